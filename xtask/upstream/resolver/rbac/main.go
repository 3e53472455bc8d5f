// Command olm-rbac-upstream prints the RBAC InstallPlan steps UPSTREAM OLM
// (operator-lifecycle-manager, pkg/controller/registry/resolver,
// NewServiceAccountStepResources) builds for each CSV it is given, so that a
// differential test can hold olm-rs's steps to upstream's on real bundles.
// It is test infrastructure, built by 'cargo xtask upstream' into the cache,
// and never part of the product.
//
// Usage:
//
//	olm-rbac-upstream --namespace NS CSV_FILE...
//
// Each CSV file (YAML or JSON) gives one JSON line on stdout:
//
//	{"file":"...","steps":[{"kind":"Role","group":"rbac.authorization.k8s.io",
//	  "version":"v1","name":"...","manifest":"..."}],"error":""}
//
// A CSV upstream cannot read or build steps for has "error" set and no
// steps; the exit status is 0 unless the arguments are wrong.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/operator-lifecycle-manager/pkg/controller/registry/resolver"
	"sigs.k8s.io/yaml"
)

type step struct {
	Kind     string `json:"kind"`
	Group    string `json:"group"`
	Version  string `json:"version"`
	Name     string `json:"name"`
	Manifest string `json:"manifest"`
}

type result struct {
	File  string `json:"file"`
	Steps []step `json:"steps"`
	Error string `json:"error"`
}

func stepsOf(file, namespace string) ([]step, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, err
	}
	csv := &v1alpha1.ClusterServiceVersion{}
	if err := json.Unmarshal(js, csv); err != nil {
		return nil, err
	}
	csv.SetNamespace(namespace)
	resources, err := resolver.NewServiceAccountStepResources(csv, "", "")
	if err != nil {
		return nil, err
	}
	steps := []step{}
	for _, r := range resources {
		steps = append(steps, step{Kind: r.Kind, Group: r.Group, Version: r.Version, Name: r.Name, Manifest: r.Manifest})
	}
	return steps, nil
}

func main() {
	fs := flag.NewFlagSet("olm-rbac-upstream", flag.ContinueOnError)
	namespace := fs.String("namespace", "operators", "the namespace the CSVs are installed into")
	if err := fs.Parse(os.Args[1:]); err != nil || fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: olm-rbac-upstream --namespace NS CSV_FILE...")
		os.Exit(2)
	}
	out := json.NewEncoder(os.Stdout)
	for _, file := range fs.Args() {
		r := result{File: file, Steps: []step{}}
		steps, err := stepsOf(file, *namespace)
		if err != nil {
			r.Error = err.Error()
		} else {
			r.Steps = steps
		}
		if err := out.Encode(r); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
