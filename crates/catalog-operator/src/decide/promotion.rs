//! The promotion guard (beyond upstream OLM). Upstream swaps a polled
//! catalog to new content as soon as the new registry pod is ready; a
//! default catalog that briefly pointed at content nobody could pull left
//! clusters with stuck InstallPlans. A guarded catalog (annotation
//! `olm.promotionGuard: "true"`) switches only when the new registry
//! answers and every bundle image it offers is inside the allowed-registries
//! policy; otherwise it keeps serving what it served, and says why in its
//! `PromotionBlocked` condition.

use std::collections::BTreeMap;

use k8s_openapi::{api::core::v1::Pod, apimachinery::pkg::apis::meta::v1::Condition};
use olm_api::{
    catalog_source::{CatalogSource, CatalogSourceConditionReason, CatalogSourceConditionType},
    conditions, labels,
};
use olm_oci::policy::RegistryRule;

/// How many offending bundles a `PromotionBlocked` message names; the rest
/// are counted. Keeps the condition (and the event) readable when a whole
/// catalog moved registry.
pub const LISTED_BUNDLES: usize = 10;

/// Whether the catalog asked for the guard.
pub fn guarded(catalog: &CatalogSource) -> bool {
    catalog
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(labels::PROMOTION_GUARD))
        .is_some_and(|value| value.eq_ignore_ascii_case("true"))
}

/// A bundle that new content offers, as `ListBundles` gives it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct OfferedBundle {
    /// The bundle (CSV) name.
    pub name: String,
    /// The bundle image (`bundlePath`); empty for inline content.
    pub image: String,
}

/// A bundle the policy refuses.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Refusal {
    /// The registry its image is hosted on, or `invalid reference`.
    pub registry: String,
    /// The bundle name.
    pub bundle: String,
    /// The bundle image.
    pub image: String,
}

/// What the registry host of an unparsable image is reported as.
const INVALID_REFERENCE: &str = "invalid reference";

/// The bundles of `offered` whose image the policy refuses, each once,
/// sorted by registry then bundle. Bundles without an image (inline
/// content) pull nothing and pass; an empty policy allows everything.
pub fn refusals(offered: &[OfferedBundle], rules: &[RegistryRule]) -> Vec<Refusal> {
    if rules.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<Refusal> = offered
        .iter()
        .filter(|b| !b.image.is_empty())
        .filter_map(|b| {
            let registry = match olm_oci::Reference::parse(&b.image) {
                Ok(reference) => reference.registry().to_owned(),
                Err(_) => INVALID_REFERENCE.to_owned(),
            };
            let allowed =
                registry != INVALID_REFERENCE && olm_oci::policy::allows(rules, &registry);
            (!allowed).then(|| Refusal {
                registry,
                bundle: b.name.clone(),
                image: b.image.clone(),
            })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The `PromotionBlocked` message for content `content` (an image pinned
/// to its digest) refused for `refused` (non-empty): the registries, and
/// under each the bundles, at most [`LISTED_BUNDLES`] of them.
pub fn refused_message(content: &str, refused: &[Refusal], rules: &[RegistryRule]) -> String {
    let mut by_registry: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for refusal in refused {
        by_registry
            .entry(refusal.registry.as_str())
            .or_default()
            .push(refusal.bundle.as_str());
    }
    let policy = rules
        .iter()
        .map(RegistryRule::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    let mut listed = 0;
    let mut groups = Vec::new();
    for (registry, bundles) in &by_registry {
        let room = LISTED_BUNDLES.saturating_sub(listed);
        let shown: Vec<&str> = bundles.iter().take(room).copied().collect();
        listed += shown.len();
        groups.push(if shown.is_empty() {
            format!("registry {registry}")
        } else {
            format!("registry {registry} ({})", shown.join(", "))
        });
    }
    let more = refused.len() - listed;
    let tail = if more > 0 {
        format!(" and {more} more bundle(s)")
    } else {
        String::new()
    };
    format!(
        "new content {content} was not promoted, the catalog keeps serving its previous content: \
         {} bundle(s) name images outside the allowed-registries policy [{policy}]: {}{tail}",
        refused.len(),
        groups.join("; "),
    )
}

/// The `PromotionBlocked` message for content whose registry pod broke
/// (crash-looped or failed) before it could be checked.
pub fn unhealthy_message(content: &str) -> String {
    format!(
        "new content {content} was not promoted, the catalog keeps serving its previous content: \
         its registry pod failed before it answered health checks"
    )
}

/// The message of a cleared guard.
pub fn promoted_message(content: &str) -> String {
    format!("content {content} passed the promotion guard and is served")
}

/// The content an update pod serves, as a block is keyed: its spec hash and
/// its image (pinned to a digest when the catalog is polled).
pub fn content_key(pod: &Pod) -> (String, String) {
    let hash = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(olm_api::labels::POD_SPEC_HASH))
        .cloned()
        .unwrap_or_default();
    let image = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default();
    (hash, image)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(name: &str, image: &str) -> OfferedBundle {
        OfferedBundle {
            name: name.to_owned(),
            image: image.to_owned(),
        }
    }

    fn rules(list: &[&str]) -> Vec<RegistryRule> {
        list.iter().map(|r| RegistryRule::new(r)).collect()
    }

    #[test]
    fn content_is_keyed_by_spec_hash_and_image() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {labels::POD_SPEC_HASH: "h1"}},
            "spec": {"containers": [{"name": "registry-server", "image": "reg/cat@sha256:ab"}]},
        }))
        .unwrap();
        assert_eq!(
            content_key(&pod),
            ("h1".to_owned(), "reg/cat@sha256:ab".to_owned())
        );
        assert_eq!(content_key(&Pod::default()), (String::new(), String::new()));
    }

    #[test]
    fn guard_is_opt_in_by_annotation() {
        let mut catalog = CatalogSource::new("c", Default::default());
        assert!(!guarded(&catalog));
        for (value, want) in [
            ("true", true),
            ("True", true),
            ("false", false),
            ("", false),
        ] {
            catalog.metadata.annotations = Some(BTreeMap::from([(
                labels::PROMOTION_GUARD.to_owned(),
                value.to_owned(),
            )]));
            assert_eq!(guarded(&catalog), want, "{value:?}");
        }
    }

    #[test]
    fn refusals_follow_the_policy() {
        let offered = [
            bundle("good.v1", "quay.io/ok/bundle:v1"),
            bundle("evil.v2", "evil.example.com/x/bundle:v2"),
            bundle("sub.v1", "mirror.corp.example/x/bundle:v1"),
            bundle("inline.v1", ""),
            bundle("broken.v1", "Not A Reference"),
            // ListBundles repeats a bundle once per channel.
            bundle("evil.v2", "evil.example.com/x/bundle:v2"),
        ];
        let policy = rules(&["quay.io", "*.corp.example"]);
        let found = refusals(&offered, &policy);
        assert_eq!(
            found
                .iter()
                .map(|r| (r.registry.as_str(), r.bundle.as_str()))
                .collect::<Vec<_>>(),
            vec![
                ("evil.example.com", "evil.v2"),
                (INVALID_REFERENCE, "broken.v1"),
            ]
        );
        assert!(refusals(&offered, &[]).is_empty(), "no policy, no refusal");
        assert!(refusals(&[], &policy).is_empty());
    }

    #[test]
    fn the_message_names_registries_and_bundles_within_a_limit() {
        let policy = rules(&["quay.io"]);
        let offered: Vec<_> = (0..LISTED_BUNDLES + 3)
            .map(|i| bundle(&format!("op.v{i:02}"), &format!("evil.io/op/b:{i}")))
            .chain([bundle("other.v1", "bad.example/b:1")])
            .collect();
        let found = refusals(&offered, &policy);
        let message = refused_message("cat@sha256:ab", &found, &policy);
        assert!(message.contains("new content cat@sha256:ab was not promoted"));
        assert!(message.contains("[quay.io]"));
        assert!(
            message.contains("registry bad.example (other.v1)"),
            "{message}"
        );
        assert!(message.contains("registry evil.io (op.v00"), "{message}");
        assert!(message.contains(&format!("{} bundle(s)", LISTED_BUNDLES + 4)));
        assert!(message.ends_with("and 4 more bundle(s)"), "{message}");
        assert!(!message.contains(&format!("op.v{:02}", LISTED_BUNDLES)));

        let one = refused_message("c", &found[..1], &policy);
        assert!(!one.contains("more"), "{one}");
    }
}

/// The promotion guard's last verdict on a catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// This content (pod spec hash, image digest) was refused: it is not
    /// started again until the content changes.
    Blocked {
        /// The refused content, as [`content_key`] names it.
        content: (String, String),
        /// `NewContentUnhealthy` or `BundleRegistryNotAllowed`.
        reason: CatalogSourceConditionReason,
        /// What was refused and why.
        message: String,
    },
    /// This content passed and was promoted.
    Promoted {
        /// The promoted image digest.
        content: String,
    },
}

/// The `PromotionBlocked` condition for the guard's last verdict: `True`
/// while content is refused, `False` once content was promoted after that
/// (a catalog never blocked gets no condition); `None` leaves it as found
/// (no verdict, or nothing to say).
pub fn blocked_condition(found: &[Condition], verdict: Option<&Verdict>) -> Option<Condition> {
    let type_ = CatalogSourceConditionType::PROMOTION_BLOCKED;
    match verdict? {
        Verdict::Blocked {
            reason, message, ..
        } => Some(conditions::metav1(
            type_.as_str(),
            conditions::TRUE,
            reason.as_str(),
            message,
            None,
        )),
        Verdict::Promoted { .. } if !found.iter().any(|c| c.type_ == type_.as_str()) => None,
        Verdict::Promoted { content } => Some(conditions::metav1(
            type_.as_str(),
            conditions::FALSE,
            CatalogSourceConditionReason::CONTENT_PROMOTED.as_str(),
            &promoted_message(content),
            None,
        )),
    }
}
