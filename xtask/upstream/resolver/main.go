// Command olm-resolve-upstream runs UPSTREAM OLM's dependency resolver
// (github.com/operator-framework/operator-lifecycle-manager,
// pkg/controller/registry/resolver) on file-based catalogs (FBC), so that a
// benchmark can compare the Rust resolver of olm-rs against upstream's on the
// same input in the same run. It is benchmark-only test infrastructure and is
// never part of the product.
//
// Build:
//
//	cd xtask/upstream/resolver && go build -o /some/out/olm-resolve-upstream .
//
// Usage:
//
//	olm-resolve-upstream --catalogs DIR --subscriptions FILE
//	                     [--runs N] [--namespace NS] [--entry steps|resolve]
//	                     [--log-level LEVEL] [--cpuprofile FILE]
//
// DIR holds one sub-directory per catalog; the sub-directory name is the
// CatalogSource name, and every CatalogSource lives in namespace NS (default
// "olm", which is also used as catalog-operator's global catalog namespace).
// Each sub-directory is an FBC as `opm serve` reads it.
//
// FILE is a JSON array of subscriptions:
//
//	[{"namespace":"ns","name":"sub","package":"p","channel":"stable",
//	  "catalog":"cat","catalogNamespace":"olm","startingCSV":""}]
//
// (an empty channel means "any channel, default channel preferred", as in
// OLM; an empty catalogNamespace is taken to be NS).
//
// Output: one JSON object on stdout,
//
//	{"version":"v0.46.0","entry":"steps","load_ms":1.2,"resolve_ms":[...],
//	 "operators":[{"name":"csv","package":"p","channel":"c","catalog":"cat",
//	               "namespace":"ns"}],
//	 "error":""}
//
// with operators sorted by name (then namespace, then catalog). A
// resolution failure (e.g. unsatisfiable constraints) exits 0 with the
// message in "error" and no operators; only bad input (flags, unreadable
// files, an FBC that does not load) exits non-zero (2). Note that
// operator-registry's model validation rejects a bundle with neither an
// `image` nor olm.bundle.object properties, so test catalogs need images.
//
// How upstream is driven, and how closely it matches a real cluster:
//
//   - Catalog serving: each FBC is loaded into operator-registry's pkg/cache
//     (the store `opm serve` answers gRPC from: declcfg -> model -> api.Bundle
//     per channel entry, kept in a pogreb database in a temporary directory).
//     Instead of a gRPC connection, OLM is handed an in-process implementation
//     of operator-registry's client.Interface that reads that same store, so
//     OLM's registrySource sees the same ListBundles / GetPackage answers it
//     would get over the wire.
//   - Resolver wiring: exactly as catalog-operator wires it
//     (pkg/controller/operators/catalog/operator.go):
//     SourceProviderFromRegistryClientProvider -> NewOperatorCacheProvider
//     (which merges in the virtual "installed CSVs" source) ->
//     NewOperatorStepResolver, over informer-style listers and a fake
//     clientset holding the CatalogSources, one OperatorGroup per
//     subscription namespace, and the Subscriptions. No CSVs are installed.
//   - load_ms covers loading every catalog into the registry store AND
//     warming OLM's resolver cache (the per-catalog snapshot that
//     catalog-operator keeps for 30 minutes), so the timed runs measure a
//     resolution against a warm cache, as in a running catalog-operator.
//   - Each timed run calls, for every namespace that has subscriptions (in
//     name order), the entry point catalog-operator's syncResolvingNamespace
//     calls: OperatorStepResolver.ResolveSteps(namespace) (--entry steps,
//     the default). That lists the namespace's subscriptions, calls
//     Resolver.Resolve([namespace, NS], subs) (the SAT resolver) and turns
//     the result into install steps / bundle lookups. With --entry resolve a
//     run calls only Resolver.Resolve([namespace, NS], subs).
//     resolve_ms[i] is the sum over namespaces for run i. A GC is forced
//     before each run (untimed) to reduce noise.
//   - The "operators" list comes from Resolver.Resolve, whose entries carry
//     package/channel/catalog. In steps mode Resolve is called once more
//     after the timed runs (untimed) and its CSV set is checked against the
//     CSVs named by ResolveSteps' output; a mismatch is reported in "error".
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	k8scache "k8s.io/client-go/tools/cache"

	"github.com/operator-framework/operator-lifecycle-manager/pkg/api/client/clientset/versioned/fake"
	v1listers "github.com/operator-framework/operator-lifecycle-manager/pkg/api/client/listers/operators/v1"
	v1alpha1listers "github.com/operator-framework/operator-lifecycle-manager/pkg/api/client/listers/operators/v1alpha1"
	olmregistry "github.com/operator-framework/operator-lifecycle-manager/pkg/controller/registry"
	"github.com/operator-framework/operator-lifecycle-manager/pkg/controller/registry/resolver"
	"github.com/operator-framework/operator-lifecycle-manager/pkg/controller/registry/resolver/cache"
	"github.com/operator-framework/operator-lifecycle-manager/pkg/lib/operatorlister"

	"github.com/operator-framework/operator-registry/pkg/api"
	orcache "github.com/operator-framework/operator-registry/pkg/cache"
	"github.com/operator-framework/operator-registry/pkg/client"
	opregistry "github.com/operator-framework/operator-registry/pkg/registry"
)

const olmModule = "github.com/operator-framework/operator-lifecycle-manager"

// ---------------------------------------------------------------------------
// Input and output shapes.

// subscriptionInput is one element of the --subscriptions JSON array.
type subscriptionInput struct {
	Namespace        string `json:"namespace"`
	Name             string `json:"name"`
	Package          string `json:"package"`
	Channel          string `json:"channel"`
	Catalog          string `json:"catalog"`
	CatalogNamespace string `json:"catalogNamespace"`
	StartingCSV      string `json:"startingCSV"`
}

// operatorOutput is one resolved operator (bundle) in the output.
// Namespace (the subscription namespace it was resolved for) keeps a run
// over several namespaces unambiguous.
type operatorOutput struct {
	Name      string `json:"name"`
	Package   string `json:"package"`
	Channel   string `json:"channel"`
	Catalog   string `json:"catalog"`
	Namespace string `json:"namespace"`
}

// output is the single JSON object printed on stdout.
type output struct {
	Version   string           `json:"version"`
	Entry     string           `json:"entry"`
	LoadMS    float64          `json:"load_ms"`
	ResolveMS []float64        `json:"resolve_ms"`
	Operators []operatorOutput `json:"operators"`
	Error     string           `json:"error"`
}

// ---------------------------------------------------------------------------
// In-process registry client.

// storeClient implements operator-registry's client.Interface on top of an
// in-process pkg/cache store, answering what the registry gRPC server
// (pkg/server.RegistryServer) would answer for the same store.
type storeClient struct {
	store orcache.Cache
}

var _ client.Interface = (*storeClient)(nil)

// sliceStream feeds a fixed list of bundles to a client.BundleIterator.
type sliceStream struct {
	bundles []*api.Bundle
}

func (s *sliceStream) Recv() (*api.Bundle, error) {
	if len(s.bundles) == 0 {
		return nil, io.EOF
	}
	b := s.bundles[0]
	s.bundles = s.bundles[1:]
	return b, nil
}

func (c *storeClient) ListBundles(ctx context.Context) (*client.BundleIterator, error) {
	// The store's ListBundles applies the same trimming as the gRPC server's
	// streaming ListBundles (CsvJson/Object dropped when BundlePath is set).
	bundles, err := c.store.ListBundles(ctx)
	if err != nil {
		return nil, err
	}
	return client.NewBundleIterator(&sliceStream{bundles: bundles}), nil
}

func (c *storeClient) GetPackage(ctx context.Context, name string) (*api.Package, error) {
	manifest, err := c.store.GetPackage(ctx, name)
	if err != nil {
		return nil, err
	}
	return opregistry.PackageManifestToAPIPackage(manifest), nil
}

func (c *storeClient) GetBundle(ctx context.Context, pkg, channel, csv string) (*api.Bundle, error) {
	return c.store.GetBundle(ctx, pkg, channel, csv)
}

func (c *storeClient) GetBundleInPackageChannel(ctx context.Context, pkg, channel string) (*api.Bundle, error) {
	return c.store.GetBundleForChannel(ctx, pkg, channel)
}

func (c *storeClient) GetReplacementBundleInPackageChannel(ctx context.Context, current, pkg, channel string) (*api.Bundle, error) {
	return c.store.GetBundleThatReplaces(ctx, current, pkg, channel)
}

func (c *storeClient) GetBundleThatProvides(ctx context.Context, group, version, kind string) (*api.Bundle, error) {
	return c.store.GetBundleThatProvides(ctx, group, version, kind)
}

func (c *storeClient) HealthCheck(context.Context, time.Duration) (bool, error) { return true, nil }

func (c *storeClient) Close() error { return nil }

// clientProvider implements resolver.RegistryClientProvider (the role played
// by catalog-operator's grpc.SourceStore) over the loaded catalogs.
type clientProvider map[olmregistry.CatalogKey]client.Interface

func (p clientProvider) ClientsForNamespaces(namespaces ...string) map[olmregistry.CatalogKey]client.Interface {
	out := make(map[olmregistry.CatalogKey]client.Interface)
	for key, c := range p {
		for _, ns := range namespaces {
			if key.Namespace == ns {
				out[key] = c
			}
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// Main.

func main() {
	code, err := run(os.Args[1:], os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "olm-resolve-upstream:", err)
	}
	os.Exit(code)
}

// badInput marks errors that come from the input, i.e. exit code 2.
type badInput struct{ error }

func run(args []string, stdout io.Writer) (int, error) {
	fs := flag.NewFlagSet("olm-resolve-upstream", flag.ContinueOnError)
	catalogsDir := fs.String("catalogs", "", "directory with one FBC sub-directory per catalog (sub-directory name = CatalogSource name)")
	subsFile := fs.String("subscriptions", "", "JSON file with the subscriptions to resolve")
	runs := fs.Int("runs", 5, "number of timed resolution runs")
	catalogNS := fs.String("namespace", "olm", "namespace of the CatalogSources; also the global catalog namespace")
	entry := fs.String("entry", "steps", "timed entry point: steps (OperatorStepResolver.ResolveSteps) or resolve (Resolver.Resolve)")
	logLevel := fs.String("log-level", "warning", "level of upstream's logrus logger (written to stderr)")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the timed runs to this file")
	if err := fs.Parse(args); err != nil {
		return 2, nil // flag package already printed the problem
	}
	if *catalogsDir == "" || *subsFile == "" {
		fs.Usage()
		return 2, errors.New("--catalogs and --subscriptions are required")
	}
	if *runs < 1 {
		return 2, errors.New("--runs must be at least 1")
	}
	if *entry != "steps" && *entry != "resolve" {
		return 2, fmt.Errorf("--entry must be steps or resolve, not %q", *entry)
	}

	logger := logrus.New()
	logger.SetOutput(os.Stderr)
	lvl, err := logrus.ParseLevel(*logLevel)
	if err != nil {
		return 2, err
	}
	logger.SetLevel(lvl)

	subs, err := readSubscriptions(*subsFile, *catalogNS)
	if err != nil {
		return 2, err
	}
	catalogNames, err := listCatalogs(*catalogsDir)
	if err != nil {
		return 2, err
	}

	out := output{Version: olmVersion(), Entry: *entry, ResolveMS: []float64{}, Operators: []operatorOutput{}}

	// ---- Load (timed): registry stores + OLM resolver wiring + warm cache.
	loadStart := time.Now()
	env, cleanup, err := load(*catalogsDir, catalogNames, *catalogNS, subs, logger)
	defer cleanup()
	if err != nil {
		var bi badInput
		if errors.As(err, &bi) {
			return 2, err
		}
		// The catalogs loaded but OLM could not snapshot them: report it as
		// a resolution failure rather than bad input.
		out.Error = err.Error()
		return 0, writeJSON(stdout, out)
	}
	out.LoadMS = msSince(loadStart)

	// ---- Resolve (timed, N runs).
	var chosen []resolved
	var stepCSVs map[string]bool
	var resolveErr error
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return 2, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return 2, err
		}
	}
	for i := 0; i < *runs; i++ {
		env.resetSubscriptions()
		runtime.GC()
		start := time.Now()
		if *entry == "steps" {
			stepCSVs, resolveErr = env.resolveSteps()
		} else {
			chosen, resolveErr = env.resolve()
		}
		out.ResolveMS = append(out.ResolveMS, msSince(start))
	}
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}

	// ---- Decision (untimed in steps mode).
	if resolveErr == nil && *entry == "steps" {
		env.resetSubscriptions()
		chosen, resolveErr = env.resolve()
		if resolveErr == nil {
			resolveErr = checkSameCSVs(stepCSVs, chosen)
		}
	}
	if resolveErr != nil {
		out.Error = resolveErr.Error()
		return 0, writeJSON(stdout, out)
	}
	for _, r := range chosen {
		e := r.entry
		op := operatorOutput{Name: e.Name, Package: e.Package(), Channel: e.Channel(), Namespace: r.namespace}
		if e.SourceInfo != nil {
			op.Catalog = e.SourceInfo.Catalog.Name
		}
		out.Operators = append(out.Operators, op)
	}
	sort.Slice(out.Operators, func(i, j int) bool {
		a, b := out.Operators[i], out.Operators[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Catalog < b.Catalog
	})
	return 0, writeJSON(stdout, out)
}

// ---------------------------------------------------------------------------
// Loading.

// env is everything a resolution run needs.
type env struct {
	catalogNS    string
	namespaces   []string // subscription namespaces, sorted
	subs         map[string][]*v1alpha1.Subscription
	subIndexer   k8scache.Indexer
	stepResolver *resolver.OperatorStepResolver
	resolver     *resolver.Resolver
}

func load(dir string, catalogNames []string, catalogNS string, subs []*v1alpha1.Subscription, logger *logrus.Logger) (*env, func(), error) {
	ctx := context.Background()
	var stores []orcache.Cache
	var tmpDirs []string
	cleanup := func() {
		for _, s := range stores {
			_ = s.Close()
		}
		for _, d := range tmpDirs {
			_ = os.RemoveAll(d)
		}
	}

	// 1. Serve each FBC the way `opm serve` does: build operator-registry's
	//    on-disk cache from the FBC, then load its package index.
	clients := clientProvider{}
	var catsrcs []k8sruntime.Object
	catsrcIndexer := newIndexer()
	for _, name := range catalogNames {
		tmp, err := os.MkdirTemp("", "olm-resolve-upstream-"+name+"-")
		if err != nil {
			return nil, cleanup, err
		}
		tmpDirs = append(tmpDirs, tmp)
		store, err := orcache.New(tmp)
		if err != nil {
			return nil, cleanup, err
		}
		stores = append(stores, store)
		if err := store.Build(ctx, os.DirFS(filepath.Join(dir, name))); err != nil {
			return nil, cleanup, badInput{fmt.Errorf("catalog %q: %w", name, err)}
		}
		if err := store.Load(ctx); err != nil {
			return nil, cleanup, badInput{fmt.Errorf("catalog %q: %w", name, err)}
		}
		clients[olmregistry.CatalogKey{Name: name, Namespace: catalogNS}] = &storeClient{store: store}

		cs := &v1alpha1.CatalogSource{
			TypeMeta:   metav1.TypeMeta{Kind: v1alpha1.CatalogSourceKind, APIVersion: v1alpha1.SchemeGroupVersion.String()},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: catalogNS, UID: types.UID("catsrc-" + name)},
			Spec:       v1alpha1.CatalogSourceSpec{SourceType: v1alpha1.SourceTypeGrpc},
		}
		catsrcs = append(catsrcs, cs)
		if err := catsrcIndexer.Add(cs); err != nil {
			return nil, cleanup, err
		}
	}

	// 2. Cluster state: one OperatorGroup per subscription namespace (the
	//    step resolver and the installed-CSV source both require exactly
	//    one), the Subscriptions, and no CSVs.
	e := &env{catalogNS: catalogNS, subs: map[string][]*v1alpha1.Subscription{}}
	objects := append([]k8sruntime.Object{}, catsrcs...)
	ogIndexer := newIndexer()
	for _, sub := range subs {
		if _, seen := e.subs[sub.Namespace]; !seen {
			e.namespaces = append(e.namespaces, sub.Namespace)
			og := &operatorsv1.OperatorGroup{
				TypeMeta:   metav1.TypeMeta{Kind: operatorsv1.OperatorGroupKind, APIVersion: operatorsv1.SchemeGroupVersion.String()},
				ObjectMeta: metav1.ObjectMeta{Name: "global-operators", Namespace: sub.Namespace, UID: types.UID("og-" + sub.Namespace)},
			}
			if err := ogIndexer.Add(og); err != nil {
				return nil, cleanup, err
			}
			objects = append(objects, og)
		}
		e.subs[sub.Namespace] = append(e.subs[sub.Namespace], sub)
		objects = append(objects, sub.DeepCopy())
	}
	sort.Strings(e.namespaces)
	e.subIndexer = newIndexer()
	e.resetSubscriptions()

	lister := operatorlister.NewLister()
	lister.OperatorsV1alpha1().RegisterCatalogSourceLister(metav1.NamespaceAll, v1alpha1listers.NewCatalogSourceLister(catsrcIndexer))
	lister.OperatorsV1alpha1().RegisterSubscriptionLister(metav1.NamespaceAll, v1alpha1listers.NewSubscriptionLister(e.subIndexer))
	lister.OperatorsV1alpha1().RegisterClusterServiceVersionLister(metav1.NamespaceAll, v1alpha1listers.NewClusterServiceVersionLister(newIndexer()))
	lister.OperatorsV1().RegisterOperatorGroupLister(metav1.NamespaceAll, v1listers.NewOperatorGroupLister(ogIndexer))
	crClient := fake.NewSimpleClientset(objects...)

	// 3. Wire the resolver exactly as catalog-operator's NewOperator does.
	sourceProvider := resolver.SourceProviderFromRegistryClientProvider(clients, lister.OperatorsV1alpha1().CatalogSourceLister(), logger)
	cacheProvider := resolver.NewOperatorCacheProvider(lister, crClient, sourceProvider, logger)
	e.stepResolver = resolver.NewOperatorStepResolver(lister, crClient, catalogNS, cacheProvider, logger)
	e.resolver = resolver.NewDefaultResolver(cacheProvider, logger)

	// 4. Warm OLM's cache: take every catalog's snapshot (ListBundles +
	//    bundle -> cache.Entry conversion) now, so that the timed runs reuse
	//    it as a running catalog-operator does.
	//    (With no subscriptions there is nothing to warm: the installed-CSV
	//    source of a namespace needs that namespace's OperatorGroup.)
	for _, ns := range e.namespaces {
		finder := cacheProvider.Namespaced(ns, catalogNS)
		finder.Find(cache.True())
		if err := finder.Error(); err != nil {
			return nil, cleanup, fmt.Errorf("snapshotting catalogs: %w", err)
		}
	}
	return e, cleanup, nil
}

// resetSubscriptions puts pristine copies of the input subscriptions back in
// the lister's indexer, so that every run starts from the same state.
func (e *env) resetSubscriptions() {
	for _, ns := range e.namespaces {
		for _, sub := range e.subs[ns] {
			_ = e.subIndexer.Update(sub.DeepCopy())
		}
	}
}

// resolved is one operator chosen for one subscription namespace.
type resolved struct {
	namespace string
	entry     *cache.Entry
}

// resolve runs the SAT resolver once per subscription namespace, with the
// arguments ResolveSteps passes it: namespaces [ns, global catalog
// namespace] and the namespace's subscriptions.
func (e *env) resolve() ([]resolved, error) {
	var all []resolved
	for _, ns := range e.namespaces {
		subs := make([]*v1alpha1.Subscription, 0, len(e.subs[ns]))
		for _, s := range e.subs[ns] {
			subs = append(subs, s.DeepCopy())
		}
		entries, err := e.resolver.Resolve([]string{ns, e.catalogNS}, subs)
		if err != nil {
			return nil, nsError(ns, err)
		}
		for _, entry := range entries {
			all = append(all, resolved{namespace: ns, entry: entry})
		}
	}
	return all, nil
}

// resolveSteps runs catalog-operator's entry point once per subscription
// namespace and returns the set of "namespace/CSV name" its output installs:
// bundle lookups (bundles served by image reference), steps resolving a CSV
// (bundles embedded in the catalog), and subscriptions whose current CSV it
// moved.
func (e *env) resolveSteps() (map[string]bool, error) {
	csvs := map[string]bool{}
	for _, ns := range e.namespaces {
		steps, lookups, updatedSubs, err := e.stepResolver.ResolveSteps(ns)
		if err != nil {
			return nil, nsError(ns, err)
		}
		for _, l := range lookups {
			csvs[ns+"/"+l.Identifier] = true
		}
		for _, s := range steps {
			if s.Resolving != "" {
				csvs[ns+"/"+s.Resolving] = true
			}
		}
		for _, s := range updatedSubs {
			csvs[ns+"/"+s.Status.CurrentCSV] = true
		}
	}
	return csvs, nil
}

// checkSameCSVs reports a difference between the CSVs named by ResolveSteps'
// output and those chosen by a separate Resolve call.
func checkSameCSVs(fromSteps map[string]bool, fromResolve []resolved) error {
	resolveSet := map[string]bool{}
	for _, r := range fromResolve {
		resolveSet[r.namespace+"/"+r.entry.Name] = true
	}
	keys := func(m map[string]bool) string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return strings.Join(out, ", ")
	}
	if a, b := keys(fromSteps), keys(resolveSet); a != b {
		return fmt.Errorf("internal: ResolveSteps chose [%s] but Resolve chose [%s]", a, b)
	}
	return nil
}

func nsError(ns string, err error) error {
	return fmt.Errorf("namespace %s: %w", ns, err)
}

// ---------------------------------------------------------------------------
// Helpers.

func newIndexer() k8scache.Indexer {
	return k8scache.NewIndexer(k8scache.MetaNamespaceKeyFunc, k8scache.Indexers{k8scache.NamespaceIndex: k8scache.MetaNamespaceIndexFunc})
}

// readSubscriptions parses the --subscriptions file into Subscription
// objects. JSON is required by the CLI contract; YAML also parses.
func readSubscriptions(path, defaultCatalogNS string) ([]*v1alpha1.Subscription, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var in []subscriptionInput
	if err := yaml.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	seen := map[string]bool{}
	var subs []*v1alpha1.Subscription
	for i, s := range in {
		if s.Namespace == "" || s.Name == "" || s.Package == "" || s.Catalog == "" {
			return nil, fmt.Errorf("%s: subscription #%d: namespace, name, package and catalog are required", path, i)
		}
		key := s.Namespace + "/" + s.Name
		if seen[key] {
			return nil, fmt.Errorf("%s: duplicate subscription %s", path, key)
		}
		seen[key] = true
		if s.CatalogNamespace == "" {
			s.CatalogNamespace = defaultCatalogNS
		}
		subs = append(subs, &v1alpha1.Subscription{
			TypeMeta: metav1.TypeMeta{Kind: v1alpha1.SubscriptionKind, APIVersion: v1alpha1.SchemeGroupVersion.String()},
			ObjectMeta: metav1.ObjectMeta{
				Name:      s.Name,
				Namespace: s.Namespace,
				// Upstream's union listers de-duplicate by UID.
				UID: types.UID("sub-" + key),
			},
			Spec: &v1alpha1.SubscriptionSpec{
				CatalogSource:          s.Catalog,
				CatalogSourceNamespace: s.CatalogNamespace,
				Package:                s.Package,
				Channel:                s.Channel,
				StartingCSV:            s.StartingCSV,
			},
		})
	}
	return subs, nil
}

// listCatalogs returns the names of DIR's sub-directories, sorted.
func listCatalogs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		// Stat (not the DirEntry's Lstat type) so a symlink to a catalog
		// directory counts as a catalog.
		if fi, err := os.Stat(filepath.Join(dir, e.Name())); err == nil && fi.IsDir() {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no catalog sub-directories", dir)
	}
	sort.Strings(names)
	return names, nil
}

// olmVersion reports the version of the OLM module linked into this binary.
func olmVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == olmModule {
				if dep.Replace != nil {
					return dep.Replace.Version
				}
				return dep.Version
			}
		}
	}
	return "unknown"
}

func msSince(start time.Time) float64 {
	return float64(time.Since(start).Nanoseconds()) / 1e6
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	return enc.Encode(v)
}
