//! The rotation policy: a pure function from the stored certificates (as
//! parsed facts), the current time and the configured lifetimes to the one
//! next thing to do.
//!
//! Every decision is derived from the certificates' own validity periods and
//! issuers, never from a timestamp kept elsewhere: upstream OLM once decided
//! from a CSV status field, the field drifted from the real certificate, and
//! certificates expired unrotated on many clusters at once.
//!
//! The life of a CA rotation, with `overlap` the time a published change
//! needs to reach every client and every replica:
//!
//! 1. the signing CA has `ca_renew_before` left: [`Decision::RotateCa`] makes a
//!    new CA, publishes old and new in the bundle, signs with the new key from
//!    now on, and re-issues the served certificate from the *old* CA so that
//!    clients that have not yet seen the new bundle keep trusting it;
//! 2. the new CA was issued `overlap` ago: [`Decision::RenewServing`] issues the
//!    served certificate from the new CA;
//! 3. that certificate was issued `overlap` ago (every replica serves it):
//!    [`Decision::RetireCa`] drops the old CA from the bundle.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use thiserror::Error;

/// Upstream OLM's lifetime of both the CA and the serving certificate
/// (`DefaultCertValidFor`, 730 days).
pub const UPSTREAM_CERT_LIFETIME: Duration = Duration::from_secs(730 * 24 * 3600);

/// Upstream OLM's rotation window before expiry (`DefaultCertMinFresh`, 24 h).
pub const UPSTREAM_MIN_FRESH: Duration = Duration::from_secs(24 * 3600);

/// The lifetimes and thresholds rotation follows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RotationPolicy {
    /// How long a new CA is valid.
    pub ca_lifetime: Duration,
    /// How long a new serving certificate is valid (never past its CA).
    pub serving_lifetime: Duration,
    /// Fraction of a serving certificate's lifetime after which it is
    /// renewed, in `(0, 1)`.
    pub serving_renew_fraction: f64,
    /// How much validity the signing CA has left when it is replaced.
    pub ca_renew_before: Duration,
    /// How long a newly published CA bundle or certificate is given to reach
    /// every client and replica before the next step relies on it.
    pub overlap: Duration,
}

impl Default for RotationPolicy {
    /// Upstream's two-year lifetimes, with serving certificates renewed at
    /// 80 % of their life, the CA replaced 30 days before expiry and an hour
    /// of overlap.
    fn default() -> Self {
        Self {
            ca_lifetime: UPSTREAM_CERT_LIFETIME,
            serving_lifetime: UPSTREAM_CERT_LIFETIME,
            serving_renew_fraction: 0.8,
            ca_renew_before: Duration::from_secs(30 * 24 * 3600),
            overlap: Duration::from_secs(3600),
        }
    }
}

/// Why a [`RotationPolicy`] cannot guarantee its invariants.
#[derive(Debug, Error, PartialEq)]
pub enum PolicyError {
    /// The renewal fraction is outside `(0, 1)`.
    #[error("serving renew fraction {0} must be greater than 0 and less than 1")]
    Fraction(f64),
    /// A lifetime is zero.
    #[error("certificate lifetimes must be at least one second")]
    ZeroLifetime,
    /// The CA would be replaced before (or as soon as) it is issued.
    #[error(
        "ca renew-before ({renew_before:?}) must be shorter than the ca lifetime ({lifetime:?})"
    )]
    CaRenewBefore {
        /// The configured renew-before.
        renew_before: Duration,
        /// The configured CA lifetime.
        lifetime: Duration,
    },
    /// The rotation steps do not fit before the old CA expires, or a
    /// serving certificate would be due again during an overlap.
    #[error(
        "overlap {overlap:?} is too long: it must be shorter than half of ca renew-before ({renew_before:?}) and than the renew fraction of the shortest serving lifetime ({shortest:?})"
    )]
    Overlap {
        /// The configured overlap.
        overlap: Duration,
        /// The configured renew-before.
        renew_before: Duration,
        /// The renew point of the shortest serving certificate ever issued.
        shortest: Duration,
    },
}

impl RotationPolicy {
    /// Checks that the policy can keep its promises: no certificate is served
    /// expired and the published bundle always verifies the served
    /// certificate, provided [`decide`] runs by [`Decision::Keep::next`].
    pub fn validate(&self) -> Result<(), PolicyError> {
        let f = self.serving_renew_fraction;
        if !(f > 0.0 && f < 1.0) {
            return Err(PolicyError::Fraction(f));
        }
        if self.ca_lifetime.as_secs() == 0 || self.serving_lifetime.as_secs() == 0 {
            return Err(PolicyError::ZeroLifetime);
        }
        if self.ca_renew_before >= self.ca_lifetime {
            return Err(PolicyError::CaRenewBefore {
                renew_before: self.ca_renew_before,
                lifetime: self.ca_lifetime,
            });
        }
        // A serving certificate is never issued with less than this much life
        // (from a CA with at least `ca_renew_before` left).
        let shortest = self.serving_lifetime.min(self.ca_renew_before).mul_f64(f);
        if self.overlap * 2 >= self.ca_renew_before || self.overlap >= shortest {
            return Err(PolicyError::Overlap {
                overlap: self.overlap,
                renew_before: self.ca_renew_before,
                shortest,
            });
        }
        Ok(())
    }
}

/// Seconds since the Unix epoch (certificates have second precision).
pub type UnixSeconds = i64;

/// Converts a [`SystemTime`] to whole seconds since the epoch (truncated).
pub fn unix_seconds(time: SystemTime) -> UnixSeconds {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

/// Converts whole seconds since the epoch to a [`SystemTime`].
pub fn system_time(seconds: UnixSeconds) -> SystemTime {
    if seconds >= 0 {
        UNIX_EPOCH + Duration::from_secs(seconds.unsigned_abs())
    } else {
        UNIX_EPOCH - Duration::from_secs(seconds.unsigned_abs())
    }
}

fn secs(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX)
}

/// The validity period of one certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    /// First second the certificate is valid.
    pub not_before: UnixSeconds,
    /// Last second the certificate is valid (inclusive, as in X.509).
    pub not_after: UnixSeconds,
}

impl Validity {
    /// Whether the certificate is valid at `now`.
    pub fn is_active(&self, now: UnixSeconds) -> bool {
        self.not_before <= now && now <= self.not_after
    }

    /// Total lifetime in seconds.
    pub fn lifetime(&self) -> i64 {
        self.not_after.saturating_sub(self.not_before)
    }
}

/// One CA of the published bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaFacts {
    /// SHA-256 of the certificate's DER, which names it in decisions.
    pub fingerprint: [u8; 32],
    /// Validity period.
    pub validity: Validity,
}

/// The served (leaf) certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServingFacts {
    /// Validity period.
    pub validity: Validity,
    /// Index into [`CertFacts::cas`] of the CA whose signature it carries,
    /// `None` when no CA of the bundle signed it.
    pub issuer: Option<usize>,
    /// Whether its names cover every host it must serve.
    pub covers_hosts: bool,
}

/// What the stored certificates say, as plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFacts {
    /// The published CA bundle, newest first.
    pub cas: Vec<CaFacts>,
    /// Index into `cas` of the CA whose private key is stored (the one that
    /// signs from now on).
    pub signing: usize,
    /// The served certificate.
    pub serving: ServingFacts,
}

/// What was found where certificates should be stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// Nothing is stored yet.
    Missing,
    /// Something is stored but cannot be used; the text says why.
    Invalid(String),
    /// Usable certificates.
    Valid(CertFacts),
}

/// Why a new CA and serving certificate are made from scratch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootstrapReason {
    /// Nothing was stored.
    Missing,
    /// What was stored cannot be used.
    Invalid(String),
    /// The stored signing CA is expired.
    CaNotActive,
}

/// Why the serving certificate is re-issued from the signing CA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServingReason {
    /// It is expired or not yet valid.
    NotActive,
    /// No CA of the bundle signed it.
    Untrusted,
    /// Its names do not cover the hosts it must serve.
    HostsChanged,
    /// It reached the renewal fraction of its lifetime.
    Due,
    /// A newer CA has been published for long enough to take over.
    NewCaPublished,
}

/// The one next step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing to do until `next` (decide again then, or on any change).
    Keep {
        /// When the next step becomes due.
        next: UnixSeconds,
    },
    /// Make a new CA and serving certificate, dropping everything stored.
    Bootstrap(BootstrapReason),
    /// Issue a new serving certificate from the signing CA.
    RenewServing(ServingReason),
    /// Make a new CA, publish it next to the old ones, sign with it from now
    /// on, and re-issue the serving certificate from the old CA.
    RotateCa,
    /// Drop these CAs (by fingerprint) from the bundle: nothing they signed is
    /// in use any more, or they expired.
    RetireCa(Vec<[u8; 32]>),
}

/// Decides the next step from the stored certificates alone.
pub fn decide(observed: &Observed, now: SystemTime, policy: &RotationPolicy) -> Decision {
    let facts = match observed {
        Observed::Missing => return Decision::Bootstrap(BootstrapReason::Missing),
        Observed::Invalid(why) => {
            return Decision::Bootstrap(BootstrapReason::Invalid(why.clone()));
        }
        Observed::Valid(facts) => facts,
    };
    let now = unix_seconds(now);
    let Some(signing) = facts.cas.get(facts.signing) else {
        return Decision::Bootstrap(BootstrapReason::Invalid(
            "the stored ca key matches no certificate of the bundle".to_owned(),
        ));
    };
    // Certificates that are not valid *yet* were just made by a replica whose
    // clock runs ahead: wait for them rather than fight over the Secret.
    let serving = &facts.serving;
    let earliest = signing.validity.not_before.max(serving.validity.not_before);
    if now < earliest && now <= signing.validity.not_after {
        return Decision::Keep { next: earliest };
    }
    if !signing.validity.is_active(now) {
        return Decision::Bootstrap(BootstrapReason::CaNotActive);
    }
    if serving.issuer.is_none() {
        return Decision::RenewServing(ServingReason::Untrusted);
    }
    if !serving.validity.is_active(now) {
        return Decision::RenewServing(ServingReason::NotActive);
    }
    if !serving.covers_hosts {
        return Decision::RenewServing(ServingReason::HostsChanged);
    }
    let overlap = secs(policy.overlap);
    let ca_due = signing
        .validity
        .not_after
        .saturating_sub(secs(policy.ca_renew_before));
    // Only one CA is in rotation at a time: a newer one waits until the
    // previous is retired.
    if now >= ca_due && facts.cas.len() == 1 {
        return Decision::RotateCa;
    }
    let switch_at = signing.validity.not_before.saturating_add(overlap);
    let on_older_ca = serving.issuer != Some(facts.signing);
    if on_older_ca && now >= switch_at {
        return Decision::RenewServing(ServingReason::NewCaPublished);
    }
    let serving_due = serving_due(&serving.validity, policy);
    if now >= serving_due {
        return Decision::RenewServing(ServingReason::Due);
    }
    let retire_at = serving.validity.not_before.saturating_add(overlap);
    let retired: Vec<[u8; 32]> = facts
        .cas
        .iter()
        .enumerate()
        .filter(|(index, ca)| {
            Some(*index) != serving.issuer
                && *index != facts.signing
                && (now > ca.validity.not_after || now >= retire_at)
        })
        .map(|(_, ca)| ca.fingerprint)
        .collect();
    if !retired.is_empty() {
        return Decision::RetireCa(retired);
    }

    let mut next = serving_due.min(serving.validity.not_after);
    if facts.cas.len() == 1 {
        next = next.min(ca_due);
    } else {
        // Waiting to retire the older CAs.
        next = next.min(retire_at.max(now));
    }
    if on_older_ca {
        next = next.min(switch_at);
    }
    for (index, ca) in facts.cas.iter().enumerate() {
        if index != facts.signing {
            next = next.min(ca.validity.not_after.saturating_add(1));
        }
    }
    Decision::Keep {
        next: next.max(now),
    }
}

/// When a serving certificate with `validity` reaches the renewal fraction.
pub fn serving_due(validity: &Validity, policy: &RotationPolicy) -> UnixSeconds {
    let lifetime = validity.lifetime().max(0) as f64;
    // Truncation keeps the renewal point at or before the exact fraction.
    let offset = (lifetime * policy.serving_renew_fraction) as i64;
    validity.not_before.saturating_add(offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: UnixSeconds = 1_700_000_000;

    fn policy() -> RotationPolicy {
        RotationPolicy {
            ca_lifetime: Duration::from_secs(90),
            serving_lifetime: Duration::from_secs(30),
            serving_renew_fraction: 0.5,
            ca_renew_before: Duration::from_secs(30),
            overlap: Duration::from_secs(5),
        }
    }

    fn ca(tag: u8, not_before: i64, not_after: i64) -> CaFacts {
        CaFacts {
            fingerprint: [tag; 32],
            validity: Validity {
                not_before: T0 + not_before,
                not_after: T0 + not_after,
            },
        }
    }

    fn serving(not_before: i64, not_after: i64, issuer: Option<usize>) -> ServingFacts {
        ServingFacts {
            validity: Validity {
                not_before: T0 + not_before,
                not_after: T0 + not_after,
            },
            issuer,
            covers_hosts: true,
        }
    }

    fn at(offset: i64) -> SystemTime {
        system_time(T0 + offset)
    }

    fn valid(cas: Vec<CaFacts>, signing: usize, serving: ServingFacts) -> Observed {
        Observed::Valid(CertFacts {
            cas,
            signing,
            serving,
        })
    }

    #[test]
    fn decisions_follow_the_certificates() {
        let fresh = valid(vec![ca(1, 0, 90)], 0, serving(0, 30, Some(0)));
        let rotated = valid(
            vec![ca(2, 60, 150), ca(1, 0, 90)],
            0,
            serving(60, 90, Some(1)),
        );
        let switched = valid(
            vec![ca(2, 60, 150), ca(1, 0, 90)],
            0,
            serving(65, 95, Some(0)),
        );
        let mut untrusted = fresh.clone();
        if let Observed::Valid(f) = &mut untrusted {
            f.serving.issuer = None;
        }
        let mut renamed = fresh.clone();
        if let Observed::Valid(f) = &mut renamed {
            f.serving.covers_hosts = false;
        }
        let near_ca_end = valid(vec![ca(1, 0, 90)], 0, serving(55, 85, Some(0)));
        let missing = Observed::Missing;
        let garbage = Observed::Invalid("bad pem".into());
        let keyless = valid(vec![ca(1, 0, 90)], 3, serving(0, 30, Some(0)));
        let table: Vec<(&str, &Observed, i64, Decision)> = vec![
            (
                "fresh pair is kept",
                &fresh,
                1,
                Decision::Keep { next: T0 + 15 },
            ),
            (
                "serving renewed at half its life",
                &fresh,
                15,
                Decision::RenewServing(ServingReason::Due),
            ),
            (
                "expired serving renewed",
                &fresh,
                31,
                Decision::RenewServing(ServingReason::NotActive),
            ),
            (
                "certificates from a clock ahead of ours are awaited",
                &fresh,
                -2,
                Decision::Keep { next: T0 },
            ),
            (
                "ca rotated with renew-before left",
                &near_ca_end,
                60,
                Decision::RotateCa,
            ),
            (
                "expired ca means starting over",
                &fresh,
                91,
                Decision::Bootstrap(BootstrapReason::CaNotActive),
            ),
            (
                "new ca not yet published long enough",
                &rotated,
                62,
                Decision::Keep { next: T0 + 65 },
            ),
            (
                "serving moves to the new ca after the overlap",
                &rotated,
                65,
                Decision::RenewServing(ServingReason::NewCaPublished),
            ),
            (
                "old ca kept while the new serving propagates",
                &switched,
                67,
                Decision::Keep { next: T0 + 70 },
            ),
            (
                "old ca retired after the overlap",
                &switched,
                70,
                Decision::RetireCa(vec![[1; 32]]),
            ),
            (
                "untrusted serving renewed",
                &untrusted,
                1,
                Decision::RenewServing(ServingReason::Untrusted),
            ),
            (
                "serving renewed when hosts change",
                &renamed,
                1,
                Decision::RenewServing(ServingReason::HostsChanged),
            ),
            (
                "nothing stored",
                &missing,
                0,
                Decision::Bootstrap(BootstrapReason::Missing),
            ),
            (
                "garbage stored",
                &garbage,
                0,
                Decision::Bootstrap(BootstrapReason::Invalid("bad pem".into())),
            ),
            (
                "key of no bundle ca",
                &keyless,
                1,
                Decision::Bootstrap(BootstrapReason::Invalid(
                    "the stored ca key matches no certificate of the bundle".into(),
                )),
            ),
        ];
        for (name, observed, offset, want) in table {
            assert_eq!(decide(observed, at(offset), &policy()), want, "{name}");
        }
    }

    #[test]
    fn a_status_timestamp_cannot_postpone_rotation() {
        // The decision has no input but the certificates: whatever a status
        // field claims, a serving certificate past its renewal point is renewed.
        let observed = valid(vec![ca(1, 0, 90)], 0, serving(0, 30, Some(0)));
        for offset in 15..=30 {
            assert!(matches!(
                decide(&observed, at(offset), &policy()),
                Decision::RenewServing(_)
            ));
        }
    }

    #[test]
    fn validate_rejects_policies_that_cannot_keep_promises() {
        assert_eq!(policy().validate(), Ok(()));
        assert_eq!(RotationPolicy::default().validate(), Ok(()));
        let table = [
            RotationPolicy {
                serving_renew_fraction: 1.0,
                ..policy()
            },
            RotationPolicy {
                serving_renew_fraction: 0.0,
                ..policy()
            },
            RotationPolicy {
                serving_renew_fraction: f64::NAN,
                ..policy()
            },
            RotationPolicy {
                ca_renew_before: Duration::from_secs(90),
                ..policy()
            },
            RotationPolicy {
                overlap: Duration::from_secs(15),
                ..policy()
            },
            RotationPolicy {
                serving_lifetime: Duration::ZERO,
                ..policy()
            },
        ];
        for bad in table {
            assert!(bad.validate().is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn time_conversions_round_trip() {
        for s in [-5, 0, 1, T0] {
            assert_eq!(unix_seconds(system_time(s)), s);
        }
    }

    #[test]
    fn keep_is_never_in_the_past() {
        let observed = valid(vec![ca(1, 0, 90)], 0, serving(0, 30, Some(0)));
        for offset in 0..15 {
            match decide(&observed, at(offset), &policy()) {
                Decision::Keep { next } => assert!(next >= T0 + offset),
                other => panic!("unexpected {other:?} at {offset}"),
            }
        }
    }
}
