//! The default sources: what the `--default-sources` file says, checked, and
//! the CatalogSource spec each one stands for.
//!
//! Upstream reads one CatalogSource manifest per file from a directory
//! (`pkg/defaults/defaults.go`); we read one list, in the shape the Helm
//! chart's `defaultCatalogs` value has, because a ConfigMap key holds it.

use std::collections::BTreeSet;

use olm_api::catalog_source::{
    CatalogSourceSpec, GrpcPodConfig, RegistryPoll, SourceType, UpdateStrategy,
};
use serde::{Deserialize, Serialize};

/// The annotation upstream puts on every default CatalogSource it manages
/// (`defaultCatsrcAnnotationKey` in operator-marketplace
/// `pkg/defaults/defaults.go`).
pub const MANAGED_BY_ANNOTATION: &str = "operatorframework.io/managed-by";

/// The value of [`MANAGED_BY_ANNOTATION`] on CatalogSources this service
/// manages (`defaultCatsrcAnnotationValue` upstream).
pub const MANAGED_BY_VALUE: &str = "marketplace-operator";

/// The longest name a CatalogSource may have (a DNS subdomain); its registry
/// Service and pod are named after it, so we ask for a DNS label.
const MAX_NAME_LENGTH: usize = 63;

/// One default catalog, as the `--default-sources` file lists it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DefaultSource {
    /// The CatalogSource's name, and the name `spec.sources[].name` of the
    /// OperatorHub refers to.
    pub name: String,
    /// The catalog image.
    pub image: String,
    /// The name shown to users (`spec.displayName`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Who publishes the catalog (`spec.publisher`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher: Option<String>,
    /// Preference among catalogs (`spec.priority`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// How often the image is polled (`spec.updateStrategy.registryPoll.interval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval: Option<String>,
    /// `spec.grpcPodConfig`, passed through as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_pod_config: Option<serde_json::Value>,
}

/// Why the default sources cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SourcesError {
    /// The text is neither YAML nor JSON of a list of sources.
    #[error("the default sources are not a YAML or JSON list of sources")]
    Parse {
        /// The parser's complaint.
        #[source]
        source: serde_yaml_ng::Error,
    },
    /// A source breaks a rule.
    #[error("default source {index} ({name:?}): {reason}")]
    Invalid {
        /// Its position in the list, from 0.
        index: usize,
        /// Its name as given.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

/// Reads the default sources from YAML or JSON text (a list; empty text or
/// `null` is no sources) and checks them: each has a name that is a DNS label
/// and an image, names are unique, and `grpcPodConfig` is one OLM reads.
pub fn parse_default_sources(text: &str) -> Result<Vec<DefaultSource>, SourcesError> {
    let sources: Option<Vec<DefaultSource>> =
        serde_yaml_ng::from_str(text).map_err(|source| SourcesError::Parse { source })?;
    let sources = sources.unwrap_or_default();
    let mut seen = BTreeSet::new();
    for (index, source) in sources.iter().enumerate() {
        let invalid = |reason: String| SourcesError::Invalid {
            index,
            name: source.name.clone(),
            reason,
        };
        if !is_dns_label(&source.name) {
            return Err(invalid(format!(
                "the name must be a DNS label (lowercase letters, digits and '-', at most {MAX_NAME_LENGTH} characters)"
            )));
        }
        if source.image.trim().is_empty() {
            return Err(invalid("the image must not be empty".to_owned()));
        }
        if !seen.insert(source.name.as_str()) {
            return Err(invalid("the name is listed twice".to_owned()));
        }
        if let Err(error) = source.grpc_pod_config() {
            return Err(invalid(format!("grpcPodConfig is not valid: {error}")));
        }
    }
    Ok(sources)
}

fn is_dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_NAME_LENGTH
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first() != Some(&b'-')
        && bytes.last() != Some(&b'-')
}

impl DefaultSource {
    /// The spec of the CatalogSource this source stands for: a `grpc`
    /// catalog of the image.
    pub fn desired_spec(&self) -> CatalogSourceSpec {
        CatalogSourceSpec {
            source_type: SourceType::GRPC,
            image: Some(self.image.clone()),
            display_name: self.display_name.clone(),
            publisher: self.publisher.clone(),
            priority: self.priority,
            update_strategy: self.poll_interval.as_ref().map(|interval| UpdateStrategy {
                registry_poll: Some(RegistryPoll {
                    interval: Some(interval.clone()),
                }),
            }),
            // Checked by `parse_default_sources`.
            grpc_pod_config: self.grpc_pod_config().ok().flatten(),
            ..CatalogSourceSpec::default()
        }
    }

    /// `grpcPodConfig` read as OLM reads it, so that what we write is what
    /// we later compare with (fields OLM does not know would be pruned by
    /// the API server and look like drift forever).
    fn grpc_pod_config(&self) -> Result<Option<GrpcPodConfig>, serde_json::Error> {
        self.grpc_pod_config
            .clone()
            .filter(|value| !value.is_null())
            .map(serde_json::from_value)
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_chart_shape_parses_into_a_grpc_spec() {
        let sources = parse_default_sources(
            "- name: fixture-community\n  image: quay.io/fixture/catalog:v1\n  displayName: Fixture Operators\n  publisher: Fixture Inc\n  priority: -100\n  pollInterval: 60m\n  grpcPodConfig:\n    nodeSelector: {kubernetes.io/os: linux}\n    securityContextConfig: restricted\n",
        )
        .unwrap();
        assert_eq!(sources.len(), 1);
        let spec = sources[0].desired_spec();
        assert_eq!(spec.source_type, SourceType::GRPC);
        assert_eq!(spec.image.as_deref(), Some("quay.io/fixture/catalog:v1"));
        assert_eq!(spec.display_name.as_deref(), Some("Fixture Operators"));
        assert_eq!(spec.publisher.as_deref(), Some("Fixture Inc"));
        assert_eq!(spec.priority, Some(-100));
        assert_eq!(
            spec.update_strategy
                .and_then(|s| s.registry_poll)
                .and_then(|p| p.interval)
                .as_deref(),
            Some("60m")
        );
        let pod = spec.grpc_pod_config.unwrap();
        assert_eq!(pod.node_selector["kubernetes.io/os"], "linux");
    }

    #[test]
    fn json_parses_too_and_empty_text_is_no_sources() {
        let sources =
            parse_default_sources(r#"[{"name": "fixture-a", "image": "example.com/a:1"}]"#)
                .unwrap();
        assert_eq!(sources[0].name, "fixture-a");
        assert!(parse_default_sources("").unwrap().is_empty());
        assert!(parse_default_sources("null").unwrap().is_empty());
        assert!(parse_default_sources("[]").unwrap().is_empty());
    }

    #[test]
    fn broken_sources_are_refused_with_their_position() {
        let cases = [
            ("- {name: Bad_Name, image: a}", "DNS label"),
            ("- {name: '', image: a}", "DNS label"),
            ("- {name: -a, image: a}", "DNS label"),
            ("- {name: a, image: ' '}", "image must not be empty"),
            (
                "- {name: a, image: x}\n- {name: a, image: y}",
                "listed twice",
            ),
            (
                "- {name: a, image: x, grpcPodConfig: {nodeSelector: 3}}",
                "grpcPodConfig",
            ),
        ];
        for (text, expected) in cases {
            let error = parse_default_sources(text).unwrap_err().to_string();
            assert!(error.contains(expected), "{text}: {error}");
        }
        assert!(matches!(
            parse_default_sources("{name: a}"),
            Err(SourcesError::Parse { .. })
        ));
    }
}
