//! Our types read and write OLM objects without loss, including values this
//! version of the code does not know (a newer OLM may write them), and objects
//! whose optional parts are missing.
//!
//! Fixture names are invented on purpose (`acme-*`, `widgets`), so a field that
//! is read into the wrong place cannot pass by looking like a real name.

use olm_api::{
    catalog_source::{CatalogSource, ConnectivityState, SecurityConfig, SourceType},
    install_plan::{InstallPlan, InstallPlanPhase, StepStatus},
    olm_config::OLMConfig,
    operator::Operator,
    operator_condition::{self, OperatorCondition},
    operator_group::{self, OperatorGroup, UpgradeStrategy},
    operator_hub::OperatorHub,
    subscription::{Approval, Subscription, SubscriptionConditionType, SubscriptionState},
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

/// Parses `yaml` as `T`, writes it back, and checks nothing was lost or added.
fn round_trip<T: DeserializeOwned + Serialize>(yaml: &str) -> T {
    let input: Value = serde_yaml_ng::from_str(yaml).expect("fixture is valid YAML");
    let parsed: T = serde_json::from_value(input.clone()).expect("fixture parses");
    let output = serde_json::to_value(&parsed).expect("object serializes");
    assert_eq!(
        output,
        input,
        "round trip changed the object:\n{}",
        serde_yaml_ng::to_string(&output).unwrap_or_default()
    );
    parsed
}

const CATALOG_SOURCE: &str = r#"
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata:
  name: acme-widgets
  namespace: acme-catalogs
spec:
  sourceType: grpc
  image: registry.example/acme/widgets-index:v9
  priority: -40
  secrets: [acme-pull]
  displayName: Acme Widgets
  publisher: Acme Corp
  icon:
    base64data: PHN2Zy8+
    mediatype: image/svg+xml
  updateStrategy:
    registryPoll:
      interval: 45m
  grpcPodConfig:
    nodeSelector:
      acme.example/pool: catalogs
    tolerations:
      - key: acme.example/dedicated
        operator: Exists
        effect: NoSchedule
    priorityClassName: acme-low
    securityContextConfig: baseline
    memoryTarget: 48Mi
    extractContent:
      catalogDir: /acme/configs
      cacheDir: /acme/cache
status:
  reason: RegistryServerWobbly
  message: registry pod is starting
  latestImageRegistryPoll: "2024-03-04T05:06:07Z"
  registryService:
    protocol: grpc
    serviceName: acme-widgets
    serviceNamespace: acme-catalogs
    port: "50051"
    createdAt: "2024-03-04T05:00:00Z"
  connectionState:
    address: acme-widgets.acme-catalogs.svc:50051
    lastObservedState: HALF_OPEN
    lastConnect: "2024-03-04T05:06:09Z"
  conditions:
    - type: ResolvedImage
      status: "True"
      reason: AllTemplatesResolved
      message: registry.example/acme/widgets-index:v9
      lastTransitionTime: "2024-03-04T05:00:00Z"
      observedGeneration: 3
"#;

#[test]
fn catalog_source_round_trips_with_unknown_values() {
    let catalog: CatalogSource = round_trip(CATALOG_SOURCE);
    assert_eq!(catalog.spec.source_type, SourceType::GRPC);
    let pod = catalog
        .spec
        .grpc_pod_config
        .as_ref()
        .expect("grpcPodConfig");
    // A value the CRD would reject today is still read (a newer CRD may allow it).
    let security = pod
        .security_context_config
        .as_ref()
        .expect("securityContextConfig");
    assert!(!security.is_known());
    assert_ne!(security, &SecurityConfig::RESTRICTED);
    let status = catalog.status.as_ref().expect("status");
    let state = &status
        .connection_state
        .as_ref()
        .expect("connectionState")
        .last_observed_state;
    assert!(!state.is_known());
    assert_ne!(state, &ConnectivityState::READY);
    assert!(catalog.runs_registry_pod());
}

/// The address both catalog services dial, from spec and status.
#[test]
fn a_catalog_s_registry_address_prefers_spec_then_its_service() {
    let catalog = |yaml: &str| -> CatalogSource {
        serde_yaml_ng::from_str(&format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata: {{name: c, namespace: team}}\n{yaml}"
        ))
        .expect("catalog")
    };
    let cases = [
        ("spec: {sourceType: grpc, image: i}", None),
        (
            "spec: {sourceType: grpc, address: '10.1.2.3:50051'}\nstatus: {registryService: {serviceName: s, serviceNamespace: x, port: '1'}}",
            Some("10.1.2.3:50051"),
        ),
        (
            "spec: {sourceType: grpc, address: ''}\nstatus: {registryService: {serviceName: s, serviceNamespace: x, port: '1'}}",
            Some("s.x.svc:1"),
        ),
        (
            "spec: {sourceType: grpc}\nstatus: {registryService: {serviceName: s}}",
            Some("s.team.svc:50051"),
        ),
        (
            "spec: {sourceType: grpc}\nstatus: {registryService: {serviceName: s, serviceNamespace: '', port: ''}}",
            Some("s.team.svc:50051"),
        ),
        (
            "spec: {sourceType: grpc}\nstatus: {registryService: {serviceName: ''}}",
            None,
        ),
    ];
    for (yaml, wanted) in cases {
        assert_eq!(
            catalog(yaml).registry_address().as_deref(),
            wanted,
            "{yaml}"
        );
    }
}

const SUBSCRIPTION: &str = r#"
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata:
  name: acme-gizmo
  namespace: acme-apps
spec:
  name: gizmo-operator
  channel: stable-9
  source: acme-widgets
  sourceNamespace: acme-catalogs
  startingCSV: gizmo-operator.v9.1.0
  installPlanApproval: Manual
  config:
    env:
      - name: GIZMO_MODE
        value: quiet
    resources:
      limits:
        memory: 300Mi
    nodeSelector:
      acme.example/pool: apps
    annotations:
      acme.example/owner: team-gizmo
status:
  currentCSV: gizmo-operator.v9.2.0
  installedCSV: gizmo-operator.v9.1.0
  state: UpgradeDeferred
  reason: WaitingForTuesday
  installPlanGeneration: 7
  installPlanRef:
    apiVersion: operators.coreos.com/v1alpha1
    kind: InstallPlan
    name: install-q7x2z
    namespace: acme-apps
    resourceVersion: "8812"
    uid: 0d7c1f4e-1111-2222-3333-444455556666
  installplan:
    apiVersion: operators.coreos.com/v1alpha1
    kind: InstallPlan
    name: install-q7x2z
    uuid: 0d7c1f4e-1111-2222-3333-444455556666
  catalogHealth:
    - catalogSourceRef:
        apiVersion: operators.coreos.com/v1alpha1
        kind: CatalogSource
        name: acme-widgets
        namespace: acme-catalogs
      healthy: true
      lastUpdated: "2024-03-04T05:06:07Z"
  conditions:
    - type: InstallPlanPending
      status: "True"
      reason: RequiresApproval
      lastTransitionTime: "2024-03-04T05:06:07Z"
    - type: GizmoAlignment
      status: Unknown
      reason: StarsNotAligned
      message: from a newer OLM
      lastHeartbeatTime: "2024-03-04T05:06:08Z"
  lastUpdated: "2024-03-04T05:06:08Z"
"#;

#[test]
fn subscription_round_trips_with_unknown_values() {
    let sub: Subscription = round_trip(SUBSCRIPTION);
    assert_eq!(sub.spec.package, "gizmo-operator");
    assert_eq!(sub.spec.source, "acme-widgets");
    assert_eq!(sub.spec.install_plan_approval, Some(Approval::MANUAL));
    assert!(sub.requires_manual_approval());
    let status = sub.status.as_ref().expect("status");
    let state = status.state.as_ref().expect("state");
    assert!(!state.is_known());
    assert_ne!(state, &SubscriptionState::AT_LATEST_KNOWN);
    assert_eq!(
        status.conditions[0].type_,
        SubscriptionConditionType::INSTALL_PLAN_PENDING
    );
    assert!(!status.conditions[1].type_.is_known());
}

const INSTALL_PLAN: &str = r#"
apiVersion: operators.coreos.com/v1alpha1
kind: InstallPlan
metadata:
  name: install-q7x2z
  namespace: acme-apps
spec:
  approval: Manual
  approved: false
  clusterServiceVersionNames: [gizmo-operator.v9.2.0]
  generation: 7
  source: acme-widgets
  sourceNamespace: acme-catalogs
status:
  phase: Rollingback
  catalogSources: [acme-widgets]
  message: retrying execution due to error
  startTime: "2024-03-04T05:06:07Z"
  conditions:
    - type: Installed
      status: "False"
      reason: InstallComponentWobbled
      message: a newer reason
      lastUpdateTime: "2024-03-04T05:06:07Z"
      lastTransitionTime: "2024-03-04T05:06:07Z"
  plan:
    - resolving: gizmo-operator.v9.2.0
      status: Verifying
      optional: true
      resource:
        sourceName: acme-widgets
        sourceNamespace: acme-catalogs
        group: operators.coreos.com
        version: v1alpha1
        kind: ClusterServiceVersion
        name: gizmo-operator.v9.2.0
        manifest: '{"kind":"ConfigMap","name":"abc","namespace":"acme-catalogs"}'
  bundleLookups:
    - path: registry.example/acme/gizmo-bundle:v9.2.0
      identifier: gizmo-operator.v9.2.0
      replaces: gizmo-operator.v9.1.0
      properties: '{"properties":[]}'
      catalogSourceRef:
        name: acme-widgets
        namespace: acme-catalogs
      conditions:
        - type: BundleLookupPending
          status: "True"
          reason: JobIncomplete
          message: unpack job not completed
  attenuatedServiceAccountRef:
    name: acme-installer
    namespace: acme-apps
"#;

#[test]
fn install_plan_round_trips_with_unknown_values() {
    let ip: InstallPlan = round_trip(INSTALL_PLAN);
    assert_eq!(ip.spec.approval, Approval::MANUAL);
    let status = ip.status.as_ref().expect("status");
    assert!(!status.phase.is_known());
    assert_ne!(status.phase, InstallPlanPhase::COMPLETE);
    assert!(!ip.is_terminal());
    assert!(!status.plan[0].status.is_known());
    assert_ne!(status.plan[0].status, StepStatus::CREATED);
    assert_eq!(status.plan[0].resource.catalog_source, "acme-widgets");
    assert_eq!(
        status.plan[0].resource.catalog_source_namespace,
        "acme-catalogs"
    );
}

#[test]
fn operator_group_v1_round_trips_and_unknown_strategy_is_not_fail_forward() {
    let og: OperatorGroup = round_trip(
        r#"
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata:
  name: acme-group
  namespace: acme-apps
  annotations:
    olm.providedAPIs: Widget.v1.acme.example
spec:
  targetNamespaces: [acme-apps, acme-tenants]
  serviceAccountName: acme-installer
  staticProvidedAPIs: true
  upgradeStrategy: TechPreviewSomethingElse
status:
  namespaces: [acme-apps, acme-tenants]
  lastUpdated: "2024-03-04T05:06:07Z"
  serviceAccountRef:
    kind: ServiceAccount
    name: acme-installer
    namespace: acme-apps
  conditions:
    - type: MultipleOperatorGroup
      status: "True"
      reason: MultipleOperatorGroupsFound
      message: Multiple OperatorGroup found in the same namespace
      lastTransitionTime: "2024-03-04T05:06:07Z"
"#,
    );
    let strategy = og.spec.upgrade_strategy.as_ref().expect("upgradeStrategy");
    assert!(!strategy.is_known());
    assert!(!og.fail_forward_enabled());
    let failing_forward = OperatorGroup {
        spec: operator_group::OperatorGroupSpec {
            upgrade_strategy: Some(UpgradeStrategy::TECH_PREVIEW_UNSAFE_FAIL_FORWARD),
            ..og.spec.clone()
        },
        ..og
    };
    assert!(failing_forward.fail_forward_enabled());
}

#[test]
fn objects_without_spec_are_read() {
    // The usual all-namespaces OperatorGroup has no spec at all.
    let og: OperatorGroup = serde_yaml_ng::from_str(
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: acme-everything\n",
    )
    .expect("OperatorGroup without spec");
    assert_eq!(og.spec, operator_group::OperatorGroupSpec::default());
    let old: operator_group::v1alpha2::OperatorGroup = serde_yaml_ng::from_str(
        "apiVersion: operators.coreos.com/v1alpha2\nkind: OperatorGroup\nmetadata:\n  name: acme-old\nspec: null\n",
    )
    .expect("v1alpha2 OperatorGroup with null spec");
    assert!(old.spec.target_namespaces.is_empty());
    let config: OLMConfig = serde_yaml_ng::from_str(
        "apiVersion: operators.coreos.com/v1\nkind: OLMConfig\nmetadata:\n  name: cluster\n",
    )
    .expect("OLMConfig without spec");
    assert!(!config.copied_csvs_disabled());
    let _: Operator = serde_yaml_ng::from_str(
        "apiVersion: operators.coreos.com/v1\nkind: Operator\nmetadata:\n  name: gizmo.acme-apps\n",
    )
    .expect("Operator without spec");
    let _: OperatorCondition = serde_yaml_ng::from_str(
        "apiVersion: operators.coreos.com/v2\nkind: OperatorCondition\nmetadata:\n  name: gizmo-operator.v9.2.0\n",
    )
    .expect("OperatorCondition without spec");
    let _: OperatorHub = serde_yaml_ng::from_str(
        "apiVersion: config.openshift.io/v1\nkind: OperatorHub\nmetadata:\n  name: cluster\n",
    )
    .expect("OperatorHub without spec");
}

#[test]
fn operator_condition_round_trips_with_overrides_lacking_transition_time() {
    let cond: OperatorCondition = round_trip(
        r#"
apiVersion: operators.coreos.com/v2
kind: OperatorCondition
metadata:
  name: gizmo-operator.v9.2.0
  namespace: acme-apps
spec:
  serviceAccounts: [gizmo-sa]
  deployments: [gizmo-controller]
  overrides:
    - type: Upgradeable
      status: "True"
      reason: AdminSaysSo
      message: maintenance window
  conditions:
    - type: Upgradeable
      status: "False"
      reason: MigrationRunning
      message: wait for the data migration
      lastTransitionTime: "2024-03-04T05:06:07Z"
status:
  conditions:
    - type: Upgradeable
      status: Maybe
      reason: FromTheFuture
      message: a status value this version does not know
      lastTransitionTime: "2024-03-04T05:06:07Z"
      observedGeneration: 2
"#,
    );
    assert_eq!(
        cond.spec.overrides[0].type_,
        operator_condition::UPGRADEABLE
    );
    assert!(cond.spec.overrides[0].last_transition_time.is_none());
    let _: operator_condition::v1::OperatorCondition = round_trip(
        r#"
apiVersion: operators.coreos.com/v1
kind: OperatorCondition
metadata:
  name: gizmo-operator.v9.1.0
  namespace: acme-apps
spec:
  serviceAccounts: [gizmo-sa]
  deployments: [gizmo-controller]
"#,
    );
}

#[test]
fn operator_olm_config_and_hub_round_trip() {
    let operator: Operator = round_trip(
        r#"
apiVersion: operators.coreos.com/v1
kind: Operator
metadata:
  name: gizmo-operator.acme-apps
spec: {}
status:
  components:
    labelSelector:
      matchExpressions:
        - key: operators.coreos.com/gizmo-operator.acme-apps
          operator: Exists
    refs:
      - apiVersion: operators.coreos.com/v1alpha1
        kind: ClusterServiceVersion
        name: gizmo-operator.v9.2.0
        namespace: acme-apps
        conditions:
          - type: Succeeded
            status: "True"
            reason: InstallSucceeded
            message: install strategy completed with no errors
            lastUpdateTime: "2024-03-04T05:06:07Z"
            lastTransitionTime: "2024-03-04T05:06:07Z"
"#,
    );
    assert_eq!(
        operator
            .status
            .as_ref()
            .and_then(|s| s.components.as_ref())
            .map(|c| c.refs.len()),
        Some(1)
    );
    let config: OLMConfig = round_trip(
        r#"
apiVersion: operators.coreos.com/v1
kind: OLMConfig
metadata:
  name: cluster
spec:
  features:
    disableCopiedCSVs: true
    packageServerSyncInterval: 1h30m
status:
  conditions:
    - type: DisabledCopiedCSVs
      status: "True"
      reason: CopiedCSVsDisabled
      message: copied CSVs are disabled
      lastTransitionTime: "2024-03-04T05:06:07Z"
"#,
    );
    assert!(config.copied_csvs_disabled());
    let _: OperatorHub = round_trip(
        r#"
apiVersion: config.openshift.io/v1
kind: OperatorHub
metadata:
  name: cluster
spec:
  disableAllDefaultSources: true
  sources:
    - name: acme-community
      disabled: false
status:
  sources:
    - name: acme-community
      disabled: false
      status: Success
"#,
    );
}

#[test]
fn open_values_compare_with_strings_and_constants() {
    let phase: InstallPlanPhase = serde_json::from_str("\"Complete\"").expect("phase");
    assert_eq!(phase, InstallPlanPhase::COMPLETE);
    assert_eq!(phase, "Complete");
    assert!(phase.is_known());
    assert_eq!(InstallPlanPhase::default(), InstallPlanPhase::NONE);
    assert_eq!(
        serde_json::to_string(&SourceType::CONFIG_MAP).expect("serializes"),
        "\"configmap\""
    );
    assert_eq!(
        SecurityConfig::from("restricted"),
        SecurityConfig::RESTRICTED
    );
}
