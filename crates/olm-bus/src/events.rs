//! Typed events of the bus: the protobuf messages of
//! `proto/olm/bus/v1/events.proto`, and for each the subject it is published
//! on and the id JetStream deduplicates it by.

use std::time::SystemTime;

use bytes::Bytes;
use prost::Name;

use crate::{
    Error,
    subjects::{self, Subject, SubjectFilter},
};

/// Generated from `proto/olm/bus/v1/events.proto`; see
/// `tests/codegen_fresh.rs` for how to regenerate.
#[allow(missing_docs, unreachable_pub, clippy::all, clippy::pedantic)]
mod generated {
    include!("gen/olm.bus.v1.rs");
}

pub use generated::{
    BundleUnpackRequest, BundleUnpacked, CatalogUpdated, CsvPhaseChanged, InstallPlanPhaseChanged,
    ObjectRef, SubscriptionResolved, bundle_unpacked,
};

/// Largest encoded event the bus publishes or decodes, in bytes. Events are
/// references and short strings; anything larger is a bug or hostile.
pub const MAX_EVENT_BYTES: usize = 64 * 1024;

/// How an event travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Published with core NATS to every subscriber, and kept by the audit
    /// stream. Fire and forget.
    Broadcast,
    /// Published to a JetStream work queue and acknowledged by the stream;
    /// each message is handled by one consumer.
    WorkQueue,
}

/// A typed event of the bus.
///
/// Implemented for every message of `olm.bus.v1` except [`ObjectRef`].
pub trait Event: prost::Message + Name + Default + Clone + Send + Sync + 'static {
    /// The full protobuf name, for example `olm.bus.v1.CsvPhaseChanged`
    /// (the same as [`Name::full_name`], without allocating). Sent in the
    /// [`crate::HEADER_EVENT_TYPE`] header.
    const FULL_NAME: &'static str;

    /// How the event travels.
    const DELIVERY: Delivery;

    /// The subject the event is published on, built from its fields.
    fn subject(&self) -> Result<Subject, Error>;

    /// A filter matching every subject this event type is published on.
    fn all_subjects() -> SubjectFilter;

    /// The id JetStream deduplicates the event by (`Nats-Msg-Id`), or `None`
    /// when the event lacks the UID that would make the id unique. Two
    /// publishers that saw the same change produce the same id.
    fn message_id(&self) -> Option<String>;

    /// The Kubernetes object the event speaks of, for logs.
    fn object(&self) -> Option<&ObjectRef>;
}

/// An event that is a unit of work, consumed from a JetStream work queue.
pub trait WorkRequest: Event {}

/// The current time as a protobuf timestamp, for `occurred_at` fields.
pub fn now() -> prost_types::Timestamp {
    prost_types::Timestamp::from(SystemTime::now())
}

/// Encodes an event, refusing ones larger than [`MAX_EVENT_BYTES`].
pub fn encode<E: Event>(event: &E) -> Result<Bytes, Error> {
    let len = event.encoded_len();
    if len > MAX_EVENT_BYTES {
        return Err(Error::PayloadTooLarge {
            event: E::FULL_NAME,
            len,
            max: MAX_EVENT_BYTES,
        });
    }
    Ok(Bytes::from(event.encode_to_vec()))
}

/// Decodes an event from a payload received from the network. Malformed,
/// truncated or oversized payloads are errors, never panics.
pub fn decode<E: Event>(payload: &[u8]) -> Result<E, Error> {
    if payload.len() > MAX_EVENT_BYTES {
        return Err(Error::PayloadTooLarge {
            event: E::FULL_NAME,
            len: payload.len(),
            max: MAX_EVENT_BYTES,
        });
    }
    E::decode(payload).map_err(|source| Error::Decode {
        event: E::FULL_NAME,
        len: payload.len(),
        source,
    })
}

impl ObjectRef {
    /// A reference to a namespaced object; `uid` and `resource_version` are
    /// set with [`ObjectRef::at`].
    pub fn new(
        api_version: impl Into<String>,
        kind: impl Into<String>,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> ObjectRef {
        ObjectRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            uid: String::new(),
            resource_version: String::new(),
        }
    }

    /// The same reference, pinned to one object (`uid`) at one resource
    /// version.
    pub fn at(mut self, uid: impl Into<String>, resource_version: impl Into<String>) -> ObjectRef {
        self.uid = uid.into();
        self.resource_version = resource_version.into();
        self
    }
}

impl BundleUnpackRequest {
    /// Whether the request's deadline has passed at `now`. A request without
    /// a deadline never expires.
    pub fn is_past_deadline(&self, now: SystemTime) -> bool {
        self.deadline
            .and_then(|deadline| SystemTime::try_from(deadline).ok())
            .is_some_and(|deadline| deadline < now)
    }
}

/// The object an event must carry, or the error naming the missing field.
fn required<'a, E: Event>(
    object: Option<&'a ObjectRef>,
    field: &'static str,
) -> Result<&'a ObjectRef, Error> {
    object.ok_or(Error::MissingField {
        event: E::FULL_NAME,
        field,
    })
}

/// Joins the parts of a dedup id, escaping each so that no part can forge
/// another part or a line break in the header. `None` without a UID: an id
/// that is not unique would make JetStream drop distinct events.
fn dedup_id(kind: &str, uid: &str, parts: &[&str]) -> Option<String> {
    if uid.is_empty() {
        return None;
    }
    let mut id = String::from(kind);
    for part in std::iter::once(&uid).chain(parts) {
        id.push('/');
        id.push_str(&subjects::escape_token("dedup id part", part, usize::MAX).ok()?);
    }
    Some(id)
}

fn all(filter: Result<SubjectFilter, Error>) -> SubjectFilter {
    // Filters without a namespace or digest have no input that could fail.
    filter.unwrap_or_else(|_| unreachable!("a filter without variable tokens is always valid"))
}

impl Event for CatalogUpdated {
    const FULL_NAME: &'static str = "olm.bus.v1.CatalogUpdated";
    const DELIVERY: Delivery = Delivery::Broadcast;

    fn subject(&self) -> Result<Subject, Error> {
        let catalog = required::<Self>(self.catalog.as_ref(), "catalog")?;
        subjects::catalog_updated(&catalog.namespace, &catalog.name)
    }

    fn all_subjects() -> SubjectFilter {
        all(subjects::catalog_updated_filter(None))
    }

    fn message_id(&self) -> Option<String> {
        let catalog = self.catalog.as_ref()?;
        dedup_id(
            "catalog-updated",
            &catalog.uid,
            &[&catalog.resource_version, &self.content_digest],
        )
    }

    fn object(&self) -> Option<&ObjectRef> {
        self.catalog.as_ref()
    }
}

impl Event for BundleUnpackRequest {
    const FULL_NAME: &'static str = "olm.bus.v1.BundleUnpackRequest";
    const DELIVERY: Delivery = Delivery::WorkQueue;

    fn subject(&self) -> Result<Subject, Error> {
        Ok(subjects::bundle_unpack_requests())
    }

    fn all_subjects() -> SubjectFilter {
        subjects::bundle_unpack_requests().into()
    }

    /// The InstallPlan version and bundle: a resync that re-sends the same
    /// request is dropped by JetStream, while a retry after the InstallPlan
    /// changed (for example after a failure was recorded) is not.
    fn message_id(&self) -> Option<String> {
        let plan = self.install_plan.as_ref()?;
        dedup_id(
            "unpack-request",
            &plan.uid,
            &[&plan.resource_version, &self.bundle_path],
        )
    }

    fn object(&self) -> Option<&ObjectRef> {
        self.install_plan.as_ref()
    }
}

impl WorkRequest for BundleUnpackRequest {}

impl BundleUnpacked {
    /// The token of the subject: the image digest, or the bundle image
    /// reference when the pull failed before the digest was known.
    fn subject_digest(&self) -> &str {
        if self.image_digest.is_empty() {
            &self.bundle_path
        } else {
            &self.image_digest
        }
    }
}

impl Event for BundleUnpacked {
    const FULL_NAME: &'static str = "olm.bus.v1.BundleUnpacked";
    const DELIVERY: Delivery = Delivery::Broadcast;

    /// `olm.v1.bundle.<digest>.unpacked`, with the bundle image reference in
    /// place of the digest when the pull failed before the digest was known.
    fn subject(&self) -> Result<Subject, Error> {
        if self.subject_digest().is_empty() {
            return Err(Error::MissingField {
                event: Self::FULL_NAME,
                field: "image_digest or bundle_path",
            });
        }
        subjects::bundle_unpacked(self.subject_digest())
    }

    fn all_subjects() -> SubjectFilter {
        all(subjects::bundle_unpacked_filter(None))
    }

    fn message_id(&self) -> Option<String> {
        let plan = self.install_plan.as_ref()?;
        dedup_id(
            "bundle-unpacked",
            &plan.uid,
            &[
                &plan.resource_version,
                &self.bundle_path,
                self.outcome().as_str_name(),
            ],
        )
    }

    fn object(&self) -> Option<&ObjectRef> {
        self.install_plan.as_ref()
    }
}

impl Event for CsvPhaseChanged {
    const FULL_NAME: &'static str = "olm.bus.v1.CsvPhaseChanged";
    const DELIVERY: Delivery = Delivery::Broadcast;

    fn subject(&self) -> Result<Subject, Error> {
        let csv = required::<Self>(self.csv.as_ref(), "csv")?;
        subjects::csv_phase(&csv.namespace, &csv.name)
    }

    fn all_subjects() -> SubjectFilter {
        all(subjects::csv_phase_filter(None))
    }

    fn message_id(&self) -> Option<String> {
        let csv = self.csv.as_ref()?;
        dedup_id(
            "csv-phase",
            &csv.uid,
            &[&csv.resource_version, &self.new_phase],
        )
    }

    fn object(&self) -> Option<&ObjectRef> {
        self.csv.as_ref()
    }
}

impl Event for InstallPlanPhaseChanged {
    const FULL_NAME: &'static str = "olm.bus.v1.InstallPlanPhaseChanged";
    const DELIVERY: Delivery = Delivery::Broadcast;

    fn subject(&self) -> Result<Subject, Error> {
        let plan = required::<Self>(self.install_plan.as_ref(), "install_plan")?;
        subjects::install_plan_phase(&plan.namespace, &plan.name)
    }

    fn all_subjects() -> SubjectFilter {
        all(subjects::install_plan_phase_filter(None))
    }

    fn message_id(&self) -> Option<String> {
        let plan = self.install_plan.as_ref()?;
        dedup_id(
            "installplan-phase",
            &plan.uid,
            &[&plan.resource_version, &self.new_phase],
        )
    }

    fn object(&self) -> Option<&ObjectRef> {
        self.install_plan.as_ref()
    }
}

impl Event for SubscriptionResolved {
    const FULL_NAME: &'static str = "olm.bus.v1.SubscriptionResolved";
    const DELIVERY: Delivery = Delivery::Broadcast;

    fn subject(&self) -> Result<Subject, Error> {
        let subscription = required::<Self>(self.subscription.as_ref(), "subscription")?;
        subjects::subscription_resolved(&subscription.namespace, &subscription.name)
    }

    fn all_subjects() -> SubjectFilter {
        all(subjects::subscription_resolved_filter(None))
    }

    fn message_id(&self) -> Option<String> {
        let subscription = self.subscription.as_ref()?;
        let plan_uid = self
            .install_plan
            .as_ref()
            .map_or("", |plan| plan.uid.as_str());
        dedup_id(
            "subscription-resolved",
            &subscription.uid,
            &[&subscription.resource_version, plan_uid],
        )
    }

    fn object(&self) -> Option<&ObjectRef> {
        self.subscription.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn csv_ref() -> ObjectRef {
        ObjectRef::new(
            "operators.coreos.com/v1alpha1",
            "ClusterServiceVersion",
            "fixture-ns",
            "fixture-operator.v1.2.3",
        )
        .at("0b5c2c4e-uid", "4242")
    }

    fn csv_succeeded() -> CsvPhaseChanged {
        CsvPhaseChanged {
            csv: Some(csv_ref()),
            old_phase: "Installing".into(),
            new_phase: "Succeeded".into(),
            reason: "InstallSucceeded".into(),
            message: "install strategy completed with no errors".into(),
            occurred_at: Some(now()),
        }
    }

    #[test]
    fn round_trips_through_encode_and_decode() {
        let event = csv_succeeded();
        let bytes = encode(&event).expect("encodes");
        assert_eq!(decode::<CsvPhaseChanged>(&bytes).expect("decodes"), event);
    }

    #[test]
    fn full_names_are_the_protobuf_full_names() {
        fn check<E: Event>() {
            assert_eq!(E::FULL_NAME, E::full_name());
        }
        check::<CatalogUpdated>();
        check::<BundleUnpackRequest>();
        check::<BundleUnpacked>();
        check::<CsvPhaseChanged>();
        check::<InstallPlanPhaseChanged>();
        check::<SubscriptionResolved>();
    }

    #[test]
    fn hostile_payloads_are_errors_not_panics() {
        let valid = encode(&csv_succeeded()).expect("encodes");
        let mut hostile: Vec<Vec<u8>> = vec![
            // A field key with wire type 7 (invalid).
            vec![0x0f],
            // Field 1 (csv, length-delimited) claiming far more bytes than follow.
            vec![0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f],
            // A varint that never ends.
            vec![0x10; 11].into_iter().chain([0x80; 11]).collect(),
            // Field 1 with the wrong wire type (varint instead of message).
            vec![0x08, 0x01],
            // A string field holding invalid UTF-8.
            vec![0x12, 0x02, 0xff, 0xfe],
            // Deeply nested unknown groups, beyond prost's recursion limit.
            std::iter::repeat_n(0x5b, 200).collect(),
            // Deeply nested length-delimited messages inside `csv`.
            nested_messages(150),
        ];
        // Every truncation of a valid payload.
        hostile.extend((1..valid.len()).map(|n| valid[..n].to_vec()));
        for payload in &hostile {
            // Truncations may decode to a partial event; nothing may panic.
            let _ = decode::<CsvPhaseChanged>(payload);
        }
        for payload in &hostile[..7] {
            let err = decode::<CsvPhaseChanged>(payload).expect_err("hostile payload decoded");
            assert!(matches!(err, Error::Decode { .. }), "{err:?}");
            assert_eq!(err.category(), "decode");
        }
    }

    /// `depth` levels of `field 1, length-delimited` wrapping each other.
    fn nested_messages(depth: usize) -> Vec<u8> {
        let mut payload = Vec::new();
        for _ in 0..depth {
            let mut outer = vec![0x0a];
            prost::encoding::encode_varint(payload.len() as u64, &mut outer);
            outer.extend_from_slice(&payload);
            payload = outer;
        }
        payload
    }

    #[test]
    fn oversized_payloads_are_refused_before_decoding() {
        let payload = vec![0u8; MAX_EVENT_BYTES + 1];
        let err = decode::<CatalogUpdated>(&payload).expect_err("oversized");
        assert!(matches!(err, Error::PayloadTooLarge { .. }), "{err:?}");

        let mut event = csv_succeeded();
        event.message = "x".repeat(MAX_EVENT_BYTES);
        let err = encode(&event).expect_err("oversized");
        assert!(matches!(err, Error::PayloadTooLarge { .. }), "{err:?}");
    }

    #[test]
    fn events_without_their_object_have_no_subject() {
        let err = CsvPhaseChanged::default().subject().expect_err("no csv");
        assert!(
            matches!(err, Error::MissingField { field: "csv", .. }),
            "{err:?}"
        );
        assert!(BundleUnpacked::default().subject().is_err());
        assert!(CatalogUpdated::default().subject().is_err());
        assert!(InstallPlanPhaseChanged::default().subject().is_err());
        assert!(SubscriptionResolved::default().subject().is_err());
        // The work queue subject does not depend on the request.
        assert!(BundleUnpackRequest::default().subject().is_ok());
    }

    #[test]
    fn bundle_unpacked_falls_back_to_the_image_reference() {
        let failed = BundleUnpacked {
            bundle_path: "registry.example/bundle:v1".into(),
            outcome: bundle_unpacked::Outcome::Failed.into(),
            ..Default::default()
        };
        assert_eq!(
            failed.subject().expect("subject").as_str(),
            "olm.v1.bundle.registry_2Eexample_2Fbundle_3Av1.unpacked"
        );
        let succeeded = BundleUnpacked {
            image_digest: "sha256:abc".into(),
            ..failed
        };
        assert_eq!(
            succeeded.subject().expect("subject").as_str(),
            "olm.v1.bundle.sha256_3Aabc.unpacked"
        );
    }

    #[test]
    fn message_ids_identify_the_change_and_are_header_safe() {
        let event = csv_succeeded();
        let id = event.message_id().expect("id");
        assert_eq!(id, "csv-phase/0b5c2c4e-uid/4242/Succeeded");
        // Another version of the same object is another change.
        let mut later = event.clone();
        later.csv = Some(csv_ref().at("0b5c2c4e-uid", "4243"));
        assert_ne!(later.message_id(), Some(id));

        // No UID, no id: better no deduplication than a false one.
        let mut anonymous = event.clone();
        anonymous.csv = Some(ObjectRef::new("v1", "K", "ns", "n"));
        assert_eq!(anonymous.message_id(), None);

        // Hostile values cannot break the header or forge parts.
        let mut hostile = event;
        hostile.csv = Some(csv_ref().at("uid\r\nX-Evil: 1", "1/2"));
        hostile.new_phase = "a/b".into();
        let id = hostile.message_id().expect("id");
        assert!(!id.contains(['\r', '\n', ' ']), "{id:?}");
        assert_eq!(id.matches('/').count(), 3, "{id:?}");
    }

    #[test]
    fn unpack_requests_expire_at_their_deadline() {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let request = BundleUnpackRequest {
            deadline: Some((start + Duration::from_secs(60)).into()),
            ..Default::default()
        };
        assert!(!request.is_past_deadline(start));
        assert!(request.is_past_deadline(start + Duration::from_secs(61)));
        assert!(!BundleUnpackRequest::default().is_past_deadline(start));
    }
}
