//! The default Config's bootstrap to `Removed` (unreachable registry, IPv6,
//! the cluster image policy), a cluster without the image and template
//! APIs, and the ClusterOperator `openshift-samples`.

use std::time::Duration;

use kube::{
    Api,
    api::{DynamicObject, PostParams},
    discovery::ApiResource,
};
use olm_api::samples::condition;
use samples_operator::{
    controller::APIS_ABSENT_REASON, decide::bootstrap::BOOTSTRAP_ANNOTATION, probe::Probe,
};
use serde_json::json;

use crate::{
    CLUSTER_APIS, Fixture, RunningSamples, VERSION, WAIT, eventually, install_crds,
    install_image_config_api, open_crd, remove_crds, remove_sample_apis, sample_api_crds,
    sample_apis,
};

#[tokio::test]
async fn an_unreachable_registry_bootstraps_to_removed() {
    let fixture = Fixture::new("unreachable").await;
    let _apis = sample_apis(&fixture.client).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let mut config = fixture.config();
    config.bootstrap.probe = Some(
        Probe::public(format!("127.0.0.1:{port}")).connect_timeout(Duration::from_millis(200)),
    );
    config.bootstrap.probe_deadline = Duration::from_secs(1);
    config.bootstrap.probe_interval = Duration::from_millis(250);
    let service = RunningSamples::start(&fixture.client, config).await;
    let made = fixture.config_object().await;
    assert_eq!(made.spec.management_state.as_deref(), Some("Removed"));
    assert_eq!(
        made.metadata.annotations.as_ref().unwrap()[BOOTSTRAP_ANNOTATION],
        "RegistryUnreachable"
    );
    fixture
        .status_until("Removed in effect", |config| {
            (config
                .status
                .as_ref()
                .and_then(|s| s.management_state.as_deref())
                == Some("Removed"))
            .then_some(())
            .ok_or_else(|| "not yet".to_owned())
        })
        .await;
    assert_eq!(fixture.samples().await, Default::default(), "no samples");
    let exposition = service.registry.encode().unwrap();
    assert!(
        exposition.contains("openshift_samples_tbr_inaccessible_info 1"),
        "{exposition}"
    );
    service.stop().await;
    fixture.delete_config().await;
}

#[tokio::test]
async fn an_ipv6_cluster_bootstraps_to_removed() {
    let fixture = Fixture::new("ipv6").await;
    let _apis = sample_apis(&fixture.client).await;
    let mut config = fixture.config();
    config.bootstrap.ipv6 = true;
    let service = RunningSamples::start(&fixture.client, config).await;
    let made = fixture.config_object().await;
    assert_eq!(made.spec.management_state.as_deref(), Some("Removed"));
    assert_eq!(
        made.metadata.annotations.as_ref().unwrap()[BOOTSTRAP_ANNOTATION],
        "IPv6"
    );
    service.stop().await;
    fixture.delete_config().await;
}

#[tokio::test]
async fn an_image_policy_blocking_the_registry_bootstraps_to_removed() {
    let fixture = Fixture::new("policy").await;
    let _exclusive = CLUSTER_APIS.write().await;
    install_crds(&fixture.client, sample_api_crds()).await;
    install_image_config_api(&fixture.client).await;
    let resource = ApiResource {
        group: "config.openshift.io".to_owned(),
        version: "v1".to_owned(),
        api_version: "config.openshift.io/v1".to_owned(),
        kind: "Image".to_owned(),
        plural: "images".to_owned(),
    };
    let images: Api<DynamicObject> = Api::all_with(fixture.client.clone(), &resource);
    let mut image = DynamicObject::new("cluster", &resource);
    image.data =
        json!({"spec": {"registrySources": {"blockedRegistries": ["registry.redhat.io"]}}});
    images.create(&PostParams::default(), &image).await.unwrap();

    let service = RunningSamples::start(&fixture.client, fixture.config()).await;
    let made = fixture.config_object().await;
    assert_eq!(made.spec.management_state.as_deref(), Some("Removed"));
    assert_eq!(
        made.metadata.annotations.as_ref().unwrap()[BOOTSTRAP_ANNOTATION],
        "ImagePolicy"
    );
    service.stop().await;
    fixture.delete_config().await;
    remove_crds(&fixture.client, &[("config.openshift.io", "images")]).await;
}

#[tokio::test]
async fn without_the_image_and_template_apis_it_says_so_and_waits() {
    let fixture = Fixture::new("absent").await;
    let _exclusive = CLUSTER_APIS.write().await;
    remove_sample_apis(&fixture.client).await;
    let service = RunningSamples::start(&fixture.client, fixture.config()).await;
    let config = fixture
        .status_until("the absence is reported", |config| {
            let exists = config
                .status
                .as_ref()
                .and_then(|s| olm_api::conditions::find(&s.conditions, condition::SAMPLES_EXIST))
                .ok_or_else(|| "no condition".to_owned())?;
            (exists.reason.as_deref() == Some(APIS_ABSENT_REASON))
                .then_some(())
                .ok_or_else(|| format!("{exists:?}"))
        })
        .await;
    assert_eq!(config.spec.management_state.as_deref(), Some("Managed"));

    // Once the APIs appear, it gets to work.
    install_crds(&fixture.client, sample_api_crds()).await;
    fixture.every_sample_managed().await;
    fixture.samples_exist().await;
    service.stop().await;
    fixture.delete_config().await;
}

#[tokio::test]
async fn the_cluster_operator_reports_the_samples() {
    let fixture = Fixture::new("co").await;
    let _exclusive = CLUSTER_APIS.write().await;
    install_crds(&fixture.client, sample_api_crds()).await;
    install_crds(
        &fixture.client,
        vec![open_crd(
            "config.openshift.io",
            "clusteroperators",
            "ClusterOperator",
            "Cluster",
            true,
        )],
    )
    .await;
    let mut config = fixture.config();
    config.report_cluster_operator = true;
    let service = RunningSamples::start(&fixture.client, config).await;
    let resource = ApiResource {
        group: "config.openshift.io".to_owned(),
        version: "v1".to_owned(),
        api_version: "config.openshift.io/v1".to_owned(),
        kind: "ClusterOperator".to_owned(),
        plural: "clusteroperators".to_owned(),
    };
    let operators: Api<DynamicObject> = Api::all_with(fixture.client.clone(), &resource);
    let conditions_of = |operator: &DynamicObject| -> Vec<(String, String, String)> {
        operator.data["status"]["conditions"]
            .as_array()
            .map(|conditions| {
                conditions
                    .iter()
                    .map(|c| {
                        let field = |name: &str| c[name].as_str().unwrap_or_default().to_owned();
                        (field("type"), field("status"), field("reason"))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let available = eventually("openshift-samples is Available", WAIT, || async {
        let operator = operators
            .get_opt("openshift-samples")
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "absent".to_owned())?;
        let conditions = conditions_of(&operator);
        conditions
            .contains(&("Available".to_owned(), "True".to_owned(), String::new()))
            .then_some(operator.clone())
            .ok_or_else(|| format!("{conditions:?}"))
    })
    .await;
    assert_eq!(
        available.data["status"]["versions"],
        json!([{"name": "operator", "version": VERSION}])
    );
    let related: Vec<&str> = available.data["status"]["relatedObjects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["resource"].as_str().unwrap())
        .collect();
    assert_eq!(
        related,
        ["configs", "namespaces", "templates", "imagestreams"]
    );
    let message = available.data["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Available")
        .unwrap()["message"]
        .clone();
    assert_eq!(
        message,
        format!("Samples installation successful at {VERSION}")
    );

    fixture.import_everything().await;
    fixture
        .patch_spec(json!({"managementState": "Removed"}))
        .await;
    eventually("openshift-samples says CurrentlyRemoved", WAIT, || async {
        let operator = operators
            .get("openshift-samples")
            .await
            .map_err(|e| e.to_string())?;
        let conditions = conditions_of(&operator);
        (conditions.len() == 3
            && conditions
                .iter()
                .all(|(_, _, reason)| reason == "CurrentlyRemoved"))
        .then_some(())
        .ok_or_else(|| format!("{conditions:?}"))
    })
    .await;
    service.stop().await;
    fixture.delete_config().await;
    remove_crds(
        &fixture.client,
        &[("config.openshift.io", "clusteroperators")],
    )
    .await;
}

#[tokio::test]
async fn uninstall_without_the_image_and_template_apis_finds_nothing_to_remove() {
    let fixture = Fixture::new("uninstall-absent").await;
    let _exclusive = CLUSTER_APIS.write().await;
    remove_sample_apis(&fixture.client).await;
    let service = RunningSamples::start(&fixture.client, fixture.config()).await;
    fixture.config_object().await;
    service.stop().await;
    let removed = samples_operator::controller::uninstall::uninstall(
        &fixture.client,
        &fixture.config(),
        "samples-operator",
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert_eq!(
        removed,
        samples_operator::controller::uninstall::Removed {
            config: true,
            ..Default::default()
        }
    );
    assert!(
        fixture
            .configs()
            .get_opt(&fixture.config_name)
            .await
            .unwrap()
            .is_none_or(|c| c.metadata.deletion_timestamp.is_some())
    );
}

#[tokio::test]
async fn without_the_apis_a_deleted_config_is_let_go_and_made_anew() {
    let fixture = Fixture::new("absent-delete").await;
    let _exclusive = CLUSTER_APIS.write().await;
    remove_sample_apis(&fixture.client).await;
    let service = RunningSamples::start(&fixture.client, fixture.config()).await;
    let first = fixture.config_object().await;
    fixture
        .configs()
        .delete(&fixture.config_name, &Default::default())
        .await
        .unwrap();
    let configs = fixture.configs();
    let name = fixture.config_name.clone();
    let old = first.metadata.uid.clone();
    eventually("a new Config", WAIT, || async {
        match configs.get_opt(&name).await.map_err(|e| e.to_string())? {
            Some(config) if config.metadata.uid != old => Ok(()),
            other => Err(format!("{:?}", other.map(|c| c.metadata))),
        }
    })
    .await;
    service.stop().await;
    fixture.delete_config().await;
}

#[tokio::test]
async fn a_pull_secret_without_registry_redhat_io_shows_in_the_metric() {
    use k8s_openapi::api::core::v1::{Namespace, Secret};

    let fixture = Fixture::new("pull-secret").await;
    let _exclusive = CLUSTER_APIS.write().await;
    install_crds(&fixture.client, sample_api_crds()).await;
    // OpenShift's config API, so that the operator judges the secret.
    install_image_config_api(&fixture.client).await;
    let namespaces: Api<Namespace> = Api::all(fixture.client.clone());
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "openshift-config"}})).unwrap();
    let _ = namespaces.create(&PostParams::default(), &namespace).await;
    let secrets: Api<Secret> = Api::namespaced(fixture.client.clone(), "openshift-config");
    let _ = secrets.delete("pull-secret", &Default::default()).await;
    let secret = |auths: serde_json::Value| -> Secret {
        serde_json::from_value(json!({
            "metadata": {"name": "pull-secret"},
            "type": "kubernetes.io/dockerconfigjson",
            "stringData": {".dockerconfigjson": json!({"auths": auths}).to_string()},
        }))
        .unwrap()
    };
    secrets
        .create(
            &PostParams::default(),
            &secret(json!({"quay.io": {"auth": "Zml4dHVyZQ=="}})),
        )
        .await
        .unwrap();
    let service = RunningSamples::start(&fixture.client, fixture.config()).await;
    let tbr = r#"openshift_samples_invalidsecret_info{reason="missing_tbr_credential"}"#;
    eventually("the missing credential is reported", WAIT, || async {
        let text = service.registry.encode().unwrap();
        text.contains(&format!("{tbr} 1"))
            .then_some(())
            .ok_or_else(|| text.lines().filter(|l| l.contains(tbr)).collect::<String>())
    })
    .await;
    secrets
        .replace(
            "pull-secret",
            &PostParams::default(),
            &secret(json!({"registry.redhat.io": {"auth": "Zml4dHVyZQ=="}})),
        )
        .await
        .unwrap();
    // A change of the Config wakes a reconcile (the secret is not watched).
    fixture
        .patch_spec(json!({"skippedTemplates": ["fixture-db"]}))
        .await;
    eventually("the credential is found", WAIT, || async {
        let text = service.registry.encode().unwrap();
        text.contains(&format!("{tbr} 0"))
            .then_some(())
            .ok_or_else(|| text.lines().filter(|l| l.contains(tbr)).collect::<String>())
    })
    .await;
    service.stop().await;
    fixture.delete_config().await;
    let _ = secrets.delete("pull-secret", &Default::default()).await;
    remove_crds(&fixture.client, &[("config.openshift.io", "images")]).await;
}
