//! Credentials from pull secrets, including hostile ones.

use std::collections::BTreeMap;

use base64::Engine as _;
use olm_oci::{
    Credentials,
    pull_secrets::{
        DOCKER_CONFIG_JSON_KEY, DOCKER_CONFIG_JSON_TYPE, DOCKERCFG_KEY, DOCKERCFG_TYPE, PullSecret,
        credentials, local_auth_files, secret_names,
    },
};

fn secret(name: &str, type_: &str, key: &str, body: &str) -> PullSecret {
    PullSecret {
        name: name.into(),
        type_: type_.into(),
        data: BTreeMap::from([(key.to_owned(), body.as_bytes().to_vec())]),
    }
}

fn auth(user: &str, password: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

#[test]
fn both_secret_types_give_credentials_and_later_secrets_win() {
    let json = secret(
        "fixture-json",
        DOCKER_CONFIG_JSON_TYPE,
        DOCKER_CONFIG_JSON_KEY,
        &format!(
            r#"{{"auths":{{"registry.fixture:5000":{{"auth":"{}"}}}}}}"#,
            auth("alice", "one")
        ),
    );
    let legacy = secret(
        "fixture-cfg",
        DOCKERCFG_TYPE,
        DOCKERCFG_KEY,
        &format!(
            r#"{{"https://other.fixture":{{"auth":"{}"}}}}"#,
            auth("bob", "two")
        ),
    );
    let override_ = secret(
        "fixture-override",
        DOCKER_CONFIG_JSON_TYPE,
        DOCKER_CONFIG_JSON_KEY,
        r#"{"auths":{"registry.fixture:5000":{"username":"carol","password":"three"}}}"#,
    );
    let (config, notes) = credentials(&[json, legacy, override_]);
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(
        config.for_registry("registry.fixture:5000"),
        Some(&Credentials::basic("carol", "three"))
    );
    assert_eq!(
        config.for_registry("other.fixture"),
        Some(&Credentials::basic("bob", "two"))
    );
}

#[test]
fn unusable_secrets_are_noted_not_fatal() {
    let cases = [
        secret("wrong-key", DOCKER_CONFIG_JSON_TYPE, DOCKERCFG_KEY, "{}"),
        secret(
            "not-json",
            DOCKER_CONFIG_JSON_TYPE,
            DOCKER_CONFIG_JSON_KEY,
            "{{{",
        ),
        secret(
            "bad-auth",
            DOCKER_CONFIG_JSON_TYPE,
            DOCKER_CONFIG_JSON_KEY,
            r#"{"auths":{"r":{"auth":"!!"}}}"#,
        ),
        secret("opaque-empty", "Opaque", "token", "x"),
        PullSecret {
            name: "huge".into(),
            type_: DOCKER_CONFIG_JSON_TYPE.into(),
            data: BTreeMap::from([(
                DOCKER_CONFIG_JSON_KEY.to_owned(),
                vec![b' '; 2 * 1024 * 1024],
            )]),
        },
    ];
    let (config, notes) = credentials(&cases);
    assert!(config.is_empty());
    assert_eq!(notes.len(), cases.len(), "{notes:?}");
    for (note, case) in notes.iter().zip(&cases) {
        assert!(note.contains(&case.name), "{note}");
    }
}

#[test]
fn an_untyped_secret_is_tried_with_both_keys() {
    let (config, notes) = credentials(&[secret(
        "untyped",
        "",
        DOCKER_CONFIG_JSON_KEY,
        r#"{"auths":{"r.fixture":{"username":"u","password":"p"}}}"#,
    )]);
    assert!(notes.is_empty());
    assert_eq!(
        config.for_registry("r.fixture"),
        Some(&Credentials::basic("u", "p"))
    );
}

#[test]
fn the_service_accounts_secrets_come_first_and_the_catalogs_win() {
    assert_eq!(
        secret_names(
            ["sa-one", "", "shared"],
            ["shared", "catalog-one", "catalog-one"]
        ),
        ["sa-one", "shared", "catalog-one"]
    );
    assert!(secret_names([], []).is_empty());
}

#[test]
fn local_auth_files_follow_docker_then_containers_then_registry_auth_file() {
    let env = |vars: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| std::ffi::OsString::from(value))
        }
    };
    let all = local_auth_files(env(&[
        ("HOME", "/home/fixture"),
        ("DOCKER_CONFIG", "/etc/docker-fixture"),
        ("XDG_RUNTIME_DIR", "/run/user/7"),
        ("REGISTRY_AUTH_FILE", "/tmp/auth-fixture.json"),
    ]));
    let text: Vec<String> = all.iter().map(|p| p.display().to_string()).collect();
    assert_eq!(
        text,
        [
            "/etc/docker-fixture/config.json",
            "/run/user/7/containers/auth.json",
            "/tmp/auth-fixture.json"
        ]
    );
    let home_only = local_auth_files(env(&[("HOME", "/home/fixture")]));
    assert_eq!(
        home_only,
        [std::path::PathBuf::from(
            "/home/fixture/.docker/config.json"
        )]
    );
    assert!(local_auth_files(env(&[])).is_empty());
}
