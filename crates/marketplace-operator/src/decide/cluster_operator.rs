//! The ClusterOperator status of marketplace and of each OLM component, as
//! OpenShift's cluster operators report it: `Available`, `Progressing`,
//! `Degraded` and `Upgradeable`, and `versions` with the `operator` version
//! once it has rolled out.
//!
//! The input is what the Deployments of the OLM namespace say (and the
//! ClusterOperator status reported before); the output is the status to
//! write. `Progressing` is about a new *version* rolling out, as the
//! cluster-version-operator reads it: a pod restarted at the version already
//! reported is routine disruption, not progress.

use std::collections::BTreeMap;

use jiff::Timestamp;
pub use olm_api::cluster_operator::{
    ClusterOperatorCondition, ClusterOperatorStatus, OperandVersion,
};
use olm_api::conditions::{self, FALSE, TRUE};

/// The pod template label that names the version a Deployment runs.
pub const VERSION_LABEL: &str = "app.kubernetes.io/version";

/// The label every OLM Deployment carries, and its value.
pub const PART_OF_SELECTOR: &str = "app.kubernetes.io/part-of=olm";

/// The name of the one entry of `status.versions` this reports.
pub const OPERATOR_VERSION_NAME: &str = "operator";

/// How many failed OperatorHub reconciles in a row make marketplace Degraded:
/// one failure is retried at once and is no news.
pub const DEGRADED_AFTER_FAILURES: u32 = 3;

/// `Available`.
pub const AVAILABLE: &str = "Available";
/// `Progressing`.
pub const PROGRESSING: &str = "Progressing";
/// `Degraded`.
pub const DEGRADED: &str = "Degraded";
/// `Upgradeable`.
pub const UPGRADEABLE: &str = "Upgradeable";

/// An OLM component that runs as a Deployment of the OLM namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Component {
    /// marketplace-operator.
    MarketplaceOperator,
    /// olm-operator.
    OlmOperator,
    /// catalog-operator.
    CatalogOperator,
    /// packageserver.
    Packageserver,
    /// bundle-unpacker, reported with catalog-operator which runs it.
    BundleUnpacker,
}

impl Component {
    /// Every component.
    pub const ALL: [Component; 5] = [
        Component::MarketplaceOperator,
        Component::OlmOperator,
        Component::CatalogOperator,
        Component::Packageserver,
        Component::BundleUnpacker,
    ];

    /// The name of its Deployment.
    pub fn deployment_name(self) -> &'static str {
        match self {
            Component::MarketplaceOperator => "marketplace-operator",
            Component::OlmOperator => "olm-operator",
            Component::CatalogOperator => "catalog-operator",
            Component::Packageserver => "packageserver",
            Component::BundleUnpacker => "bundle-unpacker",
        }
    }

    /// The component whose Deployment is named `name`.
    pub fn from_deployment_name(name: &str) -> Option<Component> {
        Component::ALL
            .into_iter()
            .find(|component| component.deployment_name() == name)
    }

    /// The ClusterOperator it reports in.
    pub fn cluster_operator(self) -> &'static str {
        match self {
            Component::MarketplaceOperator => "marketplace",
            Component::OlmOperator => "operator-lifecycle-manager",
            Component::CatalogOperator | Component::BundleUnpacker => {
                "operator-lifecycle-manager-catalog"
            }
            Component::Packageserver => "operator-lifecycle-manager-packageserver",
        }
    }

    /// Whether its version is the ClusterOperator's version (the one
    /// component a ClusterOperator is named after).
    fn is_primary(self) -> bool {
        self != Component::BundleUnpacker
    }
}

/// What a component's Deployment says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeploymentObservation {
    /// `spec.replicas` (the API server defaults it to 1).
    pub replicas: i32,
    /// `status.readyReplicas`.
    pub ready_replicas: i32,
    /// `status.availableReplicas`.
    pub available_replicas: i32,
    /// `status.updatedReplicas`.
    pub updated_replicas: i32,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `status.observedGeneration`.
    pub observed_generation: Option<i64>,
    /// The pod template's [`VERSION_LABEL`].
    pub version: Option<String>,
}

impl DeploymentObservation {
    /// Whether a rollout is under way: the Deployment controller has not yet
    /// seen the latest spec, not every replica runs the latest template, or
    /// (as `kubectl rollout status` also waits for) some updated replica is
    /// not available yet.
    pub fn rolling_out(&self) -> bool {
        let unobserved = match (self.generation, self.observed_generation) {
            (Some(generation), Some(observed)) => observed < generation,
            (Some(_), None) => true,
            (None, _) => false,
        };
        unobserved
            || self.updated_replicas < self.replicas
            || self.available_replicas < self.updated_replicas.min(self.replicas)
    }

    fn should_run(&self) -> bool {
        self.replicas > 0
    }
}

/// The health of marketplace's own OperatorHub reconcile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReconcileHealth {
    /// Failed reconciles in a row; 0 after a success.
    pub failures_in_a_row: u32,
    /// The error chain of the last failure, if the last run failed.
    pub last_error: Option<String>,
}

/// The `operator` version a status reports.
pub fn operator_version(status: &ClusterOperatorStatus) -> Option<&str> {
    status
        .versions
        .iter()
        .find(|v| v.name == OPERATOR_VERSION_NAME)
        .map(|v| v.version.as_str())
}

/// What [`cluster_operator_statuses`] reads.
#[derive(Clone, Debug)]
pub struct Observed<'a> {
    /// The Deployment of each component present in the OLM namespace.
    pub deployments: &'a BTreeMap<Component, DeploymentObservation>,
    /// The status each ClusterOperator has now, by name (absent: none yet).
    pub reported: &'a BTreeMap<String, ClusterOperatorStatus>,
    /// The marketplace's own reconcile health.
    pub marketplace: &'a ReconcileHealth,
    /// Now, for new transitions.
    pub now: Timestamp,
}

/// The status of each ClusterOperator that has at least one component
/// Deployment present, by ClusterOperator name.
pub fn cluster_operator_statuses(
    observed: &Observed<'_>,
) -> BTreeMap<String, ClusterOperatorStatus> {
    let mut by_operator: BTreeMap<&'static str, Vec<(Component, &DeploymentObservation)>> =
        BTreeMap::new();
    for (component, deployment) in observed.deployments {
        by_operator
            .entry(component.cluster_operator())
            .or_default()
            .push((*component, deployment));
    }
    by_operator
        .into_iter()
        .map(|(name, components)| {
            let reported = observed.reported.get(name);
            let marketplace = (name == Component::MarketplaceOperator.cluster_operator())
                .then_some(observed.marketplace);
            let status = operator_status(&components, reported, marketplace, observed.now);
            (name.to_owned(), status)
        })
        .collect()
}

fn operator_status(
    components: &[(Component, &DeploymentObservation)],
    reported: Option<&ClusterOperatorStatus>,
    marketplace: Option<&ReconcileHealth>,
    now: Timestamp,
) -> ClusterOperatorStatus {
    let reported_version = reported.and_then(operator_version);
    // The version the operator is going to: its own Deployment's, else that
    // of any component folded into it.
    let target_version = components
        .iter()
        .filter(|(component, _)| component.is_primary())
        .chain(components.iter())
        .find_map(|(_, deployment)| deployment.version.as_deref());
    let rolling: Vec<&str> = components
        .iter()
        .filter(|(_, deployment)| deployment.rolling_out())
        .map(|(component, _)| component.deployment_name())
        .collect();
    let unavailable: Vec<&str> = components
        .iter()
        .filter(|(_, deployment)| deployment.should_run() && deployment.available_replicas < 1)
        .map(|(component, _)| component.deployment_name())
        .collect();
    let running: Vec<&str> = components
        .iter()
        .filter(|(_, deployment)| deployment.should_run())
        .map(|(component, _)| component.deployment_name())
        .collect();

    let available = if running.is_empty() {
        ClusterOperatorCondition::new(
            AVAILABLE,
            FALSE,
            "NoReplicasWanted",
            format!(
                "{} scaled to zero replicas",
                list(components.iter().map(|(c, _)| c.deployment_name()))
            ),
        )
    } else if unavailable.is_empty() {
        ClusterOperatorCondition::new(
            AVAILABLE,
            TRUE,
            "AsExpected",
            format!("{} available", list(running.iter().copied())),
        )
    } else {
        ClusterOperatorCondition::new(
            AVAILABLE,
            FALSE,
            "DeploymentUnavailable",
            format!(
                "no available replica of {}",
                list(unavailable.iter().copied())
            ),
        )
    };

    let new_version = target_version.is_some_and(|target| Some(target) != reported_version);
    let progressing = match target_version {
        Some(target) if new_version && !rolling.is_empty() => ClusterOperatorCondition::new(
            PROGRESSING,
            TRUE,
            "Deploying",
            match reported_version {
                Some(from) => format!(
                    "rolling out version {target} (from {from}): {} not yet updated",
                    list(rolling.iter().copied())
                ),
                None => format!(
                    "rolling out version {target}: {} not yet updated",
                    list(rolling.iter().copied())
                ),
            },
        ),
        Some(target) => ClusterOperatorCondition::new(
            PROGRESSING,
            FALSE,
            "AsExpected",
            format!("deployed version {target}"),
        ),
        None => ClusterOperatorCondition::new(
            PROGRESSING,
            FALSE,
            "AsExpected",
            format!("no {VERSION_LABEL} label on the pod template"),
        ),
    };

    let failing = marketplace.filter(|health| health.failures_in_a_row >= DEGRADED_AFTER_FAILURES);
    let degraded = if let Some(health) = failing {
        ClusterOperatorCondition::new(
            DEGRADED,
            TRUE,
            "OperatorHubReconcileFailed",
            format!(
                "the OperatorHub reconcile failed {} times in a row: {}",
                health.failures_in_a_row,
                health.last_error.as_deref().unwrap_or("unknown error")
            ),
        )
    } else if !unavailable.is_empty() {
        ClusterOperatorCondition::new(
            DEGRADED,
            TRUE,
            "DeploymentUnavailable",
            format!(
                "no available replica of {}",
                list(unavailable.iter().copied())
            ),
        )
    } else {
        ClusterOperatorCondition::new(DEGRADED, FALSE, "AsExpected", "all is well".to_owned())
    };

    let upgradeable = ClusterOperatorCondition::new(
        UPGRADEABLE,
        TRUE,
        "AsExpected",
        "safe to upgrade".to_owned(),
    );

    let mut conditions = reported.map(|r| r.conditions.clone()).unwrap_or_default();
    for condition in [available, progressing, degraded, upgradeable] {
        conditions::set(&mut conditions, condition, now);
    }
    // Only the conditions this service owns, in a stable order.
    conditions
        .retain(|c| [AVAILABLE, PROGRESSING, DEGRADED, UPGRADEABLE].contains(&c.type_.as_str()));
    conditions.sort_by_key(|c| {
        [AVAILABLE, PROGRESSING, DEGRADED, UPGRADEABLE]
            .iter()
            .position(|t| *t == c.type_)
    });

    // A version is reported only once every component has rolled it out.
    let versions = match target_version {
        Some(target) if rolling.is_empty() => vec![OperandVersion {
            name: OPERATOR_VERSION_NAME.to_owned(),
            version: target.to_owned(),
        }],
        _ => reported.map(|r| r.versions.clone()).unwrap_or_default(),
    };
    ClusterOperatorStatus {
        conditions,
        versions,
        ..ClusterOperatorStatus::default()
    }
}

fn list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const OLM: &str = "operator-lifecycle-manager";

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    /// A Deployment of `replicas` that has fully rolled out `version`.
    fn settled(version: &str, replicas: i32) -> DeploymentObservation {
        DeploymentObservation {
            replicas,
            ready_replicas: replicas,
            available_replicas: replicas,
            updated_replicas: replicas,
            generation: Some(4),
            observed_generation: Some(4),
            version: Some(version.to_owned()),
        }
    }

    /// The status reported for `version` after it settled at time 100.
    fn reported_settled(version: &str) -> ClusterOperatorStatus {
        let deployments = BTreeMap::from([(Component::OlmOperator, settled(version, 2))]);
        let status = cluster_operator_statuses(&Observed {
            deployments: &deployments,
            reported: &BTreeMap::new(),
            marketplace: &ReconcileHealth::default(),
            now: at(100),
        });
        status[OLM].clone()
    }

    fn condition<'a>(
        status: &'a ClusterOperatorStatus,
        type_: &str,
    ) -> &'a ClusterOperatorCondition {
        conditions::find(&status.conditions, type_).unwrap()
    }

    struct Case {
        name: &'static str,
        deployment: DeploymentObservation,
        reported: Option<&'static str>,
        available: &'static str,
        progressing: &'static str,
        degraded: &'static str,
        versions: Option<&'static str>,
    }

    #[test]
    fn conditions_and_versions_follow_the_deployment() {
        let cases = [
            Case {
                name: "pod restart at the reported version is not progress",
                deployment: DeploymentObservation {
                    available_replicas: 1,
                    ready_replicas: 1,
                    ..settled("v1", 2)
                },
                reported: Some("v1"),
                available: TRUE,
                progressing: FALSE,
                degraded: FALSE,
                versions: Some("v1"),
            },
            Case {
                name: "a new version rolling out is progress, versions unchanged",
                deployment: DeploymentObservation {
                    updated_replicas: 1,
                    generation: Some(5),
                    observed_generation: Some(5),
                    ..settled("v2", 2)
                },
                reported: Some("v1"),
                available: TRUE,
                progressing: TRUE,
                degraded: FALSE,
                versions: Some("v1"),
            },
            Case {
                name: "a new spec not yet observed is progress",
                deployment: DeploymentObservation {
                    generation: Some(5),
                    ..settled("v2", 2)
                },
                reported: Some("v1"),
                available: TRUE,
                progressing: TRUE,
                degraded: FALSE,
                versions: Some("v1"),
            },
            Case {
                name: "a finished rollout reports the new version",
                deployment: settled("v2", 2),
                reported: Some("v1"),
                available: TRUE,
                progressing: FALSE,
                degraded: FALSE,
                versions: Some("v2"),
            },
            Case {
                name: "zero available is unavailable and degraded",
                deployment: DeploymentObservation {
                    available_replicas: 0,
                    ready_replicas: 0,
                    ..settled("v1", 2)
                },
                reported: Some("v1"),
                available: FALSE,
                progressing: FALSE,
                degraded: TRUE,
                versions: Some("v1"),
            },
            Case {
                name: "the first rollout reports no version until done",
                deployment: DeploymentObservation {
                    updated_replicas: 0,
                    available_replicas: 0,
                    ready_replicas: 0,
                    ..settled("v1", 1)
                },
                reported: None,
                available: FALSE,
                progressing: TRUE,
                degraded: TRUE,
                versions: None,
            },
        ];
        for case in cases {
            let deployments = BTreeMap::from([(Component::OlmOperator, case.deployment)]);
            let reported: BTreeMap<_, _> = case
                .reported
                .map(|version| (OLM.to_owned(), reported_settled(version)))
                .into_iter()
                .collect();
            let statuses = cluster_operator_statuses(&Observed {
                deployments: &deployments,
                reported: &reported,
                marketplace: &ReconcileHealth::default(),
                now: at(200),
            });
            let status = &statuses[OLM];
            let seen = (
                condition(status, AVAILABLE).status.as_str(),
                condition(status, PROGRESSING).status.as_str(),
                condition(status, DEGRADED).status.as_str(),
                condition(status, UPGRADEABLE).status.as_str(),
                operator_version(status),
            );
            assert_eq!(
                seen,
                (
                    case.available,
                    case.progressing,
                    case.degraded,
                    TRUE,
                    case.versions
                ),
                "{}: {status:?}",
                case.name
            );
        }
    }

    #[test]
    fn last_transition_time_is_kept_while_the_status_holds() {
        let before = reported_settled("v1");
        let deployments = BTreeMap::from([(
            Component::OlmOperator,
            DeploymentObservation {
                available_replicas: 0,
                ..settled("v1", 2)
            },
        )]);
        let reported = BTreeMap::from([(OLM.to_owned(), before)]);
        let after = cluster_operator_statuses(&Observed {
            deployments: &deployments,
            reported: &reported,
            marketplace: &ReconcileHealth::default(),
            now: at(300),
        });
        let after = &after[OLM];
        let time = |type_| {
            condition(after, type_)
                .last_transition_time
                .as_ref()
                .unwrap()
                .0
        };
        assert_eq!(time(PROGRESSING), at(100), "Progressing stayed False");
        assert_eq!(time(UPGRADEABLE), at(100), "Upgradeable stayed True");
        assert_eq!(time(AVAILABLE), at(300), "Available turned False");
        assert_eq!(time(DEGRADED), at(300), "Degraded turned True");
    }

    #[test]
    fn components_map_to_their_cluster_operators() {
        let deployments = BTreeMap::from([
            (Component::MarketplaceOperator, settled("m1", 1)),
            (Component::CatalogOperator, settled("c1", 1)),
            (
                Component::BundleUnpacker,
                DeploymentObservation {
                    available_replicas: 0,
                    ..settled("b1", 1)
                },
            ),
        ]);
        let statuses = cluster_operator_statuses(&Observed {
            deployments: &deployments,
            reported: &BTreeMap::new(),
            marketplace: &ReconcileHealth::default(),
            now: at(1),
        });
        let names: Vec<_> = statuses.keys().map(String::as_str).collect();
        assert_eq!(names, ["marketplace", "operator-lifecycle-manager-catalog"]);
        let catalog = &statuses["operator-lifecycle-manager-catalog"];
        assert_eq!(
            operator_version(catalog),
            None,
            "not reported until bundle-unpacker has rolled out too"
        );
        assert_eq!(condition(catalog, DEGRADED).status, TRUE, "{catalog:?}");
        assert!(
            condition(catalog, DEGRADED)
                .message
                .as_deref()
                .unwrap()
                .contains("bundle-unpacker"),
            "{catalog:?}"
        );
    }

    #[test]
    fn a_failing_operator_hub_reconcile_degrades_marketplace_only_when_it_keeps_failing() {
        let deployments = BTreeMap::from([(Component::MarketplaceOperator, settled("m1", 1))]);
        let degraded = |failures_in_a_row| {
            let health = ReconcileHealth {
                failures_in_a_row,
                last_error: Some("cannot create OperatorHub fixture-hub".to_owned()),
            };
            let statuses = cluster_operator_statuses(&Observed {
                deployments: &deployments,
                reported: &BTreeMap::new(),
                marketplace: &health,
                now: at(1),
            });
            condition(&statuses["marketplace"], DEGRADED).clone()
        };
        assert_eq!(degraded(1).status, FALSE);
        let failing = degraded(DEGRADED_AFTER_FAILURES);
        assert_eq!(failing.status, TRUE);
        assert_eq!(
            failing.reason.as_deref(),
            Some("OperatorHubReconcileFailed")
        );
        assert!(failing.message.unwrap().contains("fixture-hub"));
    }

    #[test]
    fn a_deployment_without_a_version_label_reports_no_version() {
        let deployments = BTreeMap::from([(
            Component::Packageserver,
            DeploymentObservation {
                version: None,
                ..settled("ignored", 1)
            },
        )]);
        let statuses = cluster_operator_statuses(&Observed {
            deployments: &deployments,
            reported: &BTreeMap::new(),
            marketplace: &ReconcileHealth::default(),
            now: at(1),
        });
        let status = &statuses["operator-lifecycle-manager-packageserver"];
        assert!(status.versions.is_empty());
        assert_eq!(condition(status, PROGRESSING).status, FALSE);
    }
}
