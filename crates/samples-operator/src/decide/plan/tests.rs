#![allow(clippy::unwrap_used)]

use olm_api::samples::{ConfigSpec, OPERATOR_NAMESPACE};
use proptest::prelude::*;
use serde_json::json;

use super::*;

const VERSION: &str = "4.99.0-fixture";
const OLD_VERSION: &str = "4.98.0-fixture";

/// Two ImageStreams (one with an ImageStreamTag alias) and two Templates.
fn inventory() -> Inventory {
    let stream = |name: &str, image: &str| {
        json!({
            "kind": "ImageStream", "apiVersion": "image.openshift.io/v1",
            "metadata": {"name": name, "annotations": {"openshift.io/display-name": name}},
            "spec": {"tags": [
                {"name": "latest", "from": {"kind": "ImageStreamTag", "name": "1.0"},
                 "generation": null, "referencePolicy": {"type": ""}},
                {"name": "1.0", "from": {"kind": "DockerImage", "name": image},
                 "generation": null, "importPolicy": {}, "referencePolicy": {"type": "Local"}}
            ]}
        })
    };
    let template = |name: &str| {
        json!({
            "kind": "Template", "apiVersion": "template.openshift.io/v1",
            "metadata": {"name": name, "labels": {"samples.fixture/template": name}},
            "objects": [{"kind": "Service", "apiVersion": "v1", "metadata": {"name": "${NAME}"}}],
            "parameters": [{"name": "NAME", "value": name}]
        })
    };
    let files = [
        (
            "fixture/imagestreams/ruby.json",
            stream("fixture-ruby", "registry.redhat.io/ubi9/ruby-33:latest"),
        ),
        (
            "fixture/imagestreams/httpd.json",
            stream("fixture-httpd", "quay.io/fixture/httpd:2.4"),
        ),
        ("fixture/templates/app.json", template("fixture-app")),
        ("fixture/templates/db.json", template("fixture-db")),
    ];
    Inventory::from_files(
        files
            .into_iter()
            .map(|(path, value)| (path, serde_json::to_vec(&value).unwrap())),
    )
    .unwrap()
}

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + second).unwrap()
}

fn config(state: &str) -> Config {
    Config {
        metadata: ObjectMeta {
            name: Some("cluster".to_owned()),
            finalizers: Some(vec![CONFIG_FINALIZER.to_owned()]),
            ..ObjectMeta::default()
        },
        spec: ConfigSpec {
            management_state: Some(state.to_owned()),
            architectures: vec!["x86_64".to_owned()],
            ..ConfigSpec::default()
        },
        status: None,
    }
}

/// The cluster as a plan sees it, and a crude API server for the writes.
#[derive(Clone, Debug)]
struct World {
    config: Config,
    streams: BTreeMap<String, ImageStream>,
    templates: BTreeMap<String, Template>,
    error_maps: BTreeMap<String, ConfigMap>,
    tag_to_image: Option<ConfigMap>,
    retries: BTreeMap<String, Timestamp>,
    imports: Vec<String>,
    finalizer_removed: bool,
    resource_version: u64,
    now: Timestamp,
    policy: Option<Result<ImagePolicy, String>>,
    write_failure: Option<WriteFailure>,
}

impl World {
    fn new(config: Config) -> Self {
        Self {
            config,
            streams: BTreeMap::new(),
            templates: BTreeMap::new(),
            error_maps: BTreeMap::new(),
            tag_to_image: None,
            retries: BTreeMap::new(),
            imports: Vec::new(),
            finalizer_removed: false,
            resource_version: 1,
            now: at(0),
            policy: None,
            write_failure: None,
        }
    }

    fn plan(&self, inventory: &Inventory) -> Plan {
        plan(&Observed {
            config: &self.config,
            inventory,
            image_streams: &self.streams,
            templates: &self.templates,
            error_config_maps: &self.error_maps,
            tag_to_image: self.tag_to_image.as_ref(),
            operator_namespace: OPERATOR_NAMESPACE,
            operator_version: VERSION,
            image_policy: self
                .policy
                .as_ref()
                .map(|policy| policy.as_ref().map_err(String::as_str)),
            write_failure: self.write_failure.as_ref(),
            last_retries: &self.retries,
            now: self.now,
        })
    }

    fn next_version(&mut self) -> Option<String> {
        self.resource_version += 1;
        Some(self.resource_version.to_string())
    }

    /// Applies a plan as the API server would.
    fn apply(&mut self, plan: &Plan) {
        self.config.status = Some(plan.status.clone());
        for write in &plan.writes {
            match write.clone() {
                Write::CreateImageStream(mut stream) | Write::ReplaceImageStream(mut stream) => {
                    stream.metadata.resource_version = self.next_version();
                    as_openshift_stores_it(&mut stream);
                    let name = stream.metadata.name.clone().unwrap();
                    let status = self
                        .streams
                        .get(&name)
                        .map(|s| s.status.clone())
                        .unwrap_or_default();
                    stream.status = status;
                    self.streams.insert(name, stream);
                }
                Write::CreateTemplate(mut template) | Write::ReplaceTemplate(mut template) => {
                    template.metadata.resource_version = self.next_version();
                    self.templates
                        .insert(template.metadata.name.clone().unwrap(), template);
                }
                Write::DeleteImageStream(name) => {
                    self.streams.remove(&name);
                }
                Write::DeleteTemplate(name) => {
                    self.templates.remove(&name);
                }
                Write::ApplyConfigMap(map) => {
                    let name = map.metadata.name.clone().unwrap();
                    if name == super::super::imports::TAG_TO_IMAGE_CONFIG_MAP {
                        self.tag_to_image = Some(map);
                    } else {
                        self.error_maps.insert(name, map);
                    }
                }
                Write::DeleteConfigMap(name) => {
                    self.error_maps.remove(&name);
                }
                Write::RetryImport { stream, request } => {
                    self.retries.insert(stream.clone(), self.now);
                    if request.is_some() {
                        self.imports.push(stream);
                    }
                }
                Write::RemoveFinalizer => self.finalizer_removed = true,
                Write::ForgetBootstrapReason => {
                    if let Some(annotations) = self.config.metadata.annotations.as_mut() {
                        annotations.remove(BOOTSTRAP_ANNOTATION);
                    }
                }
            }
        }
    }

    /// Plans and applies until nothing is left to write; returns the last
    /// plan and how many rounds it took.
    fn converge(&mut self, inventory: &Inventory) -> (Plan, usize) {
        for round in 1..=10 {
            let decided = self.plan(inventory);
            let status_changed = self.config.status.as_ref() != Some(&decided.status);
            if decided.writes.is_empty() && !status_changed {
                return (decided, round);
            }
            self.apply(&decided);
            self.now = self
                .now
                .checked_add(jiff::SignedDuration::from_secs(1))
                .unwrap();
        }
        panic!("no convergence in 10 rounds: {:#?}", self.plan(inventory));
    }

    fn condition(&self, type_: &str) -> ConfigCondition {
        conditions::find(&self.config.status.as_ref().unwrap().conditions, type_)
            .unwrap()
            .clone()
    }

    fn fail_import(&mut self, stream: &str, tag: &str, message: &str) {
        let stream = self.streams.get_mut(stream).unwrap();
        stream.status = json!({"tags": [{"tag": tag, "items": null, "conditions": [
            {"type": "ImportSuccess", "status": "False", "message": message, "generation": 2}
        ]}]});
    }

    fn import_everything(&mut self) {
        for stream in self.streams.values_mut() {
            let tags: Vec<Value> = stream
                .spec_tags()
                .iter()
                .map(|tag| json!({"tag": tag.name, "items": [{"image": "sha256:fixture", "dockerImageReference": "x", "generation": 1}]}))
                .collect();
            stream.status = json!({ "tags": tags });
        }
    }
}

/// What OpenShift's API server does to an ImageStream it stores: tags
/// sorted by name, an empty reference policy read as `Source`, defaults
/// filled in.
fn as_openshift_stores_it(stream: &mut ImageStream) {
    stream.spec["lookupPolicy"] = json!({"local": false});
    if let Some(tags) = stream.spec.get_mut("tags").and_then(Value::as_array_mut) {
        tags.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        for tag in tags {
            if tag["referencePolicy"]["type"]
                .as_str()
                .unwrap_or_default()
                .is_empty()
            {
                tag["referencePolicy"] = json!({"type": "Source"});
            }
            tag["generation"] = json!(3);
            tag["importPolicy"]["importMode"] = json!("Legacy");
        }
    }
}

fn names<K>(map: &BTreeMap<String, K>) -> Vec<&str> {
    map.keys().map(String::as_str).collect()
}

#[test]
fn managed_creates_every_sample_then_reports_them() {
    let inventory = inventory();
    let mut world = World::new(config("Managed"));
    let first = world.plan(&inventory);
    let kinds: Vec<(&str, &str)> = first.writes.iter().map(|w| (w.kind(), w.name())).collect();
    assert_eq!(
        kinds,
        [
            ("ConfigMap", "imagestreamtag-to-image"),
            ("ImageStream", "fixture-httpd"),
            ("ImageStream", "fixture-ruby"),
            ("Template", "fixture-app"),
            ("Template", "fixture-db"),
        ]
    );
    assert!(conditions::is_false(
        &first.status.conditions,
        condition::SAMPLES_EXIST
    ));
    let types: Vec<&str> = first
        .status
        .conditions
        .iter()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(types, CONDITIONS.map(|(type_, _)| type_));
    assert_eq!(first.status.version, None, "nothing is at a version yet");

    let (_, rounds) = world.converge(&inventory);
    assert_eq!(rounds, 3, "create, then report, then nothing");
    let status = world.config.status.clone().unwrap();
    assert_eq!(status.management_state.as_deref(), Some("Managed"));
    assert_eq!(status.version.as_deref(), Some(VERSION));
    assert_eq!(status.architectures, ["x86_64"]);
    assert_eq!(world.condition(condition::SAMPLES_EXIST).status, TRUE);
    assert_eq!(world.condition(condition::CONFIGURATION_VALID).status, TRUE);
    assert_eq!(
        world.condition(condition::IMPORT_CREDENTIALS_EXIST).status,
        TRUE
    );
    let ruby = &world.streams["fixture-ruby"];
    assert!(is_managed(&ruby.metadata));
    assert_eq!(version_of(&ruby.metadata), Some(VERSION));
    assert_eq!(
        ruby.metadata.annotations.as_ref().unwrap()["openshift.io/display-name"],
        "fixture-ruby",
        "the inventory's own annotations are kept"
    );
    let tag_map = world.tag_to_image.as_ref().unwrap();
    assert_eq!(
        tag_map.data.as_ref().unwrap()["fixture-ruby_1.0"],
        "registry.redhat.io/ubi9/ruby-33:latest"
    );
    assert_eq!(version_of(&tag_map.metadata), Some(VERSION));
}

#[test]
fn edits_to_managed_samples_are_put_back_but_server_defaults_and_extra_tags_are_not_drift() {
    let inventory = inventory();
    let mut world = World::new(config("Managed"));
    world.converge(&inventory);

    // Server defaults and a tag added outside the inventory: in sync.
    let ruby = world.streams.get_mut("fixture-ruby").unwrap();
    ruby.spec["lookupPolicy"] = json!({"local": false});
    ruby.spec["tags"][0]["importPolicy"] = json!({"importMode": "Legacy"});
    ruby.spec["tags"][0]["generation"] = json!(4);
    ruby.spec["tags"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "eol-fixture", "from": {"kind": "DockerImage", "name": "old.example/ruby:1"}}));
    assert!(world.plan(&inventory).writes.is_empty());

    // A changed image and a dropped label: both put back, the extra tag kept.
    let ruby = world.streams.get_mut("fixture-ruby").unwrap();
    ruby.spec["tags"][0]["from"]["name"] = json!("evil.example/ruby:1");
    ruby.metadata.labels.as_mut().unwrap().remove(MANAGED_LABEL);
    ruby.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("user.fixture/keep".to_owned(), "yes".to_owned());
    let rv = ruby.metadata.resource_version.clone();
    let decided = world.plan(&inventory);
    let [Write::ReplaceImageStream(replaced)] = decided.writes.as_slice() else {
        panic!("one replace expected: {:?}", decided.writes);
    };
    assert_eq!(
        replaced.metadata.resource_version, rv,
        "guarded by the version read"
    );
    assert!(is_managed(&replaced.metadata));
    assert_eq!(
        replaced.metadata.labels.as_ref().unwrap()["user.fixture/keep"],
        "yes"
    );
    let images: Vec<&str> = replaced.spec["tags"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tag| tag["from"]["name"].as_str())
        .collect();
    assert_eq!(
        images,
        [
            "1.0",
            "registry.redhat.io/ubi9/ruby-33:latest",
            "old.example/ruby:1"
        ],
        "the inventory's tags in its order, then the extra one"
    );

    // A template edit is put back too.
    world.apply(&decided);
    world.templates.get_mut("fixture-app").unwrap().body["objects"] = json!([{"kind": "Secret"}]);
    let decided = world.plan(&inventory);
    assert!(matches!(
        decided.writes.as_slice(),
        [Write::ReplaceTemplate(t)] if t.body["objects"][0]["kind"] == "Service"
    ));
}

#[test]
fn a_deleted_managed_sample_is_recreated() {
    let inventory = inventory();
    let mut world = World::new(config("Managed"));
    world.converge(&inventory);
    world.streams.remove("fixture-httpd");
    world.templates.remove("fixture-db");
    let decided = world.plan(&inventory);
    let written: Vec<&str> = decided.writes.iter().map(Write::name).collect();
    assert_eq!(written, ["fixture-httpd", "fixture-db"]);
    assert!(conditions::is_false(
        &decided.status.conditions,
        condition::SAMPLES_EXIST
    ));
    world.converge(&inventory);
    assert_eq!(world.condition(condition::SAMPLES_EXIST).status, TRUE);
}

#[test]
fn skipped_samples_are_left_alone_and_marked_unmanaged() {
    let inventory = inventory();
    let mut world = World::new(config("Managed"));
    world.converge(&inventory);
    world.config.spec.skipped_imagestreams = vec!["fixture-ruby".to_owned()];
    world.config.spec.skipped_templates = vec!["fixture-db".to_owned()];
    world.converge(&inventory);
    let status = world.config.status.clone().unwrap();
    assert_eq!(status.skipped_imagestreams, ["fixture-ruby"]);
    assert_eq!(status.skipped_templates, ["fixture-db"]);
    assert!(!is_managed(&world.streams["fixture-ruby"].metadata));
    assert!(!is_managed(&world.templates["fixture-db"].metadata));

    // Deleted or edited while skipped: left alone.
    world.streams.remove("fixture-ruby");
    world
        .templates
        .get_mut("fixture-db")
        .unwrap()
        .body
        .insert("message".to_owned(), json!("mine"));
    assert!(world.plan(&inventory).writes.is_empty());
    assert_eq!(world.condition(condition::SAMPLES_EXIST).status, TRUE);

    // Unskipped: managed again.
    world.config.spec.skipped_imagestreams.clear();
    world.config.spec.skipped_templates.clear();
    world.converge(&inventory);
    assert!(is_managed(&world.streams["fixture-ruby"].metadata));
    assert!(is_managed(&world.templates["fixture-db"].metadata));
    assert!(world.templates["fixture-db"].body.get("message").is_none());
    assert!(
        world
            .config
            .status
            .as_ref()
            .unwrap()
            .skipped_imagestreams
            .is_empty()
    );
}

#[test]
fn samples_outside_the_inventory_are_never_touched() {
    let inventory = inventory();
    let mut world = World::new(config("Managed"));
    let mut stranger = inventory.image_streams["fixture-ruby"].clone();
    stranger.metadata.name = Some("fixture-someone-elses".to_owned());
    label_managed(&mut stranger.metadata, OLD_VERSION);
    world
        .streams
        .insert("fixture-someone-elses".to_owned(), stranger.clone());
    world.converge(&inventory);
    assert_eq!(world.streams["fixture-someone-elses"], stranger);
}

#[test]
fn the_samples_registry_rewrites_image_streams_only() {
    let inventory = inventory();
    let mut world = World::new(config("Managed"));
    world.config.spec.samples_registry = Some("mirror.fixture:5000".to_owned());
    world.converge(&inventory);
    assert_eq!(
        world.streams["fixture-ruby"].spec["tags"][0]["from"]["name"],
        "mirror.fixture:5000/ubi9/ruby-33:latest"
    );
    assert_eq!(
        world.streams["fixture-ruby"].spec["tags"][1]["from"]["name"], "1.0",
        "ImageStreamTag references are not rewritten"
    );
    assert_eq!(
        world
            .config
            .status
            .as_ref()
            .unwrap()
            .samples_registry
            .as_deref(),
        Some("mirror.fixture:5000")
    );
    assert_eq!(
        world.tag_to_image.as_ref().unwrap().data.as_ref().unwrap()["fixture-ruby_1.0"],
        "registry.redhat.io/ubi9/ruby-33:latest",
        "the mirroring map names the original images"
    );

    // Changing the registry back rewrites them back.
    world.config.spec.samples_registry = None;
    world.converge(&inventory);
    assert_eq!(
        world.streams["fixture-httpd"].spec["tags"][0]["from"]["name"],
        "quay.io/fixture/httpd:2.4"
    );
}

#[test]
fn an_upgrade_rewrites_every_sample_and_then_moves_the_version() {
    let inventory = inventory();
    let mut world = World::new(config("Managed"));
    world.converge(&inventory);
    // The samples as an older operator left them.
    for stream in world.streams.values_mut() {
        label_managed(&mut stream.metadata, OLD_VERSION);
    }
    for template in world.templates.values_mut() {
        label_managed(&mut template.metadata, OLD_VERSION);
    }
    world.config.status.as_mut().unwrap().version = Some(OLD_VERSION.to_owned());
    let decided = world.plan(&inventory);
    assert_eq!(decided.writes.len(), 4, "every sample rewritten");
    assert_eq!(
        decided.status.version.as_deref(),
        Some(OLD_VERSION),
        "the version moves only once the samples carry it"
    );
    world.converge(&inventory);
    assert_eq!(
        world.config.status.as_ref().unwrap().version.as_deref(),
        Some(VERSION)
    );
}

#[test]
fn import_failures_get_a_config_map_a_retry_and_a_condition_until_they_clear() {
    let inventory = inventory();
    let mut world = World::new(config("Managed"));
    world.converge(&inventory);
    world.fail_import("fixture-ruby", "1.0", "unauthorized: fixture");
    let (decided, _) = world.converge(&inventory);
    let map = &world.error_maps["fixture-ruby"];
    assert_eq!(map.data.as_ref().unwrap()["1.0"], "unauthorized: fixture");
    assert_eq!(
        world.imports,
        ["fixture-ruby"],
        "one retry, not one per round"
    );
    assert_eq!(decided.failing_streams, ["fixture-ruby"]);
    assert_eq!(
        decided.streams,
        [
            ("fixture-httpd".to_owned(), false),
            ("fixture-ruby".to_owned(), true)
        ]
    );
    let errors = world.condition(condition::IMPORT_IMAGE_ERRORS_EXIST);
    assert_eq!(errors.status, TRUE);
    assert_eq!(errors.message.as_deref(), Some(IMPORT_ERRORS_MESSAGE));
    assert!(
        decided
            .requeue_after
            .is_some_and(|after| after <= IMPORT_RETRY_INTERVAL)
    );

    // After the interval, retried again.
    world.now = world
        .now
        .checked_add(jiff::SignedDuration::try_from(IMPORT_RETRY_INTERVAL).unwrap())
        .unwrap();
    world.converge(&inventory);
    assert_eq!(world.imports.len(), 2);

    // A successful import clears it all.
    world.import_everything();
    world.converge(&inventory);
    assert!(world.error_maps.is_empty());
    assert_eq!(
        world.condition(condition::IMPORT_IMAGE_ERRORS_EXIST).status,
        FALSE
    );
}

#[test]
fn error_config_maps_of_skipped_streams_are_deleted() {
    let inventory = inventory();
    let mut world = World::new(config("Managed"));
    world.converge(&inventory);
    world.fail_import("fixture-ruby", "1.0", "denied");
    world.converge(&inventory);
    assert!(world.error_maps.contains_key("fixture-ruby"));
    world.config.spec.skipped_imagestreams = vec!["fixture-ruby".to_owned()];
    world.converge(&inventory);
    assert!(world.error_maps.is_empty());
    assert_eq!(
        world.condition(condition::IMPORT_IMAGE_ERRORS_EXIST).status,
        FALSE
    );
}

#[test]
fn unmanaged_writes_nothing_but_its_status() {
    let inventory = inventory();
    let mut world = World::new(config("Managed"));
    world.converge(&inventory);
    world.config.spec.management_state = Some("Unmanaged".to_owned());
    world.streams.remove("fixture-ruby");
    world.templates.get_mut("fixture-app").unwrap().body["parameters"][0]["value"] =
        json!("edited");
    let (_, rounds) = world.converge(&inventory);
    assert_eq!(rounds, 2, "one status write");
    assert!(!world.streams.contains_key("fixture-ruby"));
    let status = world.config.status.clone().unwrap();
    assert_eq!(status.management_state.as_deref(), Some("Unmanaged"));
    assert_eq!(status.version.as_deref(), Some(VERSION));

    // Back to Managed: everything put back.
    world.config.spec.management_state = Some("Managed".to_owned());
    world.converge(&inventory);
    assert!(world.streams.contains_key("fixture-ruby"));
    assert_eq!(
        world.templates["fixture-app"].body["parameters"][0]["value"],
        "fixture-app"
    );
}

#[test]
fn removed_goes_through_upstreams_three_steps() {
    let inventory = inventory();
    let mut world = World::new(config("Managed"));
    world.converge(&inventory);
    world.import_everything();
    let mut hand_made = inventory.templates["fixture-app"].clone();
    hand_made.metadata.name = Some("fixture-hand-made".to_owned());
    world
        .templates
        .insert("fixture-hand-made".to_owned(), hand_made);
    world.config.spec.management_state = Some("Removed".to_owned());

    // Step 1: RemovePending, nothing deleted.
    let step1 = world.plan(&inventory);
    assert!(step1.writes.is_empty(), "{:?}", step1.writes);
    assert!(conditions::is_true(
        &step1.status.conditions,
        condition::REMOVE_PENDING
    ));
    assert_eq!(step1.status.management_state.as_deref(), Some("Managed"));
    world.apply(&step1);

    // Step 2: the managed samples go; the status says Removed.
    let step2 = world.plan(&inventory);
    let deleted: Vec<&str> = step2.writes.iter().map(Write::name).collect();
    assert_eq!(
        deleted,
        ["fixture-httpd", "fixture-ruby", "fixture-app", "fixture-db"]
    );
    assert_eq!(step2.status.management_state.as_deref(), Some("Removed"));
    assert!(step2.status.architectures.is_empty());
    assert!(conditions::is_true(
        &step2.status.conditions,
        condition::REMOVE_PENDING
    ));
    assert!(conditions::is_false(
        &step2.status.conditions,
        condition::SAMPLES_EXIST
    ));
    world.apply(&step2);

    // Step 3: RemovePending false once they are gone.
    let step3 = world.plan(&inventory);
    assert!(step3.writes.is_empty());
    assert!(conditions::is_false(
        &step3.status.conditions,
        condition::REMOVE_PENDING
    ));
    world.apply(&step3);
    assert_eq!(names(&world.streams), Vec::<&str>::new());
    assert_eq!(
        names(&world.templates),
        ["fixture-hand-made"],
        "samples not labelled managed stay"
    );
    assert!(world.tag_to_image.is_some(), "kept for mirroring");
    assert!(world.plan(&inventory).writes.is_empty());

    // And back to Managed.
    world.config.spec.management_state = Some("Managed".to_owned());
    world.converge(&inventory);
    assert_eq!(world.streams.len(), 2);
    assert_eq!(world.condition(condition::SAMPLES_EXIST).status, TRUE);
}

#[test]
fn removal_waits_for_imports_in_flight_but_not_forever() {
    let inventory = inventory();
    let mut world = World::new(config("Managed"));
    world.converge(&inventory);
    world.config.spec.management_state = Some("Removed".to_owned());
    let step1 = world.plan(&inventory);
    world.apply(&step1);

    // Nothing has imported yet: wait.
    world.now = world
        .now
        .checked_add(jiff::SignedDuration::from_secs(10))
        .unwrap();
    let waiting = world.plan(&inventory);
    assert!(waiting.writes.is_empty());
    assert!(waiting.requeue_after.is_some());
    assert!(waiting.notes[0].contains("fixture-httpd, fixture-ruby"));

    // The wait is bounded.
    world.now = world
        .now
        .checked_add(jiff::SignedDuration::try_from(REMOVAL_IMPORT_WAIT).unwrap())
        .unwrap();
    let removing = world.plan(&inventory);
    assert_eq!(removing.writes.len(), 4);
}

#[test]
fn a_deleted_config_is_cleaned_up_before_its_finalizer_goes() {
    let inventory = inventory();
    let mut world = World::new(config("Managed"));
    world.converge(&inventory);
    world.fail_import("fixture-ruby", "1.0", "denied");
    world.converge(&inventory);
    world.config.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(world.now),
    );
    let cleanup = world.plan(&inventory);
    let written: Vec<(&str, &str)> = cleanup
        .writes
        .iter()
        .map(|w| (w.verb(), w.name()))
        .collect();
    assert_eq!(
        written,
        [
            ("delete", "fixture-httpd"),
            ("delete", "fixture-ruby"),
            ("delete", "fixture-app"),
            ("delete", "fixture-db"),
            ("delete", "fixture-ruby"),
        ]
    );
    assert!(conditions::is_false(
        &cleanup.status.conditions,
        condition::SAMPLES_EXIST
    ));
    world.apply(&cleanup);
    let last = world.plan(&inventory);
    assert_eq!(last.writes, [Write::RemoveFinalizer]);
    world.config.metadata.finalizers = None;
    assert!(world.plan(&inventory).writes.is_empty());
}

#[test]
fn an_architecture_change_is_refused_with_upstreams_message() {
    let inventory = inventory();
    let mut world = World::new(config("Managed"));
    world.converge(&inventory);
    world.config.spec.architectures = vec!["ppc64le".to_owned()];
    let decided = world.plan(&inventory);
    assert!(decided.writes.is_empty());
    let valid =
        conditions::find(&decided.status.conditions, condition::CONFIGURATION_VALID).unwrap();
    assert_eq!(valid.status, FALSE);
    assert_eq!(valid.reason.as_deref(), Some(INVALID_CONFIGURATION_REASON));
    assert_eq!(
        valid.message.as_deref(),
        Some("cannot change architectures from x86_64 to ppc64le")
    );
    world.config.spec.architectures = vec!["x86_64".to_owned(), "ppc64le".to_owned()];
    let decided = world.plan(&inventory);
    let valid =
        conditions::find(&decided.status.conditions, condition::CONFIGURATION_VALID).unwrap();
    assert_eq!(
        valid.message.as_deref(),
        Some(
            r#"cannot change architectures from []string{"x86_64"} to []string{"x86_64", "ppc64le"}"#
        )
    );

    // Put back: valid again, message cleared.
    world.config.spec.architectures = vec!["x86_64".to_owned()];
    world.converge(&inventory);
    let valid = world.condition(condition::CONFIGURATION_VALID);
    assert_eq!((valid.status.as_str(), valid.message), (TRUE, None));
}

#[test]
fn an_unknown_architecture_and_a_blocked_registry_are_invalid() {
    let inventory = inventory();
    let mut world = World::new(config("Managed"));
    world.config.spec.architectures = vec!["riscv64".to_owned()];
    let decided = world.plan(&inventory);
    let valid =
        conditions::find(&decided.status.conditions, condition::CONFIGURATION_VALID).unwrap();
    assert_eq!(
        valid.message.as_deref(),
        Some("architecture riscv64 unsupported; only support x86_64,amd64,arm64,ppc64le,s390x")
    );
    assert!(
        decided.writes.is_empty(),
        "nothing until the spec is put right: {:?}",
        decided.writes
    );

    let mut world = World::new(config("Managed"));
    world.config.spec.samples_registry = Some("mirror.fixture".to_owned());
    world.policy = Some(Ok(ImagePolicy {
        blocked_registries: vec!["mirror.fixture".to_owned()],
        ..ImagePolicy::default()
    }));
    let decided = world.plan(&inventory);
    let valid =
        conditions::find(&decided.status.conditions, condition::CONFIGURATION_VALID).unwrap();
    assert_eq!(
        valid.message.as_deref(),
        Some(
            "global openshift image configuration prevents the creation of imagestreams using the registry mirror.fixture"
        )
    );
    assert!(!decided.writes.iter().any(|w| w.kind() == "ImageStream"));
}

#[test]
fn force_is_managed_with_upstreams_message() {
    let inventory = inventory();
    let mut world = World::new(config("Force"));
    world.converge(&inventory);
    let valid = world.condition(condition::CONFIGURATION_VALID);
    assert_eq!(valid.status, TRUE);
    assert_eq!(
        valid.message.as_deref(),
        Some("Unexpected management state Force received, switching to Managed")
    );
    assert_eq!(world.streams.len(), 2);
}

#[test]
fn contains_reads_null_as_anything_and_lists_exactly() {
    let cases = [
        (json!({"a": 1, "b": 2}), json!({"a": 1}), true),
        (json!({"a": 1}), json!({"a": 1, "b": null}), true),
        (json!({"a": 1}), json!({"a": 2}), false),
        (json!({"a": [1, 2]}), json!({"a": [1]}), false),
        (
            json!({"a": [{"x": 1, "y": 2}]}),
            json!({"a": [{"x": 1}]}),
            true,
        ),
        (json!({}), json!({"a": {}}), false),
        (json!("s"), json!("s"), true),
    ];
    for (found, desired, expected) in cases {
        assert_eq!(contains(&found, &desired), expected, "{found} ⊇ {desired}");
    }
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (0i64..5).prop_map(|n| json!(n)),
        "[a-c]{0,2}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-c]", inner, 0..3)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn everything_contains_itself(value in arb_json()) {
        prop_assert!(contains(&value, &value));
    }

    /// Whatever the skip lists, registry and state, the plan converges in
    /// a few rounds, and then Managed means every unskipped sample exists
    /// at the version while Removed and Unmanaged wrote no sample.
    #[test]
    fn plans_converge(
        skip_streams in prop::collection::vec(prop::sample::select(vec!["fixture-ruby", "fixture-httpd", "fixture-none"]), 0..3),
        skip_templates in prop::collection::vec(prop::sample::select(vec!["fixture-app", "fixture-db"]), 0..2),
        registry in prop::option::of(prop::sample::select(vec!["mirror.fixture", "mirror.fixture:5000/path"])),
        states in prop::collection::vec(prop::sample::select(vec!["Managed", "Removed", "Unmanaged", "Force"]), 1..4),
    ) {
        let inventory = inventory();
        let mut world = World::new(config("Managed"));
        world.config.spec.skipped_imagestreams = skip_streams.iter().map(|s| (*s).to_owned()).collect();
        world.config.spec.skipped_templates = skip_templates.iter().map(|s| (*s).to_owned()).collect();
        world.config.spec.samples_registry = registry.map(str::to_owned);
        world.import_everything();
        for state in &states {
            world.config.spec.management_state = Some((*state).to_owned());
            let (streams_before, templates_before) = (world.streams.clone(), world.templates.clone());
            world.converge(&inventory);
            if *state == "Unmanaged" {
                prop_assert_eq!(&world.streams, &streams_before, "Unmanaged wrote an ImageStream");
                prop_assert_eq!(&world.templates, &templates_before, "Unmanaged wrote a Template");
            }
            world.import_everything();
            world.converge(&inventory);
            let status = world.config.status.clone().unwrap();
            match *state {
                "Managed" | "Force" => {
                    prop_assert_eq!(status.version.as_deref(), Some(VERSION));
                    prop_assert!(conditions::is_true(&status.conditions, condition::SAMPLES_EXIST));
                    for name in inventory.image_streams.keys() {
                        let skipped = skip_streams.contains(&name.as_str());
                        let found = world.streams.get(name);
                        if !skipped {
                            prop_assert!(found.is_some_and(|s| is_managed(&s.metadata)));
                        } else if let Some(found) = found {
                            prop_assert!(!is_managed(&found.metadata));
                        }
                    }
                }
                "Removed" => {
                    prop_assert_eq!(status.management_state.as_deref(), Some("Removed"));
                    prop_assert!(world.streams.values().all(|s| !is_managed(&s.metadata)));
                    prop_assert!(world.templates.values().all(|t| !is_managed(&t.metadata)));
                    prop_assert!(conditions::is_false(&status.conditions, condition::REMOVE_PENDING));
                }
                _ => prop_assert_eq!(status.management_state.as_deref(), Some("Unmanaged")),
            }
        }
    }
}

#[test]
fn removal_waits_for_terminating_samples_without_deleting_them_again() {
    let inventory = inventory();
    let mut world = World::new(config("Managed"));
    world.converge(&inventory);
    world.import_everything();
    world.config.spec.management_state = Some("Removed".to_owned());
    let step1 = world.plan(&inventory);
    world.apply(&step1);
    let step2 = world.plan(&inventory);
    // The API server keeps one, held by someone else's finalizer.
    let held = world.streams["fixture-ruby"].clone();
    world.apply(&step2);
    let mut held = held;
    held.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        world.now,
    ));
    world.streams.insert("fixture-ruby".to_owned(), held);

    let waiting = world.plan(&inventory);
    assert!(waiting.writes.is_empty(), "{:?}", waiting.writes);
    assert_eq!(waiting.requeue_after, None, "its deletion event wakes us");
    let pending = conditions::find(&waiting.status.conditions, condition::REMOVE_PENDING).unwrap();
    assert_eq!(pending.status, TRUE);
    assert_eq!(
        pending.message.as_deref(),
        Some("waiting for 1 to be deleted: imagestream/fixture-ruby")
    );
    world.apply(&waiting);
    world.streams.remove("fixture-ruby");
    let done = world.plan(&inventory);
    assert!(conditions::is_false(
        &done.status.conditions,
        condition::REMOVE_PENDING
    ));
}

#[test]
fn a_lasting_write_failure_shows_as_samples_exist_unknown_until_it_clears() {
    let inventory = inventory();
    let mut world = World::new(config("Managed"));
    world.write_failure = Some(WriteFailure {
        status_reason: "Forbidden".to_owned(),
        message: "cannot create ImageStream fixture-ruby: forbidden".to_owned(),
    });
    let decided = world.plan(&inventory);
    let exists = conditions::find(&decided.status.conditions, condition::SAMPLES_EXIST).unwrap();
    assert_eq!(exists.status, UNKNOWN);
    assert_eq!(exists.reason.as_deref(), Some("APIServerForbiddenError"));
    assert_eq!(
        exists.message.as_deref(),
        Some("error creating samples: cannot create ImageStream fixture-ruby: forbidden")
    );
    assert!(!decided.writes.is_empty(), "it keeps trying");
    world.write_failure = None;
    world.converge(&inventory);
    assert_eq!(world.condition(condition::SAMPLES_EXIST).status, TRUE);
}

#[test]
fn an_unreadable_image_policy_makes_the_spec_uncheckable() {
    let inventory = inventory();
    let mut world = World::new(config("Managed"));
    world.policy = Some(Err(
        "images.config.openshift.io \"cluster\" is forbidden".to_owned()
    ));
    let decided = world.plan(&inventory);
    let valid =
        conditions::find(&decided.status.conditions, condition::CONFIGURATION_VALID).unwrap();
    assert_eq!(valid.status, FALSE);
    assert!(
        valid
            .message
            .as_deref()
            .unwrap()
            .starts_with("the global openshift image configuration cannot be read"),
        "{valid:?}"
    );
    assert!(decided.writes.is_empty(), "{:?}", decided.writes);
    // Removed and Unmanaged do not read it: nothing to validate.
    world.config.spec.management_state = Some("Unmanaged".to_owned());
    world.policy = None;
    assert!(world.plan(&inventory).writes.is_empty());
}

#[test]
fn leaving_removed_forgets_why_it_started_there() {
    let inventory = inventory();
    let mut world = World::new(config("Removed"));
    world.config.metadata.annotations = Some(
        [(
            BOOTSTRAP_ANNOTATION.to_owned(),
            "RegistryUnreachable".to_owned(),
        )]
        .into(),
    );
    world.converge(&inventory);
    assert!(
        world
            .config
            .metadata
            .annotations
            .as_ref()
            .unwrap()
            .contains_key(BOOTSTRAP_ANNOTATION)
    );
    world.config.spec.management_state = Some("Managed".to_owned());
    world.converge(&inventory);
    assert!(
        !world
            .config
            .metadata
            .annotations
            .as_ref()
            .unwrap()
            .contains_key(BOOTSTRAP_ANNOTATION)
    );
}

#[test]
fn unmanaged_and_an_invalid_spec_leave_the_mirroring_map_alone() {
    let inventory = inventory();
    let mut world = World::new(config("Unmanaged"));
    world.converge(&inventory);
    assert!(world.tag_to_image.is_none());
    let mut world = World::new(config("Managed"));
    world.config.spec.architectures = vec!["riscv64".to_owned()];
    assert!(world.plan(&inventory).writes.is_empty());
    let mut world = World::new(config("Removed"));
    world.converge(&inventory);
    assert!(
        world.tag_to_image.is_some(),
        "kept while Removed, for mirroring"
    );
}
