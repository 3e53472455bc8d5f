//! Every phase and reason transition of upstream's CSV lifecycle, one table
//! row per rule, each named by the sentence it proves.

use olm_api::{
    csv::{
        CsvPhase, CsvReason, InstallMode, InstallModeType, RequirementStatus, WebhookDescription,
    },
    labels,
};
use olm_operator::decide::{
    csv_phase::{
        self, ApiServiceResources, ApiServicesCheck, CsvAction, CsvDecision, DeploymentsCheck,
        InstallCheck, InstallOutcome, IssuedCertificates, OwnedClusterObjects, WAIT_REQUEUE_AFTER,
        WebhooksCheck,
    },
    csv_status::EventType,
    deployment::{InvalidStrategy, StrategyError, StrategyErrorReason},
    requirements::RequirementsOutcome,
};

use super::fixtures::{
    CsvFixture, GADGET_SYSTEM, GroupFixture, WIDGET_API, World, gadget_group, minute,
    upgrade_blocked_condition, widget_operator, widget_version,
};

const WIDGET: &str = "widget-operator.v1.2.0";

/// What a row expects of the decision.
struct Case {
    name: &'static str,
    world: World,
    /// The new phase, reason and message; `None`: the status is not written.
    becomes: Option<(CsvPhase, CsvReason, &'static str)>,
    /// Actions that must be among the decided ones.
    actions: Vec<CsvAction>,
    /// Actions that must not be among them.
    absent: Vec<CsvAction>,
    /// The category of the retry error, if the sync must be retried.
    retry: Option<&'static str>,
}

impl Case {
    fn new(name: &'static str, world: World) -> Self {
        Self {
            name,
            world,
            becomes: None,
            actions: Vec::new(),
            absent: Vec::new(),
            retry: None,
        }
    }

    fn becomes(mut self, phase: CsvPhase, reason: CsvReason, message: &'static str) -> Self {
        self.becomes = Some((phase, reason, message));
        self
    }

    fn with_actions(mut self, actions: Vec<CsvAction>) -> Self {
        self.actions = actions;
        self
    }

    fn without_actions(mut self, actions: Vec<CsvAction>) -> Self {
        self.absent = actions;
        self
    }

    fn retried_as(mut self, category: &'static str) -> Self {
        self.retry = Some(category);
        self
    }

    fn check(self) {
        let decision = self.world.decide();
        let name = self.name;
        match (&self.becomes, &decision.status) {
            (None, None) => {}
            (None, Some(status)) => panic!("{name}: expected no status write, got {status:?}"),
            (Some(_), None) => panic!("{name}: expected a status write, got none ({decision:?})"),
            (Some((phase, reason, message)), Some(status)) => {
                assert_eq!(status.phase.as_ref(), Some(phase), "{name}: phase");
                assert_eq!(status.reason.as_ref(), Some(reason), "{name}: reason");
                assert_eq!(
                    status.message.as_deref().unwrap_or_default(),
                    *message,
                    "{name}: message"
                );
                let event = decision
                    .events
                    .last()
                    .unwrap_or_else(|| panic!("{name}: no event"));
                assert_eq!(event.reason, reason.as_str(), "{name}: event reason");
                let warning = *phase == CsvPhase::FAILED;
                assert_eq!(
                    event.event_type == EventType::Warning,
                    warning,
                    "{name}: event type"
                );
            }
        }
        for action in &self.actions {
            assert!(
                decision.actions.contains(action),
                "{name}: expected action {action:?} in {:?}",
                decision.actions
            );
        }
        for action in &self.absent {
            assert!(
                !decision.actions.contains(action),
                "{name}: unexpected action {action:?}"
            );
        }
        assert_eq!(
            decision.retry.as_ref().map(|e| e.category()),
            self.retry,
            "{name}: retry"
        );
    }
}

trait WorldSetup: Sized {
    fn with(self, change: impl FnOnce(&mut World)) -> Self;
}

impl WorldSetup for World {
    fn with(mut self, change: impl FnOnce(&mut World)) -> Self {
        change(&mut self);
        self
    }
}

fn unmet() -> Result<RequirementsOutcome, InvalidStrategy> {
    Ok(RequirementsOutcome {
        met: false,
        statuses: vec![RequirementStatus {
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            kind: "CustomResourceDefinition".into(),
            name: "cogs.gears.example.test".into(),
            status: "NotPresent".into(),
            message: "CRD is not present".into(),
            ..Default::default()
        }],
    })
}

fn deployments(reason: StrategyErrorReason, message: &str) -> InstallCheck {
    InstallCheck {
        deployments: DeploymentsCheck::Unhealthy(StrategyError::new(reason, message)),
        ..InstallCheck::default()
    }
}

fn requeue_widget() -> CsvAction {
    CsvAction::Requeue {
        name: WIDGET.to_owned(),
        after: None,
    }
}

fn waiting_requeue(name: &str) -> CsvAction {
    CsvAction::Requeue {
        name: name.to_owned(),
        after: Some(WAIT_REQUEUE_AFTER),
    }
}

#[test]
fn operator_group_preamble() {
    use CsvPhase as P;
    use CsvReason as R;
    let cases = vec![
        Case::new(
            "a CSV in a namespace without an OperatorGroup fails with NoOperatorGroup",
            World::widget_in(P::PENDING, R::REQUIREMENTS_UNKNOWN).with(|w| w.groups.clear()),
        )
        .becomes(P::FAILED, R::NO_OPERATOR_GROUP, "csv in namespace with no operatorgroups")
        .retried_as("NoOperatorGroup"),
        Case::new(
            "a CSV already failed for lack of an OperatorGroup is not rewritten on every sync",
            World::widget_in(P::FAILED, R::NO_OPERATOR_GROUP).with(|w| {
                w.groups.clear();
                w.csv.status.as_mut().expect("status").message = Some("csv in namespace with no operatorgroups".into());
            }),
        )
        .retried_as("NoOperatorGroup"),
        Case::new(
            "a CSV in a namespace with two OperatorGroups fails with TooManyOperatorGroups",
            World::widget_in(P::PENDING, R::REQUIREMENTS_UNKNOWN)
                .with(|w| w.groups.push(gadget_group().named("spare-group"))),
        )
        .becomes(
            P::FAILED,
            R::TOO_MANY_OPERATOR_GROUPS,
            "csv created in namespace with multiple operatorgroups, can't pick one automatically",
        )
        .retried_as("TooManyOperatorGroups"),
        Case::new(
            "a CSV without membership annotations gets them and its group is requeued, nothing else",
            World::widget_in(P::NONE, R::new("")).with(|w| w.csv.metadata.annotations = None),
        )
        .with_actions(vec![CsvAction::RequeueOperatorGroup("gadget-group".into())]),
        Case::new(
            "a CSV whose group selects no namespace fails with NoTargetNamespaces",
            World::widget_in(P::PENDING, R::REQUIREMENTS_UNKNOWN).with(|w| {
                let group = &mut w.groups[0];
                group.spec.target_namespaces.clear();
                group.spec.selector = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                    match_labels: Some([("team".to_owned(), "nobody".to_owned())].into()),
                    ..Default::default()
                });
                group.status.as_mut().expect("status").namespaces.clear();
            }),
        )
        .becomes(
            P::FAILED,
            R::NO_TARGET_NAMESPACES,
            "no targetNamespaces are matched operatorgroups namespace selection",
        ),
        Case::new(
            "a CSV listing an install mode twice fails with InvalidInstallModes",
            World::widget_in(P::PENDING, R::REQUIREMENTS_UNKNOWN).with(|w| {
                w.csv.spec.install_modes = Some(vec![
                    InstallMode {
                        type_: InstallModeType::OWN_NAMESPACE,
                        supported: true,
                    },
                    InstallMode {
                        type_: InstallModeType::OWN_NAMESPACE,
                        supported: false,
                    },
                ]);
            }),
        )
        .becomes(
            P::FAILED,
            R::INVALID_INSTALL_MODES,
            "InstallMode list contains duplicates, cannot make set: [{OwnNamespace true} {OwnNamespace false}]",
        ),
        Case::new(
            "a CSV that cannot watch all namespaces fails in an AllNamespaces group",
            {
                let group = gadget_group().targeting_all_namespaces().providing(WIDGET_API);
                let csv = widget_operator().replacing("").member_of(&group).in_phase(
                    P::PENDING,
                    R::REQUIREMENTS_UNKNOWN,
                    minute(0),
                );
                World::around(csv, group)
            },
        )
        .becomes(
            P::FAILED,
            R::UNSUPPORTED_OPERATOR_GROUP,
            "AllNamespaces InstallModeType not supported, cannot configure to watch all namespaces",
        ),
        Case::new(
            "a CSV that cannot watch its own namespace fails in an OwnNamespace group",
            World::widget_in(P::PENDING, R::REQUIREMENTS_UNKNOWN).with(|w| {
                w.csv.spec.install_modes = Some(vec![InstallMode {
                    type_: InstallModeType::ALL_NAMESPACES,
                    supported: true,
                }]);
            }),
        )
        .becomes(
            P::FAILED,
            R::UNSUPPORTED_OPERATOR_GROUP,
            "OwnNamespace InstallModeType not supported, cannot configure to watch own namespace",
        ),
        Case::new(
            "a CSV whose APIs a static group does not list fails and loses its deployments",
            {
                let group = gadget_group().providing("").with_static_provided_apis();
                let csv = widget_operator().replacing("").member_of(&group).in_phase(
                    P::PENDING,
                    R::REQUIREMENTS_UNKNOWN,
                    minute(0),
                );
                World::around(csv, group)
            },
        )
        .becomes(
            P::FAILED,
            R::CANNOT_MODIFY_STATIC_OPERATOR_GROUP_PROVIDED_APIS,
            "static provided api operatorgroup cannot be modified by these apis",
        )
        .with_actions(vec![CsvAction::DeleteDeployments(vec!["widget-controller".into()])]),
        Case::new(
            "a CSV already failed for a static group is neither rewritten nor stripped again",
            {
                let group = gadget_group().providing("").with_static_provided_apis();
                let csv = widget_operator().replacing("").member_of(&group).in_phase(
                    P::FAILED,
                    R::CANNOT_MODIFY_STATIC_OPERATOR_GROUP_PROVIDED_APIS,
                    minute(0),
                );
                World::around(csv, group).with(|w| {
                    w.csv.status.as_mut().expect("status").message =
                        Some("static provided api operatorgroup cannot be modified by these apis".into());
                })
            },
        )
        .without_actions(vec![CsvAction::DeleteDeployments(vec!["widget-controller".into()])]),
        Case::new(
            "a CSV naming an owned CRD without a group is left alone until it is fixed",
            World::widget_in(P::PENDING, R::REQUIREMENTS_UNKNOWN).with(|w| {
                if let Some(owned) = w
                    .csv
                    .spec
                    .customresourcedefinitions
                    .as_mut()
                    .and_then(|c| c.owned.as_mut())
                {
                    owned[0].name = "widgets".into();
                }
            }),
        ),
        Case::new(
            "a CSV whose API an intersecting group already provides fails with InterOperatorGroupOwnerConflict",
            {
                let group = gadget_group().providing("");
                let csv = widget_operator().replacing("").member_of(&group).in_phase(
                    P::PENDING,
                    R::REQUIREMENTS_UNKNOWN,
                    minute(0),
                );
                World::around(csv, group).with(|w| {
                    w.groups_elsewhere.push(
                        gadget_group()
                            .named("cog-group")
                            .in_namespace("cog-works")
                            .targeting_all_namespaces()
                            .providing(WIDGET_API),
                    );
                })
            },
        )
        .becomes(
            P::FAILED,
            R::INTER_OPERATOR_GROUP_OWNER_CONFLICT,
            "intersecting operatorgroups provide the same apis",
        )
        .with_actions(vec![CsvAction::DeleteDeployments(vec!["widget-controller".into()])]),
        Case::new(
            "a CSV already in an intersection conflict is left alone",
            {
                let group = gadget_group().providing("");
                let csv = widget_operator().replacing("").member_of(&group).in_phase(
                    P::FAILED,
                    R::INTER_OPERATOR_GROUP_OWNER_CONFLICT,
                    minute(0),
                );
                World::around(csv, group).with(|w| {
                    w.groups_elsewhere.push(
                        gadget_group()
                            .named("cog-group")
                            .in_namespace("cog-works")
                            .targeting_all_namespaces()
                            .providing(WIDGET_API),
                    );
                })
            },
        ),
        Case::new(
            "a CSV whose APIs its group does not list yet adds them to the group and is requeued",
            {
                let group = gadget_group().providing("Cog.v2.gears.example.test");
                let csv = widget_operator().replacing("").member_of(&group).in_phase(
                    P::PENDING,
                    R::REQUIREMENTS_UNKNOWN,
                    minute(0),
                );
                World::around(csv, group)
            },
        )
        .with_actions(vec![
            CsvAction::SetProvidedApis {
                operator_group: "gadget-group".into(),
                value: "Cog.v2.gears.example.test,Widget.v1.gadgets.example.test".into(),
            },
            requeue_widget(),
        ]),
        Case::new(
            "a CSV whose APIs its group lists but an intersecting group also provides takes them out of its group",
            {
                let group = gadget_group().providing("Cog.v2.gears.example.test,Widget.v1.gadgets.example.test");
                let csv = widget_operator().replacing("").member_of(&group).in_phase(
                    P::PENDING,
                    R::REQUIREMENTS_UNKNOWN,
                    minute(0),
                );
                World::around(csv, group).with(|w| {
                    w.groups_elsewhere.push(
                        gadget_group()
                            .named("cog-group")
                            .in_namespace("cog-works")
                            .targeting(&["cog-works", GADGET_SYSTEM])
                            .providing(WIDGET_API),
                    );
                })
            },
        )
        .with_actions(vec![CsvAction::SetProvidedApis {
            operator_group: "gadget-group".into(),
            value: "Cog.v2.gears.example.test".into(),
        }]),
        Case::new(
            "a group elsewhere that does not intersect may provide the same API",
            World::widget_in(P::NONE, R::new("")).with(|w| {
                w.groups_elsewhere.push(
                    gadget_group()
                        .named("cog-group")
                        .in_namespace("cog-works")
                        .targeting(&["cog-works"])
                        .providing(WIDGET_API),
                );
            }),
        )
        .becomes(P::PENDING, R::REQUIREMENTS_UNKNOWN, "requirements not yet checked"),
    ];
    for case in cases {
        case.check();
    }
}

#[test]
fn phase_handlers() {
    use CsvPhase as P;
    use CsvReason as R;
    let previous =
        |phase: P, reason: R| widget_version("widget-operator.v1.1.0", "", phase, reason);
    let cases = vec![
        // None
        Case::new(
            "a CSV seen for the first time waits for its requirements to be checked",
            World::widget_in(P::NONE, R::new("")).with(|w| w.csv.status = None),
        )
        .becomes(P::PENDING, R::REQUIREMENTS_UNKNOWN, "requirements not yet checked"),
        // Pending
        Case::new(
            "a pending CSV whose replaced operator blocks upgrades stays pending",
            World::widget_in(P::PENDING, R::REQUIREMENTS_UNKNOWN).with(|w| {
                w.csv.spec.replaces = Some("widget-operator.v1.1.0".into());
                w.other_csvs.push(previous(P::SUCCEEDED, R::INSTALL_SUCCEEDED));
                w.replaced_condition = Some(upgrade_blocked_condition());
            }),
        )
        .becomes(
            P::PENDING,
            R::OPERATOR_CONDITION_NOT_UPGRADEABLE,
            "operator is not upgradeable: the operator is not upgradeable: widgets are being migrated",
        ),
        Case::new(
            "a pending CSV with an unknown install strategy fails",
            World::widget_in(P::PENDING, R::REQUIREMENTS_UNKNOWN).with(|w| {
                w.requirements = Err(InvalidStrategy("unrecognized install strategy".into()));
            }),
        )
        .becomes(
            P::FAILED,
            R::INVALID_INSTALL_STRATEGY,
            "install strategy invalid: unrecognized install strategy",
        ),
        Case::new(
            "a pending CSV with unmet requirements records them and is retried",
            World::widget_in(P::PENDING, R::REQUIREMENTS_UNKNOWN).with(|w| w.requirements = unmet()),
        )
        .becomes(
            P::PENDING,
            R::REQUIREMENTS_NOT_MET,
            "one or more requirements couldn't be found",
        )
        .retried_as("RequirementsNotMet"),
        Case::new(
            "a pending CSV with two webhooks of one name fails",
            World::widget_in(P::PENDING, R::REQUIREMENTS_UNKNOWN).with(|w| {
                let hook = WebhookDescription {
                    generate_name: "vwidget.gadgets.example.test".into(),
                    ..Default::default()
                };
                w.csv.spec.webhookdefinitions = Some(vec![hook.clone(), hook]);
            }),
        )
        .becomes(
            P::FAILED,
            R::INVALID_WEBHOOK_DESCRIPTION,
            "CSV contains repeated WebhookDescription name",
        ),
        Case::new(
            "a pending CSV with a webhook on all API groups fails",
            World::widget_in(P::PENDING, R::REQUIREMENTS_UNKNOWN).with(|w| {
                w.csv.spec.webhookdefinitions = Some(vec![WebhookDescription {
                    generate_name: "vwidget.gadgets.example.test".into(),
                    rules: Some(vec![k8s_openapi::api::admissionregistration::v1::RuleWithOperations {
                        api_groups: Some(vec!["*".into()]),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }]);
            }),
        )
        .becomes(
            P::FAILED,
            R::INVALID_WEBHOOK_DESCRIPTION,
            "webhook rules cannot include all groups",
        ),
        Case::new(
            "a pending CSV owning a CRD that an unrelated CSV owns fails with OwnerConflict",
            World::widget_in(P::PENDING, R::REQUIREMENTS_UNKNOWN).with(|w| {
                w.other_csvs.push(widget_version("gizmo-operator.v3.0.0", "", P::SUCCEEDED, R::INSTALL_SUCCEEDED));
            }),
        )
        .becomes(P::FAILED, R::OWNER_CONFLICT, "conflicting CRD owner in namespace"),
        Case::new(
            "a pending CSV owning an APIService it may not adopt fails with OwnerConflict",
            World::widget_in(P::PENDING, R::REQUIREMENTS_UNKNOWN).with(|w| w.api_service_owner_conflict = true),
        )
        .becomes(P::FAILED, R::OWNER_CONFLICT, "unable to adopt APIService"),
        Case::new(
            "a pending CSV waits while the CSV it replaces has not started Replacing, and requeues it",
            World::widget_in(P::PENDING, R::REQUIREMENTS_UNKNOWN).with(|w| {
                w.csv.spec.replaces = Some("widget-operator.v1.1.0".into());
                w.other_csvs.push(previous(P::SUCCEEDED, R::INSTALL_SUCCEEDED));
            }),
        )
        .with_actions(vec![CsvAction::Requeue {
            name: "widget-operator.v1.1.0".into(),
            after: None,
        }]),
        Case::new(
            "a pending CSV sharing CRDs with the CSV it replaces installs once that one is Replacing",
            World::widget_in(P::PENDING, R::REQUIREMENTS_UNKNOWN).with(|w| {
                w.csv.spec.replaces = Some("widget-operator.v1.1.0".into());
                w.other_csvs.push(previous(P::REPLACING, R::BEING_REPLACED));
            }),
        )
        .becomes(
            P::INSTALL_READY,
            R::ALL_REQUIREMENTS_MET,
            "all requirements found, attempting install",
        ),
        Case::new(
            "a pending CSV with every requirement met is ready to install",
            World::widget_in(P::PENDING, R::REQUIREMENTS_NOT_MET),
        )
        .without_actions(vec![CsvAction::RunInstaller])
        .becomes(
            P::INSTALL_READY,
            R::ALL_REQUIREMENTS_MET,
            "all requirements found, attempting install",
        ),
        // InstallReady
        Case::new(
            "a CSV ready to install asks for the installer and writes nothing yet",
            World::widget_in(P::INSTALL_READY, R::ALL_REQUIREMENTS_MET),
        )
        .with_actions(vec![CsvAction::RunInstaller]),
        Case::new(
            "a CSV ready to install requeues the CSV it replaces",
            World::widget_in(P::INSTALL_READY, R::ALL_REQUIREMENTS_MET).with(|w| {
                w.csv.spec.replaces = Some("widget-operator.v1.1.0".into());
                w.other_csvs.push(previous(P::REPLACING, R::BEING_REPLACED));
            }),
        )
        .with_actions(vec![
            CsvAction::Requeue {
                name: "widget-operator.v1.1.0".into(),
                after: None,
            },
            CsvAction::RunInstaller,
        ]),
        Case::new(
            "a CSV ready to install with an unknown strategy fails",
            World::widget_in(P::INSTALL_READY, R::ALL_REQUIREMENTS_MET)
                .with(|w| w.csv = w.csv.clone().with_strategy("helm")),
        )
        .becomes(
            P::FAILED,
            R::INVALID_INSTALL_STRATEGY,
            "install strategy invalid: unrecognized install strategy",
        ),
        // Installing
        Case::new(
            "an installing CSV whose components are healthy succeeds",
            World::widget_in(P::INSTALLING, R::INSTALL_SUCCEEDED),
        )
        .becomes(
            P::SUCCEEDED,
            R::INSTALL_SUCCEEDED,
            "install strategy completed with no errors",
        ),
        Case::new(
            "an installing CSV waits for its deployment to roll out",
            World::widget_in(P::INSTALLING, R::INSTALL_SUCCEEDED).with(|w| {
                w.install = deployments(
                    StrategyErrorReason::Waiting,
                    "waiting for deployment widget-controller to become ready: deployment \"widget-controller\" not available: Deployment does not have minimum availability.",
                );
            }),
        )
        .becomes(
            P::INSTALLING,
            R::INSTALL_WAITING,
            "installing: waiting for deployment widget-controller to become ready: deployment \"widget-controller\" not available: Deployment does not have minimum availability.",
        )
        .with_actions(vec![waiting_requeue(WIDGET)]),
        Case::new(
            "an installing CSV unhealthy for five minutes fails with install timeout",
            World::widget_in(P::INSTALLING, R::INSTALL_WAITING).with(|w| {
                w.install = deployments(StrategyErrorReason::Waiting, "waiting for deployment widget-controller");
                w.now = minute(5);
            }),
        )
        .becomes(P::FAILED, R::INSTALL_CHECK_FAILED, "install timeout"),
        Case::new(
            "an installing CSV unhealthy for four minutes and fifty-nine seconds keeps waiting",
            World::widget_in(P::INSTALLING, R::INSTALL_WAITING).with(|w| {
                w.install = deployments(StrategyErrorReason::Waiting, "waiting for deployment widget-controller");
                w.now = minute(5) - jiff::SignedDuration::from_secs(1);
            }),
        )
        .becomes(
            P::INSTALLING,
            R::INSTALL_WAITING,
            "installing: waiting for deployment widget-controller",
        ),
        Case::new(
            "an installing CSV whose deployment missed its progress deadline fails",
            World::widget_in(P::INSTALLING, R::INSTALL_WAITING).with(|w| {
                w.install = deployments(
                    StrategyErrorReason::Timeout,
                    "deployment widget-controller not ready before timeout: deployment \"widget-controller\" exceeded its progress deadline",
                );
            }),
        )
        .becomes(
            P::FAILED,
            R::INSTALL_CHECK_FAILED,
            "install failed: deployment widget-controller not ready before timeout: deployment \"widget-controller\" exceeded its progress deadline",
        )
        .retried_as("InstallCheckFailed"),
        Case::new(
            "an installing CSV whose deployment drifted from its spec hash goes back to InstallReady",
            World::widget_in(P::INSTALLING, R::INSTALL_WAITING).with(|w| {
                w.install = deployments(
                    StrategyErrorReason::DeploymentUpdated,
                    "deployment changed old hash=abc, new hash=def",
                );
            }),
        )
        .becomes(
            P::INSTALL_READY,
            R::INSTALL_WAITING,
            "installing: deployment changed old hash=abc, new hash=def",
        ),
        Case::new(
            "an installing CSV whose pods lack a CSV annotation goes back to InstallReady",
            World::widget_in(P::INSTALLING, R::INSTALL_WAITING).with(|w| {
                w.install = deployments(
                    StrategyErrorReason::AnnotationsMissing,
                    "annotations on deployment does not contain expected key: olm.targetNamespaces",
                );
            }),
        )
        .becomes(
            P::INSTALL_READY,
            R::INSTALL_WAITING,
            "installing: annotations on deployment does not contain expected key: olm.targetNamespaces",
        ),
        Case::new(
            "an installing CSV waits for its APIServices",
            World::widget_in(P::INSTALLING, R::INSTALL_SUCCEEDED).with(|w| {
                w.install.api_services = ApiServicesCheck::NotAvailable;
            }),
        )
        .becomes(P::INSTALLING, R::INSTALL_WAITING, "apiServices not installed"),
        Case::new(
            "an installing CSV whose APIService pods are briefly disrupted keeps its phase and looks again in ten seconds",
            World::widget_in(P::INSTALLING, R::INSTALL_WAITING).with(|w| {
                w.install.api_services = ApiServicesCheck::Retryable("pod restarting".into());
            }),
        )
        .with_actions(vec![CsvAction::Requeue {
            name: WIDGET.into(),
            after: Some(csv_phase::API_SERVICE_RETRY_AFTER),
        }]),
        Case::new(
            "an installing CSV whose APIService fails for good fails",
            World::widget_in(P::INSTALLING, R::INSTALL_WAITING).with(|w| {
                w.install.api_services = ApiServicesCheck::Failed("no endpoints".into());
            }),
        )
        .becomes(
            P::FAILED,
            R::API_SERVICE_INSTALL_FAILED,
            "APIService install failed: no endpoints",
        ),
        Case::new(
            "an installing CSV with a broken webhook goes back to InstallReady",
            World::widget_in(P::INSTALLING, R::INSTALL_WAITING).with(|w| {
                w.install.webhooks = WebhooksCheck::Failed("no caBundle".into());
            }),
        )
        .becomes(P::INSTALL_READY, R::INSTALL_WAITING, "Webhook install failed: no caBundle"),
        Case::new(
            "an installing CSV waits for its webhooks",
            World::widget_in(P::INSTALLING, R::INSTALL_SUCCEEDED).with(|w| {
                w.install.webhooks = WebhooksCheck::NotAvailable;
            }),
        )
        .becomes(P::INSTALLING, R::INSTALL_WAITING, "webhooks not installed"),
        Case::new(
            "an installing CSV whose expected deployments cannot be computed needs a reinstall",
            World::widget_in(P::INSTALLING, R::INSTALL_WAITING).with(|w| {
                w.install.deployments = DeploymentsCheck::ExpectedSpecInvalid;
            }),
        )
        .becomes(P::PENDING, R::NEEDS_REINSTALL, "calculated deployment install is bad"),
        // Succeeded
        Case::new(
            "a healthy succeeded CSV writes nothing and keeps its per-API roles",
            World::widget_in(P::SUCCEEDED, R::INSTALL_SUCCEEDED).with(|w| {
                w.csv.status.as_mut().expect("status").message =
                    Some("install strategy completed with no errors".into());
            }),
        )
        .with_actions(vec![CsvAction::EnsureProvidedApiClusterRoles]),
        Case::new(
            "a succeeded CSV that a newer CSV replaces starts Replacing and counts an upgrade",
            World::widget_in(P::SUCCEEDED, R::INSTALL_SUCCEEDED).with(|w| {
                w.other_csvs.push(widget_version("widget-operator.v1.3.0", WIDGET, P::PENDING, R::REQUIREMENTS_UNKNOWN));
            }),
        )
        .becomes(P::REPLACING, R::BEING_REPLACED, "being replaced by csv: widget-operator.v1.3.0")
        .with_actions(vec![CsvAction::CountUpgrade]),
        Case::new(
            "a copy of a newer CSV does not replace anything",
            World::widget_in(P::SUCCEEDED, R::INSTALL_SUCCEEDED).with(|w| {
                w.csv.status.as_mut().expect("status").message =
                    Some("install strategy completed with no errors".into());
                w.other_csvs.push(
                    widget_version("widget-operator.v1.3.0", WIDGET, P::PENDING, R::REQUIREMENTS_UNKNOWN)
                        .copied_from("cog-works"),
                );
            }),
        ),
        Case::new(
            "a succeeded CSV whose APIService resources broke fails",
            World::widget_in(P::SUCCEEDED, R::INSTALL_SUCCEEDED).with(|w| {
                w.api_service_resources = ApiServiceResources::Broken {
                    message: "secret widget-controller-service-cert missing".into(),
                    actionable: true,
                };
            }),
        )
        .becomes(
            P::FAILED,
            R::API_SERVICE_RESOURCE_ISSUE,
            "secret widget-controller-service-cert missing",
        ),
        Case::new(
            "a succeeded CSV whose certificates are due goes back to Pending for rotation",
            World::widget_in(P::SUCCEEDED, R::INSTALL_SUCCEEDED).with(|w| w.cert_rotation_due = true),
        )
        .becomes(
            P::PENDING,
            R::NEEDS_CERT_ROTATION,
            "CSV owns resources that require a cert refresh",
        ),
        Case::new(
            "a succeeded CSV that lost a requirement fails",
            World::widget_in(P::SUCCEEDED, R::INSTALL_SUCCEEDED).with(|w| w.requirements = unmet()),
        )
        .becomes(P::FAILED, R::REQUIREMENTS_NOT_MET, "requirements no longer met"),
        Case::new(
            "a succeeded CSV whose deployment disappeared fails with ComponentUnhealthy",
            World::widget_in(P::SUCCEEDED, R::INSTALL_SUCCEEDED).with(|w| {
                w.install = deployments(
                    StrategyErrorReason::ComponentMissing,
                    "missing deployment with name=widget-controller",
                );
            }),
        )
        .becomes(
            P::FAILED,
            R::COMPONENT_UNHEALTHY,
            "installing: missing deployment with name=widget-controller",
        ),
        // Failed
        Case::new(
            "a failed CSV with fail-forward enabled is replaced by a newer one",
            {
                let group = gadget_group().providing(WIDGET_API).failing_forward();
                let csv = widget_operator().replacing("").member_of(&group).in_phase(
                    P::FAILED,
                    R::INSTALL_CHECK_FAILED,
                    minute(0),
                );
                World::around(csv, group).with(|w| {
                    w.other_csvs.push(widget_version("widget-operator.v1.3.0", WIDGET, P::PENDING, R::REQUIREMENTS_UNKNOWN));
                })
            },
        )
        .becomes(
            P::REPLACING,
            R::BEING_REPLACED,
            "Fail Forward is enabled, allowing Failed csv to be replaced by csv: widget-operator.v1.3.0",
        )
        .with_actions(vec![CsvAction::CountUpgrade]),
        Case::new(
            "a failed CSV without fail-forward is not replaced, and tries to heal",
            World::widget_in(P::FAILED, R::COMPONENT_UNHEALTHY).with(|w| {
                w.other_csvs.push(widget_version("widget-operator.v1.3.0", WIDGET, P::PENDING, R::REQUIREMENTS_UNKNOWN));
            }),
        )
        .becomes(
            P::SUCCEEDED,
            R::INSTALL_SUCCEEDED,
            "install strategy completed with no errors",
        ),
        Case::new(
            "a CSV that failed for want of target namespaces retries once its group is fine",
            World::widget_in(P::FAILED, R::NO_TARGET_NAMESPACES),
        )
        .becomes(
            P::PENDING,
            R::REQUIREMENTS_UNKNOWN,
            "InstallModes now support target namespaces",
        ),
        Case::new(
            "a CSV that failed for want of an OperatorGroup retries once there is one",
            World::widget_in(P::FAILED, R::NO_OPERATOR_GROUP),
        )
        .becomes(
            P::PENDING,
            R::REQUIREMENTS_UNKNOWN,
            "InstallModes now support target namespaces",
        ),
        Case::new(
            "a CSV that failed among too many OperatorGroups retries once one is left",
            World::widget_in(P::FAILED, R::TOO_MANY_OPERATOR_GROUPS),
        )
        .becomes(
            P::PENDING,
            R::REQUIREMENTS_UNKNOWN,
            "InstallModes now support target namespaces",
        ),
        Case::new(
            "a CSV that failed an unsupported group retries once the group fits",
            World::widget_in(P::FAILED, R::UNSUPPORTED_OPERATOR_GROUP),
        )
        .becomes(
            P::PENDING,
            R::REQUIREMENTS_UNKNOWN,
            "InstallModes now support target namespaces",
        ),
        Case::new(
            "a CSV that failed an intersection conflict retries once the groups no longer intersect",
            World::widget_in(P::FAILED, R::INTER_OPERATOR_GROUP_OWNER_CONFLICT),
        )
        .becomes(
            P::PENDING,
            R::REQUIREMENTS_UNKNOWN,
            "OperatorGroup no longer intersecting with conflicting owner",
        ),
        Case::new(
            "a CSV that failed a static group retries once the group lists its APIs",
            World::widget_in(P::FAILED, R::CANNOT_MODIFY_STATIC_OPERATOR_GROUP_PROVIDED_APIS),
        )
        .becomes(
            P::PENDING,
            R::REQUIREMENTS_UNKNOWN,
            "static OperatorGroup and intersecting groups now support providedAPIs",
        ),
        Case::new(
            "a failed CSV with unmet requirements goes back to Pending",
            World::widget_in(P::FAILED, R::COMPONENT_UNHEALTHY).with(|w| w.requirements = unmet()),
        )
        .becomes(P::PENDING, R::REQUIREMENTS_NOT_MET, "requirements not met"),
        Case::new(
            "a failed CSV whose APIService resources OLM can repair goes back to Pending",
            World::widget_in(P::FAILED, R::API_SERVICE_RESOURCE_ISSUE).with(|w| {
                w.api_service_resources = ApiServiceResources::Broken {
                    message: "secret widget-controller-service-cert missing".into(),
                    actionable: true,
                };
            }),
        )
        .becomes(
            P::PENDING,
            R::API_SERVICE_RESOURCES_NEED_REINSTALL,
            "secret widget-controller-service-cert missing",
        ),
        Case::new(
            "a failed CSV whose APIService belongs to someone else stays failed",
            World::widget_in(P::FAILED, R::API_SERVICE_RESOURCE_ISSUE).with(|w| {
                w.api_service_resources = ApiServiceResources::Broken {
                    message: "apiservice owned elsewhere".into(),
                    actionable: false,
                };
            }),
        ),
        Case::new(
            "a failed CSV with certificates due goes back to Pending for rotation",
            World::widget_in(P::FAILED, R::COMPONENT_UNHEALTHY).with(|w| w.cert_rotation_due = true),
        )
        .becomes(P::PENDING, R::NEEDS_CERT_ROTATION, "owned APIServices need cert refresh"),
        Case::new(
            "a failed CSV whose components are still unhealthy needs a reinstall",
            World::widget_in(P::FAILED, R::COMPONENT_UNHEALTHY).with(|w| {
                w.install = deployments(
                    StrategyErrorReason::ComponentMissing,
                    "missing deployment with name=widget-controller",
                );
            }),
        )
        .becomes(
            P::PENDING,
            R::NEEDS_REINSTALL,
            "installing: missing deployment with name=widget-controller",
        ),
        // Replacing
        Case::new(
            "a replaced CSV is deleted once its replacement succeeded",
            World::widget_in(P::REPLACING, R::BEING_REPLACED).with(|w| {
                w.other_csvs.push(widget_version("widget-operator.v1.3.0", WIDGET, P::SUCCEEDED, R::INSTALL_SUCCEEDED));
            }),
        )
        .becomes(
            P::DELETING,
            R::REPLACED,
            "has been replaced by a newer ClusterServiceVersion that has successfully installed.",
        ),
        Case::new(
            "a replaced CSV waits, with its replacement, while the replacement installs",
            World::widget_in(P::REPLACING, R::BEING_REPLACED).with(|w| {
                w.other_csvs.push(widget_version("widget-operator.v1.3.0", WIDGET, P::INSTALLING, R::INSTALL_WAITING));
            }),
        )
        .with_actions(vec![waiting_requeue("widget-operator.v1.3.0"), waiting_requeue(WIDGET)]),
        Case::new(
            "only the oldest CSV of a replacement chain acts",
            World::widget_in(P::REPLACING, R::BEING_REPLACED).with(|w| {
                w.csv.spec.replaces = Some("widget-operator.v1.1.0".into());
                w.other_csvs.push(previous(P::REPLACING, R::BEING_REPLACED));
                w.other_csvs.push(widget_version("widget-operator.v1.3.0", WIDGET, P::SUCCEEDED, R::INSTALL_SUCCEEDED));
            }),
        ),
        Case::new(
            "a Replacing CSV that nothing replaces is retried",
            World::widget_in(P::REPLACING, R::BEING_REPLACED),
        )
        .retried_as("NoReplacementFound"),
        Case::new(
            "with fail-forward a replaced CSV is deleted when the newest of a chain of replacements succeeded",
            {
                let group = gadget_group().providing(WIDGET_API).failing_forward();
                let csv = widget_operator().replacing("").member_of(&group).in_phase(
                    P::REPLACING,
                    R::BEING_REPLACED,
                    minute(0),
                );
                World::around(csv, group).with(|w| {
                    w.other_csvs.push(widget_version("widget-operator.v1.3.0", WIDGET, P::REPLACING, R::BEING_REPLACED));
                    w.other_csvs.push(widget_version(
                        "widget-operator.v1.4.0",
                        "widget-operator.v1.3.0",
                        P::SUCCEEDED,
                        R::INSTALL_SUCCEEDED,
                    ));
                })
            },
        )
        .becomes(
            P::DELETING,
            R::REPLACED,
            "has been replaced by a newer ClusterServiceVersion that has successfully installed.",
        ),
        Case::new(
            "without fail-forward only the direct replacement counts",
            World::widget_in(P::REPLACING, R::BEING_REPLACED).with(|w| {
                w.other_csvs.push(widget_version("widget-operator.v1.3.0", WIDGET, P::FAILED, R::INSTALL_CHECK_FAILED));
                w.other_csvs.push(widget_version(
                    "widget-operator.v1.4.0",
                    "widget-operator.v1.3.0",
                    P::SUCCEEDED,
                    R::INSTALL_SUCCEEDED,
                ));
            }),
        )
        .with_actions(vec![waiting_requeue("widget-operator.v1.3.0")]),
        // Deleting
        Case::new(
            "a CSV marked Deleting is deleted",
            World::widget_in(P::DELETING, R::REPLACED),
        )
        .with_actions(vec![CsvAction::DeleteCsv]),
    ];
    for case in cases {
        case.check();
    }
}

#[test]
fn copies_are_never_driven() {
    let world = World::widget_in(CsvPhase::NONE, CsvReason::new("")).with(|w| {
        w.csv = w.csv.clone().copied_from("cog-works");
        w.csv.metadata.finalizers = None;
    });
    let decision = world.decide();
    assert!(decision.status.is_none());
    assert!(decision.finalizers.is_none());
    assert!(decision.actions.is_empty());
}

#[test]
fn finalizer_is_added_and_cleanup_waits_for_cluster_objects() {
    let world = World::widget_in(CsvPhase::PENDING, CsvReason::REQUIREMENTS_UNKNOWN)
        .with(|w| w.csv.metadata.finalizers = None);
    assert_eq!(
        world.decide().finalizers,
        Some(vec![labels::CSV_CLEANUP_FINALIZER.to_owned()])
    );

    let deleting = World::widget_in(CsvPhase::SUCCEEDED, CsvReason::INSTALL_SUCCEEDED).with(|w| {
        w.csv.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(minute(1)),
        );
        w.owned_cluster_objects = OwnedClusterObjects {
            cluster_role_bindings: 0,
            cluster_roles: 2,
        };
    });
    let decision = deleting.decide();
    assert_eq!(decision.actions, vec![CsvAction::DeleteOwnedClusterObjects]);
    assert_eq!(
        decision.retry.map(|e| e.to_string()),
        Some("waiting for ClusterRoles to delete".to_owned())
    );
    assert!(decision.finalizers.is_none());
    assert!(decision.status.is_none());

    let cleaned = deleting.with(|w| w.owned_cluster_objects = OwnedClusterObjects::default());
    let decision = cleaned.decide();
    assert_eq!(decision.finalizers, Some(Vec::new()));
    assert!(decision.retry.is_none());
}

#[test]
fn forbidden_installs_wait_for_a_cluster_change() {
    let world = World::widget_in(
        CsvPhase::FAILED,
        CsvReason::INSTALL_COMPONENT_FAILED_NO_RETRY,
    )
    .with(|w| {
        w.install = deployments(StrategyErrorReason::ComponentMissing, "missing");
    });
    let decision = world.decide();
    assert!(decision.status.is_none(), "skipped entirely");
    assert!(decision.actions.is_empty());

    let status =
        csv_phase::detected_cluster_change(&world.csv, minute(2)).expect("moves to Pending");
    assert_eq!(status.phase, Some(CsvPhase::PENDING));
    assert_eq!(status.reason, Some(CsvReason::DETECTED_CLUSTER_CHANGE));
    assert_eq!(
        status.message.as_deref(),
        Some("Cluster resources changed state")
    );
    let healthy =
        widget_operator().in_phase(CsvPhase::SUCCEEDED, CsvReason::INSTALL_SUCCEEDED, minute(0));
    assert!(csv_phase::detected_cluster_change(&healthy, minute(2)).is_none());
}

#[test]
fn api_labels_are_written_for_provided_and_required_apis() {
    let decision = World::widget_in(CsvPhase::NONE, CsvReason::new("")).decide();
    let labels = decision.labels.expect("labels change");
    assert_eq!(
        labels.get(&labels::api_label_key(
            "Widget",
            "v1",
            "gadgets.example.test"
        )),
        Some(&"provided".to_owned())
    );
    assert_eq!(
        labels.get(&labels::api_label_key("Cog", "v2", "gears.example.test")),
        Some(&"required".to_owned())
    );
    assert_eq!(
        labels.get("tier"),
        Some(&"gold".to_owned()),
        "existing labels stay"
    );
}

fn ready_csv() -> olm_api::csv::ClusterServiceVersion {
    World::widget_in(CsvPhase::INSTALL_READY, CsvReason::ALL_REQUIREMENTS_MET).csv
}

#[test]
fn installer_outcomes() {
    let csv = ready_csv();
    let installed = csv_phase::after_install(
        &csv,
        &InstallOutcome::Installed { certificates: None },
        minute(2),
    );
    assert_phase(
        &installed,
        CsvPhase::INSTALLING,
        CsvReason::INSTALL_SUCCEEDED,
        "waiting for install components to report healthy",
    );
    assert!(installed.actions.contains(&requeue_widget()));

    let forbidden = csv_phase::after_install(
        &csv,
        &InstallOutcome::Forbidden("deployments.apps is forbidden".into()),
        minute(2),
    );
    assert_phase(
        &forbidden,
        CsvPhase::FAILED,
        CsvReason::INSTALL_COMPONENT_FAILED_NO_RETRY,
        "install strategy failed: install strategy failed: deployments.apps is forbidden",
    );

    let failed = csv_phase::after_install(
        &csv,
        &InstallOutcome::Failed("etcd is sad".into()),
        minute(2),
    );
    assert_phase(
        &failed,
        CsvPhase::FAILED,
        CsvReason::INSTALL_COMPONENT_FAILED,
        "install strategy failed: etcd is sad",
    );

    let with_certs = csv_phase::after_install(
        &csv,
        &InstallOutcome::Installed {
            certificates: Some(IssuedCertificates {
                issued_at: minute(2),
                rotate_at: minute(3),
            }),
        },
        minute(2),
    );
    let status = with_certs.status.expect("status");
    assert_eq!(status.certs_last_updated.map(|t| t.0), Some(minute(2)));
    assert_eq!(status.certs_rotate_at.map(|t| t.0), Some(minute(3)));
}

fn assert_phase(decision: &CsvDecision, phase: CsvPhase, reason: CsvReason, message: &str) {
    let status = decision.status.as_ref().expect("status written");
    assert_eq!(status.phase, Some(phase));
    assert_eq!(status.reason, Some(reason));
    assert_eq!(status.message.as_deref(), Some(message));
}

#[test]
fn set_phase_keeps_history_and_transition_times() {
    // Pending for a while with changing reasons, then InstallReady.
    let world = World::widget_in(CsvPhase::PENDING, CsvReason::REQUIREMENTS_UNKNOWN).with(|w| {
        w.requirements = unmet();
        w.now = minute(3);
    });
    let decision = world.decide();
    let status = decision.status.expect("status");
    assert_eq!(
        status.last_transition_time.map(|t| t.0),
        Some(minute(0)),
        "phase did not change"
    );
    assert_eq!(status.last_update_time.map(|t| t.0), Some(minute(3)));
    assert_eq!(
        status.requirement_status.as_ref().map(Vec::len),
        Some(1),
        "requirement status recorded"
    );
    let history = status.conditions.expect("history");
    let last = history.last().expect("entry");
    assert_eq!(last.reason, Some(CsvReason::REQUIREMENTS_NOT_MET));
    assert_eq!(last.last_update_time.as_ref().map(|t| t.0), Some(minute(3)));
}

#[test]
fn installing_timeout_records_both_transitions() {
    // Upstream first records the wait, then the timeout, in one sync.
    let world = World::widget_in(CsvPhase::INSTALLING, CsvReason::INSTALL_SUCCEEDED).with(|w| {
        w.install = deployments(
            StrategyErrorReason::Waiting,
            "waiting for deployment widget-controller",
        );
        w.now = minute(7);
    });
    let decision = world.decide();
    let reasons: Vec<&str> = decision.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons, ["InstallWaiting", "InstallCheckFailed"]);
}

#[test]
fn members_of_wider_groups_get_rbac_and_copies() {
    let group = gadget_group()
        .targeting(&[GADGET_SYSTEM, "cog-works"])
        .providing(WIDGET_API);
    let csv = widget_operator().replacing("").member_of(&group).in_phase(
        CsvPhase::SUCCEEDED,
        CsvReason::INSTALL_SUCCEEDED,
        minute(0),
    );
    let decision = World::around(csv, group).decide();
    assert!(
        decision
            .actions
            .contains(&CsvAction::EnsureTargetNamespaceRbac)
    );
    assert!(decision.actions.contains(&CsvAction::SyncCopies));

    let own_namespace_only =
        World::widget_in(CsvPhase::SUCCEEDED, CsvReason::INSTALL_SUCCEEDED).decide();
    assert!(!own_namespace_only.actions.contains(&CsvAction::SyncCopies));
    assert!(
        !own_namespace_only
            .actions
            .contains(&CsvAction::EnsureTargetNamespaceRbac)
    );

    let group = gadget_group().targeting(&[GADGET_SYSTEM, "cog-works"]);
    let failing = widget_operator().replacing("").member_of(&group).in_phase(
        CsvPhase::FAILED,
        CsvReason::NO_OPERATOR_GROUP,
        minute(0),
    );
    let mut world = World::around(failing, group);
    world.groups.clear();
    let decision = world.decide();
    assert!(
        !decision.actions.contains(&CsvAction::SyncCopies),
        "no group, no copies"
    );
}

#[test]
fn a_second_sync_with_nothing_new_writes_nothing() {
    let world = World::widget_in(CsvPhase::PENDING, CsvReason::REQUIREMENTS_UNKNOWN)
        .with(|w| w.requirements = unmet());
    let first = world.decide();
    let mut again = world;
    again.csv.status = first.status;
    again.csv.metadata.labels = first.labels.or(again.csv.metadata.labels);
    again.now = minute(9);
    let second = again.decide();
    assert!(
        second.status.is_none(),
        "same phase, reason, message and requirements"
    );
    assert!(second.labels.is_none());
    assert!(second.events.is_empty());
}

#[test]
fn pending_status_requirements_are_kept_even_when_unchanged_phase() {
    // Requirement statuses change while phase, reason and message stay: the
    // status is still written (upstream would not write it).
    let world = World::widget_in(CsvPhase::PENDING, CsvReason::REQUIREMENTS_NOT_MET).with(|w| {
        w.csv.status.as_mut().expect("status").message =
            Some("one or more requirements couldn't be found".into());
        w.requirements = unmet();
    });
    let decision = world.decide();
    let status = decision.status.expect("requirement status changed");
    assert_eq!(status.phase, Some(CsvPhase::PENDING));
    assert!(decision.events.is_empty(), "no phase set, no event");
}
