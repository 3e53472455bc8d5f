//! Building a client from the command-line arguments.

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use olm_runtime::config::KubeArgs;

use crate::init_logs;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_from_a_kubeconfig_path_reaches_the_api_server() {
    init_logs();
    let plane = olm_testkit::control_plane();
    let args = KubeArgs {
        kubeconfig: Some(plane.kubeconfig_path().to_owned()),
        context: None,
    };
    let client = args.client().await.expect("client builds");
    let namespaces: Api<Namespace> = Api::all(client);
    let default = namespaces
        .get("default")
        .await
        .expect("API server reachable");
    assert_eq!(default.metadata.name.as_deref(), Some("default"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_context_is_a_configuration_error() {
    let plane = olm_testkit::control_plane();
    let args = KubeArgs {
        kubeconfig: Some(plane.kubeconfig_path().to_owned()),
        context: Some("sample-missing-context".to_owned()),
    };
    let error = args.config().await.expect_err("no such context");
    assert_eq!(error.category(), "kube_config", "{error}");
}
