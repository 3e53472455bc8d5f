//! The OperatorHub rules: which default sources are enabled, what to do to
//! the CatalogSources in the marketplace namespace, and what
//! `status.sources` says.
//!
//! Facts from upstream operator-marketplace:
//! - `pkg/operatorhub/operatorhub.go` (`Set`): every default starts enabled;
//!   `disableAllDefaultSources` disables them all; each `spec.sources[]`
//!   entry then sets its own `disabled`, overriding the former.
//! - `pkg/defaults/catsrcHelpers.go` (`processCatsrc`, `ensureCatsrcPresent`):
//!   a disabled source's CatalogSource is deleted only when it carries the
//!   managed-by annotation; an enabled one is created when absent and
//!   otherwise replaced (spec and annotation) unless it is annotated and its
//!   spec matches. So upstream *adopts* a same-named CatalogSource without
//!   the annotation; [`Inputs::adopt_unmanaged`] keeps that behaviour or
//!   refuses, leaving the user's catalog alone and reporting an error.
//! - `pkg/operatorhub/handler.go` (`updateStatus`): one status entry per
//!   name in the configuration (defaults and `spec.sources` names), with the
//!   effective `disabled`, `Success` or `Error` and the error's message; a
//!   name that is no default gets `Error` with the message
//!   [`NOT_A_DEFAULT_MESSAGE`]. Names no default has are never acted on.

use std::collections::BTreeMap;

use olm_api::{
    catalog_source::CatalogSourceSpec,
    operator_hub::{HubSourceStatus, OperatorHubSpec},
};

use super::{
    compare::specs_match,
    sources::{DefaultSource, MANAGED_BY_ANNOTATION, MANAGED_BY_VALUE},
};

/// `status.sources[].status` when the source is as configured.
pub const STATUS_SUCCESS: &str = "Success";
/// `status.sources[].status` when it is not.
pub const STATUS_ERROR: &str = "Error";
/// Upstream's message for a `spec.sources` name that is no default source.
pub const NOT_A_DEFAULT_MESSAGE: &str = "Not present in the default definitions";

/// A CatalogSource in the marketplace namespace, as the rules need it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObservedCatalog {
    /// Its name.
    pub name: String,
    /// Its annotations.
    pub annotations: BTreeMap<String, String>,
    /// Its spec.
    pub spec: CatalogSourceSpec,
    /// Whether it is being deleted (`metadata.deletionTimestamp` is set).
    pub deleting: bool,
}

impl ObservedCatalog {
    /// Whether it carries `operatorframework.io/managed-by: marketplace-operator`.
    pub fn is_managed(&self) -> bool {
        self.annotations
            .get(MANAGED_BY_ANNOTATION)
            .map(String::as_str)
            == Some(MANAGED_BY_VALUE)
    }

    /// Whether catalog-operator's promotion guard covers it
    /// (`olm.promotionGuard: "true"`), as it must on every default catalog.
    pub fn is_guarded(&self) -> bool {
        self.annotations
            .get(olm_api::labels::PROMOTION_GUARD)
            .is_some_and(|value| value == PROMOTION_GUARD_VALUE)
    }
}

/// The value of `olm.promotionGuard` on the default catalogs: each switch to
/// new content goes through catalog-operator's promotion guard.
pub const PROMOTION_GUARD_VALUE: &str = "true";

/// Everything one decision reads.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    /// The configured default sources.
    pub defaults: &'a [DefaultSource],
    /// The OperatorHub's spec.
    pub hub: &'a OperatorHubSpec,
    /// The CatalogSources in the marketplace namespace.
    pub observed: &'a [ObservedCatalog],
    /// Take over an enabled default's same-named CatalogSource that lacks the
    /// managed-by annotation, as upstream does (`true`), or leave it alone
    /// and report an error (`false`).
    pub adopt_unmanaged: bool,
}

/// One write to a CatalogSource.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Create it with the managed-by and promotion-guard annotations and
    /// this spec.
    Create {
        /// Its name.
        name: String,
        /// Its spec.
        spec: CatalogSourceSpec,
    },
    /// Replace its spec with this one and set the managed-by and
    /// promotion-guard annotations.
    Update {
        /// Its name.
        name: String,
        /// Its spec.
        spec: CatalogSourceSpec,
    },
    /// Delete it (it is managed and its source is disabled).
    Delete {
        /// Its name.
        name: String,
    },
}

impl Action {
    /// The CatalogSource it writes.
    pub fn name(&self) -> &str {
        match self {
            Self::Create { name, .. } | Self::Update { name, .. } | Self::Delete { name } => name,
        }
    }

    /// A short verb for logs, events and metrics: `create`, `update`, `delete`.
    pub fn verb(&self) -> &'static str {
        match self {
            Self::Create { .. } => "create",
            Self::Update { .. } => "update",
            Self::Delete { .. } => "delete",
        }
    }
}

/// What is known about one configured source before any write.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceOutcome {
    /// The source's name.
    pub name: String,
    /// Whether it is disabled, after `disableAllDefaultSources` and its own entry.
    pub disabled: bool,
    /// `None` when it is fine (once its action, if any, succeeds); else why not.
    pub error: Option<String>,
}

/// The decision: writes to make, and each configured source's outcome,
/// sorted by name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// The writes, in the order of the sources.
    pub actions: Vec<Action>,
    /// One entry per default source and per name in `spec.sources`.
    pub sources: Vec<SourceOutcome>,
}

/// Which sources are disabled: every default as `disableAllDefaultSources`
/// says, then each `spec.sources` entry as it says (an entry without
/// `disabled` enables its source). Includes names that are no default.
pub fn effective_config(
    defaults: &[DefaultSource],
    hub: &OperatorHubSpec,
) -> BTreeMap<String, bool> {
    let disable_all = hub.disable_all_default_sources.unwrap_or(false);
    let mut config: BTreeMap<String, bool> = defaults
        .iter()
        .map(|source| (source.name.clone(), disable_all))
        .collect();
    for source in &hub.sources {
        if let Some(name) = source.name.as_deref().filter(|name| !name.is_empty()) {
            config.insert(name.to_owned(), source.disabled.unwrap_or(false));
        }
    }
    config
}

/// Decides the writes and outcomes; see the module documentation.
pub fn plan(inputs: Inputs<'_>) -> Plan {
    let observed: BTreeMap<&str, &ObservedCatalog> = inputs
        .observed
        .iter()
        .map(|catalog| (catalog.name.as_str(), catalog))
        .collect();
    let defaults: BTreeMap<&str, &DefaultSource> = inputs
        .defaults
        .iter()
        .map(|source| (source.name.as_str(), source))
        .collect();
    let mut plan = Plan::default();
    for (name, disabled) in effective_config(inputs.defaults, inputs.hub) {
        let Some(source) = defaults.get(name.as_str()) else {
            plan.sources.push(SourceOutcome {
                name,
                disabled,
                error: Some(NOT_A_DEFAULT_MESSAGE.to_owned()),
            });
            continue;
        };
        let current = observed.get(name.as_str()).copied();
        let (action, error) = if disabled {
            (disable(&name, current), None)
        } else {
            enable(&name, source, current, inputs.adopt_unmanaged)
        };
        plan.actions.extend(action);
        plan.sources.push(SourceOutcome {
            name,
            disabled,
            error,
        });
    }
    plan
}

fn disable(name: &str, current: Option<&ObservedCatalog>) -> Option<Action> {
    // A CatalogSource without the annotation is someone else's: upstream
    // leaves it alone, and so do we.
    current.filter(|c| c.is_managed() && !c.deleting)?;
    Some(Action::Delete {
        name: name.to_owned(),
    })
}

fn enable(
    name: &str,
    source: &DefaultSource,
    current: Option<&ObservedCatalog>,
    adopt_unmanaged: bool,
) -> (Option<Action>, Option<String>) {
    let desired = source.desired_spec();
    let Some(current) = current else {
        return (
            Some(Action::Create {
                name: name.to_owned(),
                spec: desired,
            }),
            None,
        );
    };
    // Being deleted: its deletion event brings us back to create it anew.
    if current.deleting {
        return (None, None);
    }
    if current.is_managed() {
        if current.is_guarded() && specs_match(&desired, &current.spec) {
            return (None, None);
        }
    } else if !adopt_unmanaged {
        return (
            None,
            Some(format!(
                "a CatalogSource named {name} exists without the annotation \
                 {MANAGED_BY_ANNOTATION}: {MANAGED_BY_VALUE}, so the marketplace operator \
                 leaves it alone; delete it to get the default catalog, or disable this \
                 source in the OperatorHub"
            )),
        );
    }
    (
        Some(Action::Update {
            name: name.to_owned(),
            spec: desired,
        }),
        None,
    )
}

/// `status.sources`: the plan's outcomes, with `failures` (the error
/// message of each source whose write failed, by name) turned into `Error`.
pub fn status_sources(plan: &Plan, failures: &BTreeMap<String, String>) -> Vec<HubSourceStatus> {
    plan.sources
        .iter()
        .map(|source| {
            let error = source
                .error
                .clone()
                .or_else(|| failures.get(&source.name).cloned());
            HubSourceStatus {
                name: Some(source.name.clone()),
                disabled: Some(source.disabled),
                status: Some(
                    if error.is_some() {
                        STATUS_ERROR
                    } else {
                        STATUS_SUCCESS
                    }
                    .to_owned(),
                ),
                message: error,
            }
        })
        .collect()
}
