//! The APIs a CSV provides and requires ("operator surface"), the
//! `olm.api.<hash>` labels OLM puts on CSVs for them, and the
//! `Kind.version.group` list format of the OperatorGroup annotation
//! `olm.providedAPIs`.
//!
//! Upstream: `pkg/controller/operators/olm/labeler.go` (`apiSurfaceOfCSV`,
//! `LabelSetsFor`) and `pkg/controller/registry/resolver/cache/operators.go`
//! (`APISet`, `GVKStringToProvidedAPISet`). Keys here never carry the plural:
//! upstream strips it (`StripPlural`) before every comparison.

use std::collections::{BTreeMap, BTreeSet};

use olm_api::{csv::ClusterServiceVersionSpec, labels};

use super::Error;

/// One API, identified by group, version and kind.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ApiKey {
    /// API group; empty for the core group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
}

impl ApiKey {
    /// An API key from its parts.
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
        }
    }

    /// `Kind.version.group`, the form used in `olm.providedAPIs` and hashed
    /// into label keys.
    pub fn gvk_string(&self) -> String {
        format!("{}.{}.{}", self.kind, self.version, self.group)
    }

    /// The `olm.api.<fnv64a hex>` label key for this API.
    pub fn label_key(&self) -> String {
        labels::api_label_key(&self.kind, &self.version, &self.group)
    }

    /// Parses `Kind.version.group` as Kubernetes' `schema.ParseKindArg` does:
    /// at least two dots are needed; the group is everything after the second
    /// dot (it may itself contain dots, or be empty for the core group).
    pub fn parse(text: &str) -> Option<Self> {
        if text.matches('.').count() < 2 {
            return None;
        }
        let mut parts = text.splitn(3, '.');
        let kind = parts.next()?;
        let version = parts.next()?;
        let group = parts.next()?;
        Some(Self::new(group, version, kind))
    }
}

/// A set of APIs.
pub type ApiSet = BTreeSet<ApiKey>;

/// What a CSV provides (owned CRDs and APIServices) and requires (required CRDs
/// and APIServices).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiSurface {
    /// APIs the operator serves.
    pub provided: ApiSet,
    /// APIs the operator needs from others.
    pub required: ApiSet,
}

/// The API surface of a CSV.
///
/// A CRD description's group is the part of its `name` after the first dot;
/// a name without a dot is an error (`error parsing crd name: <name>`), which
/// upstream treats as "the CSV needs changes" and stops the sync.
pub fn api_surface(spec: &ClusterServiceVersionSpec) -> Result<ApiSurface, Error> {
    let crd_key = |name: &str, version: &str, kind: &str| -> Result<ApiKey, Error> {
        let (_plural, group) = name.split_once('.').ok_or_else(|| Error::CrdName {
            name: name.to_owned(),
        })?;
        Ok(ApiKey::new(group, version, kind))
    };
    let mut surface = ApiSurface::default();
    for crd in spec.owned_crds() {
        surface
            .provided
            .insert(crd_key(&crd.name, &crd.version, &crd.kind)?);
    }
    for api in spec.owned_api_services() {
        surface
            .provided
            .insert(ApiKey::new(&api.group, &api.version, &api.kind));
    }
    for crd in spec.required_crds() {
        surface
            .required
            .insert(crd_key(&crd.name, &crd.version, &crd.kind)?);
    }
    for api in spec.required_api_services() {
        surface
            .required
            .insert(ApiKey::new(&api.group, &api.version, &api.kind));
    }
    Ok(surface)
}

/// The `olm.api.<hash>` labels for a surface: `provided` for provided APIs,
/// `required` for required ones (an API that is both ends up `required`, as
/// upstream writes the required set second).
pub fn api_labels(surface: &ApiSurface) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    for api in &surface.provided {
        labels.insert(api.label_key(), labels::API_PROVIDED.to_owned());
    }
    for api in &surface.required {
        labels.insert(api.label_key(), labels::API_REQUIRED.to_owned());
    }
    labels
}

/// The CSV's labels with the API labels merged in, if that changes anything.
///
/// Like upstream's `ensureLabels`, labels are only added or overwritten, never
/// removed: a label for an API the CSV stopped providing stays.
pub fn merge_api_labels(
    existing: Option<&BTreeMap<String, String>>,
    surface: &ApiSurface,
) -> Option<BTreeMap<String, String>> {
    let mut merged = existing.cloned().unwrap_or_default();
    let mut changed = false;
    for (key, value) in api_labels(surface) {
        if merged.get(&key) != Some(&value) {
            merged.insert(key, value);
            changed = true;
        }
    }
    changed.then_some(merged)
}

/// The `olm.providedAPIs` form of a set: `Kind.version.group` strings sorted by
/// byte order (Go's `sort.Strings`) and joined with `,`. The empty set is `""`.
pub fn format_api_set(set: &ApiSet) -> String {
    let mut names: Vec<String> = set.iter().map(ApiKey::gvk_string).collect();
    names.sort();
    names.join(",")
}

/// Reads an `olm.providedAPIs` value: spaces are removed, entries are split on
/// `,`, and entries that are not `Kind.version.group` are skipped.
pub fn parse_api_set(text: &str) -> ApiSet {
    text.replace(' ', "")
        .split(',')
        .filter_map(ApiKey::parse)
        .collect()
}

#[cfg(test)]
mod tests {
    use olm_api::csv::{
        ApiServiceDefinitions, ApiServiceDescription, CrdDescription, CustomResourceDefinitions,
    };

    use super::*;

    fn crd(name: &str, version: &str, kind: &str) -> CrdDescription {
        CrdDescription {
            name: name.into(),
            version: version.into(),
            kind: kind.into(),
            ..Default::default()
        }
    }

    #[test]
    fn surface_reads_owned_and_required_apis() {
        let spec = ClusterServiceVersionSpec {
            customresourcedefinitions: Some(CustomResourceDefinitions {
                owned: Some(vec![crd("widgets.gadgets.example.test", "v1", "Widget")]),
                required: Some(vec![crd("cogs.gears.example.test", "v2", "Cog")]),
            }),
            apiservicedefinitions: Some(ApiServiceDefinitions {
                owned: Some(vec![ApiServiceDescription {
                    name: "sprockets".into(),
                    group: "sprockets.example.test".into(),
                    version: "v1alpha1".into(),
                    kind: "Sprocket".into(),
                    ..Default::default()
                }]),
                required: None,
            }),
            ..Default::default()
        };
        let surface = api_surface(&spec).expect("valid names");
        assert_eq!(
            format_api_set(&surface.provided),
            "Sprocket.v1alpha1.sprockets.example.test,Widget.v1.gadgets.example.test"
        );
        assert_eq!(
            format_api_set(&surface.required),
            "Cog.v2.gears.example.test"
        );
        let labels = api_labels(&surface);
        assert_eq!(
            labels.get(&ApiKey::new("gears.example.test", "v2", "Cog").label_key()),
            Some(&"required".to_owned())
        );
    }

    #[test]
    fn crd_name_without_group_is_an_error() {
        let spec = ClusterServiceVersionSpec {
            customresourcedefinitions: Some(CustomResourceDefinitions {
                owned: Some(vec![crd("widgets", "v1", "Widget")]),
                required: None,
            }),
            ..Default::default()
        };
        let err = api_surface(&spec).expect_err("no group");
        assert_eq!(err.to_string(), "error parsing crd name: widgets");
    }

    #[test]
    fn provided_apis_annotation_parses_like_parse_kind_arg() {
        let set = parse_api_set("Widget.v1.gadgets.example.test, Pod.v1., bogus,Thing.v1");
        let names: Vec<String> = set.iter().map(ApiKey::gvk_string).collect();
        assert_eq!(names, ["Pod.v1.", "Widget.v1.gadgets.example.test"]);
        assert!(parse_api_set("").is_empty());
    }

    #[test]
    fn labels_merge_only_when_something_changes() {
        let surface = ApiSurface {
            provided: [ApiKey::new("gadgets.example.test", "v1", "Widget")].into(),
            required: ApiSet::new(),
        };
        let merged = merge_api_labels(None, &surface).expect("adds the label");
        assert_eq!(merge_api_labels(Some(&merged), &surface), None);
    }
}
