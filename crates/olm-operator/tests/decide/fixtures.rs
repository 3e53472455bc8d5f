//! Fixtures that read like sentences: a widget operator, its gadget group and
//! the world around them, loaded from YAML under `tests/fixtures` and bent by
//! small builder methods.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm_api::{
    csv::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase, CsvReason},
    labels,
    operator_condition::OperatorCondition,
    operator_group::{OperatorGroup, UpgradeStrategy},
    subscription::Subscription,
};
use olm_operator::decide::{
    csv_phase::{
        self, ApiServiceResources, CsvDecision, CsvObservation, InstallCheck, OwnedClusterObjects,
    },
    deployment::InvalidStrategy,
    operator_group::{ObservedNamespace, with_membership_annotations},
    requirements::RequirementsOutcome,
};

/// The operator's namespace.
pub(crate) const GADGET_SYSTEM: &str = "gadget-system";

fn parse<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
    serde_yaml_ng::from_str(yaml).expect("fixture is valid YAML for its type")
}

/// `widget-operator.v1.2.0` in `gadget-system`, as written in its bundle: no
/// status, no finalizer, no OperatorGroup annotations.
pub(crate) fn widget_operator() -> ClusterServiceVersion {
    parse(include_str!("../fixtures/widget-operator.v1.2.0.csv.yaml"))
}

/// `gadget-group` in `gadget-system`, targeting its own namespace.
pub(crate) fn gadget_group() -> OperatorGroup {
    parse(include_str!("../fixtures/gadget-group.og.yaml"))
}

/// The Subscription that installed the widget operator, with a `config`.
pub(crate) fn sprocket_subscription() -> Subscription {
    parse(include_str!("../fixtures/sprocket-subscription.sub.yaml"))
}

/// The OperatorCondition of `widget-operator.v1.1.0`, blocking upgrades.
pub(crate) fn upgrade_blocked_condition() -> OperatorCondition {
    parse(include_str!(
        "../fixtures/upgrade-blocked.operatorcondition.yaml"
    ))
}

/// A moment, `minutes` after the tests' epoch.
pub(crate) fn minute(minutes: i64) -> Timestamp {
    Timestamp::from_second(1_924_992_000 + minutes * 60).expect("valid test time")
}

/// Builder steps for CSVs.
pub(crate) trait CsvFixture: Sized {
    /// Renames it.
    fn named(self, name: &str) -> Self;
    /// Moves it to another namespace.
    fn in_namespace(self, namespace: &str) -> Self;
    /// Sets phase and reason, as if set at `since`.
    fn in_phase(self, phase: CsvPhase, reason: CsvReason, since: Timestamp) -> Self;
    /// Sets `spec.replaces` (empty: replaces nothing).
    fn replacing(self, name: &str) -> Self;
    /// Adds the finalizer and the membership annotations of `group`.
    fn member_of(self, group: &OperatorGroup) -> Self;
    /// Turns it into the copy of a CSV from `parent_namespace`.
    fn copied_from(self, parent_namespace: &str) -> Self;
    /// Changes the install strategy name.
    fn with_strategy(self, strategy: &str) -> Self;
    /// Sets one metadata annotation.
    fn annotated(self, key: &str, value: &str) -> Self;
}

impl CsvFixture for ClusterServiceVersion {
    fn named(mut self, name: &str) -> Self {
        self.metadata.name = Some(name.to_owned());
        self
    }

    fn in_namespace(mut self, namespace: &str) -> Self {
        self.metadata.namespace = Some(namespace.to_owned());
        self
    }

    fn in_phase(mut self, phase: CsvPhase, reason: CsvReason, since: Timestamp) -> Self {
        let status = self
            .status
            .get_or_insert_with(ClusterServiceVersionStatus::default);
        status.phase = Some(phase);
        status.reason = Some(reason);
        status.message = Some("as observed".to_owned());
        status.last_transition_time = Some(Time(since));
        status.last_update_time = Some(Time(since));
        self
    }

    fn replacing(mut self, name: &str) -> Self {
        self.spec.replaces = (!name.is_empty()).then(|| name.to_owned());
        self
    }

    fn member_of(mut self, group: &OperatorGroup) -> Self {
        self.metadata.annotations = Some(with_membership_annotations(
            self.metadata.annotations.as_ref(),
            group,
        ));
        self.metadata.finalizers = Some(vec![labels::CSV_CLEANUP_FINALIZER.to_owned()]);
        self
    }

    fn copied_from(mut self, parent_namespace: &str) -> Self {
        self.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(labels::COPIED_FROM.to_owned(), parent_namespace.to_owned());
        self
    }

    fn with_strategy(mut self, strategy: &str) -> Self {
        self.spec.install.strategy = strategy.into();
        self
    }

    fn annotated(mut self, key: &str, value: &str) -> Self {
        self.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_owned(), value.to_owned());
        self
    }
}

/// Builder steps for OperatorGroups.
pub(crate) trait GroupFixture: Sized {
    /// Renames it.
    fn named(self, name: &str) -> Self;
    /// Moves it to another namespace.
    fn in_namespace(self, namespace: &str) -> Self;
    /// Sets spec and status to exactly these targets.
    fn targeting(self, namespaces: &[&str]) -> Self;
    /// Targets all namespaces (empty spec, status `[""]`).
    fn targeting_all_namespaces(self) -> Self;
    /// Sets the `olm.providedAPIs` annotation.
    fn providing(self, apis: &str) -> Self;
    /// Makes its provided APIs static.
    fn with_static_provided_apis(self) -> Self;
    /// Turns on fail-forward upgrades.
    fn failing_forward(self) -> Self;
}

impl GroupFixture for OperatorGroup {
    fn named(mut self, name: &str) -> Self {
        self.metadata.name = Some(name.to_owned());
        self
    }

    fn in_namespace(mut self, namespace: &str) -> Self {
        self.metadata.namespace = Some(namespace.to_owned());
        self
    }

    fn targeting(mut self, namespaces: &[&str]) -> Self {
        let namespaces: Vec<String> = namespaces.iter().map(|ns| (*ns).to_owned()).collect();
        self.spec.target_namespaces = namespaces.clone();
        self.status.get_or_insert_with(Default::default).namespaces = namespaces;
        self
    }

    fn targeting_all_namespaces(mut self) -> Self {
        self.spec.target_namespaces = Vec::new();
        self.spec.selector = None;
        self.status.get_or_insert_with(Default::default).namespaces = vec![String::new()];
        self
    }

    fn providing(mut self, apis: &str) -> Self {
        self.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(labels::PROVIDED_APIS.to_owned(), apis.to_owned());
        self
    }

    fn with_static_provided_apis(mut self) -> Self {
        self.spec.static_provided_apis = Some(true);
        self
    }

    fn failing_forward(mut self) -> Self {
        self.spec.upgrade_strategy = Some(UpgradeStrategy::TECH_PREVIEW_UNSAFE_FAIL_FORWARD);
        self
    }
}

/// The widget operator's `olm.providedAPIs` entry.
pub(crate) const WIDGET_API: &str = "Widget.v1.gadgets.example.test";

/// Everything a CSV sync observes, owned, with readable defaults: the widget
/// operator as a member of the gadget group, requirements met, install healthy.
pub(crate) struct World {
    pub(crate) csv: ClusterServiceVersion,
    pub(crate) groups: Vec<OperatorGroup>,
    pub(crate) groups_elsewhere: Vec<OperatorGroup>,
    pub(crate) namespaces: Vec<ObservedNamespace>,
    pub(crate) other_csvs: Vec<ClusterServiceVersion>,
    pub(crate) requirements: Result<RequirementsOutcome, InvalidStrategy>,
    pub(crate) install: InstallCheck,
    pub(crate) api_service_owner_conflict: bool,
    pub(crate) api_service_resources: ApiServiceResources,
    pub(crate) cert_rotation_due: bool,
    pub(crate) replaced_condition: Option<OperatorCondition>,
    pub(crate) owned_cluster_objects: OwnedClusterObjects,
    pub(crate) now: Timestamp,
}

impl World {
    /// The widget operator, in `phase`/`reason` since minute 0, observed at
    /// minute 1, as a member of the gadget group (which already lists the
    /// widget API), replacing nothing.
    pub(crate) fn widget_in(phase: CsvPhase, reason: CsvReason) -> Self {
        let group = gadget_group().providing(WIDGET_API);
        let csv =
            widget_operator()
                .replacing("")
                .member_of(&group)
                .in_phase(phase, reason, minute(0));
        Self::around(csv, group)
    }

    /// `csv` in a world with `group` as its namespace's only group.
    pub(crate) fn around(csv: ClusterServiceVersion, group: OperatorGroup) -> Self {
        Self {
            csv,
            groups: vec![group],
            groups_elsewhere: Vec::new(),
            namespaces: vec![
                ObservedNamespace::new(GADGET_SYSTEM, &[]),
                ObservedNamespace::new("cog-works", &[("team", "cogs")]),
                ObservedNamespace::new("sprocket-yard", &[("team", "sprockets")]),
            ],
            other_csvs: Vec::new(),
            requirements: Ok(RequirementsOutcome {
                met: true,
                statuses: Vec::new(),
            }),
            install: InstallCheck::default(),
            api_service_owner_conflict: false,
            api_service_resources: ApiServiceResources::Healthy,
            cert_rotation_due: false,
            replaced_condition: None,
            owned_cluster_objects: OwnedClusterObjects::default(),
            now: minute(1),
        }
    }

    /// Runs one sync.
    pub(crate) fn decide(&self) -> CsvDecision {
        let mut namespace_csvs = vec![self.csv.clone()];
        namespace_csvs.extend(self.other_csvs.iter().cloned());
        let all_groups: Vec<OperatorGroup> = self
            .groups
            .iter()
            .chain(&self.groups_elsewhere)
            .cloned()
            .collect();
        let observation = CsvObservation {
            namespace_operator_groups: &self.groups,
            all_operator_groups: &all_groups,
            namespaces: &self.namespaces,
            namespace_csvs: &namespace_csvs,
            requirements: self.requirements.clone(),
            install: self.install.clone(),
            api_service_owner_conflict: self.api_service_owner_conflict,
            api_service_resources: self.api_service_resources.clone(),
            cert_rotation_due: self.cert_rotation_due,
            replaced_operator_condition: self.replaced_condition.as_ref(),
            owned_cluster_objects: self.owned_cluster_objects,
            ..CsvObservation::new(&self.csv, self.now)
        };
        csv_phase::decide(&observation)
    }
}

/// Another CSV of the widget package in `gadget-system`.
pub(crate) fn widget_version(
    name: &str,
    replaces: &str,
    phase: CsvPhase,
    reason: CsvReason,
) -> ClusterServiceVersion {
    widget_operator()
        .named(name)
        .replacing(replaces)
        .in_phase(phase, reason, minute(0))
}
