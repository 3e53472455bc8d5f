//! How OLM marks what a ClusterServiceVersion owns, one home for every
//! service: the owner labels (`olm.owner`, `olm.owner.namespace`,
//! `olm.owner.kind`) that cluster-scoped objects carry, and the
//! non-blocking ownerReference namespaced ones carry.
//!
//! Upstream: `OwnerLabel` and `NonBlockingOwner` in
//! `pkg/lib/ownerutil/util.go`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::{csv::ClusterServiceVersion, labels};

/// The kind named by a CSV's owner labels and ownerReferences.
pub const CSV_KIND: &str = "ClusterServiceVersion";

/// The apiVersion of a CSV ownerReference.
pub const CSV_API_VERSION: &str = "operators.coreos.com/v1alpha1";

/// The owner labels of objects a CSV owns: `olm.owner`, `olm.owner.namespace`,
/// `olm.owner.kind=ClusterServiceVersion`.
pub fn owner_labels(csv: &ClusterServiceVersion) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            labels::OWNER.to_owned(),
            csv.metadata.name.clone().unwrap_or_default(),
        ),
        (
            labels::OWNER_NAMESPACE.to_owned(),
            csv.metadata.namespace.clone().unwrap_or_default(),
        ),
        (labels::OWNER_KIND.to_owned(), CSV_KIND.to_owned()),
    ])
}

/// Whether a label set carries exactly this CSV's owner labels.
pub fn has_owner_labels(
    object_labels: Option<&BTreeMap<String, String>>,
    csv: &ClusterServiceVersion,
) -> bool {
    let Some(object_labels) = object_labels else {
        return false;
    };
    owner_labels(csv)
        .iter()
        .all(|(key, value)| object_labels.get(key) == Some(value))
}

/// A non-blocking, non-controller ownerReference to the CSV (upstream's
/// `NonBlockingOwner`). A CSV not yet created has no uid; such a reference
/// must get the uid before it is written (see [`is_csv_reference`]).
pub fn non_blocking_owner(csv: &ClusterServiceVersion) -> OwnerReference {
    OwnerReference {
        api_version: CSV_API_VERSION.to_owned(),
        kind: CSV_KIND.to_owned(),
        name: csv.metadata.name.clone().unwrap_or_default(),
        uid: csv.metadata.uid.clone().unwrap_or_default(),
        block_owner_deletion: Some(false),
        controller: Some(false),
    }
}

/// Whether an ownerReference names a CSV.
pub fn is_csv_reference(reference: &OwnerReference) -> bool {
    reference.kind == CSV_KIND && reference.api_version.starts_with("operators.coreos.com/")
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn csv() -> ClusterServiceVersion {
        ClusterServiceVersion {
            metadata: ObjectMeta {
                name: Some("widget.v1".into()),
                namespace: Some("gadgets".into()),
                uid: Some("u-1".into()),
                ..ObjectMeta::default()
            },
            ..ClusterServiceVersion::default()
        }
    }

    #[test]
    fn owner_labels_name_the_csv_and_are_recognised() {
        let csv = csv();
        let found = owner_labels(&csv);
        assert_eq!(found["olm.owner"], "widget.v1");
        assert_eq!(found["olm.owner.namespace"], "gadgets");
        assert_eq!(found["olm.owner.kind"], "ClusterServiceVersion");
        let mut with_more = found.clone();
        with_more.insert("app".into(), "x".into());
        assert!(has_owner_labels(Some(&with_more), &csv));
        with_more.insert("olm.owner.namespace".into(), "elsewhere".into());
        assert!(!has_owner_labels(Some(&with_more), &csv));
        assert!(!has_owner_labels(None, &csv));
    }

    #[test]
    fn the_owner_reference_never_blocks_deletion() {
        let reference = non_blocking_owner(&csv());
        assert_eq!(reference.uid, "u-1");
        assert_eq!(reference.block_owner_deletion, Some(false));
        assert_eq!(reference.controller, Some(false));
        assert!(is_csv_reference(&reference));
        let mut other = reference.clone();
        other.kind = "Deployment".into();
        assert!(!is_csv_reference(&other));
    }
}
