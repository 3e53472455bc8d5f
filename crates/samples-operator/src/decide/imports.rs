//! Import tracking: which tags of a sample ImageStream failed to import,
//! which are still importing, the ConfigMaps that record failures, and the
//! `ImageStreamImport` that retries them, as upstream's
//! `processImportStatus` (`pkg/stub/imagestreams.go`), `importTag`
//! (`pkg/stub/retry.go`) and `IST2ImageMap` (`pkg/util/util.go`) do.
//!
//! One difference in shape: upstream creates one `ImageStreamImport` per
//! failing tag; [`import_request`] builds one for all of a stream's failing
//! tags, each tag an entry of `spec.images`, and hands back the tags it had
//! to leave out (with why) so the caller can log them and still send the
//! rest.

use std::{collections::BTreeMap, time::Duration};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use olm_api::{
    conditions::FALSE,
    openshift::{ImageStream, ObjectReferenceLite, TagReference},
    samples::VERSION_ANNOTATION,
};
use serde_json::{Value, json};

/// The label (value `"true"`) on a stream's ConfigMap once one of its tags
/// failed to import. Note the group: `samples.openshift.io`, not
/// `samples.operator.openshift.io`, as upstream spells it.
pub const IMAGESTREAM_ERROR_LABEL: &str = "samples.openshift.io/imagestream-error";

/// The ConfigMap (operator namespace) mapping `<stream>_<tag>` to the
/// inventory's pull spec, for people mirroring the samples' images.
pub const TAG_TO_IMAGE_CONFIG_MAP: &str = "imagestreamtag-to-image";

/// How long after a retry a stream's failing imports are retried again.
///
/// Upstream retries when the last retry is older than ten minutes ("a little
/// bit less than the 15 minute relist interval"), driven by ImageStream
/// events including the ten-minute informer resync.
pub const IMPORT_RETRY_INTERVAL: Duration = Duration::from_secs(10 * 60);

/// The message upstream means `ImportImageErrorsExist` to carry (it sets it on
/// a copy and never stores it, so upstream's stored message stays empty).
pub const IMPORT_ERRORS_MESSAGE: &str = "ImageStream import errors have been detected.  Scan the openshift-cluster-samples-operator namespace for config maps.  Each failing imagestream will have a config map.  And the 'data' map will have entries per image stream tag with details on the errors.";

/// The `kind` of a tag source that is imported from a registry.
pub const DOCKER_IMAGE: &str = "DockerImage";

/// The `kind` of a tag source that points at another tag.
pub const IMAGE_STREAM_TAG: &str = "ImageStreamTag";

/// The tags of `stream` whose latest import failed, with the failure's
/// message, by upstream's rule.
///
/// For each `status.tags[]` entry with conditions: the latest generation is
/// the largest condition generation, the most recent error the condition
/// with status `False` and the largest generation (the first such condition
/// for its message; generation 0 never counts). The tag is failing when that
/// error's generation is above 0 and not older than the latest generation,
/// so a newer successful import supersedes an older failure. The condition
/// type is not checked (upstream does not either; in practice it is always
/// `ImportSuccess`).
pub fn failing_tags(stream: &ImageStream) -> BTreeMap<String, String> {
    let mut failing = BTreeMap::new();
    for status_tag in stream.status_tags() {
        if status_tag.conditions.is_empty() {
            continue;
        }
        let mut latest_generation = 0;
        let mut most_recent_error_generation = 0;
        let mut message = "";
        for condition in &status_tag.conditions {
            latest_generation = latest_generation.max(condition.generation);
            if condition.status == FALSE && condition.generation > most_recent_error_generation {
                most_recent_error_generation = condition.generation;
                message = &condition.message;
            }
        }
        if most_recent_error_generation > 0 && most_recent_error_generation >= latest_generation {
            failing.insert(status_tag.tag.clone(), message.to_owned());
        }
    }
    failing
}

/// The imports still in flight: the `spec.tags` of kind `DockerImage` (in
/// spec order) that have no result yet, that is no `status.tags` entry with
/// at least one imported item, and no failure by [`failing_tags`]'s rule.
///
/// Tags that point at other tags (`ImageStreamTag`) import nothing and are
/// never pending. A tag whose spec changed after an earlier import (so its
/// items are from an older generation) counts as done: upstream does not
/// track that either.
pub fn pending_tags(stream: &ImageStream) -> Vec<String> {
    let status_tags = stream.status_tags();
    let failing = failing_tags(stream);
    stream
        .spec_tags()
        .into_iter()
        .filter(|tag| {
            tag.from
                .as_ref()
                .is_some_and(|from| from.kind == DOCKER_IMAGE)
        })
        .filter(|tag| !failing.contains_key(&tag.name))
        .filter(|tag| {
            !status_tags
                .iter()
                .any(|status| status.tag == tag.name && !status.items.is_empty())
        })
        .map(|tag| tag.name)
        .collect()
}

/// The ConfigMap recording a stream's failing tags: named after the stream,
/// labelled [`IMAGESTREAM_ERROR_LABEL`]` = "true"`, with each failing tag's
/// message under the tag's name.
pub fn error_config_map(
    stream: &str,
    failing: &BTreeMap<String, String>,
    namespace: &str,
) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(stream.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([(
                IMAGESTREAM_ERROR_LABEL.to_owned(),
                "true".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(failing.clone()),
        ..ConfigMap::default()
    }
}

/// The [`TAG_TO_IMAGE_CONFIG_MAP`] ConfigMap: `data` maps `<stream>_<tag>` to
/// the inventory's pull spec, annotated with the operator `version` that
/// wrote it.
pub fn tag_to_image_config_map(
    data: BTreeMap<String, String>,
    version: &str,
    namespace: &str,
) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(TAG_TO_IMAGE_CONFIG_MAP.to_owned()),
            namespace: Some(namespace.to_owned()),
            annotations: Some(BTreeMap::from([(
                VERSION_ANNOTATION.to_owned(),
                version.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    }
}

/// Why a failing tag, or a whole stream, cannot be retried; the messages are
/// upstream's where it has one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImportRequestError {
    /// Following `ImageStreamTag` references came back to a tag already seen.
    #[error("circular reference stream {stream} tag {tag}")]
    CircularReference {
        /// The stream.
        stream: String,
        /// The tag seen twice.
        tag: String,
    },
    /// The references end at a tag whose source is not a registry image.
    #[error("tag {tag:?} points to existing {kind} {name:?}, it cannot be re-imported")]
    NotDockerImage {
        /// The failing tag.
        tag: String,
        /// The final tag's source kind (`ImageStreamImage`, ...).
        kind: String,
        /// The final tag's source name.
        name: String,
    },
    /// The references end at a tag with no source (or at no spec tag at all);
    /// upstream silently creates no import for it.
    #[error("tag {tag:?} has no source to import from")]
    NoSource {
        /// The failing tag.
        tag: String,
    },
    /// The stream has no `metadata.name`, which the `ImageStreamImport` must
    /// carry.
    #[error("the image stream has no name")]
    UnnamedStream,
}

/// What [`import_request`] returns: the body to create, if any tag is left
/// to import, and the tags left out with why.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImportRequest {
    /// The `image.openshift.io/v1` `ImageStreamImport` to create; `None` when
    /// every tag was left out.
    pub body: Option<Value>,
    /// The failing tags that cannot be retried, with why, for the log.
    pub left_out: Vec<(String, ImportRequestError)>,
}

/// The `ImageStreamImport` that retries `tags` of `stream`, as upstream's
/// `importTag` builds it.
///
/// `metadata` carries the stream's name and namespace (upstream also sends
/// the stream's resourceVersion; we do not, so that the request is one any
/// API server accepts as a new object, and a retry is never refused for a
/// stream that changed since it was read);
/// `spec.import` is true; each tag becomes one `spec.images[]` entry after
/// following `ImageStreamTag` references within the stream (`stream:tag`
/// follows to `tag`, an empty tag to `latest`; a bare `tag` to itself): it
/// imports the final tag's `DockerImage` into the final tag's name, with the
/// final tag's `importPolicy` (`insecure`, `scheduled`) and a `Local`
/// reference policy. Two failing tags that end at the same tag give one
/// entry. A tag whose references loop, end at a source other than
/// `DockerImage`, or end without a source is left out and listed; the only
/// error for the whole stream is a stream without a name.
pub fn import_request(
    stream: &ImageStream,
    tags: &[String],
) -> Result<ImportRequest, ImportRequestError> {
    let Some(stream_name) = stream.metadata.name.clone() else {
        return Err(ImportRequestError::UnnamedStream);
    };
    let spec_tags = stream.spec_tags();
    let mut images: BTreeMap<String, Value> = BTreeMap::new();
    let mut left_out = Vec::new();
    for tag in tags {
        match resolve(&spec_tags, &stream_name, tag) {
            Ok((final_tag, spec_tag, from)) => {
                let policy = spec_tag.import_policy.unwrap_or_default();
                images.entry(final_tag.to_owned()).or_insert_with(|| {
                    json!({
                        "from": {"kind": DOCKER_IMAGE, "name": from.name},
                        "to": {"name": final_tag},
                        "importPolicy": {
                            "insecure": policy.insecure.unwrap_or_default(),
                            "scheduled": policy.scheduled.unwrap_or_default(),
                        },
                        "referencePolicy": {"type": "Local"},
                    })
                });
            }
            Err(error) => left_out.push((tag.clone(), error)),
        }
    }
    let body = (!images.is_empty()).then(|| {
        let mut metadata = json!({ "name": stream_name });
        if let Some(namespace) = &stream.metadata.namespace {
            metadata["namespace"] = json!(namespace);
        }
        json!({
            "apiVersion": "image.openshift.io/v1",
            "kind": "ImageStreamImport",
            "metadata": metadata,
            "spec": {
                "import": true,
                "images": images.into_values().collect::<Vec<_>>(),
            },
        })
    });
    Ok(ImportRequest { body, left_out })
}

/// Whether a stream whose imports were last retried at `last_retry` (never:
/// `None`) is due another retry at `now`: when the last retry is more than
/// `interval` ago.
pub fn retry_due(last_retry: Option<Timestamp>, now: Timestamp, interval: Duration) -> bool {
    match last_retry {
        None => true,
        Some(last) => {
            let interval = SignedDuration::try_from(interval).unwrap_or(SignedDuration::MAX);
            now.duration_since(last) > interval
        }
    }
}

/// Follows `tag`'s `ImageStreamTag` references to the tag that is imported,
/// as upstream's `followTagReferenceV1`: the final tag's name, its spec and
/// its `DockerImage` source.
fn resolve<'a>(
    spec_tags: &'a [TagReference],
    stream: &str,
    tag: &'a str,
) -> Result<(&'a str, &'a TagReference, &'a ObjectReferenceLite), ImportRequestError> {
    static NO_TAG: TagReference = TagReference {
        name: String::new(),
        from: None,
        generation: None,
        import_policy: None,
    };
    let mut seen: Vec<&str> = Vec::new();
    let mut current = tag;
    loop {
        if seen.contains(&current) {
            return Err(ImportRequestError::CircularReference {
                stream: stream.to_owned(),
                tag: current.to_owned(),
            });
        }
        seen.push(current);
        // Upstream reads a missing spec tag as an empty one: no source.
        let spec_tag = spec_tags
            .iter()
            .find(|spec_tag| spec_tag.name == current)
            .unwrap_or(&NO_TAG);
        match &spec_tag.from {
            Some(from) if from.kind == IMAGE_STREAM_TAG => {
                current = referenced_tag(&from.name);
            }
            Some(from) if from.kind == DOCKER_IMAGE => return Ok((current, spec_tag, from)),
            Some(from) => {
                return Err(ImportRequestError::NotDockerImage {
                    tag: tag.to_owned(),
                    kind: from.kind.clone(),
                    name: from.name.clone(),
                });
            }
            None => {
                return Err(ImportRequestError::NoSource {
                    tag: tag.to_owned(),
                });
            }
        }
    }
}

/// The tag an `ImageStreamTag` source names: after the `:` of `stream:tag`
/// (`latest` when empty), or the whole name when there is no `:`.
fn referenced_tag(name: &str) -> &str {
    match name.split_once(':') {
        Some((_, "")) => "latest",
        Some((_, tag)) => tag,
        None => name,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;

    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    /// A stream named `fixture-stream` with the given `spec` and `status`.
    fn stream_with(spec: Value, status: Value) -> ImageStream {
        ImageStream {
            metadata: ObjectMeta {
                name: Some("fixture-stream".to_owned()),
                namespace: Some("fixture-namespace".to_owned()),
                resource_version: Some("fixture-rv-7".to_owned()),
                ..ObjectMeta::default()
            },
            spec,
            status,
            ..ImageStream::default()
        }
    }

    /// A status tag with `(status, generation, message)` conditions.
    fn status_tag(tag: &str, conditions: &[(&str, i64, &str)]) -> Value {
        json!({
            "tag": tag,
            "conditions": conditions
                .iter()
                .map(|(status, generation, message)| json!({
                    "type": "ImportSuccess",
                    "status": status,
                    "generation": generation,
                    "message": message,
                }))
                .collect::<Vec<_>>(),
        })
    }

    fn docker_tag(name: &str, image: &str) -> Value {
        json!({"name": name, "from": {"kind": "DockerImage", "name": image}})
    }

    fn reference_tag(name: &str, to: &str) -> Value {
        json!({"name": name, "from": {"kind": "ImageStreamTag", "name": to}})
    }

    /// (name, status tags, expected failing (tag, message)).
    type FailingCase = (
        &'static str,
        Vec<Value>,
        &'static [(&'static str, &'static str)],
    );

    /// (name, failing tags, expected `spec.images`, expected left out).
    type ImportCase = (
        &'static str,
        &'static [&'static str],
        Option<Vec<Value>>,
        Vec<(String, ImportRequestError)>,
    );

    #[test]
    fn failing_tags_follow_upstreams_generation_rule() {
        let cases: [FailingCase; 7] = [
            (
                "an older error is superseded by a newer success",
                vec![status_tag(
                    "fixture-a",
                    &[("False", 2, "denied"), ("True", 3, "")],
                )],
                &[],
            ),
            (
                "an error at the latest generation fails",
                vec![status_tag(
                    "fixture-a",
                    &[("True", 2, ""), ("False", 3, "denied at 3")],
                )],
                &[("fixture-a", "denied at 3")],
            ),
            (
                "an error at the same generation as a success still fails",
                vec![status_tag(
                    "fixture-a",
                    &[("True", 3, ""), ("False", 3, "denied")],
                )],
                &[("fixture-a", "denied")],
            ),
            (
                "only True conditions is healthy",
                vec![status_tag("fixture-a", &[("True", 1, ""), ("True", 2, "")])],
                &[],
            ),
            (
                "no conditions is healthy",
                vec![json!({"tag": "fixture-a", "items": [{"image": "sha256:1"}]})],
                &[],
            ),
            (
                "an error at generation 0 is ignored",
                vec![status_tag("fixture-a", &[("False", 0, "ignored")])],
                &[],
            ),
            (
                "the first error at the top generation gives the message",
                vec![
                    status_tag(
                        "fixture-a",
                        &[
                            ("False", 4, "first"),
                            ("False", 4, "second"),
                            ("False", 1, "old"),
                        ],
                    ),
                    status_tag("fixture-b", &[("Unknown", 1, "?")]),
                ],
                &[("fixture-a", "first")],
            ),
        ];
        for (name, status_tags, expected) in cases {
            let stream = stream_with(json!({}), json!({ "tags": status_tags }));
            let expected: BTreeMap<String, String> = expected
                .iter()
                .map(|(tag, message)| ((*tag).to_owned(), (*message).to_owned()))
                .collect();
            assert_eq!(failing_tags(&stream), expected, "{name}");
        }
    }

    #[test]
    fn pending_tags_are_docker_images_without_a_result() {
        let spec = json!({"tags": [
            docker_tag("fixture-imported", "quay.example/a:1"),
            docker_tag("fixture-failed", "quay.example/a:2"),
            docker_tag("fixture-in-flight", "quay.example/a:3"),
            docker_tag("fixture-no-items", "quay.example/a:4"),
            docker_tag("fixture-superseded", "quay.example/a:5"),
            reference_tag("fixture-alias", "fixture-stream:fixture-in-flight"),
        ]});
        let status = json!({"tags": [
            {"tag": "fixture-imported", "items": [{"image": "sha256:1"}]},
            status_tag("fixture-failed", &[("False", 2, "denied")]),
            {"tag": "fixture-no-items", "items": []},
            status_tag("fixture-superseded", &[("False", 1, "denied"), ("True", 2, "")]),
        ]});
        let stream = stream_with(spec, status);
        assert_eq!(
            pending_tags(&stream),
            [
                "fixture-in-flight",
                "fixture-no-items",
                "fixture-superseded"
            ]
        );
        assert!(pending_tags(&stream_with(json!({}), json!({}))).is_empty());
    }

    #[test]
    fn config_maps_carry_their_label_and_annotation() {
        let failing = BTreeMap::from([("fixture-tag".to_owned(), "denied".to_owned())]);
        let errors = error_config_map("fixture-stream", &failing, "fixture-ns");
        assert_eq!(errors.metadata.name.as_deref(), Some("fixture-stream"));
        assert_eq!(errors.metadata.namespace.as_deref(), Some("fixture-ns"));
        assert_eq!(
            errors.metadata.labels.unwrap()["samples.openshift.io/imagestream-error"],
            "true"
        );
        assert_eq!(errors.data, Some(failing));

        let data = BTreeMap::from([(
            "fixture-stream_fixture-tag".to_owned(),
            "quay.example/a:1".to_owned(),
        )]);
        let map = tag_to_image_config_map(data.clone(), "fixture-4.99", "fixture-ns");
        assert_eq!(
            map.metadata.name.as_deref(),
            Some("imagestreamtag-to-image")
        );
        assert_eq!(
            map.metadata.annotations.unwrap()["samples.operator.openshift.io/version"],
            "fixture-4.99"
        );
        assert_eq!(map.data, Some(data));
    }

    #[test]
    fn import_request_follows_references_and_lists_what_it_leaves_out() {
        let spec = json!({"tags": [
            {"name": "fixture-base", "from": {"kind": "DockerImage", "name": "quay.example/base:9"},
             "importPolicy": {"scheduled": true, "insecure": true}},
            reference_tag("fixture-mid", "other-stream:fixture-base"),
            reference_tag("fixture-top", "fixture-mid"),
            reference_tag("fixture-latest-ref", "fixture-stream:"),
            docker_tag("latest", "quay.example/base:latest"),
            docker_tag("fixture-plain", "quay.example/plain:1"),
            reference_tag("fixture-loop-a", "fixture-loop-b"),
            reference_tag("fixture-loop-b", "fixture-stream:fixture-loop-a"),
            {"name": "fixture-image", "from": {"kind": "ImageStreamImage", "name": "fixture-stream@sha256:1"}},
            reference_tag("fixture-to-image", "fixture-image"),
            {"name": "fixture-sourceless"},
        ]});
        let stream = stream_with(spec, json!({}));
        let image = |from: &str, to: &str, insecure: bool, scheduled: bool| {
            json!({
                "from": {"kind": "DockerImage", "name": from},
                "to": {"name": to},
                "importPolicy": {"insecure": insecure, "scheduled": scheduled},
                "referencePolicy": {"type": "Local"},
            })
        };
        let left = |tag: &str, error: ImportRequestError| (tag.to_owned(), error);
        let cases: [ImportCase; 6] = [
            (
                "a chain of references imports the final tag with its policy",
                &["fixture-top"],
                Some(vec![image(
                    "quay.example/base:9",
                    "fixture-base",
                    true,
                    true,
                )]),
                vec![],
            ),
            (
                "an empty tag after the colon means latest; a plain tag imports itself",
                &["fixture-latest-ref", "fixture-plain"],
                Some(vec![
                    image("quay.example/plain:1", "fixture-plain", false, false),
                    image("quay.example/base:latest", "latest", false, false),
                ]),
                vec![],
            ),
            (
                "a loop is an error and the rest is still sent",
                &["fixture-loop-a", "fixture-plain"],
                Some(vec![image(
                    "quay.example/plain:1",
                    "fixture-plain",
                    false,
                    false,
                )]),
                vec![left(
                    "fixture-loop-a",
                    ImportRequestError::CircularReference {
                        stream: "fixture-stream".to_owned(),
                        tag: "fixture-loop-a".to_owned(),
                    },
                )],
            ),
            (
                "a final tag that is not a DockerImage is left out",
                &["fixture-to-image"],
                None,
                vec![left(
                    "fixture-to-image",
                    ImportRequestError::NotDockerImage {
                        tag: "fixture-to-image".to_owned(),
                        kind: "ImageStreamImage".to_owned(),
                        name: "fixture-stream@sha256:1".to_owned(),
                    },
                )],
            ),
            (
                "no source, or no spec tag at all, is left out",
                &["fixture-sourceless", "fixture-gone"],
                None,
                vec![
                    left(
                        "fixture-sourceless",
                        ImportRequestError::NoSource {
                            tag: "fixture-sourceless".to_owned(),
                        },
                    ),
                    left(
                        "fixture-gone",
                        ImportRequestError::NoSource {
                            tag: "fixture-gone".to_owned(),
                        },
                    ),
                ],
            ),
            (
                "two tags ending at the same tag import it once",
                &["fixture-top", "fixture-mid", "fixture-base"],
                Some(vec![image(
                    "quay.example/base:9",
                    "fixture-base",
                    true,
                    true,
                )]),
                vec![],
            ),
        ];
        for (name, tags, images, left_out) in cases {
            let tags: Vec<String> = tags.iter().map(|tag| (*tag).to_owned()).collect();
            let request = import_request(&stream, &tags).unwrap();
            let expected_body = images.map(|images| {
                json!({
                    "apiVersion": "image.openshift.io/v1",
                    "kind": "ImageStreamImport",
                    "metadata": {
                        "name": "fixture-stream",
                        "namespace": "fixture-namespace",
                    },
                    "spec": {"import": true, "images": images},
                })
            });
            assert_eq!(request.body, expected_body, "{name}");
            assert_eq!(request.left_out, left_out, "{name}");
        }
    }

    #[test]
    fn import_request_errors_read_like_upstreams() {
        let looped = ImportRequestError::CircularReference {
            stream: "fixture-stream".to_owned(),
            tag: "fixture-b".to_owned(),
        };
        assert_eq!(
            looped.to_string(),
            "circular reference stream fixture-stream tag fixture-b"
        );
        let image = ImportRequestError::NotDockerImage {
            tag: "fixture-a".to_owned(),
            kind: "ImageStreamImage".to_owned(),
            name: "fixture@sha256:1".to_owned(),
        };
        assert_eq!(
            image.to_string(),
            "tag \"fixture-a\" points to existing ImageStreamImage \"fixture@sha256:1\", it cannot be re-imported"
        );
    }

    #[test]
    fn a_stream_without_a_name_cannot_be_retried() {
        let mut stream = stream_with(
            json!({"tags": [docker_tag("fixture-plain", "quay.example/plain:1")]}),
            json!({}),
        );
        stream.metadata.name = None;
        assert_eq!(
            import_request(&stream, &["fixture-plain".to_owned()]),
            Err(ImportRequestError::UnnamedStream)
        );
    }

    #[test]
    fn retry_is_due_only_after_the_interval() {
        let interval = Duration::from_secs(600);
        let cases = [
            ("never retried", None, 1_000, true),
            ("just retried", Some(1_000), 1_000, false),
            ("exactly the interval ago", Some(1_000), 1_600, false),
            ("past the interval", Some(1_000), 1_601, true),
            ("a clock that went back", Some(2_000), 1_000, false),
        ];
        for (name, last, now, due) in cases {
            assert_eq!(retry_due(last.map(at), at(now), interval), due, "{name}");
        }
        assert_eq!(IMPORT_RETRY_INTERVAL, interval);
    }

    fn arbitrary_status_tags() -> impl Strategy<Value = Vec<Value>> {
        let condition = (
            prop::sample::select(vec!["True", "False", "Unknown"]),
            0i64..5,
            "[a-z]{0,4}",
        );
        let tag = (
            prop::sample::select(vec!["t0", "t1", "t2", "t3"]),
            prop::collection::vec(condition, 0..5),
        );
        prop::collection::vec(tag, 0..6).prop_map(|tags| {
            tags.into_iter()
                .map(|(tag, conditions)| {
                    let conditions: Vec<(&str, i64, &str)> = conditions
                        .iter()
                        .map(|(status, generation, message)| {
                            (*status, *generation, message.as_str())
                        })
                        .collect();
                    status_tag(tag, &conditions)
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn failing_tags_are_status_tags_with_a_false_condition(status_tags in arbitrary_status_tags()) {
            let stream = stream_with(json!({}), json!({ "tags": status_tags }));
            let status = stream.status_tags();
            for (tag, message) in failing_tags(&stream) {
                let entries: Vec<_> = status.iter().filter(|s| s.tag == tag).collect();
                prop_assert!(!entries.is_empty(), "{tag} is not in status");
                prop_assert!(entries.iter().any(|entry| entry
                    .conditions
                    .iter()
                    .any(|c| c.status == "False" && c.generation > 0 && c.message == message)));
            }
        }
    }
}
