//! The management states and their transitions, the Config re-created
//! after a delete, upgrades in each state, and the immutable architecture.

use futures::StreamExt as _;
use kube::{
    api::DeleteParams,
    runtime::{WatchStreamExt as _, watcher},
};
use olm_api::samples::{VERSION_ANNOTATION, condition};
use serde_json::json;

use crate::{
    Fixture, RunningSamples, VERSION, WAIT, condition as condition_of, eventually,
    expect_condition, sample_apis,
};

#[tokio::test]
async fn removed_unmanaged_and_managed_again() {
    let fixture = Fixture::new("states").await;
    let _apis = sample_apis(&fixture.client).await;
    let service = RunningSamples::start(&fixture.client, fixture.config()).await;
    fixture.every_sample_managed().await;
    fixture.samples_exist().await;
    fixture.import_everything().await;

    // Record every status the Config goes through while it is Removed.
    let watch = watcher(
        fixture.configs(),
        watcher::Config::default().fields(&format!("metadata.name={}", fixture.config_name)),
    )
    .applied_objects();
    let (watching_tx, watching) = tokio::sync::oneshot::channel();
    let seen = tokio::spawn(async move {
        let mut seen: Vec<(String, String)> = Vec::new();
        let mut watching_tx = Some(watching_tx);
        let mut watch = std::pin::pin!(watch);
        while let Some(Ok(config)) = watch.next().await {
            if let Some(tx) = watching_tx.take() {
                let _ = tx.send(());
            }
            let state = config
                .status
                .as_ref()
                .and_then(|s| s.management_state.clone())
                .unwrap_or_default();
            let entry = (state, condition_of(&config, condition::REMOVE_PENDING));
            if seen.last() != Some(&entry) {
                seen.push(entry);
            }
            if seen
                .last()
                .is_some_and(|(state, pending)| state == "Removed" && pending == "False")
            {
                break;
            }
        }
        seen
    });
    // The watch has seen the Config as it is before the change is made.
    tokio::time::timeout(WAIT, watching).await.unwrap().unwrap();
    fixture
        .patch_spec(json!({"managementState": "Removed"}))
        .await;
    let seen = tokio::time::timeout(WAIT, seen).await.unwrap().unwrap();
    let steps: Vec<(&str, &str)> = seen
        .iter()
        .map(|(state, pending)| (state.as_str(), pending.as_str()))
        .skip_while(|step| *step == ("Managed", "False"))
        .collect();
    assert_eq!(
        steps,
        [
            ("Managed", "True"),
            ("Removed", "True"),
            ("Removed", "False")
        ],
        "upstream's three steps, in order: {seen:?}"
    );
    fixture.managed_samples_are(&[], &[]).await;
    let removed = fixture.config_object().await;
    let status = removed.status.unwrap();
    assert!(olm_api::conditions::is_false(
        &status.conditions,
        condition::SAMPLES_EXIST
    ));
    assert!(status.architectures.is_empty());
    assert_eq!(status.version.as_deref(), Some(VERSION));

    // Unmanaged: nothing is recreated or put back.
    fixture
        .patch_spec(json!({"managementState": "Managed"}))
        .await;
    fixture.every_sample_managed().await;
    fixture
        .patch_spec(json!({"managementState": "Unmanaged"}))
        .await;
    fixture
        .status_until("Unmanaged in effect", |config| {
            (config.status.as_ref().unwrap().management_state.as_deref() == Some("Unmanaged"))
                .then_some(())
                .ok_or_else(|| "not yet".to_owned())
        })
        .await;
    fixture
        .streams()
        .delete("fixture-ruby", &DeleteParams::default())
        .await
        .unwrap();
    fixture
        .templates()
        .delete("fixture-app", &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    fixture
        .managed_samples_are(&["fixture-httpd"], &["fixture-db"])
        .await;

    // Managed again: everything is back.
    fixture
        .patch_spec(json!({"managementState": "Managed"}))
        .await;
    fixture.every_sample_managed().await;
    service.stop().await;
    fixture.delete_config().await;
}

#[tokio::test]
async fn a_deleted_config_is_recreated_with_fresh_samples() {
    let fixture = Fixture::new("recreate").await;
    let _apis = sample_apis(&fixture.client).await;
    let service = RunningSamples::start(&fixture.client, fixture.config()).await;
    fixture.samples_exist().await;
    let mut hand_made = fixture.templates().get("fixture-app").await.unwrap();
    hand_made.metadata = kube::api::ObjectMeta {
        name: Some("fixture-hand-made".to_owned()),
        ..Default::default()
    };
    fixture
        .templates()
        .create(&Default::default(), &hand_made)
        .await
        .unwrap();

    for round in 0..3 {
        let before = fixture.config_object().await;
        let old_uid = before.metadata.uid.clone().unwrap();
        let old_stream = fixture.streams().get("fixture-ruby").await.unwrap();
        fixture
            .configs()
            .delete(&fixture.config_name, &DeleteParams::default())
            .await
            .unwrap();
        let configs = fixture.configs();
        let name = fixture.config_name.clone();
        eventually(&format!("round {round}: a new Config"), WAIT, || async {
            match configs.get_opt(&name).await.map_err(|e| e.to_string())? {
                Some(config) if config.metadata.uid.as_deref() != Some(old_uid.as_str()) => Ok(()),
                other => Err(format!("{:?}", other.map(|c| c.metadata.uid))),
            }
        })
        .await;
        let streams = fixture.streams();
        let old_stream_uid = old_stream.metadata.uid.clone();
        eventually(
            &format!("round {round}: samples made anew"),
            WAIT,
            || async {
                let stream = streams
                    .get("fixture-ruby")
                    .await
                    .map_err(|e| e.to_string())?;
                (stream.metadata.uid != old_stream_uid)
                    .then_some(())
                    .ok_or_else(|| "the old one".to_owned())
            },
        )
        .await;
    }
    fixture.samples_exist().await;
    assert!(
        fixture.samples().await.1.contains_key("fixture-hand-made"),
        "templates the operator does not manage survive"
    );
    service.stop().await;
    fixture.delete_config().await;
}

#[tokio::test]
async fn upgrades_in_each_state_move_the_version() {
    let fixture = Fixture::new("upgrade").await;
    let _apis = sample_apis(&fixture.client).await;
    let service = RunningSamples::start(&fixture.client, fixture.config()).await;
    fixture
        .status_until("samples exist at the version", |config| {
            expect_condition(config, condition::SAMPLES_EXIST, "True")?;
            version_is(config, VERSION)
        })
        .await;
    service.stop().await;

    // Managed: every sample carries the new version, then the status does.
    let mut config = fixture.config();
    config.operator_version = "5.0.0-fixture".to_owned();
    let service = RunningSamples::start(&fixture.client, config).await;
    fixture
        .status_until("the status at the new version", |c| {
            version_is(c, "5.0.0-fixture")
        })
        .await;
    for stream in fixture.streams().list(&Default::default()).await.unwrap() {
        assert_eq!(
            stream.metadata.annotations.as_ref().unwrap()[VERSION_ANNOTATION],
            "5.0.0-fixture"
        );
    }
    for template in fixture.templates().list(&Default::default()).await.unwrap() {
        assert_eq!(
            template.metadata.annotations.as_ref().unwrap()[VERSION_ANNOTATION],
            "5.0.0-fixture"
        );
    }

    // Unmanaged and Removed: the version moves, the samples are not touched.
    fixture.import_everything().await;
    let mut running = service;
    for (state, version) in [("Unmanaged", "5.1.0-fixture"), ("Removed", "5.2.0-fixture")] {
        fixture.patch_spec(json!({"managementState": state})).await;
        fixture
            .status_until(&format!("{state} in effect"), |config| {
                let status = config.status.as_ref().unwrap();
                (status.management_state.as_deref() == Some(state)
                    && condition_of(config, condition::REMOVE_PENDING) != "True")
                    .then_some(())
                    .ok_or_else(|| format!("{status:?}"))
            })
            .await;
        running.stop().await;
        let mut config = fixture.config();
        config.operator_version = version.to_owned();
        running = RunningSamples::start(&fixture.client, config).await;
        fixture
            .status_until(&format!("{state}: at {version}"), |c| {
                version_is(c, version)
            })
            .await;
        if state == "Unmanaged" {
            let ruby = fixture.streams().get("fixture-ruby").await.unwrap();
            assert_eq!(
                ruby.metadata.annotations.as_ref().unwrap()[VERSION_ANNOTATION],
                "5.0.0-fixture",
                "an Unmanaged upgrade leaves the samples alone"
            );
        }
    }
    running.stop().await;
    fixture.delete_config().await;
}

fn version_is(config: &olm_api::samples::Config, version: &str) -> Result<(), String> {
    let got = config.status.as_ref().and_then(|s| s.version.as_deref());
    (got == Some(version))
        .then_some(())
        .ok_or_else(|| format!("version {got:?}"))
}

#[tokio::test]
async fn the_architecture_cannot_change() {
    let fixture = Fixture::new("arch").await;
    let _apis = sample_apis(&fixture.client).await;
    let service = RunningSamples::start(&fixture.client, fixture.config()).await;
    fixture.samples_exist().await;
    fixture
        .patch_spec(json!({"architectures": ["ppc64le"]}))
        .await;
    let config = fixture
        .status_until("the change is refused", |c| {
            expect_condition(c, condition::CONFIGURATION_VALID, "False")
        })
        .await;
    let valid = olm_api::conditions::find(
        &config.status.as_ref().unwrap().conditions,
        condition::CONFIGURATION_VALID,
    )
    .unwrap()
    .clone();
    assert_eq!(
        valid.message.as_deref(),
        Some("cannot change architectures from x86_64 to ppc64le")
    );
    assert_eq!(config.status.unwrap().architectures, ["x86_64"]);

    // Put back, it is valid again.
    fixture
        .patch_spec(json!({"architectures": ["x86_64"]}))
        .await;
    fixture
        .status_until("valid again", |c| {
            expect_condition(c, condition::CONFIGURATION_VALID, "True")
        })
        .await;
    service.stop().await;
    fixture.delete_config().await;
}

#[tokio::test]
async fn uninstall_removes_everything_the_operator_made() {
    let fixture = Fixture::new("uninstall").await;
    let _apis = sample_apis(&fixture.client).await;
    let service = RunningSamples::start(&fixture.client, fixture.config()).await;
    fixture.samples_exist().await;
    let failed = json!({"status": {"tags": [{"tag": "1.0", "conditions": [{
        "type": "ImportSuccess", "status": "False", "message": "denied", "generation": 1
    }]}]}});
    fixture
        .streams()
        .patch_status(
            "fixture-httpd",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&failed),
        )
        .await
        .unwrap();
    let config_maps = fixture.config_maps();
    eventually("an error ConfigMap", WAIT, || async {
        config_maps
            .get_opt("fixture-httpd")
            .await
            .map_err(|e| e.to_string())?
            .map(|_| ())
            .ok_or_else(|| "absent".to_owned())
    })
    .await;
    let mut hand_made = fixture.templates().get("fixture-app").await.unwrap();
    hand_made.metadata = kube::api::ObjectMeta {
        name: Some("fixture-hand-made".to_owned()),
        ..Default::default()
    };
    fixture
        .templates()
        .create(&Default::default(), &hand_made)
        .await
        .unwrap();
    // The chart's hook stops the operator's Deployment; here it runs
    // in-process, so it is stopped by hand.
    service.stop().await;

    let removed = samples_operator::controller::uninstall::uninstall(
        &fixture.client,
        &fixture.config(),
        "samples-operator",
        std::time::Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert_eq!(
        removed,
        samples_operator::controller::uninstall::Removed {
            image_streams: 2,
            templates: 2,
            config_maps: 2,
            config: true,
        }
    );
    let (streams, templates) = fixture.samples().await;
    assert!(streams.is_empty(), "{streams:?}");
    assert_eq!(
        templates.keys().collect::<Vec<_>>(),
        ["fixture-hand-made"],
        "what the operator did not make stays"
    );
    let configs = fixture.configs();
    let name = fixture.config_name.clone();
    eventually("the Config is gone", WAIT, || async {
        match configs.get_opt(&name).await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(config) => Err(format!("{:?}", config.metadata)),
        }
    })
    .await;
    assert!(
        config_maps
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .all(|cm| cm.metadata.name.as_deref() == Some("kube-root-ca.crt")),
        "the operator's ConfigMaps are gone"
    );
    // Run again, it finds nothing to do.
    let again = samples_operator::controller::uninstall::uninstall(
        &fixture.client,
        &fixture.config(),
        "samples-operator",
        std::time::Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert_eq!(again, Default::default());
}
