//! The rotation policy carried out with real certificates over simulated
//! time: a certificate is never served expired, and the published bundle
//! (even as a client saw it up to `overlap` ago) always verifies the served
//! certificate, across many CA rotations.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use olm_certs::{
    BootstrapReason, Decision, Material, Observed, Profile, RotationPolicy, ServingReason, decide,
    material::MAX_RECONCILE_STEPS,
    policy::{system_time, unix_seconds},
    reconcile, verify_served,
};
use proptest::prelude::*;

const T0: i64 = 1_800_000_000;

fn profile() -> Profile {
    Profile::for_service("packageserver-service", "olm")
}

fn host() -> String {
    profile().hosts[1].clone()
}

/// What a client trusting the bundle published at or before `at` sees.
fn bundle_at(history: &[(i64, String)], at: i64) -> &str {
    history
        .iter()
        .rev()
        .find(|(t, _)| *t <= at)
        .map_or(history[0].1.as_str(), |(_, b)| b.as_str())
}

struct Run {
    ca_rotations: usize,
    checks: usize,
}

fn simulate(policy: &RotationPolicy, lateness: &[u8], extra_ticks: &[u8]) -> Result<Run, String> {
    let profile = profile();
    let host = host();
    let lag = secs(policy.overlap) - 1;
    let end = T0 + 4 * secs(policy.ca_lifetime);
    let mut t = T0;
    let mut material: Option<Material> = None;
    let mut history: Vec<(i64, String)> = Vec::new();
    let mut last_bundle = String::new();
    let mut run = Run {
        ca_rotations: 0,
        checks: 0,
    };
    let mut step = 0usize;
    while t < end {
        let before = material.clone();
        let done = reconcile(material.as_ref(), system_time(t), policy, &profile)
            .map_err(|e| format!("reconcile at {t}: {e}"))?;
        // A valid policy always settles on Keep within one pass: the step
        // bound is never what ends it.
        if done.steps.len() >= MAX_RECONCILE_STEPS {
            return Err(format!(
                "reconcile at {t} ran out of steps: {:?}",
                done.steps
            ));
        }
        let (now_material, next) = (done.material, done.next);
        if let Some(before) = &before
            && now_material.ca_key_pem != before.ca_key_pem
        {
            run.ca_rotations += 1;
        }
        if now_material.ca_bundle_pem != last_bundle {
            last_bundle = now_material.ca_bundle_pem.clone();
            history.push((t, last_bundle.clone()));
        }
        material = Some(now_material);
        let m = material.as_ref().unwrap();

        // The next reconcile runs at `next`, a little late, or earlier on an
        // unrelated wake-up; check every second until then.
        let late = i64::from(lateness[step % lateness.len()] % 2);
        let early = i64::from(extra_ticks[step % extra_ticks.len()]);
        let mut next_t = (next + late).max(t + 1);
        if early > 0 {
            next_t = next_t.min(t + early);
        }
        for at in t..next_t {
            let now = system_time(at);
            verify_served(&m.ca_bundle_pem, &m.cert_pem, &host, now)
                .map_err(|e| format!("at {at} (t={t}): current bundle: {e}"))?;
            let seen = bundle_at(&history, at - lag);
            verify_served(seen, &m.cert_pem, &host, now)
                .map_err(|e| format!("at {at}: bundle seen {lag}s ago: {e}"))?;
            run.checks += 1;
        }
        t = next_t;
        step += 1;
    }
    Ok(run)
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap()
}

fn policies() -> impl Strategy<Value = RotationPolicy> {
    (60u64..240, 10u64..60, 30u32..80, 25u32..50, 1u64..6).prop_filter_map(
        "a valid policy",
        |(ca, serving, fraction, renew_pct, overlap)| {
            let policy = RotationPolicy {
                ca_lifetime: Duration::from_secs(ca),
                serving_lifetime: Duration::from_secs(serving.min(ca)),
                serving_renew_fraction: f64::from(fraction) / 100.0,
                ca_renew_before: Duration::from_secs(ca * u64::from(renew_pct) / 100),
                overlap: Duration::from_secs(overlap + 1),
            };
            policy.validate().ok().map(|()| policy)
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn served_certificate_is_always_valid_and_trusted(
        policy in policies(),
        lateness in proptest::collection::vec(any::<u8>(), 1..8),
        extra in proptest::collection::vec(0u8..4, 1..8),
    ) {
        let run = simulate(&policy, &lateness, &extra).map_err(TestCaseError::fail)?;
        // Four CA lifetimes rotate the CA at least three times.
        prop_assert!(run.ca_rotations >= 3, "only {} rotations", run.ca_rotations);
        prop_assert!(run.checks > 0);
    }
}

fn soak_policy() -> RotationPolicy {
    RotationPolicy {
        ca_lifetime: Duration::from_secs(90),
        serving_lifetime: Duration::from_secs(30),
        serving_renew_fraction: 0.5,
        ca_renew_before: Duration::from_secs(30),
        overlap: Duration::from_secs(5),
    }
}

#[test]
fn the_soak_policy_rotates_safely() {
    let run = simulate(&soak_policy(), &[0, 1], &[0]).unwrap();
    assert!(run.ca_rotations >= 5, "{} rotations", run.ca_rotations);
}

#[test]
fn reconcile_stops_at_the_step_bound_under_a_policy_that_never_settles() {
    // Neither policy passes `validate`, and each makes every step due again
    // at once: the bound is what ends the pass.
    let renewed_at_once = RotationPolicy {
        // Half of one second truncates to nothing: due as soon as issued.
        serving_lifetime: Duration::from_secs(1),
        ..soak_policy()
    };
    let rotated_at_once = RotationPolicy {
        ca_renew_before: Duration::from_secs(90),
        overlap: Duration::ZERO,
        ..soak_policy()
    };
    assert!(renewed_at_once.validate().is_err());
    assert!(rotated_at_once.validate().is_err());
    let now = system_time(T0);
    for (policy, expected) in [
        (
            renewed_at_once,
            &["Bootstrap", "RenewServing", "RenewServing", "RenewServing"][..],
        ),
        (
            rotated_at_once,
            &["Bootstrap", "RotateCa", "RenewServing", "RetireCa"][..],
        ),
    ] {
        let done = reconcile(None, now, &policy, &profile()).unwrap();
        assert_eq!(done.steps.len(), MAX_RECONCILE_STEPS, "{:?}", done.steps);
        let kinds: Vec<&str> = done
            .steps
            .iter()
            .map(|step| match step {
                Decision::Keep { .. } => "Keep",
                Decision::Bootstrap(BootstrapReason::Missing) => "Bootstrap",
                Decision::RenewServing(ServingReason::Due | ServingReason::NewCaPublished) => {
                    "RenewServing"
                }
                Decision::RotateCa => "RotateCa",
                Decision::RetireCa(_) => "RetireCa",
                other => panic!("unexpected step {other:?}"),
            })
            .collect();
        assert_eq!(kinds, expected);
        // Asked back at once, and what it made is still served correctly.
        assert_eq!(done.next, T0);
        verify_served(
            &done.material.ca_bundle_pem,
            &done.material.cert_pem,
            &host(),
            now,
        )
        .unwrap();
        // Another pass would step again: only the bound ended this one.
        let observed = Material::observe_stored(Some(&done.material), &profile().hosts);
        assert!(!matches!(
            decide(&observed, now, &policy),
            Decision::Keep { .. }
        ));
    }
}

#[test]
fn a_restart_reuses_valid_material() {
    let policy = soak_policy();
    let now = system_time(T0);
    let first = reconcile(None, now, &policy, &profile()).unwrap();
    assert!(first.changed());
    let later = system_time(T0 + 3);
    let again = reconcile(Some(&first.material), later, &policy, &profile()).unwrap();
    assert!(!again.changed(), "valid material is reused");
    assert_eq!(again.material, first.material);
    assert_eq!(
        again.next,
        T0 + 15,
        "decided from the certificate: half of 30 s"
    );
}

#[test]
fn hostile_material_is_replaced_not_trusted() {
    let policy = soak_policy();
    let now = system_time(T0);
    let good = reconcile(None, now, &policy, &profile()).unwrap().material;
    let other = reconcile(None, now, &policy, &profile()).unwrap().material;
    let long_bundle = good.ca_bundle_pem.repeat(olm_certs::MAX_BUNDLE_CERTS + 1);
    let cases: Vec<(&str, Material)> = vec![
        (
            "garbage bundle",
            Material {
                ca_bundle_pem: "garbage".into(),
                ..good.clone()
            },
        ),
        (
            "empty cert",
            Material {
                cert_pem: String::new(),
                ..good.clone()
            },
        ),
        (
            "garbage key",
            Material {
                key_pem: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".into(),
                ..good.clone()
            },
        ),
        (
            "key of another cert",
            Material {
                key_pem: other.key_pem.clone(),
                ..good.clone()
            },
        ),
        (
            "ca key of another ca",
            Material {
                ca_key_pem: other.ca_key_pem.clone(),
                ..good.clone()
            },
        ),
        (
            "huge bundle",
            Material {
                ca_bundle_pem: "A".repeat(olm_certs::MAX_PEM_BYTES + 1),
                ..good.clone()
            },
        ),
        (
            "too many cas",
            Material {
                ca_bundle_pem: long_bundle,
                ..good.clone()
            },
        ),
    ];
    for (name, bad) in cases {
        let observed = bad.observe(&profile().hosts);
        assert!(
            matches!(observed, Observed::Invalid(_)),
            "{name}: {observed:?}"
        );
        assert!(
            matches!(decide(&observed, now, &policy), Decision::Bootstrap(_)),
            "{name}"
        );
        let done = reconcile(Some(&bad), now, &policy, &profile()).unwrap();
        assert!(done.changed(), "{name}");
        let fixed = done.material;
        verify_served(&fixed.ca_bundle_pem, &fixed.cert_pem, &host(), now).unwrap();
    }
    // A serving certificate from a foreign CA is re-issued from ours.
    let foreign = Material {
        cert_pem: other.cert_pem.clone(),
        key_pem: other.key_pem.clone(),
        ..good.clone()
    };
    let done = reconcile(Some(&foreign), now, &policy, &profile()).unwrap();
    assert!(done.changed());
    let fixed = done.material;
    assert_eq!(fixed.ca_bundle_pem, good.ca_bundle_pem);
    verify_served(&fixed.ca_bundle_pem, &fixed.cert_pem, &host(), now).unwrap();
}

#[test]
fn certificates_carry_upstream_names() {
    let m = reconcile(None, system_time(T0), &soak_policy(), &profile())
        .unwrap()
        .material;
    let der = &olm_certs::parse_certificates(&m.ca_bundle_pem).unwrap()[0];
    let (_, ca) = x509_parser::parse_x509_certificate(der).unwrap();
    let cn = ca
        .subject()
        .iter_common_name()
        .next()
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned();
    assert!(cn.starts_with("olm-selfsigned-"), "{cn}");
    let org = ca
        .subject()
        .iter_organization()
        .next()
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(org, "Red Hat, Inc.");
    for h in &profile().hosts {
        verify_served(&m.ca_bundle_pem, &m.cert_pem, h, system_time(T0)).unwrap();
    }
    assert_eq!(unix_seconds(m.serving_not_after().unwrap()), T0 + 30);
}
