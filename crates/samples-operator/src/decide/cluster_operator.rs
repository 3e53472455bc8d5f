//! The status of the ClusterOperator `openshift-samples`, by upstream's
//! rules (`UpdateOperatorStatus` in `pkg/operatorstatus/operatorstatus.go`
//! and the `ClusterOperatorStatus*Condition` functions of `pkg/util/util.go`):
//! `Available`, `Progressing` and `Degraded` (no `Upgradeable`), the
//! `operator` version and upstream's four related objects, with upstream's
//! reasons and messages verbatim.
//!
//! The rules, in upstream's order:
//!
//! 1. The Config is being deleted: all three conditions with reason
//!    `DeletionInProgress`, `Available` and `Progressing` True, `Degraded`
//!    False.
//! 2. Unsupported architecture (`UnsupportHWArchitecture`), then the
//!    terms-based registry unreachable at bootstrap
//!    (`TermsBasedRegistryUnreacahable`, sic): the same, with `Progressing`
//!    False.
//! 3. Otherwise `Degraded`, then `Available`, then `Progressing`, each from
//!    the Config's status (see [`cluster_operator_status`]).
//!
//! One deliberate difference: upstream reports `Progressing` True while
//! samples are being brought to a new version only when the deprecated
//! `ImageChangesInProgress` condition is True, which it never sets, so an
//! upgrade never shows as progressing. Here, when the state is Managed,
//! nothing is degraded, no removal is pending, and either the samples do not
//! exist yet or the Config's `status.version` is not the operator's version,
//! `Progressing` is True with upstream's `Samples processing to <version>`
//! message and no reason. The rule sits where upstream's
//! `ImageChangesInProgress` rule sits but ahead of "`Available` True, so
//! `Progressing` False", which would otherwise always win during an upgrade.
//!
//! Upstream writes the version only with `Available` (and on the special
//! paths); the net effect, kept here, is `versions` =
//! `[{name: operator, version: <status.version>}]` whenever the Config has a
//! `status.version`, and whatever was reported before otherwise.

use jiff::Timestamp;
use olm_api::{
    cluster_operator::{
        ClusterOperatorCondition, ClusterOperatorStatus, OperandVersion, RelatedObject,
    },
    conditions::{self, FALSE, TRUE, UNKNOWN},
    samples::{self, ConfigStatus, condition, management_state},
};

/// The ClusterOperator the samples operator reports in.
pub const CLUSTER_OPERATOR_NAME: &str = "openshift-samples";

/// The name of the one entry of `status.versions`.
pub const OPERATOR_VERSION_NAME: &str = "operator";

/// `Available`.
pub const AVAILABLE: &str = "Available";
/// `Progressing`.
pub const PROGRESSING: &str = "Progressing";
/// `Degraded`.
pub const DEGRADED: &str = "Degraded";

/// Reason while the Config is being deleted.
pub const DELETION_IN_PROGRESS: &str = "DeletionInProgress";
/// Reason when `spec.architectures[0]` is not supported (upstream's
/// spelling).
pub const UNSUPPORTED_ARCHITECTURE: &str = "UnsupportHWArchitecture";
/// Reason when the operator bootstrapped as Removed because
/// `registry.redhat.io` was unreachable (upstream's spelling, sic).
pub const TBR_UNREACHABLE: &str = "TermsBasedRegistryUnreacahable";
/// `Progressing` reason when some sample imports failed.
pub const FAILED_IMAGE_IMPORTS: &str = "FailedImageImports";
/// `Available` reason while the samples do not exist yet.
pub const SAMPLE_UPSERTS_PENDING: &str = "SampleUpsertsPending";
/// `Degraded` reason when the Config is invalid.
pub const INVALID_CONFIGURATION: &str = "InvalidConfiguration";
/// Reason of all three conditions while the state is Removed
/// (`Currently<State>`).
pub const CURRENTLY_REMOVED: &str = "CurrentlyRemoved";
/// Reason of all three conditions while the state is Unmanaged
/// (`Currently<State>`).
pub const CURRENTLY_UNMANAGED: &str = "CurrentlyUnmanaged";

/// How many conditions the Config has once it has been processed; with
/// fewer, nothing is reported as degraded yet.
pub const CONFIG_CONDITION_COUNT: usize = 7;

/// What [`cluster_operator_status`] reads.
#[derive(Clone, Debug)]
pub struct Observed<'a> {
    /// The Config's status.
    pub status: &'a ConfigStatus,
    /// The Config is being deleted (or has just been).
    pub deleting: bool,
    /// `spec.architectures[0]` is not one of the supported architectures.
    pub unsupported_architecture: bool,
    /// The operator bootstrapped as Removed because `registry.redhat.io` was
    /// unreachable, and the state has not been changed since.
    pub registry_unreachable_at_bootstrap: bool,
    /// The streams listed when imports failed, as upstream's
    /// `activeImageStreams`: the sorted names of the operator namespace's
    /// ConfigMaps other than `imagestreamtag-to-image`.
    pub failing_streams: &'a [String],
    /// The operator's version (upstream's `RELEASE_VERSION`).
    pub operator_version: &'a str,
}

/// The ClusterOperator status to write, from what is observed and what was
/// `reported` before (whose `lastTransitionTime`s are kept where a status
/// did not change, and whose other condition types are kept as they are).
///
/// Outside the special paths of the module doc:
///
/// - `Degraded`: False with no reason while the Config has fewer than seven
///   conditions; False `Currently<State>` when Removed or Unmanaged; True
///   `InvalidConfiguration` when `ConfigurationValid` is False; True with the
///   first Unknown condition's reason and every condition message joined as
///   `m1;m2;` when any condition is Unknown; else False.
/// - `Available`: True `Currently<State>` when Removed or Unmanaged; False
///   `SampleUpsertsPending` with `SamplesExist`'s message until it is True;
///   else True with `Samples installation successful at <version>`.
/// - `Progressing`: False `Currently<State>` when Removed or Unmanaged; True
///   with the Degraded reason in the message when that reason is set; True
///   `Deleting samples at ...` while `RemovePending`; True
///   `Samples processing to ...` while upgrading (ours, see the module doc);
///   False when Available, with reason `FailedImageImports` and the failing
///   streams when `ImportImageErrorsExist` is True; True while
///   `ImageChangesInProgress` (never, upstream no longer sets it); else
///   False.
pub fn cluster_operator_status(
    observed: &Observed<'_>,
    reported: Option<&ClusterOperatorStatus>,
    now: Timestamp,
) -> ClusterOperatorStatus {
    let status = observed.status;
    let config_version = status.version.as_deref().unwrap_or_default();
    let special = if observed.deleting {
        Some((DELETION_IN_PROGRESS, TRUE))
    } else if observed.unsupported_architecture {
        Some((UNSUPPORTED_ARCHITECTURE, FALSE))
    } else if observed.registry_unreachable_at_bootstrap {
        Some((TBR_UNREACHABLE, FALSE))
    } else {
        None
    };
    let [available, progressing, degraded] = match special {
        Some((reason, progressing)) => [
            ClusterOperatorCondition::new(AVAILABLE, TRUE, reason, ""),
            ClusterOperatorCondition::new(PROGRESSING, progressing, reason, ""),
            ClusterOperatorCondition::new(DEGRADED, FALSE, reason, ""),
        ],
        None => {
            let degraded = degraded_condition(observed);
            let available = available_condition(observed);
            let progressing = progressing_condition(observed, &degraded, &available);
            [available, progressing, degraded]
        }
    };

    let mut conditions = reported.map(|r| r.conditions.clone()).unwrap_or_default();
    for condition in [available, progressing, degraded] {
        conditions::set(&mut conditions, condition, now);
    }
    let versions = if config_version.is_empty() {
        reported.map(|r| r.versions.clone()).unwrap_or_default()
    } else {
        vec![OperandVersion {
            name: OPERATOR_VERSION_NAME.to_owned(),
            version: config_version.to_owned(),
        }]
    };
    ClusterOperatorStatus {
        conditions,
        versions,
        related_objects: related_objects(),
    }
}

/// Whether `status` reports `Degraded` True (for the `degraded_info` metric).
pub fn degraded(status: &ClusterOperatorStatus) -> bool {
    conditions::is_true(&status.conditions, DEGRADED)
}

/// Upstream's related objects: the Config `cluster`, the operator
/// namespace, and the Templates and ImageStreams of the `openshift`
/// namespace.
pub fn related_objects() -> Vec<RelatedObject> {
    vec![
        RelatedObject {
            group: samples::GROUP.to_owned(),
            resource: "configs".to_owned(),
            namespace: String::new(),
            name: samples::CONFIG_NAME.to_owned(),
        },
        RelatedObject {
            group: String::new(),
            resource: "namespaces".to_owned(),
            namespace: String::new(),
            name: samples::OPERATOR_NAMESPACE.to_owned(),
        },
        RelatedObject {
            group: olm_api::openshift::TEMPLATE_GROUP.to_owned(),
            resource: "templates".to_owned(),
            namespace: samples::SAMPLES_NAMESPACE.to_owned(),
            name: String::new(),
        },
        RelatedObject {
            group: olm_api::openshift::IMAGE_GROUP.to_owned(),
            resource: "imagestreams".to_owned(),
            namespace: samples::SAMPLES_NAMESPACE.to_owned(),
            name: String::new(),
        },
    ]
}

/// Formats `at` as Go's `time.Time.String()` does for a UTC time:
/// `2024-01-02 03:04:05 +0000 UTC`, with the fraction of a second (trailing
/// zeros dropped) only when there is one. No time is Go's zero time.
pub fn go_time_string(at: Option<Timestamp>) -> String {
    let Some(at) = at else {
        return "0001-01-01 00:00:00 +0000 UTC".to_owned();
    };
    let mut text = at.strftime("%Y-%m-%d %H:%M:%S").to_string();
    let nanos = at.subsec_nanosecond();
    if nanos != 0 {
        let fraction = format!("{nanos:09}");
        text.push('.');
        text.push_str(fraction.trim_end_matches('0'));
    }
    text.push_str(" +0000 UTC");
    text
}

/// `Removed` or `Unmanaged` when the status says so: the states in which
/// upstream reports `Currently<State>`.
fn not_managed(status: &ConfigStatus) -> Option<&'static str> {
    match status.management_state.as_deref() {
        Some(management_state::REMOVED) => Some(management_state::REMOVED),
        Some(management_state::UNMANAGED) => Some(management_state::UNMANAGED),
        _ => None,
    }
}

fn currently(state: &str) -> String {
    format!("Currently{state}")
}

fn installed_but_not_managed(status: &ConfigStatus, state: &str) -> String {
    format!(
        "Samples installation was previously successful at {} but the samples operator is now {state}",
        status.version.as_deref().unwrap_or_default()
    )
}

fn message_of(status: &ConfigStatus, type_: &str) -> String {
    conditions::find(&status.conditions, type_)
        .and_then(|c| c.message.clone())
        .unwrap_or_default()
}

fn degraded_condition(observed: &Observed<'_>) -> ClusterOperatorCondition {
    let status = observed.status;
    if status.conditions.len() < CONFIG_CONDITION_COUNT {
        return ClusterOperatorCondition::new(DEGRADED, FALSE, "", "");
    }
    if let Some(state) = not_managed(status) {
        return ClusterOperatorCondition::new(
            DEGRADED,
            FALSE,
            &currently(state),
            installed_but_not_managed(status, state),
        );
    }
    if conditions::is_false(&status.conditions, condition::CONFIGURATION_VALID) {
        return ClusterOperatorCondition::new(
            DEGRADED,
            TRUE,
            INVALID_CONFIGURATION,
            format!(
                "Samples installation in error at {}: {}",
                observed.operator_version,
                message_of(status, condition::CONFIGURATION_VALID)
            ),
        );
    }
    if let Some(unknown) = status.conditions.iter().find(|c| c.status == UNKNOWN) {
        let messages: String = status
            .conditions
            .iter()
            .filter_map(|c| c.message.as_deref())
            .filter(|message| !message.is_empty())
            .map(|message| format!("{message};"))
            .collect();
        return ClusterOperatorCondition::new(
            DEGRADED,
            TRUE,
            unknown.reason.as_deref().unwrap_or_default(),
            messages,
        );
    }
    ClusterOperatorCondition::new(DEGRADED, FALSE, "", "")
}

fn available_condition(observed: &Observed<'_>) -> ClusterOperatorCondition {
    let status = observed.status;
    if let Some(state) = not_managed(status) {
        return ClusterOperatorCondition::new(
            AVAILABLE,
            TRUE,
            &currently(state),
            installed_but_not_managed(status, state),
        );
    }
    if !conditions::is_true(&status.conditions, condition::SAMPLES_EXIST) {
        return ClusterOperatorCondition::new(
            AVAILABLE,
            FALSE,
            SAMPLE_UPSERTS_PENDING,
            message_of(status, condition::SAMPLES_EXIST),
        );
    }
    let version = match status.version.as_deref() {
        Some(version) if !version.is_empty() => version,
        _ => observed.operator_version,
    };
    ClusterOperatorCondition::new(
        AVAILABLE,
        TRUE,
        "",
        format!("Samples installation successful at {version}"),
    )
}

fn progressing_condition(
    observed: &Observed<'_>,
    degraded: &ClusterOperatorCondition,
    available: &ClusterOperatorCondition,
) -> ClusterOperatorCondition {
    let status = observed.status;
    let config_version = status.version.as_deref().unwrap_or_default();
    if let Some(state) = not_managed(status) {
        return ClusterOperatorCondition::new(
            PROGRESSING,
            FALSE,
            &currently(state),
            installed_but_not_managed(status, state),
        );
    }
    let degraded_reason = degraded.reason.as_deref().unwrap_or_default();
    if !degraded_reason.is_empty() {
        return ClusterOperatorCondition::new(
            PROGRESSING,
            TRUE,
            "",
            format!(
                "Samples installation in error at {}: {degraded_reason}",
                observed.operator_version
            ),
        );
    }
    if conditions::is_true(&status.conditions, condition::REMOVE_PENDING) {
        return ClusterOperatorCondition::new(
            PROGRESSING,
            TRUE,
            "",
            format!("Deleting samples at {}", observed.operator_version),
        );
    }
    // Ours (see the module doc): the state is Managed here, since Removed and
    // Unmanaged returned above.
    let upgrading = !conditions::is_true(&status.conditions, condition::SAMPLES_EXIST)
        || config_version != observed.operator_version;
    if degraded.status != TRUE && upgrading {
        return moving(observed);
    }
    if available.status == TRUE {
        if let Some(import_errors) =
            conditions::find(&status.conditions, condition::IMPORT_IMAGE_ERRORS_EXIST)
                .filter(|c| c.status == TRUE)
        {
            return ClusterOperatorCondition::new(
                PROGRESSING,
                FALSE,
                FAILED_IMAGE_IMPORTS,
                format!(
                    "Samples installed at {config_version}, with image import failures for these imagestreams: {}; last import attempt {}",
                    observed.failing_streams.join(","),
                    go_time_string(import_errors.last_update_time.as_ref().map(|t| t.0)),
                ),
            );
        }
        return ClusterOperatorCondition::new(
            PROGRESSING,
            FALSE,
            "",
            format!("Samples installation successful at {config_version}"),
        );
    }
    if conditions::is_true(&status.conditions, condition::IMAGE_CHANGES_IN_PROGRESS) {
        return moving(observed);
    }
    ClusterOperatorCondition::new(PROGRESSING, FALSE, "", "")
}

fn moving(observed: &Observed<'_>) -> ClusterOperatorCondition {
    ClusterOperatorCondition::new(
        PROGRESSING,
        TRUE,
        "",
        format!("Samples processing to {}", observed.operator_version),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use olm_api::samples::ConfigCondition;

    use super::*;

    const OPERATOR: &str = "fixture-op-2.0";
    const CONFIG: &str = "fixture-cfg-1.0";

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    /// A status in `state` at `version` whose seven conditions are all as a
    /// settled install has them, then changed by `changes`
    /// (type, status, reason, message).
    fn settled_status(
        state: &str,
        version: &str,
        changes: &[(&str, &str, &str, &str)],
    ) -> ConfigStatus {
        let mut list: Vec<ConfigCondition> = [
            (condition::SAMPLES_EXIST, TRUE),
            (condition::IMPORT_CREDENTIALS_EXIST, TRUE),
            (condition::CONFIGURATION_VALID, TRUE),
            (condition::IMAGE_CHANGES_IN_PROGRESS, FALSE),
            (condition::REMOVE_PENDING, FALSE),
            (condition::MIGRATION_IN_PROGRESS, FALSE),
            (condition::IMPORT_IMAGE_ERRORS_EXIST, FALSE),
        ]
        .into_iter()
        .map(|(type_, status)| ConfigCondition::new(type_, status, "", ""))
        .collect();
        for (type_, status, reason, message) in changes {
            conditions::set(
                &mut list,
                ConfigCondition::new(type_, status, reason, *message),
                at(1_704_164_645),
            );
        }
        ConfigStatus {
            management_state: Some(state.to_owned()),
            conditions: list,
            version: (!version.is_empty()).then(|| version.to_owned()),
            ..ConfigStatus::default()
        }
    }

    fn observed<'a>(status: &'a ConfigStatus, failing: &'a [String]) -> Observed<'a> {
        Observed {
            status,
            deleting: false,
            unsupported_architecture: false,
            registry_unreachable_at_bootstrap: false,
            failing_streams: failing,
            operator_version: OPERATOR,
        }
    }

    /// (status, reason, message) of a condition, "" for an absent field.
    fn seen<'a>(status: &'a ClusterOperatorStatus, type_: &str) -> (&'a str, &'a str, &'a str) {
        let condition = conditions::find(&status.conditions, type_).unwrap();
        (
            condition.status.as_str(),
            condition.reason.as_deref().unwrap_or_default(),
            condition.message.as_deref().unwrap_or_default(),
        )
    }

    type Expected = (&'static str, &'static str, &'static str);

    struct Case {
        name: &'static str,
        status: ConfigStatus,
        deleting: bool,
        unsupported_architecture: bool,
        registry_unreachable: bool,
        available: Expected,
        progressing: Expected,
        degraded: Expected,
    }

    fn case(name: &'static str, status: ConfigStatus) -> Case {
        Case {
            name,
            status,
            deleting: false,
            unsupported_architecture: false,
            registry_unreachable: false,
            available: (TRUE, "", ""),
            progressing: (FALSE, "", ""),
            degraded: (FALSE, "", ""),
        }
    }

    #[test]
    fn conditions_follow_upstreams_rules() {
        let settled = settled_status(management_state::MANAGED, OPERATOR, &[]);
        let invalid = settled_status(
            management_state::MANAGED,
            OPERATOR,
            &[(
                condition::CONFIGURATION_VALID,
                FALSE,
                "",
                "architecture fixture-arch unsupported",
            )],
        );
        let cases = [
            Case {
                deleting: true,
                // Invalid underneath, to show deletion wins.
                available: (TRUE, DELETION_IN_PROGRESS, ""),
                progressing: (TRUE, DELETION_IN_PROGRESS, ""),
                degraded: (FALSE, DELETION_IN_PROGRESS, ""),
                ..case("deletion", invalid.clone())
            },
            Case {
                unsupported_architecture: true,
                registry_unreachable: true,
                available: (TRUE, UNSUPPORTED_ARCHITECTURE, ""),
                progressing: (FALSE, UNSUPPORTED_ARCHITECTURE, ""),
                degraded: (FALSE, UNSUPPORTED_ARCHITECTURE, ""),
                ..case("unsupported architecture", invalid.clone())
            },
            Case {
                registry_unreachable: true,
                available: (TRUE, TBR_UNREACHABLE, ""),
                progressing: (FALSE, TBR_UNREACHABLE, ""),
                degraded: (FALSE, TBR_UNREACHABLE, ""),
                ..case(
                    "registry unreachable at bootstrap",
                    settled_status(management_state::REMOVED, OPERATOR, &[]),
                )
            },
            Case {
                available: (
                    TRUE,
                    CURRENTLY_REMOVED,
                    "Samples installation was previously successful at fixture-cfg-1.0 but the samples operator is now Removed",
                ),
                progressing: (
                    FALSE,
                    CURRENTLY_REMOVED,
                    "Samples installation was previously successful at fixture-cfg-1.0 but the samples operator is now Removed",
                ),
                degraded: (
                    FALSE,
                    CURRENTLY_REMOVED,
                    "Samples installation was previously successful at fixture-cfg-1.0 but the samples operator is now Removed",
                ),
                ..case(
                    "removed",
                    settled_status(
                        management_state::REMOVED,
                        CONFIG,
                        &[(condition::SAMPLES_EXIST, FALSE, "", "")],
                    ),
                )
            },
            Case {
                available: (
                    TRUE,
                    CURRENTLY_UNMANAGED,
                    "Samples installation was previously successful at fixture-cfg-1.0 but the samples operator is now Unmanaged",
                ),
                progressing: (
                    FALSE,
                    CURRENTLY_UNMANAGED,
                    "Samples installation was previously successful at fixture-cfg-1.0 but the samples operator is now Unmanaged",
                ),
                degraded: (
                    FALSE,
                    CURRENTLY_UNMANAGED,
                    "Samples installation was previously successful at fixture-cfg-1.0 but the samples operator is now Unmanaged",
                ),
                ..case(
                    "unmanaged",
                    settled_status(management_state::UNMANAGED, CONFIG, &[]),
                )
            },
            Case {
                available: (
                    TRUE,
                    "",
                    "Samples installation successful at fixture-op-2.0",
                ),
                progressing: (
                    TRUE,
                    "",
                    "Samples installation in error at fixture-op-2.0: InvalidConfiguration",
                ),
                degraded: (
                    TRUE,
                    INVALID_CONFIGURATION,
                    "Samples installation in error at fixture-op-2.0: architecture fixture-arch unsupported",
                ),
                ..case("invalid configuration", invalid.clone())
            },
            Case {
                available: (
                    TRUE,
                    "",
                    "Samples installation successful at fixture-op-2.0",
                ),
                progressing: (
                    TRUE,
                    "",
                    "Samples installation in error at fixture-op-2.0: APIServerInternalErrorError",
                ),
                degraded: (
                    TRUE,
                    "APIServerInternalErrorError",
                    "the pull secret is odd;template create error: boom;",
                ),
                ..case(
                    "an unknown condition",
                    settled_status(
                        management_state::MANAGED,
                        OPERATOR,
                        &[
                            (
                                condition::IMPORT_CREDENTIALS_EXIST,
                                TRUE,
                                "",
                                "the pull secret is odd",
                            ),
                            (
                                condition::REMOVE_PENDING,
                                UNKNOWN,
                                "APIServerInternalErrorError",
                                "template create error: boom",
                            ),
                        ],
                    ),
                )
            },
            Case {
                available: (FALSE, SAMPLE_UPSERTS_PENDING, ""),
                // Ours: the first install is progress.
                progressing: (TRUE, "", "Samples processing to fixture-op-2.0"),
                degraded: (FALSE, "", ""),
                ..case(
                    "fewer than seven conditions is not degraded",
                    ConfigStatus {
                        management_state: Some(management_state::MANAGED.to_owned()),
                        conditions: vec![ConfigCondition::new(
                            condition::CONFIGURATION_VALID,
                            FALSE,
                            "",
                            "architecture fixture-arch unsupported",
                        )],
                        ..ConfigStatus::default()
                    },
                )
            },
            Case {
                available: (
                    FALSE,
                    SAMPLE_UPSERTS_PENDING,
                    "imagestream create error: nope",
                ),
                progressing: (TRUE, "", "Samples processing to fixture-op-2.0"),
                ..case(
                    "samples not existing is not available",
                    settled_status(
                        management_state::MANAGED,
                        OPERATOR,
                        &[(
                            condition::SAMPLES_EXIST,
                            FALSE,
                            "",
                            "imagestream create error: nope",
                        )],
                    ),
                )
            },
            Case {
                available: (FALSE, SAMPLE_UPSERTS_PENDING, ""),
                progressing: (TRUE, "", "Deleting samples at fixture-op-2.0"),
                ..case(
                    "a pending removal is progress",
                    settled_status(
                        management_state::MANAGED,
                        OPERATOR,
                        &[
                            (condition::SAMPLES_EXIST, FALSE, "", ""),
                            (condition::REMOVE_PENDING, TRUE, "", ""),
                        ],
                    ),
                )
            },
            Case {
                available: (
                    TRUE,
                    "",
                    "Samples installation successful at fixture-op-2.0",
                ),
                progressing: (
                    FALSE,
                    FAILED_IMAGE_IMPORTS,
                    "Samples installed at fixture-op-2.0, with image import failures for these imagestreams: fixture-java,fixture-ruby; last import attempt 2024-01-02 03:04:05 +0000 UTC",
                ),
                ..case(
                    "import failures are listed",
                    settled_status(
                        management_state::MANAGED,
                        OPERATOR,
                        &[(condition::IMPORT_IMAGE_ERRORS_EXIST, TRUE, "", "")],
                    ),
                )
            },
            Case {
                available: (
                    TRUE,
                    "",
                    "Samples installation successful at fixture-op-2.0",
                ),
                progressing: (
                    FALSE,
                    "",
                    "Samples installation successful at fixture-op-2.0",
                ),
                ..case("settled", settled.clone())
            },
            Case {
                available: (
                    TRUE,
                    "",
                    "Samples installation successful at fixture-cfg-1.0",
                ),
                // Ours: upstream says False "Samples installation successful at 1.0".
                progressing: (TRUE, "", "Samples processing to fixture-op-2.0"),
                ..case(
                    "an upgrade is progress",
                    settled_status(management_state::MANAGED, CONFIG, &[]),
                )
            },
            Case {
                available: (
                    TRUE,
                    "",
                    "Samples installation successful at fixture-cfg-1.0",
                ),
                progressing: (TRUE, "", "Samples processing to fixture-op-2.0"),
                ..case(
                    "Force is Managed",
                    settled_status(management_state::FORCE, CONFIG, &[]),
                )
            },
        ];
        let failing = ["fixture-java".to_owned(), "fixture-ruby".to_owned()];
        for case in cases {
            let observed = Observed {
                deleting: case.deleting,
                unsupported_architecture: case.unsupported_architecture,
                registry_unreachable_at_bootstrap: case.registry_unreachable,
                ..observed(&case.status, &failing)
            };
            let status = cluster_operator_status(&observed, None, at(10));
            assert_eq!(
                (
                    seen(&status, AVAILABLE),
                    seen(&status, PROGRESSING),
                    seen(&status, DEGRADED)
                ),
                (case.available, case.progressing, case.degraded),
                "{}",
                case.name
            );
            assert_eq!(degraded(&status), case.degraded.0 == TRUE, "{}", case.name);
            assert_eq!(status.related_objects, related_objects(), "{}", case.name);
            let types: Vec<_> = status.conditions.iter().map(|c| c.type_.as_str()).collect();
            assert_eq!(types, [AVAILABLE, PROGRESSING, DEGRADED], "{}", case.name);
        }
    }

    #[test]
    fn versions_are_the_configs_version_when_it_has_one() {
        let failing: [String; 0] = [];
        let with_version = settled_status(management_state::REMOVED, CONFIG, &[]);
        let status = cluster_operator_status(&observed(&with_version, &failing), None, at(1));
        assert_eq!(
            status.versions,
            [OperandVersion {
                name: "operator".to_owned(),
                version: CONFIG.to_owned(),
            }]
        );
        let deleting = Observed {
            deleting: true,
            ..observed(&with_version, &failing)
        };
        assert_eq!(
            cluster_operator_status(&deleting, None, at(1)).versions,
            status.versions
        );

        let without_version = settled_status(management_state::MANAGED, "", &[]);
        let fresh = cluster_operator_status(&observed(&without_version, &failing), None, at(2));
        assert!(fresh.versions.is_empty());
        let kept =
            cluster_operator_status(&observed(&without_version, &failing), Some(&status), at(2));
        assert_eq!(kept.versions, status.versions);
    }

    #[test]
    fn transition_times_are_kept_when_nothing_changed() {
        let failing = ["fixture-java".to_owned()];
        let status = settled_status(
            management_state::MANAGED,
            OPERATOR,
            &[(condition::IMPORT_IMAGE_ERRORS_EXIST, TRUE, "", "")],
        );
        let first = cluster_operator_status(&observed(&status, &failing), None, at(100));
        let second = cluster_operator_status(&observed(&status, &failing), Some(&first), at(200));
        assert_eq!(first, second);
        for condition in &second.conditions {
            assert_eq!(
                condition.last_transition_time,
                Some(Time(at(100))),
                "{}",
                condition.type_
            );
        }

        // Imports recover: Progressing keeps False and its transition time,
        // while its reason and message change.
        let recovered = settled_status(management_state::MANAGED, OPERATOR, &[]);
        let third = cluster_operator_status(&observed(&recovered, &[]), Some(&second), at(300));
        let progressing = conditions::find(&third.conditions, PROGRESSING).unwrap();
        assert_eq!(progressing.reason, None);
        assert_eq!(progressing.last_transition_time, Some(Time(at(100))));
    }

    #[test]
    fn other_condition_types_reported_are_kept() {
        let reported = ClusterOperatorStatus {
            conditions: vec![ClusterOperatorCondition::new(
                "Upgradeable",
                TRUE,
                "FixtureReason",
                String::new(),
            )],
            ..ClusterOperatorStatus::default()
        };
        let status = settled_status(management_state::MANAGED, OPERATOR, &[]);
        let written = cluster_operator_status(&observed(&status, &[]), Some(&reported), at(1));
        let types: Vec<_> = written
            .conditions
            .iter()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(types, ["Upgradeable", AVAILABLE, PROGRESSING, DEGRADED]);
    }

    #[test]
    fn times_read_like_go() {
        let cases = [
            (Some(at(1_704_164_645)), "2024-01-02 03:04:05 +0000 UTC"),
            (
                Some(Timestamp::new(1_704_164_645, 120_000_000).unwrap()),
                "2024-01-02 03:04:05.12 +0000 UTC",
            ),
            (None, "0001-01-01 00:00:00 +0000 UTC"),
        ];
        for (time, text) in cases {
            assert_eq!(go_time_string(time), text);
        }
    }
}
