//! Requirement checks of a CSV: the Kubernetes version, CRDs, APIServices,
//! native APIs, service accounts and their permission rules, each turned into a
//! `status.requirementStatus` entry with upstream's exact group, version, kind,
//! status and message, plus the overall met/unmet outcome.
//!
//! Upstream: `pkg/controller/operators/olm/requirements.go`. The cluster is
//! observed by the caller and handed in as [`RequirementFacts`]; which
//! permission rules to check is told by [`permission_rules`], and whether each
//! is satisfied (by OLM's own Roles found through `olm.permissions.hash`, or by
//! an RBAC authorizer) comes back in [`RequirementFacts::unsatisfied_rules`].
//!
//! Entries come in a fixed order: minKubeVersion, CRDs (by name), required
//! APIServices (by name), owned APIServices (by name), native APIs (as
//! listed), service accounts (by name; upstream yields these in map order).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::{
    api::{core::v1::ServiceAccount, rbac::v1::PolicyRule},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use olm_api::{
    csv::{
        ApiServiceDescription, ClusterServiceVersion, CrdDescription, DependentStatus,
        GroupVersionKind, RequirementStatus, RequirementStatusReason,
    },
    labels,
};

use olm_plan::go_json;

use super::{copied_csv::is_copied, deployment::InvalidStrategy};

/// What the caller observed in the cluster for one CRD.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CrdFacts {
    /// The CRD's uid.
    pub uid: Option<String>,
    /// Its versions and whether each is served.
    pub versions: Vec<(String, bool)>,
    /// Whether the `Established` condition is `True`.
    pub established: bool,
    /// Whether the `NamesAccepted` condition is `True`.
    pub names_accepted: bool,
    /// The `<namespace>/<csv>` references of its
    /// `operatorframework.io/installed-alongside-*` annotations.
    pub installed_alongside: Vec<(String, String)>,
}

impl CrdFacts {
    /// The facts of a CRD object.
    pub fn of(crd: &CustomResourceDefinition) -> Self {
        let condition_true = |type_: &str| {
            crd.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .any(|c| c.type_ == type_ && c.status == "True")
        };
        let installed_alongside = crd
            .metadata
            .annotations
            .iter()
            .flatten()
            .filter(|(key, _)| key.starts_with(labels::INSTALLED_ALONGSIDE_PREFIX))
            .filter_map(|(_, value)| {
                let mut parts = value.split('/');
                match (parts.next(), parts.next(), parts.next()) {
                    (Some(namespace), Some(name), None) => {
                        Some((namespace.to_owned(), name.to_owned()))
                    }
                    _ => None,
                }
            })
            .collect();
        Self {
            uid: crd.metadata.uid.clone(),
            versions: crd
                .spec
                .versions
                .iter()
                .map(|v| (v.name.clone(), v.served))
                .collect(),
            established: condition_true("Established"),
            names_accepted: condition_true("NamesAccepted"),
            installed_alongside,
        }
    }
}

/// What the caller observed for one APIService (named `<version>.<group>`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiServiceFacts {
    /// The APIService's uid.
    pub uid: Option<String>,
    /// Whether its `Available` condition is `True`.
    pub available: bool,
}

impl ApiServiceFacts {
    /// The facts of an APIService object.
    pub fn of(api_service: &APIService) -> Self {
        Self {
            uid: api_service.metadata.uid.clone(),
            available: api_service
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .any(|c| c.type_ == "Available" && c.status == "True"),
        }
    }
}

/// What the caller observed for one existing ServiceAccount of the CSV's
/// namespace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServiceAccountFacts {
    /// Whether another CSV owns it (an ownerReference of kind
    /// ClusterServiceVersion, none of them to this CSV's uid).
    pub owned_by_other_csv: bool,
}

impl ServiceAccountFacts {
    /// The facts of a ServiceAccount, for the CSV with uid `csv_uid`.
    pub fn of(service_account: &ServiceAccount, csv_uid: &str) -> Self {
        let references = service_account
            .metadata
            .owner_references
            .as_deref()
            .unwrap_or_default();
        let owned_by_a_csv = references.iter().any(|r| r.kind == "ClusterServiceVersion");
        let owned_by_this_csv = references.iter().any(|r| r.uid == csv_uid);
        Self {
            owned_by_other_csv: owned_by_a_csv && !owned_by_this_csv,
        }
    }
}

/// Whether a permission is namespaced (`permissions`) or cluster-wide
/// (`clusterPermissions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum RuleScope {
    /// Checked in the CSV's namespace.
    Namespaced,
    /// Checked cluster-wide.
    Cluster,
}

impl RuleScope {
    fn as_str(self) -> &'static str {
        match self {
            RuleScope::Namespaced => "namespaced",
            RuleScope::Cluster => "cluster",
        }
    }
}

/// One permission rule of one service account.
#[derive(Clone, Debug, PartialEq)]
pub struct PermissionRule {
    /// Namespaced or cluster-wide.
    pub scope: RuleScope,
    /// The service account the rule is granted to.
    pub service_account: String,
    /// The rule.
    pub rule: PolicyRule,
}

/// Every permission rule of a CSV, for the caller to check.
pub fn permission_rules(csv: &ClusterServiceVersion) -> Vec<PermissionRule> {
    let strategy = &csv.spec.install.spec;
    let scoped = [
        (
            RuleScope::Namespaced,
            strategy.permissions.as_deref().unwrap_or_default(),
        ),
        (
            RuleScope::Cluster,
            strategy.cluster_permissions.as_deref().unwrap_or_default(),
        ),
    ];
    scoped
        .into_iter()
        .flat_map(|(scope, permissions)| {
            permissions.iter().flat_map(move |permission| {
                permission.rules.iter().map(move |rule| PermissionRule {
                    scope,
                    service_account: permission.service_account_name.clone(),
                    rule: rule.clone(),
                })
            })
        })
        .collect()
}

/// Everything the requirement checks need to know about the cluster.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequirementFacts {
    /// The API server's `gitVersion` (for example `v1.31.2`), or `None` when
    /// version discovery failed.
    pub server_version: Option<String>,
    /// CRDs that exist, by name.
    pub crds: BTreeMap<String, CrdFacts>,
    /// APIServices that exist, by name (`<version>.<group>`).
    pub api_services: BTreeMap<String, ApiServiceFacts>,
    /// Kinds served by the API server, as discovery reports them.
    pub discovered: BTreeSet<GroupVersionKind>,
    /// ServiceAccounts that exist in the CSV's namespace, by name.
    pub service_accounts: BTreeMap<String, ServiceAccountFacts>,
    /// The permission rules found not satisfied.
    pub unsatisfied_rules: Vec<PermissionRule>,
}

/// The result of the requirement checks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequirementsOutcome {
    /// Whether every requirement is met.
    pub met: bool,
    /// One entry per requirement, for `status.requirementStatus`.
    pub statuses: Vec<RequirementStatus>,
}

fn requirement(group: &str, version: &str, kind: &str, name: &str) -> RequirementStatus {
    RequirementStatus {
        group: group.to_owned(),
        version: version.to_owned(),
        kind: kind.to_owned(),
        name: name.to_owned(),
        ..Default::default()
    }
}

/// Evaluates every requirement of `csv` against the observed `facts`;
/// `namespace_csvs` are the CSVs of its namespace (to tell ancestors in
/// installed-alongside annotations). An install strategy other than
/// `deployment` cannot be evaluated.
pub fn evaluate(
    csv: &ClusterServiceVersion,
    facts: &RequirementFacts,
    namespace_csvs: &[ClusterServiceVersion],
) -> Result<RequirementsOutcome, InvalidStrategy> {
    super::deployment::validate_strategy(csv)?;
    let mut outcome = RequirementsOutcome {
        met: true,
        statuses: Vec::new(),
    };
    min_kube_version(csv, facts, &mut outcome);
    crds(csv, facts, namespace_csvs, &mut outcome);
    api_services(csv, facts, &mut outcome);
    native_apis(csv, facts, &mut outcome);
    permissions(csv, facts, &mut outcome);
    Ok(outcome)
}

fn min_kube_version(
    csv: &ClusterServiceVersion,
    facts: &RequirementFacts,
    outcome: &mut RequirementsOutcome,
) {
    let Some(min) = csv
        .spec
        .min_kube_version
        .as_deref()
        .filter(|v| !v.is_empty())
    else {
        return;
    };
    let name = csv.metadata.name.as_deref().unwrap_or_default();
    let mut status = requirement(
        "operators.coreos.com",
        "v1alpha1",
        "ClusterServiceVersion",
        name,
    );
    let fail = |status: &mut RequirementStatus, message: String| {
        status.status = RequirementStatusReason::PRESENT_NOT_SATISFIED;
        status.message = message;
    };
    match &facts.server_version {
        None => fail(&mut status, "Server version discovery error".to_owned()),
        Some(git_version) => {
            let trimmed = git_version.strip_prefix('v').unwrap_or(git_version);
            let server = trimmed.split('-').next().and_then(DottedTri::parse);
            match (
                server,
                DottedTri::parse(min.strip_prefix('v').unwrap_or(min)),
            ) {
                (None, _) => fail(&mut status, "Server version parsing error".to_owned()),
                (Some(_), None) => fail(&mut status, "CSV version parsing error".to_owned()),
                (Some(server), Some(wanted))
                    if wanted.cmp_precedence(&server) == std::cmp::Ordering::Greater =>
                {
                    fail(
                        &mut status,
                        format!(
                            "CSV version requirement not met: minKubeVersion ({min}) > server version ({server})"
                        ),
                    )
                }
                (Some(_), Some(_)) => {
                    status.status = RequirementStatusReason::PRESENT;
                    status.message = format!(
                        "CSV minKubeVersion ({min}) less than server version ({git_version})"
                    );
                }
            }
        }
    }
    if status.status != RequirementStatusReason::PRESENT {
        outcome.met = false;
    }
    outcome.statuses.push(status);
}

/// Owned and required CRD descriptions, deduplicated by name (owned wins) and
/// sorted by name (upstream's `GetAllCRDDescriptions`).
fn all_crd_descriptions(csv: &ClusterServiceVersion) -> Vec<&CrdDescription> {
    let mut by_name: BTreeMap<&str, &CrdDescription> = BTreeMap::new();
    for crd in csv.spec.required_crds() {
        by_name.insert(&crd.name, crd);
    }
    for crd in csv.spec.owned_crds() {
        by_name.insert(&crd.name, crd);
    }
    by_name.into_values().collect()
}

fn crds(
    csv: &ClusterServiceVersion,
    facts: &RequirementFacts,
    namespace_csvs: &[ClusterServiceVersion],
    outcome: &mut RequirementsOutcome,
) {
    let owned: BTreeSet<&str> = csv
        .spec
        .owned_crds()
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    for description in all_crd_descriptions(csv) {
        let mut status = requirement(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            &description.name,
        );
        let Some(crd) = facts.crds.get(&description.name) else {
            status.status = RequirementStatusReason::NOT_PRESENT;
            status.message = "CRD is not present".to_owned();
            outcome.met = false;
            outcome.statuses.push(status);
            continue;
        };
        let others = others_installed_alongside(crd, csv, namespace_csvs);
        if !others.is_empty() && owned.contains(description.name.as_str()) {
            status.status = RequirementStatusReason::PRESENT_NOT_SATISFIED;
            status.message = format!(
                "CRD installed alongside other CSV(s): {}",
                others.join(", ")
            );
            outcome.met = false;
            outcome.statuses.push(status);
            continue;
        }
        let served = crd
            .versions
            .iter()
            .find(|(name, _)| *name == description.version)
            .is_some_and(|(_, served)| *served);
        if !served {
            status.status = RequirementStatusReason::NOT_PRESENT;
            status.message = "CRD version not served".to_owned();
            outcome.met = false;
            outcome.statuses.push(status);
            continue;
        }
        if crd.established && crd.names_accepted {
            status.status = RequirementStatusReason::PRESENT;
            status.message = "CRD is present and Established condition is true".to_owned();
            status.uuid = crd.uid.clone();
        } else {
            status.status = RequirementStatusReason::PRESENT_NOT_AVAILABLE;
            status.message =
                "CRD is present but the Established condition is False (not available)".to_owned();
            outcome.met = false;
        }
        outcome.statuses.push(status);
    }
}

/// The CSVs a CRD was installed alongside that are ancestors of `csv` in its
/// replacement chain, sorted; empty when the CRD also names `csv` itself
/// (upstream's `othersInstalledAlongside`).
fn others_installed_alongside(
    crd: &CrdFacts,
    csv: &ClusterServiceVersion,
    namespace_csvs: &[ClusterServiceVersion],
) -> Vec<String> {
    let namespace = csv.metadata.namespace.as_deref().unwrap_or_default();
    let name = csv.metadata.name.as_deref().unwrap_or_default();
    let mut alongside: BTreeMap<&str, &ClusterServiceVersion> = BTreeMap::new();
    for (ref_namespace, ref_name) in &crd.installed_alongside {
        if ref_namespace != namespace {
            continue;
        }
        if ref_name == name {
            return Vec::new();
        }
        if let Some(other) = namespace_csvs
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(ref_name.as_str()) && !is_copied(c))
        {
            alongside.insert(ref_name, other);
        }
    }

    let mut replacees: BTreeMap<String, String> = BTreeMap::new();
    for (current, other) in &alongside {
        if let Some(replaces) = other.spec.replaces.as_deref()
            && alongside.contains_key(replaces)
        {
            replacees.insert((*current).to_owned(), replaces.to_owned());
        }
    }
    if let Some(replaces) = csv.spec.replaces.as_deref().filter(|r| !r.is_empty()) {
        replacees.insert(name.to_owned(), replaces.to_owned());
    }

    let mut ancestors = BTreeSet::new();
    let mut current = name.to_owned();
    while !current.is_empty() {
        let replacee = replacees.remove(&current);
        if let Some(replacee) = &replacee {
            ancestors.insert(replacee.clone());
        }
        current = replacee.unwrap_or_default();
    }
    alongside
        .keys()
        .filter(|other| ancestors.contains(**other) && **other != name)
        .map(|other| (*other).to_owned())
        .collect()
}

fn api_service_name(description: &ApiServiceDescription) -> String {
    format!("{}.{}", description.version, description.group)
}

fn api_services(
    csv: &ClusterServiceVersion,
    facts: &RequirementFacts,
    outcome: &mut RequirementsOutcome,
) {
    let owned: BTreeMap<String, &ApiServiceDescription> = csv
        .spec
        .owned_api_services()
        .iter()
        .map(|d| (api_service_name(d), d))
        .collect();
    let required: BTreeMap<String, &ApiServiceDescription> = csv
        .spec
        .required_api_services()
        .iter()
        .map(|d| (api_service_name(d), d))
        .filter(|(name, _)| !owned.contains_key(name))
        .collect();

    for (name, description) in &required {
        let mut status = requirement("apiregistration.k8s.io", "v1", "APIService", name);
        let gvk = GroupVersionKind {
            group: description.group.clone(),
            version: description.version.clone(),
            kind: description.kind.clone(),
        };
        match facts.api_services.get(name) {
            Some(api_service) if facts.discovered.contains(&gvk) && api_service.available => {
                status.status = RequirementStatusReason::PRESENT;
                status.uuid = api_service.uid.clone();
            }
            _ => {
                status.status = RequirementStatusReason::NOT_PRESENT;
                outcome.met = false;
            }
        }
        outcome.statuses.push(status);
    }

    let deployments: BTreeSet<&str> = csv
        .spec
        .install
        .spec
        .deployments
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    for (name, description) in &owned {
        let mut status = requirement("apiregistration.k8s.io", "v1", "APIService", name);
        let deployment = description.deployment_name.as_deref().unwrap_or_default();
        if deployments.contains(deployment) {
            status.status = RequirementStatusReason::DEPLOYMENT_FOUND;
        } else {
            status.status = RequirementStatusReason::DEPLOYMENT_NOT_FOUND;
            outcome.met = false;
        }
        outcome.statuses.push(status);
    }
}

fn native_apis(
    csv: &ClusterServiceVersion,
    facts: &RequirementFacts,
    outcome: &mut RequirementsOutcome,
) {
    for gvk in csv.spec.native_apis.iter().flatten() {
        let name = format!("{}.{}", gvk.version, gvk.group);
        let mut status = requirement(&gvk.group, &gvk.version, &gvk.kind, &name);
        if facts.discovered.contains(gvk) {
            status.status = RequirementStatusReason::PRESENT;
            status.message = "Native API exists".to_owned();
        } else {
            status.status = RequirementStatusReason::NOT_PRESENT;
            status.message = "Native API does not exist".to_owned();
            outcome.met = false;
        }
        outcome.statuses.push(status);
    }
}

fn permissions(
    csv: &ClusterServiceVersion,
    facts: &RequirementFacts,
    outcome: &mut RequirementsOutcome,
) {
    let strategy = &csv.spec.install.spec;
    let mut by_account: BTreeMap<String, RequirementStatus> = BTreeMap::new();
    let scoped = [
        (
            RuleScope::Namespaced,
            strategy.permissions.as_deref().unwrap_or_default(),
        ),
        (
            RuleScope::Cluster,
            strategy.cluster_permissions.as_deref().unwrap_or_default(),
        ),
    ];
    for (scope, permissions) in scoped {
        for permission in permissions {
            let account = &permission.service_account_name;
            let mut status = by_account
                .remove(account)
                .unwrap_or_else(|| RequirementStatus {
                    status: RequirementStatusReason::PRESENT,
                    ..requirement("", "v1", "ServiceAccount", account)
                });
            match facts.service_accounts.get(account) {
                None => {
                    outcome.met = false;
                    status.status = RequirementStatusReason::NOT_PRESENT;
                    status.message = "Service account does not exist".to_owned();
                }
                Some(facts_of_account) if facts_of_account.owned_by_other_csv => {
                    outcome.met = false;
                    status.status = RequirementStatusReason::PRESENT_NOT_SATISFIED;
                    status.message =
                        "Service account is owned by another ClusterServiceVersion".to_owned();
                }
                Some(_) => {
                    for rule in &permission.rules {
                        let unsatisfied = facts.unsatisfied_rules.iter().any(|u| {
                            u.scope == scope && u.service_account == *account && u.rule == *rule
                        });
                        let dependent = DependentStatus {
                            group: "rbac.authorization.k8s.io".to_owned(),
                            version: "v1".to_owned(),
                            kind: "PolicyRule".to_owned(),
                            status: if unsatisfied {
                                RequirementStatusReason::NOT_SATISFIED
                            } else {
                                RequirementStatusReason::SATISFIED
                            },
                            uuid: None,
                            message: Some(format!(
                                "{} rule:{}",
                                scope.as_str(),
                                go_json::policy_rule_string(rule)
                            )),
                        };
                        if unsatisfied {
                            outcome.met = false;
                            status.status = RequirementStatusReason::PRESENT_NOT_SATISFIED;
                            status.message =
                                "Policy rule not satisfied for service account".to_owned();
                        }
                        status
                            .dependents
                            .get_or_insert_with(Vec::new)
                            .push(dependent);
                    }
                }
            }
            by_account.insert(account.clone(), status);
        }
    }
    outcome.statuses.extend(by_account.into_values());
}

/// A `MAJOR.MINOR.PATCH[-pre][+meta]` version as coreos/go-semver reads it
/// (all three numbers required), for the minKubeVersion check.
#[derive(Clone, Debug, PartialEq, Eq)]
struct DottedTri {
    numbers: [i64; 3],
    pre_release: String,
    metadata: String,
}

impl DottedTri {
    fn parse(text: &str) -> Option<Self> {
        let valid_identifier = |id: &str| {
            id.is_empty()
                || id.split('.').all(|part| {
                    !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                })
        };
        let (rest, metadata) = text.split_once('+').unwrap_or((text, ""));
        let (core, pre_release) = rest.split_once('-').unwrap_or((rest, ""));
        if !valid_identifier(pre_release) || !valid_identifier(metadata) {
            return None;
        }
        let mut parts = core.splitn(3, '.');
        let mut numbers = [0i64; 3];
        for number in &mut numbers {
            *number = parts.next()?.parse().ok()?;
        }
        Some(Self {
            numbers,
            pre_release: pre_release.to_owned(),
            metadata: metadata.to_owned(),
        })
    }

    /// Semver precedence: numbers, then a release beats a pre-release, then
    /// pre-release identifiers (numeric ones numerically and below textual
    /// ones). Metadata does not count.
    fn cmp_precedence(&self, other: &Self) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        self.numbers.cmp(&other.numbers).then_with(|| {
            match (self.pre_release.is_empty(), other.pre_release.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => {
                    let mut left = self.pre_release.split('.');
                    let mut right = other.pre_release.split('.');
                    loop {
                        match (left.next(), right.next()) {
                            (None, None) => return Ordering::Equal,
                            (None, Some(_)) => return Ordering::Less,
                            (Some(_), None) => return Ordering::Greater,
                            (Some(a), Some(b)) => {
                                let order = match (a.parse::<u64>(), b.parse::<u64>()) {
                                    (Ok(x), Ok(y)) => x.cmp(&y),
                                    (Ok(_), Err(_)) => Ordering::Less,
                                    (Err(_), Ok(_)) => Ordering::Greater,
                                    (Err(_), Err(_)) => a.cmp(b),
                                };
                                if order != Ordering::Equal {
                                    return order;
                                }
                            }
                        }
                    }
                }
            }
        })
    }
}

impl std::fmt::Display for DottedTri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [major, minor, patch] = self.numbers;
        write!(f, "{major}.{minor}.{patch}")?;
        if !self.pre_release.is_empty() {
            write!(f, "-{}", self.pre_release)?;
        }
        if !self.metadata.is_empty() {
            write!(f, "+{}", self.metadata)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_tri_reads_like_go_semver() {
        let v = DottedTri::parse("1.30.2+k3s1").expect("valid");
        assert_eq!(v.to_string(), "1.30.2+k3s1");
        assert!(DottedTri::parse("1.30").is_none());
        assert!(DottedTri::parse("1.x.0").is_none());
        let rc = DottedTri::parse("1.30.0-rc.1").expect("valid");
        let release = DottedTri::parse("1.30.0").expect("valid");
        assert_eq!(rc.cmp_precedence(&release), std::cmp::Ordering::Less);
        assert_eq!(
            DottedTri::parse("1.30.0-rc.10")
                .expect("valid")
                .cmp_precedence(&DottedTri::parse("1.30.0-rc.9").expect("valid")),
            std::cmp::Ordering::Greater
        );
    }
}
