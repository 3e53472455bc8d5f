//! CSV status bookkeeping exactly as upstream's `SetPhase` does it, plus the
//! rule for when a status is worth writing.
//!
//! - `lastUpdateTime` is set on every phase set; `lastTransitionTime` only
//!   when the phase changes.
//! - A `status.conditions` history entry is appended when the phase or the
//!   reason differs from the newest entry (or the history is empty); only the
//!   newest [`CONDITIONS_LENGTH_LIMIT`] entries are kept.
//! - Every phase set emits an Event whose reason is the CSV reason, `Warning`
//!   when the phase is `Failed` and `Normal` otherwise.
//!
//! Times are whole seconds: the API server stores `metav1.Time` with second
//! precision, so a sub-second `now` is truncated.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm_api::csv::{
    ClusterServiceVersionCondition, ClusterServiceVersionStatus, CsvPhase, CsvReason,
};

/// Upstream's `ConditionsLengthLimit`: how many history entries a CSV keeps.
pub const CONDITIONS_LENGTH_LIMIT: usize = 20;

/// Type of a Kubernetes Event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
}

impl EventType {
    /// The Event `type` string.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// An Event to record on the CSV.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsvEvent {
    /// `Normal` or `Warning`.
    pub event_type: EventType,
    /// The Event reason (the CSV reason, or another CamelCase reason).
    pub reason: String,
    /// The Event message.
    pub message: String,
}

/// The Event upstream records for a phase set.
pub fn phase_event(phase: &CsvPhase, reason: &CsvReason, message: &str) -> CsvEvent {
    CsvEvent {
        event_type: if *phase == CsvPhase::FAILED {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.as_str().to_owned(),
        message: message.to_owned(),
    }
}

/// `now` cut to whole seconds, as it will be stored.
pub fn truncate_to_seconds(now: Timestamp) -> Timestamp {
    Timestamp::from_second(now.as_second()).unwrap_or(now)
}

/// The current phase, `""` when unset.
pub fn phase_of(status: &ClusterServiceVersionStatus) -> CsvPhase {
    status.phase.clone().unwrap_or(CsvPhase::NONE)
}

/// Whether a CSV in `phase` is still on its way to its first Succeeded or
/// Failed: its reconciles belong to the install's trace. Replacing and
/// Deleting belong to the CSV that replaces it; Unknown is never set.
pub fn installing(phase: &CsvPhase) -> bool {
    [
        CsvPhase::NONE,
        CsvPhase::PENDING,
        CsvPhase::INSTALL_READY,
        CsvPhase::INSTALLING,
    ]
    .contains(phase)
}

/// The current reason, `""` when unset.
pub fn reason_of(status: &ClusterServiceVersionStatus) -> CsvReason {
    status.reason.clone().unwrap_or_default()
}

/// The current message, `""` when unset.
pub fn message_of(status: &ClusterServiceVersionStatus) -> &str {
    status.message.as_deref().unwrap_or_default()
}

/// Whether setting this phase, reason and message would change any of them
/// (upstream's `SetPhaseWithEventIfChanged` guard).
pub fn differs(
    status: &ClusterServiceVersionStatus,
    phase: &CsvPhase,
    reason: &CsvReason,
    message: &str,
) -> bool {
    phase_of(status) != *phase || reason_of(status) != *reason || message_of(status) != message
}

/// Sets phase, reason and message with upstream's `SetPhase` semantics.
pub fn set_phase(
    status: &mut ClusterServiceVersionStatus,
    phase: CsvPhase,
    reason: CsvReason,
    message: &str,
    now: Timestamp,
) {
    let now = Time(truncate_to_seconds(now));
    status.last_update_time = Some(now.clone());
    if phase_of(status) != phase {
        status.last_transition_time = Some(now.clone());
    }
    status.phase = Some(phase);
    status.message = (!message.is_empty()).then(|| message.to_owned());
    status.reason = Some(reason);

    let entry = ClusterServiceVersionCondition {
        phase: status.phase.clone(),
        message: status.message.clone(),
        reason: status.reason.clone(),
        last_update_time: Some(now),
        last_transition_time: status.last_transition_time.clone(),
    };
    let history = status.conditions.get_or_insert_with(Vec::new);
    let append = match history.last() {
        None => true,
        Some(last) => last.phase != entry.phase || last.reason != entry.reason,
    };
    if append {
        history.push(entry);
    }
    if history.len() > CONDITIONS_LENGTH_LIMIT {
        let excess = history.len() - CONDITIONS_LENGTH_LIMIT;
        history.drain(..excess);
    }
}

/// Whether a computed status must be written over the observed one.
///
/// Upstream writes only when phase, reason, message or `lastUpdateTime`
/// changed, so a refreshed `requirementStatus` of a CSV that stays Pending is
/// never written. We write whenever anything in the status differs, which keeps
/// `requirementStatus` current and is just as quiet when nothing changed.
pub fn status_changed(
    observed: Option<&ClusterServiceVersionStatus>,
    computed: &ClusterServiceVersionStatus,
) -> bool {
    match observed {
        Some(observed) => observed != computed,
        None => *computed != ClusterServiceVersionStatus::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_csv_is_installing_until_it_first_succeeds_or_fails() {
        for (phase, installing_now) in [
            (CsvPhase::NONE, true),
            (CsvPhase::PENDING, true),
            (CsvPhase::INSTALL_READY, true),
            (CsvPhase::INSTALLING, true),
            (CsvPhase::SUCCEEDED, false),
            (CsvPhase::FAILED, false),
            (CsvPhase::REPLACING, false),
            (CsvPhase::DELETING, false),
            (CsvPhase::UNKNOWN, false),
            (CsvPhase::from("SomeFuturePhase"), false),
        ] {
            assert_eq!(installing(&phase), installing_now, "{phase}");
        }
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).expect("valid")
    }

    #[test]
    fn first_phase_starts_the_history() {
        let mut status = ClusterServiceVersionStatus::default();
        set_phase(
            &mut status,
            CsvPhase::PENDING,
            CsvReason::REQUIREMENTS_UNKNOWN,
            "requirements not yet checked",
            at(10),
        );
        assert_eq!(status.phase, Some(CsvPhase::PENDING));
        assert_eq!(status.last_transition_time, Some(Time(at(10))));
        let history = status.conditions.expect("history");
        assert_eq!(history.len(), 1);
        assert_eq!(history[0].last_transition_time, Some(Time(at(10))));
    }

    #[test]
    fn same_phase_new_reason_appends_but_keeps_transition_time() {
        let mut status = ClusterServiceVersionStatus::default();
        set_phase(
            &mut status,
            CsvPhase::PENDING,
            CsvReason::REQUIREMENTS_UNKNOWN,
            "a",
            at(10),
        );
        set_phase(
            &mut status,
            CsvPhase::PENDING,
            CsvReason::REQUIREMENTS_NOT_MET,
            "b",
            at(20),
        );
        set_phase(
            &mut status,
            CsvPhase::PENDING,
            CsvReason::REQUIREMENTS_NOT_MET,
            "c",
            at(30),
        );
        assert_eq!(status.last_transition_time, Some(Time(at(10))));
        assert_eq!(status.last_update_time, Some(Time(at(30))));
        assert_eq!(status.message.as_deref(), Some("c"));
        assert_eq!(status.conditions.as_ref().map(Vec::len), Some(2));
    }

    #[test]
    fn sub_second_now_is_truncated() {
        let mut status = ClusterServiceVersionStatus::default();
        let now = at(10) + jiff::SignedDuration::from_millis(750);
        set_phase(
            &mut status,
            CsvPhase::PENDING,
            CsvReason::REQUIREMENTS_UNKNOWN,
            "",
            now,
        );
        assert_eq!(status.last_update_time, Some(Time(at(10))));
        assert_eq!(status.message, None);
    }

    #[test]
    fn events_warn_only_for_failed() {
        assert_eq!(
            phase_event(&CsvPhase::FAILED, &CsvReason::INSTALL_CHECK_FAILED, "x").event_type,
            EventType::Warning
        );
        assert_eq!(
            phase_event(&CsvPhase::REPLACING, &CsvReason::BEING_REPLACED, "x").event_type,
            EventType::Normal
        );
    }
}
