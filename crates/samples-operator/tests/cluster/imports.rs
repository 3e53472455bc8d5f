//! Import tracking: a failed import (written into ImageStream status, as
//! OpenShift's image API would) gets a ConfigMap, a condition and a retry;
//! a successful one clears them.

use kube::{
    Api,
    api::{DynamicObject, ListParams, Patch, PatchParams},
    discovery::ApiResource,
};
use olm_api::samples::condition;
use samples_operator::decide::imports::IMAGESTREAM_ERROR_LABEL;
use serde_json::json;

use crate::{Fixture, RunningSamples, WAIT, eventually, expect_condition, sample_apis};

#[tokio::test]
async fn import_errors_appear_are_retried_and_clear() {
    let fixture = Fixture::new("imports").await;
    let _apis = sample_apis(&fixture.client).await;
    let service = RunningSamples::start(&fixture.client, fixture.config()).await;
    fixture.samples_exist().await;

    let streams = fixture.streams();
    let failed = json!({"status": {"tags": [{"tag": "1.0", "items": null, "conditions": [{
        "type": "ImportSuccess", "status": "False", "reason": "Unauthorized",
        "message": "unauthorized: fixture registry says no", "generation": 2,
        "lastTransitionTime": "2026-01-01T00:00:00Z"
    }]}]}});
    streams
        .patch_status(
            "fixture-ruby",
            &PatchParams::default(),
            &Patch::Merge(&failed),
        )
        .await
        .unwrap();

    let config_maps = fixture.config_maps();
    let map = eventually("an error ConfigMap", WAIT, || async {
        config_maps
            .get_opt("fixture-ruby")
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "absent".to_owned())
    })
    .await;
    assert_eq!(
        map.metadata.labels.as_ref().unwrap()[IMAGESTREAM_ERROR_LABEL],
        "true"
    );
    assert_eq!(
        map.data.as_ref().unwrap()["1.0"],
        "unauthorized: fixture registry says no"
    );
    let config = fixture
        .status_until("ImportImageErrorsExist", |c| {
            expect_condition(c, condition::IMPORT_IMAGE_ERRORS_EXIST, "True")
        })
        .await;
    let errors = olm_api::conditions::find(
        &config.status.as_ref().unwrap().conditions,
        condition::IMPORT_IMAGE_ERRORS_EXIST,
    )
    .unwrap()
    .clone();
    assert!(
        errors
            .message
            .unwrap()
            .starts_with("ImageStream import errors have been detected.")
    );

    // A retry: an ImageStreamImport of the failing tag.
    let resource = ApiResource {
        group: "image.openshift.io".to_owned(),
        version: "v1".to_owned(),
        api_version: "image.openshift.io/v1".to_owned(),
        kind: "ImageStreamImport".to_owned(),
        plural: "imagestreamimports".to_owned(),
    };
    let imports: Api<DynamicObject> =
        Api::namespaced_with(fixture.client.clone(), fixture.samples.name(), &resource);
    let retry = eventually("an import retry", WAIT, || async {
        imports
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .into_iter()
            .next()
            .ok_or_else(|| "none yet".to_owned())
    })
    .await;
    assert_eq!(retry.metadata.name.as_deref(), Some("fixture-ruby"));
    assert_eq!(retry.data["spec"]["import"], true);
    assert_eq!(
        retry.data["spec"]["images"][0]["from"],
        json!({"kind": "DockerImage", "name": "registry.redhat.io/ubi9/ruby-33:latest"})
    );
    assert_eq!(retry.data["spec"]["images"][0]["to"]["name"], "1.0");
    // Counted once the create is answered, a moment after the import can
    // be seen.
    let series =
        r#"openshift_samples_retry_imagestream_import_total{imagestreamname="fixture-ruby"} 1"#;
    eventually("the retry counted", WAIT, || async {
        let exposition = service.registry.encode().unwrap();
        if exposition.contains(series) {
            Ok(())
        } else {
            Err(exposition)
        }
    })
    .await;

    // A later successful import clears the ConfigMap and the condition.
    let imported = json!({"status": {"tags": [{"tag": "1.0", "items": [{
        "image": "sha256:fixture", "dockerImageReference": "registry.redhat.io/ubi9/ruby-33@sha256:fixture",
        "generation": 3, "created": "2026-01-01T00:01:00Z"
    }], "conditions": null}]}});
    streams
        .patch_status(
            "fixture-ruby",
            &PatchParams::default(),
            &Patch::Merge(&imported),
        )
        .await
        .unwrap();
    eventually("the error ConfigMap is deleted", WAIT, || async {
        match config_maps
            .get_opt("fixture-ruby")
            .await
            .map_err(|e| e.to_string())?
        {
            None => Ok(()),
            Some(_) => Err("still there".to_owned()),
        }
    })
    .await;
    fixture
        .status_until("no import errors", |c| {
            expect_condition(c, condition::IMPORT_IMAGE_ERRORS_EXIST, "False")
        })
        .await;
    service.stop().await;
    fixture.delete_config().await;
}
