//! Property tests: the solver against a brute-force enumerator and a
//! reference implementation of upstream's search, and whole resolutions of
//! generated catalogs against the rules checked independently.

use std::{collections::VecDeque, sync::Arc};

use proptest::prelude::*;

use crate::{
    model::{BundleInput, CatalogKey, CatalogSnapshot, InstalledCsv, NamespaceState, Subscription},
    resolve::{ResolveError, ResolveRequest, prepare, resolve},
    sat::{Outcome, Problem, Rule, VarId},
};

/// Every assignment of `n` variables, as flags.
fn assignments(n: usize) -> impl Iterator<Item = Vec<bool>> {
    (0u32..(1 << n)).map(move |bits| (0..n).map(|i| bits & (1 << i) != 0).collect())
}

fn satisfiable(p: &Problem, subset: &[usize]) -> bool {
    assignments(p.names.len()).any(|a| subset.iter().all(|&c| p.satisfies(&p.constraints[c], &a)))
}

fn all_constraints(p: &Problem) -> Vec<usize> {
    (0..p.constraints.len()).collect()
}

/// Upstream's `search.Do` without its unit-propagation pruning: a plain
/// lexicographic depth-first search that only checks complete leaves (by
/// enumeration). Returns the guesses of the first satisfiable leaf, or
/// `None` when that leaf needs more than its guesses to be true.
fn reference_search(p: &Problem) -> Option<Option<Vec<VarId>>> {
    if !satisfiable(p, &all_constraints(p)) {
        return Some(None);
    }
    struct Guess {
        m: Option<VarId>,
        index: usize,
        children: usize,
        candidates: Vec<VarId>,
    }
    let n = p.names.len();
    let mut choices: VecDeque<(usize, Vec<VarId>)> = VecDeque::new();
    let mut seen = vec![false; n];
    for c in &p.constraints {
        if c.rule == Rule::Mandatory && !seen[c.subject] {
            seen[c.subject] = true;
            choices.push_back((0, vec![c.subject]));
        }
    }
    #[derive(PartialEq)]
    enum State {
        Unknown,
        Unsat,
    }
    let mut guesses: Vec<Guess> = Vec::new();
    let mut state = State::Unknown;
    loop {
        let assumed: Vec<VarId> = guesses.iter().filter_map(|g| g.m).collect();
        if choices.is_empty() && state == State::Unknown {
            let ok = assignments(n).any(|a| {
                assumed.iter().all(|&x| a[x]) && p.constraints.iter().all(|c| p.satisfies(c, &a))
            });
            if ok {
                // Upstream then minimizes the extras; compare only when the
                // guesses alone are a model.
                let mut a = vec![false; n];
                for &x in &assumed {
                    a[x] = true;
                }
                if p.constraints.iter().all(|c| p.satisfies(c, &a)) {
                    return Some(Some(assumed));
                }
                return None;
            }
            state = State::Unsat;
        }
        if state == State::Unsat {
            // Backtrack: popping a real guess returns to the unknown state
            // of its parent scope; popping a null guess keeps unsat.
            let Some(g) = guesses.pop() else {
                return Some(None);
            };
            for _ in 0..g.children {
                choices.pop_back();
            }
            let index = if g.m.is_some() {
                state = State::Unknown;
                g.index + 1
            } else {
                g.index
            };
            choices.push_front((index, g.candidates));
            continue;
        }
        let Some((index, candidates)) = choices.pop_front() else {
            continue;
        };
        let mut m = candidates.get(index).copied();
        if candidates.iter().any(|c| assumed.contains(c)) {
            m = None;
        }
        let mut g = Guess {
            m,
            index,
            children: 0,
            candidates,
        };
        if let Some(x) = m {
            for c in &p.constraints {
                if c.subject == x
                    && let Rule::Dependency(cands) = &c.rule
                    && !cands.is_empty()
                {
                    g.children += 1;
                    choices.push_back((0, cands.clone()));
                }
            }
        }
        guesses.push(g);
    }
}

fn problem_strategy() -> impl Strategy<Value = Problem> {
    (2usize..8).prop_flat_map(|n| {
        let var = 0..n;
        let rule = prop_oneof![
            3 => proptest::collection::vec(0..n, 0..4).prop_map(Rule::Dependency),
            1 => (0..n).prop_map(Rule::Conflict),
            1 => proptest::collection::vec(0..n, 2..5).prop_map(|mut v| { v.sort_unstable(); v.dedup(); Rule::AtMostOne(v) }),
            1 => Just(Rule::Prohibited),
        ];
        (
            proptest::collection::vec(0..n, 1..3),
            proptest::collection::vec((var, rule), 0..10),
        )
            .prop_map(move |(anchors, rules)| {
                let mut p = Problem::default();
                for i in 0..n {
                    p.add_var(format!("v{i}"));
                }
                for a in anchors {
                    p.add(a, Rule::Mandatory, format!("v{a} is mandatory"));
                }
                for (s, r) in rules {
                    p.add(s, r, format!("rule on v{s}"));
                }
                p
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn solver_agrees_with_enumeration(p in problem_strategy()) {
        let all = all_constraints(&p);
        match p.solve() {
            Outcome::Selected(selected) => {
                let mut a = vec![false; p.names.len()];
                for &x in &selected {
                    a[x] = true;
                }
                for c in &p.constraints {
                    prop_assert!(p.satisfies(c, &a), "violates {:?}", c);
                }
            }
            Outcome::Conflicts(core) => {
                prop_assert!(!satisfiable(&p, &all), "solver says unsat, enumeration finds a model");
                prop_assert!(!satisfiable(&p, &core), "core {:?} is satisfiable", core);
                for i in 0..core.len() {
                    let smaller: Vec<usize> = core.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, &c)| c).collect();
                    prop_assert!(satisfiable(&p, &smaller), "core {:?} is not minimal", core);
                }
            }
        }
    }

    #[test]
    fn solver_matches_upstreams_lexicographic_search(p in problem_strategy()) {
        if let Some(reference) = reference_search(&p) {
            match (p.solve(), reference) {
                (Outcome::Selected(mut got), Some(mut want)) => {
                    got.sort_unstable();
                    want.sort_unstable();
                    prop_assert_eq!(got, want);
                }
                (Outcome::Conflicts(_), None) => {}
                (got, want) => prop_assert!(false, "solver {:?}, reference {:?}", got, want),
            }
        }
    }
}

/// A generated catalog: a few packages, each a short replaces chain, whose
/// bundles provide and require APIs and packages drawn from small sets.
#[derive(Debug, Clone)]
struct GenBundle {
    package: usize,
    provides: Vec<usize>,
    requires_api: Vec<usize>,
    requires_package: Option<(usize, u8)>,
    deprecated: bool,
}

const PACKAGES: usize = 3;
const APIS: usize = 3;

fn gen_bundle(package: usize) -> impl Strategy<Value = GenBundle> {
    (
        proptest::collection::vec(0..APIS, 0..2),
        proptest::collection::vec(0..APIS, 0..2),
        proptest::option::weighted(0.3, (0..PACKAGES, 0u8..3)),
        proptest::bool::weighted(0.1),
    )
        .prop_map(
            move |(provides, requires_api, requires_package, deprecated)| GenBundle {
                package,
                provides,
                requires_api,
                requires_package: requires_package.filter(|(p, _)| *p != package),
                deprecated,
            },
        )
}

fn gen_catalog() -> impl Strategy<Value = Vec<Vec<GenBundle>>> {
    (1usize..3, 1usize..3, 1usize..3).prop_flat_map(|(a, b, c)| {
        (
            proptest::collection::vec(gen_bundle(0), a),
            proptest::collection::vec(gen_bundle(1), b),
            proptest::collection::vec(gen_bundle(2), c),
        )
            .prop_map(|(a, b, c)| vec![a, b, c])
    })
}

fn bundle_name(package: usize, version: usize) -> String {
    format!("p{package}.v{version}")
}

fn to_snapshot(name: &str, priority: i32, packages: &[Vec<GenBundle>]) -> Arc<CatalogSnapshot> {
    let gvk = |i: usize| format!(r#"{{"group":"g","version":"v1","kind":"K{i}"}}"#);
    let mut inputs = Vec::new();
    for (p, bundles) in packages.iter().enumerate() {
        for (v, b) in bundles.iter().enumerate() {
            let mut properties = vec![(
                "olm.package".to_owned(),
                format!(r#"{{"packageName":"p{p}","version":"{v}.0.0"}}"#),
            )];
            properties.extend(b.provides.iter().map(|&i| ("olm.gvk".to_owned(), gvk(i))));
            properties.extend(
                b.requires_api
                    .iter()
                    .map(|&i| ("olm.gvk.required".to_owned(), gvk(i))),
            );
            if let Some((q, min)) = b.requires_package {
                properties.push((
                    "olm.package.required".to_owned(),
                    format!(r#"{{"packageName":"p{q}","versionRange":">={min}.0.0"}}"#),
                ));
            }
            if b.deprecated {
                properties.push(("olm.deprecated".to_owned(), "{}".to_owned()));
            }
            inputs.push(BundleInput {
                name: bundle_name(b.package, v),
                package: format!("p{p}"),
                channel: "stable".into(),
                replaces: if v == 0 {
                    String::new()
                } else {
                    bundle_name(p, v - 1)
                },
                properties,
                ..Default::default()
            });
        }
    }
    let packages: Vec<(String, String)> = (0..PACKAGES)
        .map(|p| (format!("p{p}"), "stable".to_owned()))
        .collect();
    Arc::new(CatalogSnapshot::build(
        CatalogKey::new(name, "olm"),
        priority,
        true,
        &packages,
        inputs,
    ))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn resolutions_satisfy_every_rule(
        first in gen_catalog(),
        second in proptest::option::of(gen_catalog()),
        subscribed in proptest::collection::btree_set(0..PACKAGES, 1..3),
        installed in proptest::option::of(0..PACKAGES),
    ) {
        let mut catalogs = vec![to_snapshot("first", 0, &first)];
        if let Some(second) = &second {
            catalogs.push(to_snapshot("second", 1, second));
        }
        let mut csvs = Vec::new();
        let mut subscriptions: Vec<Subscription> = subscribed
            .iter()
            .map(|&p| Subscription {
                name: format!("sub-p{p}"),
                package: format!("p{p}"),
                channel: "stable".into(),
                catalog: "first".into(),
                catalog_namespace: "olm".into(),
                ..Default::default()
            })
            .collect();
        if let Some(p) = installed {
            let name = bundle_name(p, 0);
            let source = &catalogs[0].entries.iter().find(|e| *e.name == *name).map(|e| e.bundle.properties.clone());
            let properties = source
                .clone()
                .unwrap_or_default()
                .into_iter()
                .map(|rp| (rp.type_.to_string(), rp.value.to_string()))
                .collect();
            csvs.push(InstalledCsv { name: name.clone(), version: Some("0.0.0".into()), replaces: None, properties });
            if let Some(s) = subscriptions.iter_mut().find(|s| s.package == format!("p{p}")) {
                s.installed_csv = name;
            }
        }
        let state = NamespaceState { namespace: "ns".into(), csvs, subscriptions };
        let request = ResolveRequest { state: &state, catalogs: &catalogs, global_namespace: "olm", exclude_global: false };
        let Ok(prepared) = prepare(&request) else {
            return Ok(());
        };
        let b = &prepared.builder;
        let n = b.problem.names.len();
        match b.problem.solve() {
            Outcome::Selected(selected) => {
                // The full set that would run: every selected bundle.
                let entries: Vec<_> = selected.iter().filter_map(|&v| b.var_entries[v]).map(|r| b.entry(r)).collect();
                // Never two bundles of one package.
                let mut packages: Vec<&str> = entries.iter().filter(|e| e.bundle.has_package_property).map(|e| &*e.bundle.package).collect();
                packages.sort_unstable();
                let before = packages.len();
                packages.dedup();
                prop_assert_eq!(before, packages.len(), "two bundles of one package: {:?}", entries.iter().map(|e| &e.name).collect::<Vec<_>>());
                // Never two providers of one API.
                let mut apis: Vec<_> = entries.iter().flat_map(|e| e.bundle.provided.iter().cloned()).collect();
                apis.sort();
                let before = apis.len();
                apis.dedup();
                prop_assert_eq!(before, apis.len());
                // Every requirement is met by a selected bundle; nothing
                // deprecated is chosen.
                for e in &entries {
                    prop_assert!(!e.bundle.deprecated);
                    for d in &e.bundle.dependencies {
                        prop_assert!(entries.iter().any(|o| d.matches(o)), "{} lacks {}", e.name, d);
                    }
                }
                // Every Subscription gets its package.
                for s in &state.subscriptions {
                    prop_assert!(entries.iter().any(|e| *e.bundle.package == *s.package), "{} unmet", s.name);
                }
                // The public answer agrees.
                prop_assert!(resolve(&request).is_ok());
            }
            Outcome::Conflicts(_) => {
                if n <= 16 {
                    prop_assert!(!satisfiable(&b.problem, &all_constraints(&b.problem)));
                }
                let unsat = matches!(resolve(&request), Err(ResolveError::NotSatisfiable { .. }));
                prop_assert!(unsat, "resolve disagrees with the solver");
            }
        }
    }
}
