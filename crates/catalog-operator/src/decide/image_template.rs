//! The `olm.catalogImageTemplate` annotation: a catalog image reference with
//! `{kube_major_version}`, `{kube_minor_version}` and `{kube_patch_version}`
//! placeholders, filled from the cluster's version so one CatalogSource
//! follows cluster upgrades. Upstream:
//! `pkg/controller/operators/catalogtemplate`.

/// The cluster version the placeholders are filled from (discovery's
/// `/version`, for example major `1`, minor `34`, git version `v1.34.4`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KubeVersion {
    /// `major` from `/version`.
    pub major: String,
    /// `minor` from `/version`, without a trailing `+`.
    pub minor: String,
    /// The patch number from `gitVersion`.
    pub patch: String,
}

impl KubeVersion {
    /// Reads the fields of `/version` (`minor` may carry a `+`, as on
    /// managed clusters; the patch is the third number of `gitVersion`).
    pub fn from_version_info(major: &str, minor: &str, git_version: &str) -> Self {
        let patch = git_version
            .trim_start_matches('v')
            .split(['.', '-', '+'])
            .nth(2)
            .unwrap_or_default()
            .to_owned();
        Self {
            major: major.trim_end_matches('+').to_owned(),
            minor: minor.trim_end_matches('+').to_owned(),
            patch,
        }
    }
}

/// The placeholders upstream knows.
pub const PLACEHOLDERS: [&str; 3] = [
    "{kube_major_version}",
    "{kube_minor_version}",
    "{kube_patch_version}",
];

/// The outcome of resolving a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateOutcome {
    /// Every placeholder was filled and the result is a valid image
    /// reference: write it to `spec.image`.
    Resolved(String),
    /// Something is left unresolved or invalid; the message goes into the
    /// `UnableToResolve` conditions.
    Unresolved(String),
}

/// Fills the placeholders of `template` from `version`.
pub fn resolve(template: &str, version: &KubeVersion) -> TemplateOutcome {
    let values = [&version.major, &version.minor, &version.patch];
    let mut image = template.to_owned();
    let mut missing = Vec::new();
    for (placeholder, value) in PLACEHOLDERS.iter().zip(values) {
        if image.contains(placeholder) {
            if value.is_empty() {
                missing.push(*placeholder);
            } else {
                image = image.replace(placeholder, value);
            }
        }
    }
    if !missing.is_empty() {
        return TemplateOutcome::Unresolved(format!(
            "cannot construct catalog image reference, because variable(s) {} could not be resolved",
            missing.join(", ")
        ));
    }
    if let Some(start) = image.find('{') {
        let unknown = image[start..]
            .split_inclusive('}')
            .next()
            .unwrap_or_default()
            .to_owned();
        return TemplateOutcome::Unresolved(format!(
            "cannot construct catalog image reference, because variable(s) {unknown} could not be resolved"
        ));
    }
    if let Err(error) = olm_catalog::image_reference::validate(&image) {
        return TemplateOutcome::Unresolved(format!(
            "cannot construct catalog image reference, because the resolved value {image:?} is not a valid image reference: {error}"
        ));
    }
    TemplateOutcome::Resolved(image)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v134() -> KubeVersion {
        KubeVersion::from_version_info("1", "34+", "v1.34.4-gke.100")
    }

    #[test]
    fn reads_version_info() {
        assert_eq!(
            v134(),
            KubeVersion {
                major: "1".into(),
                minor: "34".into(),
                patch: "4".into()
            }
        );
    }

    #[test]
    fn resolves_every_placeholder() {
        let outcome = resolve(
            "quay.io/org/catalog:v{kube_major_version}.{kube_minor_version}.{kube_patch_version}",
            &v134(),
        );
        assert_eq!(
            outcome,
            TemplateOutcome::Resolved("quay.io/org/catalog:v1.34.4".into())
        );
    }

    #[test]
    fn unknown_or_unfilled_placeholders_are_reported() {
        let TemplateOutcome::Unresolved(message) = resolve(
            "quay.io/org/catalog:{kube_minor_version}-{flavour}",
            &v134(),
        ) else {
            panic!("an unknown placeholder must not resolve");
        };
        assert!(message.contains("{flavour}"), "{message}");
        let TemplateOutcome::Unresolved(message) = resolve(
            "quay.io/org/catalog:v{kube_patch_version}",
            &KubeVersion::default(),
        ) else {
            panic!("an empty version must not resolve");
        };
        assert!(message.contains("{kube_patch_version}"), "{message}");
    }

    #[test]
    fn an_invalid_result_is_not_written() {
        assert!(matches!(
            resolve("Not A Reference:{kube_major_version}", &v134()),
            TemplateOutcome::Unresolved(_)
        ));
    }
}
