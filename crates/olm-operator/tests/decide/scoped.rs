//! Scoped installs and the OperatorGroup bookkeeping around them: the
//! group's `serviceAccountRef` and conditions (the identity a CSV is
//! installed with is olm-api's `install_identity`, tested there), and the `olm.operatorgroup.uid/<uid>` namespace labels.

// Helpers of a test module: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use olm_api::{conditions, labels, operator_group::OperatorGroup};
use olm_operator::decide::scoped::{
    MULTIPLE_OPERATOR_GROUPS_MESSAGE, ServiceAccountLookup, group_status_update,
    namespace_group_labels, namespace_label_patch, service_account_reference,
};

use super::fixtures::{GroupFixture, gadget_group, minute};

fn with_account(mut group: OperatorGroup, account: &str) -> OperatorGroup {
    group.spec.service_account_name = Some(account.to_owned());
    group
}

fn sprocket_account() -> ObjectReference {
    service_account_reference(
        "gadget-system",
        "sprocket-installer",
        Some("sa-uid-7"),
        Some("41"),
    )
}

fn with_ref(mut group: OperatorGroup, reference: ObjectReference) -> OperatorGroup {
    group
        .status
        .get_or_insert_with(Default::default)
        .service_account_ref = Some(reference);
    group
}

#[test]
fn group_status_follows_the_service_account_and_the_namespace_as_upstream() {
    let now = minute(3);
    let grouped = || gadget_group().targeting(&["gadget-system"]);
    // (what, group, groups in namespace, lookup, expected ref, expected
    // conditions as (type, reason, message), changed, ref changed)
    type Row = (
        &'static str,
        OperatorGroup,
        usize,
        ServiceAccountLookup,
        Option<ObjectReference>,
        Vec<(&'static str, &'static str, String)>,
        bool,
        bool,
    );
    let rows: Vec<Row> = vec![
        (
            "nothing asked, one group: nothing to write",
            grouped(),
            1,
            ServiceAccountLookup::NotRequested,
            None,
            vec![],
            false,
            false,
        ),
        (
            "two groups in the namespace: MultipleOperatorGroup",
            grouped(),
            2,
            ServiceAccountLookup::NotRequested,
            None,
            vec![(
                "MultipleOperatorGroup",
                "MultipleOperatorGroupsFound",
                MULTIPLE_OPERATOR_GROUPS_MESSAGE.to_owned(),
            )],
            true,
            false,
        ),
        (
            "a missing account: OperatorGroupServiceAccount, no reference",
            with_account(grouped(), "sprocket-installer"),
            1,
            ServiceAccountLookup::NotFound,
            None,
            vec![(
                "OperatorGroupServiceAccount",
                "ServiceAccountNotFound",
                "ServiceAccount sprocket-installer not found".to_owned(),
            )],
            true,
            false,
        ),
        (
            "a found account: its reference",
            with_account(grouped(), "sprocket-installer"),
            1,
            ServiceAccountLookup::Found(sprocket_account()),
            Some(sprocket_account()),
            vec![],
            true,
            true,
        ),
        (
            "the same account found again: nothing to write",
            with_ref(
                with_account(grouped(), "sprocket-installer"),
                sprocket_account(),
            ),
            1,
            ServiceAccountLookup::Found(sprocket_account()),
            Some(sprocket_account()),
            vec![],
            false,
            false,
        ),
        (
            "the name removed: the reference goes",
            with_ref(grouped(), sprocket_account()),
            1,
            ServiceAccountLookup::NotRequested,
            None,
            vec![],
            true,
            true,
        ),
    ];
    for (what, group, count, lookup, reference, expected, changed, ref_changed) in rows {
        let update = group_status_update(&group, count, &lookup, now);
        assert_eq!(update.service_account_ref, reference, "{what}: reference");
        let got: Vec<(&str, &str, String)> = update
            .conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.reason.as_str(), c.message.clone()))
            .collect();
        assert_eq!(got, expected, "{what}: conditions");
        assert!(
            update.conditions.iter().all(|c| c.status == "True"),
            "{what}"
        );
        assert_eq!(update.changed, changed, "{what}: changed");
        assert_eq!(
            update.service_account_ref_changed, ref_changed,
            "{what}: ref changed"
        );
    }
}

#[test]
fn conditions_go_when_their_cause_goes_and_keep_their_time_while_it_stays() {
    let group = with_account(
        gadget_group().targeting(&["gadget-system"]),
        "sprocket-installer",
    );
    let first = group_status_update(&group, 2, &ServiceAccountLookup::NotFound, minute(1));
    let mut observed = group.clone();
    let status = observed.status.get_or_insert_with(Default::default);
    status.conditions = first.conditions.clone();

    let again = group_status_update(&observed, 2, &ServiceAccountLookup::NotFound, minute(9));
    assert!(!again.changed, "the same causes write nothing");
    assert_eq!(
        again.conditions, first.conditions,
        "lastTransitionTime kept"
    );

    let healed = group_status_update(
        &observed,
        1,
        &ServiceAccountLookup::Found(sprocket_account()),
        minute(10),
    );
    assert!(healed.conditions.is_empty(), "both conditions removed");
    assert!(healed.changed && healed.service_account_ref_changed);

    // Upstream keeps a ServiceAccountNotFound condition for good when the
    // name is removed while the account was missing; here it goes.
    let mut dropped = observed.clone();
    dropped.spec.service_account_name = None;
    let update = group_status_update(&dropped, 2, &ServiceAccountLookup::NotRequested, minute(11));
    assert!(conditions::find(&update.conditions, "OperatorGroupServiceAccount").is_none());
    assert!(conditions::find(&update.conditions, "MultipleOperatorGroup").is_some());
}

fn group_with_uid(uid: &str, targets: &[&str]) -> OperatorGroup {
    let mut group = gadget_group().targeting(targets);
    group.metadata.uid = Some(uid.to_owned());
    group
}

#[test]
fn target_namespaces_carry_the_uid_label_of_each_group_targeting_them() {
    let groups = [
        group_with_uid("uid-one", &["cog-works", "gadget-system"]),
        group_with_uid("uid-two", &["cog-works"]),
        group_with_uid("uid-all", &[""]),
    ];
    assert_eq!(
        namespace_group_labels("cog-works", &groups),
        BTreeMap::from([
            (labels::operator_group_uid_label("uid-one"), String::new()),
            (labels::operator_group_uid_label("uid-two"), String::new()),
        ]),
        "a group for all namespaces labels none"
    );
    assert!(namespace_group_labels("sprocket-yard", &groups).is_empty());

    let label = |uid: &str| labels::operator_group_uid_label(uid);
    let current = BTreeMap::from([
        ("team".to_owned(), "gears".to_owned()),
        (label("uid-one"), String::new()),
        (label("uid-gone"), String::new()),
        (label("uid-elsewhere"), String::new()),
    ]);
    let desired = BTreeMap::from([
        (label("uid-one"), String::new()),
        (label("uid-two"), String::new()),
    ]);
    let known = ["uid-one", "uid-two", "uid-gone"];
    assert_eq!(
        namespace_label_patch(Some(&current), &desired, &known, false),
        Some(BTreeMap::from([
            (label("uid-gone"), None),
            (label("uid-two"), Some(String::new())),
        ])),
        "only known groups' labels are removed when not every group is known; others stay"
    );
    assert_eq!(
        namespace_label_patch(Some(&current), &desired, &known, true),
        Some(BTreeMap::from([
            (label("uid-elsewhere"), None),
            (label("uid-gone"), None),
            (label("uid-two"), Some(String::new())),
        ])),
        "a service seeing every group removes every stale label"
    );
    let settled = BTreeMap::from([
        ("team".to_owned(), "gears".to_owned()),
        (label("uid-one"), String::new()),
        (label("uid-two"), String::new()),
    ]);
    assert_eq!(
        namespace_label_patch(Some(&settled), &desired, &known, true),
        None
    );
    assert_eq!(
        namespace_label_patch(None, &BTreeMap::new(), &known, true),
        None
    );
}

fn apply_label_patch(
    current: &BTreeMap<String, String>,
    patch: Option<BTreeMap<String, Option<String>>>,
) -> BTreeMap<String, String> {
    let mut labels = current.clone();
    for (key, value) in patch.into_iter().flatten() {
        match value {
            Some(value) => labels.insert(key, value),
            None => labels.remove(&key),
        };
    }
    labels
}

proptest::proptest! {
    /// Once patched, a namespace carries exactly the desired group labels,
    /// keeps every other label, and needs no further patch.
    #[test]
    fn a_label_patch_reaches_the_desired_group_labels_and_then_nothing_changes(
        uids in proptest::collection::btree_set("[a-d]", 0..4),
        present in proptest::collection::btree_map("[a-d]", proptest::prop_oneof!["", "x"], 0..4),
        others in proptest::collection::btree_map("team|tier|zone", "[a-c]", 0..3),
    ) {
        let label = |uid: &str| labels::operator_group_uid_label(uid);
        let mut current: BTreeMap<String, String> = others.clone();
        current.extend(present.iter().map(|(uid, v)| (label(uid), v.clone())));
        let desired: BTreeMap<String, String> =
            uids.iter().map(|uid| (label(uid), String::new())).collect();
        let patched = apply_label_patch(&current, namespace_label_patch(Some(&current), &desired, &[], true));
        let group_labels: BTreeMap<String, String> = patched
            .iter()
            .filter(|(k, _)| k.starts_with(labels::OPERATOR_GROUP_UID_PREFIX))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        proptest::prop_assert_eq!(&group_labels, &desired);
        for (key, value) in &others {
            proptest::prop_assert_eq!(patched.get(key), Some(value));
        }
        proptest::prop_assert_eq!(namespace_label_patch(Some(&patched), &desired, &[], true), None);
    }
}
