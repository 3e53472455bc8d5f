//! The one install-identity rule both operators use: which ServiceAccount
//! a namespace's operators are installed as, and when nothing may be
//! installed at all.
#![allow(clippy::unwrap_used)]

use k8s_openapi::api::core::v1::ObjectReference;
use olm_api::{
    install_identity::{
        IdentityUnavailable, impersonation, install_service_account, service_account_reference,
    },
    operator_group::{OperatorGroup, OperatorGroupSpec, OperatorGroupStatus},
};
use proptest::prelude::*;

const HOME: &str = "gadget-system";

/// A group in `namespace` that olm-operator has seen: it manages `HOME`.
fn managing(name: &str) -> OperatorGroup {
    let mut group = OperatorGroup::new(name, OperatorGroupSpec::default());
    group.metadata.namespace = Some(HOME.to_owned());
    group.status = Some(OperatorGroupStatus {
        namespaces: vec![HOME.to_owned()],
        ..OperatorGroupStatus::default()
    });
    group
}

fn sprocket_account() -> ObjectReference {
    service_account_reference(HOME, "sprocket-installer", Some("sa-uid-7"), Some("41"))
}

fn asking_for(mut group: OperatorGroup, account: &str) -> OperatorGroup {
    group.spec.service_account_name = Some(account.to_owned());
    group
}

fn recording(mut group: OperatorGroup, reference: ObjectReference) -> OperatorGroup {
    group
        .status
        .get_or_insert_with(Default::default)
        .service_account_ref = Some(reference);
    group
}

fn identity(groups: &[OperatorGroup]) -> Result<Option<ObjectReference>, String> {
    install_service_account(HOME, groups).map_err(|IdentityUnavailable(message)| message)
}

#[test]
fn one_group_without_an_account_installs_as_olm() {
    assert_eq!(identity(&[managing("gadget-group")]), Ok(None));
}

#[test]
fn a_scoped_group_installs_as_the_account_recorded_in_its_status() {
    let group = recording(
        asking_for(managing("gadget-group"), "sprocket-installer"),
        sprocket_account(),
    );
    assert_eq!(identity(&[group]), Ok(Some(sprocket_account())));
}

#[test]
fn a_scoped_group_whose_account_is_not_found_yet_installs_nothing() {
    assert_eq!(
        identity(&[asking_for(managing("gadget-group"), "sprocket-installer")]),
        Err("please make sure the service account exists. sa=sprocket-installer operatorgroup=gadget-system/gadget-group".to_owned())
    );
}

#[test]
fn a_recorded_account_other_than_the_one_asked_for_is_not_used() {
    // The spec moved to another account and olm-operator has not looked it
    // up yet: neither account is a safe guess.
    let stale = recording(
        asking_for(managing("gadget-group"), "cog-installer"),
        sprocket_account(),
    );
    assert!(identity(&[stale]).unwrap_err().contains("sa=cog-installer"));
}

#[test]
fn no_managing_group_installs_nothing() {
    let none = Err("no operator group found that is managing this namespace".to_owned());
    assert_eq!(identity(&[]), none);
    let mut idle = managing("gadget-group");
    idle.status = None;
    assert_eq!(
        identity(&[idle]),
        none,
        "a group managing nothing is ignored"
    );
    let mut elsewhere = managing("gadget-group");
    elsewhere.metadata.namespace = Some("cog-works".to_owned());
    assert_eq!(
        identity(&[elsewhere]),
        none,
        "other namespaces' groups do not count"
    );
}

#[test]
fn a_second_group_lifts_no_scoping_it_stops_every_install() {
    // The escape this rule closes: a tenant adds an unscoped group beside
    // an admin's scoped one. Neither identity is used.
    let scoped = recording(
        asking_for(managing("admin-group"), "sprocket-installer"),
        sprocket_account(),
    );
    assert_eq!(
        identity(&[scoped, managing("tenant-group")]),
        Err("more than one operator group(s) are managing this namespace count=2".to_owned())
    );
}

#[test]
fn impersonation_is_the_accounts_own_identity() {
    assert_eq!(
        impersonation(&sprocket_account()),
        "system:serviceaccount:gadget-system:sprocket-installer"
    );
}

/// A group of `HOME` or elsewhere, managing or not, scoped or not.
fn any_group() -> impl Strategy<Value = OperatorGroup> {
    (
        0..4u8,
        any::<bool>(),
        any::<bool>(),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(id, at_home, is_managing, scoped)| {
            let mut group = managing(&format!("group-{id}"));
            if !at_home {
                group.metadata.namespace = Some("cog-works".to_owned());
            }
            if !is_managing {
                group.status = None;
            }
            match scoped {
                Some(true) => {
                    recording(asking_for(group, "sprocket-installer"), sprocket_account())
                }
                Some(false) => asking_for(group, "sprocket-installer"),
                None => group,
            }
        })
}

proptest! {
    /// OLM's own identity is granted only by exactly one managing group of
    /// the namespace that names no account; any other outcome is either
    /// that group's recorded account or a refusal.
    #[test]
    fn olms_own_identity_needs_exactly_one_unscoped_managing_group(
        groups in prop::collection::vec(any_group(), 0..6)
    ) {
        let managing: Vec<&OperatorGroup> = groups
            .iter()
            .filter(|g| g.metadata.namespace.as_deref() == Some(HOME))
            .filter(|g| g.status.as_ref().is_some_and(|s| !s.namespaces.is_empty()))
            .collect();
        match identity(&groups) {
            Ok(None) => {
                prop_assert_eq!(managing.len(), 1);
                prop_assert!(managing[0].spec.service_account_name.is_none());
            }
            Ok(Some(reference)) => {
                prop_assert_eq!(managing.len(), 1);
                prop_assert_eq!(reference, sprocket_account());
            }
            Err(_) => prop_assert!(
                managing.len() != 1
                    || managing[0].status.as_ref().unwrap().service_account_ref.is_none()
            ),
        }
    }
}
