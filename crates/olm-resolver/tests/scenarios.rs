//! Table-driven scenarios: upstream's documented resolution behaviour
//! (dependency-resolution docs and the resolver's own rules), each with the
//! expected bundles or the expected upstream message.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use olm_resolver::{CatalogSnapshot, InstalledCsv, ResolveError, Subscription};

enum Want {
    /// Exactly these CSVs are installed or upgraded to.
    Installs(&'static [&'static str]),
    /// Resolution fails with a message containing every one of these.
    Fails(&'static [&'static str]),
}

struct Scenario {
    name: &'static str,
    catalogs: Vec<Arc<CatalogSnapshot>>,
    csvs: Vec<InstalledCsv>,
    subs: Vec<Subscription>,
    want: Want,
}

fn etcd_channel() -> Vec<B> {
    vec![
        bundle("etcd.v1.0.0", "etcd", "1.0.0"),
        bundle("etcd.v1.1.0", "etcd", "1.1.0").replaces("etcd.v1.0.0"),
        bundle("etcd.v1.2.0", "etcd", "1.2.0").replaces("etcd.v1.1.0"),
    ]
}

fn scenarios() -> Vec<Scenario> {
    let g = "example.com";
    vec![
        Scenario {
            name: "a fresh install takes the channel head",
            catalogs: vec![catalog("community", GLOBAL, 0, &[("etcd", "stable")], etcd_channel())],
            csvs: vec![],
            subs: vec![sub("etcd", "etcd", "stable", "community")],
            want: Want::Installs(&["etcd.v1.2.0"]),
        },
        Scenario {
            name: "startingCSV limits a fresh install to that CSV",
            catalogs: vec![catalog("community", GLOBAL, 0, &[("etcd", "stable")], etcd_channel())],
            csvs: vec![],
            subs: vec![sub("etcd", "etcd", "stable", "community").starting_at("etcd.v1.0.0")],
            want: Want::Installs(&["etcd.v1.0.0"]),
        },
        Scenario {
            name: "a missing startingCSV fails with upstream's message",
            catalogs: vec![catalog("community", GLOBAL, 0, &[("etcd", "stable")], etcd_channel())],
            csvs: vec![],
            subs: vec![sub("etcd", "etcd", "stable", "community").starting_at("etcd.v9")],
            want: Want::Fails(&[
                "constraints not satisfiable: no operators found with name etcd.v9 in channel stable of package etcd in the catalog referenced by subscription etcd, subscription etcd exists",
            ]),
        },
        Scenario {
            name: "upgrades follow replaces one step at a time",
            catalogs: vec![catalog("community", GLOBAL, 0, &[("etcd", "stable")], etcd_channel())],
            csvs: vec![csv("etcd.v1.0.0", "etcd", "1.0.0", &[])],
            subs: vec![sub("etcd", "etcd", "stable", "community").installed("etcd.v1.0.0")],
            want: Want::Installs(&["etcd.v1.1.0"]),
        },
        Scenario {
            name: "at the head there is nothing to do",
            catalogs: vec![catalog("community", GLOBAL, 0, &[("etcd", "stable")], etcd_channel())],
            csvs: vec![csv("etcd.v1.2.0", "etcd", "1.2.0", &[])],
            subs: vec![sub("etcd", "etcd", "stable", "community").installed("etcd.v1.2.0")],
            want: Want::Installs(&[]),
        },
        Scenario {
            name: "skips upgrade directly past skipped versions",
            catalogs: vec![catalog(
                "community",
                GLOBAL,
                0,
                &[("etcd", "stable")],
                vec![
                    bundle("etcd.v1.0.0", "etcd", "1.0.0"),
                    bundle("etcd.v1.1.0", "etcd", "1.1.0").replaces("etcd.v1.0.0"),
                    bundle("etcd.v1.2.0", "etcd", "1.2.0").replaces("etcd.v1.1.0").skips("etcd.v1.0.0"),
                ],
            )],
            csvs: vec![csv("etcd.v1.0.0", "etcd", "1.0.0", &[])],
            subs: vec![sub("etcd", "etcd", "stable", "community").installed("etcd.v1.0.0")],
            want: Want::Installs(&["etcd.v1.2.0"]),
        },
        Scenario {
            name: "skipped bundles are never chosen, even when the head cannot be",
            catalogs: vec![catalog(
                "community",
                GLOBAL,
                0,
                &[("etcd", "stable")],
                vec![
                    bundle("etcd.v1.0.0", "etcd", "1.0.0"),
                    bundle("etcd.v1.1.0", "etcd", "1.1.0").replaces("etcd.v1.0.0"),
                    bundle("etcd.v1.2.0", "etcd", "1.2.0")
                        .replaces("etcd.v1.0.0")
                        .skips("etcd.v1.1.0")
                        .deprecated(),
                ],
            )],
            csvs: vec![],
            subs: vec![sub("etcd", "etcd", "stable", "community")],
            want: Want::Installs(&["etcd.v1.0.0"]),
        },
        Scenario {
            name: "skipRange upgrades any version in range straight to the head",
            catalogs: vec![catalog(
                "community",
                GLOBAL,
                0,
                &[("etcd", "stable")],
                vec![
                    bundle("etcd.v1.0.0", "etcd", "1.0.0"),
                    bundle("etcd.v1.1.0", "etcd", "1.1.0").replaces("etcd.v1.0.0"),
                    bundle("etcd.v1.2.0", "etcd", "1.2.0")
                        .replaces("etcd.v1.1.0")
                        .skip_range(">=1.0.0 <1.2.0"),
                ],
            )],
            csvs: vec![csv("etcd.v1.0.0", "etcd", "1.0.0", &[])],
            subs: vec![sub("etcd", "etcd", "stable", "community").installed("etcd.v1.0.0")],
            want: Want::Installs(&["etcd.v1.2.0"]),
        },
        Scenario {
            name: "z-stream: a patch release with skipRange takes over from the older patch",
            catalogs: vec![catalog(
                "community",
                GLOBAL,
                0,
                &[("etcd", "stable")],
                vec![
                    bundle("etcd.v4.1.0", "etcd", "4.1.0"),
                    bundle("etcd.v4.1.1", "etcd", "4.1.1").replaces("etcd.v4.1.0"),
                    bundle("etcd.v4.1.2", "etcd", "4.1.2")
                        .replaces("etcd.v4.1.1")
                        .skip_range(">=4.1.0 <4.1.2"),
                ],
            )],
            csvs: vec![csv("etcd.v4.1.0", "etcd", "4.1.0", &[])],
            subs: vec![sub("etcd", "etcd", "stable", "community").installed("etcd.v4.1.0")],
            want: Want::Installs(&["etcd.v4.1.2"]),
        },
        Scenario {
            name: "an empty channel prefers the default channel, then others by name",
            catalogs: vec![catalog(
                "community",
                GLOBAL,
                0,
                &[("etcd", "beta")],
                vec![
                    bundle("etcd.v2.0.0", "etcd", "2.0.0").in_channel("alpha"),
                    bundle("etcd.v1.5.0", "etcd", "1.5.0").in_channel("beta").deprecated(),
                    bundle("etcd.v1.9.0", "etcd", "1.9.0").in_channel("gamma"),
                    bundle("etcd.v1.8.0", "etcd", "1.8.0").in_channel("delta"),
                ],
            )],
            csvs: vec![],
            subs: vec![sub("etcd", "etcd", "", "community")],
            // beta (default) is prohibited; then alpha < delta < gamma.
            want: Want::Installs(&["etcd.v2.0.0"]),
        },
        Scenario {
            name: "a required API is provided by a dependency from the catalog",
            catalogs: vec![catalog(
                "community",
                GLOBAL,
                0,
                &[("app", "stable"), ("db", "stable")],
                vec![
                    bundle("app.v1", "app", "1.0.0").requires_api(g, "v1", "Database"),
                    bundle("db.v1", "db", "1.0.0").provides(g, "v1", "Database"),
                    bundle("db.v2", "db", "2.0.0").replaces("db.v1").provides(g, "v1", "Database"),
                ],
            )],
            csvs: vec![],
            subs: vec![sub("app", "app", "stable", "community")],
            want: Want::Installs(&["app.v1", "db.v2"]),
        },
        Scenario {
            name: "an installed provider is preferred over any catalog",
            catalogs: vec![catalog(
                "community",
                GLOBAL,
                0,
                &[("app", "stable"), ("db", "stable")],
                vec![
                    bundle("app.v1", "app", "1.0.0").requires_api(g, "v1", "Database"),
                    bundle("db.v1", "db", "1.0.0").provides(g, "v1", "Database"),
                    bundle("db.v2", "db", "2.0.0").replaces("db.v1").provides(g, "v1", "Database"),
                ],
            )],
            csvs: vec![csv("db.v1", "db", "1.0.0", &[("olm.gvk", gvk(g, "v1", "Database"))])],
            subs: vec![sub("app", "app", "stable", "community")],
            want: Want::Installs(&["app.v1"]),
        },
        Scenario {
            name: "a missing API fails: bundle requires an operator providing it",
            catalogs: vec![catalog(
                "community",
                GLOBAL,
                0,
                &[("app", "stable")],
                vec![bundle("app.v1", "app", "1.0.0").requires_api(g, "v1", "Database")],
            )],
            csvs: vec![],
            subs: vec![sub("app", "app", "stable", "community")],
            want: Want::Fails(&[
                "constraints not satisfiable:",
                "subscription app requires community/olm/stable/app.v1",
                "bundle app.v1 requires an operator providing an API with group: example.com, version: v1, kind: Database",
            ]),
        },
        Scenario {
            name: "catalog priority orders dependency candidates",
            catalogs: vec![
                catalog("apps", GLOBAL, 0, &[("app", "stable")], vec![bundle("app.v1", "app", "1.0.0").requires_package("db", ">=1.0.0")]),
                catalog("low", GLOBAL, -10, &[("db", "stable")], vec![bundle("db.v3", "db", "3.0.0")]),
                catalog("high", GLOBAL, 10, &[("db", "stable")], vec![bundle("db.v1", "db", "1.0.0")]),
            ],
            csvs: vec![],
            subs: vec![sub("app", "app", "stable", "apps")],
            want: Want::Installs(&["app.v1", "db.v1"]),
        },
        Scenario {
            name: "the dependant's own catalog beats a higher priority",
            catalogs: vec![
                catalog(
                    "apps",
                    GLOBAL,
                    0,
                    &[("app", "stable"), ("db", "stable")],
                    vec![bundle("app.v1", "app", "1.0.0").requires_package("db", ">=1.0.0"), bundle("db.v2", "db", "2.0.0")],
                ),
                catalog("high", GLOBAL, 10, &[("db", "stable")], vec![bundle("db.v1", "db", "1.0.0")]),
            ],
            csvs: vec![],
            subs: vec![sub("app", "app", "stable", "apps")],
            want: Want::Installs(&["app.v1", "db.v2"]),
        },
        Scenario {
            name: "a catalog in the namespace beats one in the global namespace at equal priority",
            catalogs: vec![
                catalog("apps", GLOBAL, 0, &[("app", "stable")], vec![bundle("app.v1", "app", "1.0.0").requires_package("db", ">=1.0.0")]),
                catalog("aaa-global", GLOBAL, 0, &[("db", "stable")], vec![bundle("db.v3", "db", "3.0.0")]),
                catalog("zzz-local", NS, 0, &[("db", "stable")], vec![bundle("db.v1", "db", "1.0.0")]),
            ],
            csvs: vec![],
            subs: vec![sub("app", "app", "stable", "apps")],
            want: Want::Installs(&["app.v1", "db.v1"]),
        },
        Scenario {
            name: "package requirement: the newest version in range",
            catalogs: vec![catalog(
                "community",
                GLOBAL,
                0,
                &[("app", "stable"), ("db", "stable")],
                vec![
                    bundle("app.v1", "app", "1.0.0").requires_package("db", "<2.0.0"),
                    bundle("db.v1.0", "db", "1.0.0"),
                    bundle("db.v1.5", "db", "1.5.0").replaces("db.v1.0"),
                    bundle("db.v2.0", "db", "2.0.0").replaces("db.v1.5"),
                ],
            )],
            csvs: vec![],
            subs: vec![sub("app", "app", "stable", "community")],
            want: Want::Installs(&["app.v1", "db.v1.5"]),
        },
        Scenario {
            name: "compound all: package and API together",
            catalogs: vec![catalog(
                "community",
                GLOBAL,
                0,
                &[("app", "stable"), ("db", "stable")],
                vec![
                    bundle("app.v1", "app", "1.0.0").constraint(&format!(
                        r#"{{"failureMessage":"needs db 1.x serving Database v1","all":{{"constraints":[{{"package":{{"packageName":"db","versionRange":">=1.0.0 <2.0.0"}}}},{{"gvk":{}}}]}}}}"#,
                        gvk(g, "v1", "Database")
                    )),
                    bundle("db.v1.0", "db", "1.0.0").provides(g, "v1", "Database"),
                    bundle("db.v1.5", "db", "1.5.0").replaces("db.v1.0"),
                    bundle("db.v2.0", "db", "2.0.0").replaces("db.v1.5").provides(g, "v1", "Database"),
                ],
            )],
            csvs: vec![],
            subs: vec![sub("app", "app", "stable", "community")],
            want: Want::Installs(&["app.v1", "db.v1.0"]),
        },
        Scenario {
            name: "compound any and nested not",
            catalogs: vec![catalog(
                "community",
                GLOBAL,
                0,
                &[("app", "stable"), ("db", "stable"), ("cache", "stable")],
                vec![
                    bundle("app.v1", "app", "1.0.0").constraint(
                        r#"{"any":{"constraints":[{"all":{"constraints":[{"package":{"packageName":"db","versionRange":">=1.0.0"}},{"not":{"constraints":[{"package":{"packageName":"db","versionRange":">=2.0.0"}}]}}]}},{"package":{"packageName":"cache","versionRange":">=1.0.0"}}]}}"#,
                    ),
                    bundle("cache.v1", "cache", "1.0.0"),
                    bundle("db.v1", "db", "1.0.0"),
                    bundle("db.v2", "db", "2.0.0").replaces("db.v1"),
                ],
            )],
            csvs: vec![],
            subs: vec![sub("app", "app", "stable", "community")],
            // Candidates in catalog order: default channels, then by package:
            // cache before db; db.v2 is excluded by the nested not.
            want: Want::Installs(&["app.v1", "cache.v1"]),
        },
        Scenario {
            name: "a CEL rule's failureMessage is surfaced with the rule, as upstream words it",
            catalogs: vec![catalog(
                "community",
                GLOBAL,
                0,
                &[("app", "stable")],
                vec![bundle("app.v1", "app", "1.0.0").constraint(
                    r#"{"failureMessage":"requires a certified database","cel":{"rule":"properties.exists(p, p.type == \"certified\" && p.value == true)"}}"#,
                )],
            )],
            csvs: vec![],
            subs: vec![sub("app", "app", "stable", "community")],
            want: Want::Fails(&[
                r#"bundle app.v1 requires an operator with constraint: "properties.exists(p, p.type == \"certified\" && p.value == true)" and message: "requires a certified database""#,
            ]),
        },
        Scenario {
            name: "CEL selects on arbitrary properties and semver_compare",
            catalogs: vec![catalog(
                "community",
                GLOBAL,
                0,
                &[("app", "stable"), ("db", "stable")],
                vec![
                    bundle("app.v1", "app", "1.0.0").constraint(
                        r#"{"cel":{"rule":"properties.exists(p, p.type == \"certified\" && p.value == true) && properties.exists(p, p.type == \"olm.package\" && semver_compare(p.value.version, \"1.2.0\") >= 0)"}}"#,
                    ),
                    bundle("db.v1.1", "db", "1.1.0").property("certified", "true"),
                    bundle("db.v1.2", "db", "1.2.0").replaces("db.v1.1"),
                    bundle("db.v1.3", "db", "1.3.0").replaces("db.v1.2").property("certified", "true"),
                    bundle("db.v1.4", "db", "1.4.0").replaces("db.v1.3").property("certified", "false"),
                ],
            )],
            csvs: vec![],
            subs: vec![sub("app", "app", "stable", "community")],
            want: Want::Installs(&["app.v1", "db.v1.3"]),
        },
        Scenario {
            name: "deprecating a dependent API: the provider's upgrade is held back",
            catalogs: vec![catalog(
                "community",
                GLOBAL,
                0,
                &[("a", "stable"), ("b", "stable")],
                vec![
                    bundle("a.v1", "a", "1.0.0").provides(g, "v1", "A").requires_api(g, "v1", "B"),
                    bundle("b.v1", "b", "1.0.0").provides(g, "v1", "B"),
                    bundle("b.v2", "b", "2.0.0").replaces("b.v1").provides(g, "v1", "C"),
                ],
            )],
            csvs: vec![
                csv("a.v1", "a", "1.0.0", &[("olm.gvk", gvk(g, "v1", "A")), ("olm.gvk.required", gvk(g, "v1", "B"))]),
                csv("b.v1", "b", "1.0.0", &[("olm.gvk", gvk(g, "v1", "B"))]),
            ],
            subs: vec![
                sub("a", "a", "stable", "community").installed("a.v1"),
                sub("b", "b", "stable", "community").installed("b.v1"),
            ],
            want: Want::Installs(&[]),
        },
        Scenario {
            name: "version deadlock: two providers that need each other upgrade together",
            catalogs: vec![catalog(
                "community",
                GLOBAL,
                0,
                &[("a", "stable"), ("b", "stable")],
                vec![
                    bundle("a.v1", "a", "1.0.0").provides(g, "v1", "A").requires_api(g, "v1", "B"),
                    bundle("a.v2", "a", "2.0.0").replaces("a.v1").provides(g, "v2", "A").requires_api(g, "v2", "B"),
                    bundle("b.v1", "b", "1.0.0").provides(g, "v1", "B").requires_api(g, "v1", "A"),
                    bundle("b.v2", "b", "2.0.0").replaces("b.v1").provides(g, "v2", "B").requires_api(g, "v2", "A"),
                ],
            )],
            csvs: vec![
                csv("a.v1", "a", "1.0.0", &[("olm.gvk", gvk(g, "v1", "A")), ("olm.gvk.required", gvk(g, "v1", "B"))]),
                csv("b.v1", "b", "1.0.0", &[("olm.gvk", gvk(g, "v1", "B")), ("olm.gvk.required", gvk(g, "v1", "A"))]),
            ],
            subs: vec![
                sub("a", "a", "stable", "community").installed("a.v1"),
                sub("b", "b", "stable", "community").installed("b.v1"),
            ],
            want: Want::Installs(&["a.v2", "b.v2"]),
        },
        Scenario {
            name: "version deadlock without a compatible set: nothing moves",
            catalogs: vec![catalog(
                "community",
                GLOBAL,
                0,
                &[("a", "stable"), ("b", "stable")],
                vec![
                    bundle("a.v1", "a", "1.0.0").provides(g, "v1", "A").requires_api(g, "v1", "B"),
                    bundle("a.v2", "a", "2.0.0").replaces("a.v1").provides(g, "v2", "A").requires_api(g, "v2", "B"),
                    bundle("b.v1", "b", "1.0.0").provides(g, "v1", "B").requires_api(g, "v1", "A"),
                ],
            )],
            csvs: vec![
                csv("a.v1", "a", "1.0.0", &[("olm.gvk", gvk(g, "v1", "A")), ("olm.gvk.required", gvk(g, "v1", "B"))]),
                csv("b.v1", "b", "1.0.0", &[("olm.gvk", gvk(g, "v1", "B")), ("olm.gvk.required", gvk(g, "v1", "A"))]),
            ],
            subs: vec![
                sub("a", "a", "stable", "community").installed("a.v1"),
                sub("b", "b", "stable", "community").installed("b.v1"),
            ],
            want: Want::Installs(&[]),
        },
        Scenario {
            name: "colocated subscriptions are resolved together to a common version",
            catalogs: vec![catalog(
                "community",
                GLOBAL,
                0,
                &[("x", "stable"), ("y", "stable"), ("db", "stable")],
                vec![
                    bundle("x.v1", "x", "1.0.0").requires_package("db", ">=1.0.0"),
                    bundle("y.v1", "y", "1.0.0").requires_package("db", "<2.0.0"),
                    bundle("db.v1", "db", "1.0.0"),
                    bundle("db.v2", "db", "2.0.0").replaces("db.v1"),
                ],
            )],
            csvs: vec![],
            subs: vec![sub("x", "x", "stable", "community"), sub("y", "y", "stable", "community")],
            want: Want::Installs(&["db.v1", "x.v1", "y.v1"]),
        },
        Scenario {
            name: "colocated subscriptions that need two versions of one package fail",
            catalogs: vec![catalog(
                "community",
                GLOBAL,
                0,
                &[("x", "stable"), ("y", "stable"), ("db", "stable")],
                vec![
                    bundle("x.v1", "x", "1.0.0").requires_package("db", ">=2.0.0"),
                    bundle("y.v1", "y", "1.0.0").requires_package("db", "<2.0.0"),
                    bundle("db.v1", "db", "1.0.0"),
                    bundle("db.v2", "db", "2.0.0").replaces("db.v1"),
                ],
            )],
            csvs: vec![],
            subs: vec![sub("x", "x", "stable", "community"), sub("y", "y", "stable", "community")],
            want: Want::Fails(&[
                "bundle x.v1 requires an operator with package: db and with version in range: >=2.0.0",
                "bundle y.v1 requires an operator with package: db and with version in range: <2.0.0",
                "community/olm/stable/db.v1 and community/olm/stable/db.v2 originate from package db",
            ]),
        },
        Scenario {
            name: "an installed CSV without a Subscription is never replaced",
            catalogs: vec![catalog("community", GLOBAL, 0, &[("etcd", "stable")], etcd_channel())],
            csvs: vec![csv("etcd.v1.0.0", "etcd", "1.0.0", &[])],
            subs: vec![sub("etcd", "etcd", "stable", "community")],
            want: Want::Fails(&[
                "clusterserviceversion etcd.v1.0.0 exists and is not referenced by a subscription",
                "originate from package etcd",
            ]),
        },
        Scenario {
            name: "a subscription to an unknown catalog fails with upstream's message",
            catalogs: vec![catalog("community", GLOBAL, 0, &[("etcd", "stable")], etcd_channel())],
            csvs: vec![],
            subs: vec![sub("etcd", "etcd", "stable", "missing")],
            want: Want::Fails(&[
                "no operators found from catalog missing in namespace olm referenced by subscription etcd",
            ]),
        },
        Scenario {
            name: "a subscription to an unknown package or channel fails with upstream's messages",
            catalogs: vec![catalog("community", GLOBAL, 0, &[("etcd", "stable")], etcd_channel())],
            csvs: vec![],
            subs: vec![sub("nope", "nope", "stable", "community"), sub("etcd", "etcd", "fast", "community")],
            want: Want::Fails(&[
                "no operators found in package nope in the catalog referenced by subscription nope",
            ]),
        },
        Scenario {
            name: "two providers of one API cannot both be installed",
            catalogs: vec![catalog(
                "community",
                GLOBAL,
                0,
                &[("p", "stable"), ("q", "stable")],
                vec![bundle("p.v1", "p", "1.0.0").provides(g, "v1", "Thing"), bundle("q.v1", "q", "1.0.0").provides(g, "v1", "Thing")],
            )],
            csvs: vec![],
            subs: vec![sub("p", "p", "stable", "community"), sub("q", "q", "stable", "community")],
            want: Want::Fails(&["community/olm/stable/p.v1 and community/olm/stable/q.v1 provide Thing (example.com/v1)"]),
        },
    ]
}

#[test]
fn documented_scenarios() {
    let mut failures = Vec::new();
    for s in scenarios() {
        let result = run(s.csvs, s.subs, &s.catalogs);
        match (&s.want, &result) {
            (Want::Installs(want), Ok(_)) => {
                let got = installs(&result);
                let mut want: Vec<String> = want.iter().map(|s| (*s).to_owned()).collect();
                want.sort();
                if got != want {
                    failures.push(format!("{}: installs {got:?}, want {want:?}", s.name));
                }
            }
            (Want::Fails(parts), Err(e)) => {
                let message = e.to_string();
                for p in *parts {
                    if !message.contains(p) {
                        failures.push(format!("{}: message {message:?} lacks {p:?}", s.name));
                    }
                }
            }
            (Want::Installs(_), Err(e)) => failures.push(format!("{}: failed: {e}", s.name)),
            (Want::Fails(_), Ok(r)) => {
                failures.push(format!("{}: resolved to {:?}", s.name, r.operators))
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn unhealthy_catalogs_in_scope_block_resolution() {
    let healthy = catalog(
        "community",
        GLOBAL,
        0,
        &[("etcd", "stable")],
        etcd_channel(),
    );
    let broken = unhealthy(catalog("broken", NS, 0, &[], vec![]));
    let err = run(
        vec![],
        vec![sub("etcd", "etcd", "stable", "community")],
        &[healthy.clone(), broken],
    )
    .unwrap_err();
    assert_eq!(err.reason(), "ErrorPreventedResolution");
    assert_eq!(
        err.to_string(),
        "failed to populate resolver cache from source broken/operators: catalog source is unhealthy"
    );
    // An unhealthy catalog outside the namespace's scope does not matter.
    let elsewhere = unhealthy(catalog("broken", "elsewhere", 0, &[], vec![]));
    let r = run(
        vec![],
        vec![sub("etcd", "etcd", "stable", "community")],
        &[healthy, elsewhere],
    );
    assert_eq!(installs(&r), ["etcd.v1.2.0"]);
}

#[test]
fn excluding_the_global_namespace_hides_its_catalogs() {
    let global = catalog(
        "community",
        GLOBAL,
        0,
        &[("etcd", "stable")],
        etcd_channel(),
    );
    let state = olm_resolver::NamespaceState {
        namespace: NS.into(),
        csvs: vec![],
        subscriptions: vec![sub("etcd", "etcd", "stable", "community")],
    };
    let err = olm_resolver::resolve(&olm_resolver::ResolveRequest {
        state: &state,
        catalogs: &[global],
        global_namespace: GLOBAL,
        exclude_global: true,
    })
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("no operators found from catalog community in namespace olm"),
        "{err}"
    );
}

#[test]
fn not_satisfiable_reports_a_minimal_set_in_plain_words() {
    let r = run(
        vec![],
        vec![sub("app", "app", "stable", "community")],
        &[catalog(
            "community",
            GLOBAL,
            0,
            &[("app", "stable"), ("other", "stable")],
            vec![
                bundle("app.v1", "app", "1.0.0").requires_api("example.com", "v1", "Database"),
                bundle("other.v1", "other", "1.0.0").provides("example.com", "v1", "Unrelated"),
            ],
        )],
    );
    let Err(ResolveError::NotSatisfiable { conflicts }) = r else {
        panic!("expected NotSatisfiable, got {r:?}");
    };
    let messages: Vec<&str> = conflicts.iter().map(|c| c.message.as_str()).collect();
    assert_eq!(
        messages,
        // Sorted by text, as upstream's solver sorts them.
        [
            "bundle app.v1 requires an operator providing an API with group: example.com, version: v1, kind: Database",
            "subscription app exists",
            "subscription app requires community/olm/stable/app.v1",
        ]
    );
    assert_eq!(
        conflicts[0].explanation,
        "bundle app.v1 requires an operator providing an API with group: example.com, version: v1, kind: Database; no catalog visible to namespace operators has one"
    );
    assert_eq!(
        ResolveError::NotSatisfiable { conflicts }.reason(),
        "ConstraintsNotSatisfiable"
    );
}

#[test]
fn upgrades_record_what_they_replace() {
    let r = run(
        vec![csv("etcd.v1.0.0", "etcd", "1.0.0", &[])],
        vec![sub("etcd", "etcd", "stable", "community").installed("etcd.v1.0.0")],
        &[catalog(
            "community",
            GLOBAL,
            0,
            &[("etcd", "stable")],
            etcd_channel(),
        )],
    )
    .unwrap();
    assert_eq!(r.operators.len(), 1);
    let op = &r.operators[0];
    assert_eq!(op.replaces.as_deref(), Some("etcd.v1.0.0"));
    assert_eq!(op.subscription.as_deref(), Some("etcd"));
    assert_eq!(
        op.bundle_path.as_deref(),
        Some("quay.io/example/etcd.v1.1.0:latest")
    );
    assert_eq!(r.subscriptions[0].csv, "etcd.v1.1.0");
    assert!(!r.subscriptions[0].unchanged);
}

#[test]
fn invalid_requirements_prevent_resolution() {
    let cases = [
        (
            "olm.package.required",
            r#"{"packageName":"db","versionRange":"not a range"}"#,
            "failed to parse version range",
        ),
        ("olm.constraint", r#"{"bogus":{}}"#, "olm.constraint"),
        ("olm.constraint", r#"{}"#, "constraint is empty"),
        (
            "olm.constraint",
            r#"{"cel":{"rule":"nope == 1"}}"#,
            "undeclared reference",
        ),
    ];
    for (t, v, want) in cases {
        let r = run(
            vec![],
            vec![sub("app", "app", "stable", "community")],
            &[catalog(
                "community",
                GLOBAL,
                0,
                &[("app", "stable")],
                vec![bundle("app.v1", "app", "1.0.0").property(t, v)],
            )],
        );
        let err = r.unwrap_err();
        assert_eq!(err.reason(), "ErrorPreventedResolution", "{t} {v}");
        assert!(err.to_string().contains(want), "{t} {v}: {err}");
    }
}

#[test]
fn oversized_constraints_are_refused_with_upstreams_message() {
    let rule = format!("{} == \"x\"", "\"a\" + ".repeat(140_000 / 6) + "\"a\"");
    let value = format!(
        r#"{{"cel":{{"rule":{}}}}}"#,
        serde_json::to_string(&rule).unwrap()
    );
    assert!(value.len() > 131_072);
    let r = run(
        vec![],
        vec![sub("app", "app", "stable", "community")],
        &[catalog(
            "community",
            GLOBAL,
            0,
            &[("app", "stable")],
            vec![bundle("app.v1", "app", "1.0.0").constraint(&value)],
        )],
    );
    assert!(
        r.unwrap_err()
            .to_string()
            .contains("olm.constraint value is greater than max constraint size 131072 bytes")
    );
}

#[test]
fn broken_channels_report_upstreams_sort_errors() {
    let r = run(
        vec![],
        vec![sub("etcd", "etcd", "stable", "community")],
        &[catalog(
            "community",
            GLOBAL,
            0,
            &[("etcd", "stable")],
            vec![
                bundle("etcd.v1", "etcd", "1.0.0"),
                bundle("etcd.v2", "etcd", "2.0.0"),
            ],
        )],
    );
    let message = r.unwrap_err().to_string();
    assert!(
        message.starts_with("a unique replacement chain within a channel is required to determine the relative order between channel entries, but 2 replacement chains were found in channel \"stable\" of package \"etcd\""),
        "{message}"
    );
}

#[test]
fn deeply_nested_constraints_are_refused_not_overflowed() {
    let depth = 5_000;
    let value = format!(
        "{}{}{}",
        r#"{"not":{"constraints":["#.repeat(depth),
        r#"{"package":{"packageName":"db","versionRange":">=1.0.0"}}"#,
        "]}}".repeat(depth)
    );
    assert!(value.len() < 131_072);
    let r = run(
        vec![],
        vec![sub("app", "app", "stable", "community")],
        &[catalog(
            "community",
            GLOBAL,
            0,
            &[("app", "stable")],
            vec![bundle("app.v1", "app", "1.0.0").constraint(&value)],
        )],
    );
    let err = r.unwrap_err();
    assert_eq!(err.reason(), "ErrorPreventedResolution", "{err}");
}
