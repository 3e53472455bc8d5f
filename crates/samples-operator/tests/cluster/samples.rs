//! Managed samples: created from the inventory, kept as it has them (edits
//! and deletions put back), skipped ones left alone, the registry override,
//! and the shipped inventory installed whole.

use kube::api::{DeleteParams, Patch, PatchParams};
use olm_api::samples::{VERSION_ANNOTATION, condition};
use samples_operator::{
    controller::InventorySource,
    decide::{
        imports::TAG_TO_IMAGE_CONFIG_MAP,
        inventory::{Flavour, Inventory},
    },
};
use serde_json::json;

use crate::{Fixture, RunningSamples, VERSION, WAIT, eventually, expect_condition, sample_apis};

#[tokio::test]
async fn samples_are_created_kept_and_put_back() {
    let fixture = Fixture::new("kept").await;
    let _apis = sample_apis(&fixture.client).await;
    let service = RunningSamples::start(&fixture.client, fixture.config()).await;

    // The default Config is made, Managed, and the samples follow.
    let config = fixture
        .status_until("samples exist", |config| {
            expect_condition(config, condition::SAMPLES_EXIST, "True")?;
            (config.status.as_ref().unwrap().version.as_deref() == Some(VERSION))
                .then_some(())
                .ok_or_else(|| "version not yet".to_owned())
        })
        .await;
    assert_eq!(config.spec.management_state.as_deref(), Some("Managed"));
    assert_eq!(config.spec.architectures, ["x86_64"]);
    assert_eq!(
        config.metadata.finalizers.as_deref(),
        Some(&["samples.operator.openshift.io/finalizer".to_owned()][..])
    );
    let status = config.status.unwrap();
    for type_ in [
        condition::IMPORT_CREDENTIALS_EXIST,
        condition::CONFIGURATION_VALID,
    ] {
        assert!(
            olm_api::conditions::is_true(&status.conditions, type_),
            "{type_}"
        );
    }
    fixture.every_sample_managed().await;
    let ruby = fixture.streams().get("fixture-ruby").await.unwrap();
    assert_eq!(
        ruby.metadata.annotations.as_ref().unwrap()[VERSION_ANNOTATION],
        VERSION
    );
    let tag_map = fixture
        .config_maps()
        .get(TAG_TO_IMAGE_CONFIG_MAP)
        .await
        .unwrap();
    assert_eq!(
        tag_map.data.unwrap()["fixture-ruby_1.0"],
        "registry.redhat.io/ubi9/ruby-33:latest"
    );

    // An edited image reference is put back; a tag added by hand stays.
    let streams = fixture.streams();
    let mut edited = ruby.clone();
    edited.spec["tags"][0]["from"]["name"] = json!("evil.example/ruby:1");
    edited.spec["tags"].as_array_mut().unwrap().push(
        json!({"name": "mine", "from": {"kind": "DockerImage", "name": "mine.example/ruby:1"}}),
    );
    streams
        .replace("fixture-ruby", &Default::default(), &edited)
        .await
        .unwrap();
    eventually("the edit is put back", WAIT, || async {
        let ruby = streams
            .get("fixture-ruby")
            .await
            .map_err(|e| e.to_string())?;
        let names: Vec<String> = ruby.spec["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tag| tag["from"]["name"].as_str().unwrap_or_default().to_owned())
            .collect();
        (names
            == [
                "registry.redhat.io/ubi9/ruby-33:latest",
                "1.0",
                "mine.example/ruby:1",
            ])
        .then_some(())
        .ok_or_else(|| format!("{names:?}"))
    })
    .await;

    // A deleted sample comes back; so does a Template's edited parameter.
    streams
        .delete("fixture-httpd", &DeleteParams::default())
        .await
        .unwrap();
    fixture
        .templates()
        .patch(
            "fixture-app",
            &PatchParams::default(),
            &Patch::Merge(&json!({"parameters": [{"name": "NAME", "value": "edited"}]})),
        )
        .await
        .unwrap();
    fixture.every_sample_managed().await;
    let templates = fixture.templates();
    eventually("the template is put back", WAIT, || async {
        let app = templates
            .get("fixture-app")
            .await
            .map_err(|e| e.to_string())?;
        (app.body["parameters"][0]["value"] == "fixture-app")
            .then_some(())
            .ok_or_else(|| format!("{:?}", app.body["parameters"]))
    })
    .await;

    service.stop().await;
    fixture.delete_config().await;
}

#[tokio::test]
async fn skipped_samples_are_left_alone_until_unskipped() {
    let fixture = Fixture::new("skipped").await;
    let _apis = sample_apis(&fixture.client).await;
    let service = RunningSamples::start(&fixture.client, fixture.config()).await;
    fixture.every_sample_managed().await;

    fixture
        .patch_spec(
            json!({"skippedImagestreams": ["fixture-ruby"], "skippedTemplates": ["fixture-db"]}),
        )
        .await;
    fixture
        .status_until("the skip lists are in effect", |config| {
            let status = config.status.as_ref().unwrap();
            (status.skipped_imagestreams == ["fixture-ruby"]
                && status.skipped_templates == ["fixture-db"])
            .then_some(())
            .ok_or_else(|| format!("{status:?}"))
        })
        .await;
    fixture
        .managed_samples_are(&["fixture-httpd"], &["fixture-app"])
        .await;
    let (streams, templates) = fixture.samples().await;
    assert_eq!(streams["fixture-ruby"], "false", "kept, marked unmanaged");
    assert_eq!(templates["fixture-db"], "false");

    // A deleted skipped sample stays deleted.
    fixture
        .streams()
        .delete("fixture-ruby", &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    let (streams, _) = fixture.samples().await;
    assert!(!streams.contains_key("fixture-ruby"), "{streams:?}");

    // Unskipped: managed again.
    fixture
        .patch_spec(json!({"skippedImagestreams": null, "skippedTemplates": null}))
        .await;
    fixture.every_sample_managed().await;
    fixture
        .status_until("the skip lists are empty", |config| {
            let status = config.status.as_ref().unwrap();
            (status.skipped_imagestreams.is_empty() && status.skipped_templates.is_empty())
                .then_some(())
                .ok_or_else(|| format!("{status:?}"))
        })
        .await;

    service.stop().await;
    fixture.delete_config().await;
}

#[tokio::test]
async fn the_samples_registry_rewrites_the_image_streams() {
    let fixture = Fixture::new("registry").await;
    let _apis = sample_apis(&fixture.client).await;
    let service = RunningSamples::start(&fixture.client, fixture.config()).await;
    fixture.every_sample_managed().await;
    fixture
        .patch_spec(json!({"samplesRegistry": "mirror.fixture:5000"}))
        .await;
    let streams = fixture.streams();
    eventually("the images come from the mirror", WAIT, || async {
        let mut images = Vec::new();
        for name in ["fixture-ruby", "fixture-httpd"] {
            let stream = streams.get(name).await.map_err(|e| e.to_string())?;
            images.push(
                stream.spec["tags"][0]["from"]["name"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            );
        }
        (images
            == [
                "mirror.fixture:5000/ubi9/ruby-33:latest",
                "mirror.fixture:5000/fixture/httpd:2.4",
            ])
        .then_some(())
        .ok_or_else(|| format!("{images:?}"))
    })
    .await;
    fixture
        .status_until("the registry is in effect", |config| {
            (config.status.as_ref().unwrap().samples_registry.as_deref()
                == Some("mirror.fixture:5000"))
            .then_some(())
            .ok_or_else(|| "not yet".to_owned())
        })
        .await;
    service.stop().await;
    fixture.delete_config().await;
}

/// The shipped inventory, whole, on a real API server: the figure of how
/// long a first install of every sample takes is printed.
#[tokio::test]
async fn the_shipped_inventory_installs_whole() {
    let fixture = Fixture::new("shipped").await;
    let _apis = sample_apis(&fixture.client).await;
    let inventory: Inventory = Inventory::embedded(Flavour::Ocp, "x86_64")
        .unwrap()
        .unwrap();
    let mut config = fixture.config();
    config.inventory = InventorySource::Embedded(Flavour::Ocp);
    let started = std::time::Instant::now();
    let service = RunningSamples::start(&fixture.client, config).await;
    let mut streams: Vec<&str> = inventory.image_streams.keys().map(String::as_str).collect();
    let mut templates: Vec<&str> = inventory.templates.keys().map(String::as_str).collect();
    streams.sort_unstable();
    templates.sort_unstable();
    fixture.managed_samples_are(&streams, &templates).await;
    fixture
        .status_until("samples exist", |config| {
            expect_condition(config, condition::SAMPLES_EXIST, "True")
        })
        .await;
    println!(
        "the shipped ocp-x86_64 inventory ({} ImageStreams, {} Templates) installed in {:?}",
        streams.len(),
        templates.len(),
        started.elapsed()
    );
    // Converged means quiet: more reconciles (status writes wake it, and
    // the resync is 3 s) write no sample again.
    let settled = service.sample_writes();
    tokio::time::sleep(std::time::Duration::from_secs(7)).await;
    assert_eq!(
        service.sample_writes(),
        settled,
        "samples rewritten after convergence"
    );
    service.stop().await;
    fixture.delete_config().await;
}
