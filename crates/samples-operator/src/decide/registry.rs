//! The samplesRegistry rewrite: with Config `spec.samplesRegistry` set, the
//! ImageStreams pull their images from that registry (a mirror) instead of
//! the ones the inventory names, exactly as upstream rewrites them
//! (`updateDockerPullSpec` and `coreUpdateDockerPullSpec` in
//! `pkg/stub/imagestreams.go`). Templates are never rewritten.

use olm_api::openshift::ImageStream;
use serde_json::Value;

/// The registries upstream replaces in place, in the order it tries them.
pub const REPLACED_REGISTRIES: [&str; 5] = [
    "docker.io",
    "registry.redhat.io",
    "registry.access.redhat.com",
    "quay.io",
    "registry.svc.ci.openshift.org",
];

/// The tag source kind that names a pull spec; the other kinds
/// (`ImageStreamTag`, `ImageStreamImage`) point into the cluster and end at a
/// `DockerImage` that is rewritten itself.
const DOCKER_IMAGE_KIND: &str = "DockerImage";

/// `pull_spec` pulled from `registry`, by upstream's rules:
///
/// - a pull spec with exactly two `/` is `registry/repository/image`: if it
///   starts with one of [`REPLACED_REGISTRIES`], that prefix becomes
///   `registry`; otherwise its first segment does;
/// - any other pull spec (`repository/image`, or one with a deeper path) gets
///   `registry/` in front.
///
/// QUIRK (kept from upstream): the known registries are matched as string
/// prefixes, not whole segments, so `quay.iox/a/b` becomes
/// `<registry>x/a/b`.
pub fn rewrite_pull_spec(pull_spec: &str, registry: &str) -> String {
    if pull_spec.matches('/').count() != 2 {
        return format!("{registry}/{pull_spec}");
    }
    if let Some(rest) = REPLACED_REGISTRIES
        .iter()
        .find_map(|old| pull_spec.strip_prefix(old))
    {
        return format!("{registry}{rest}");
    }
    let mut segments = pull_spec.splitn(3, '/');
    let _old_registry = segments.next();
    let repository = segments.next().unwrap_or_default();
    let image = segments.next().unwrap_or_default();
    format!("{registry}/{repository}/{image}")
}

/// `stream` as it is created with Config `spec.samplesRegistry` =
/// `registry`: `spec.dockerImageRepository` (when set) and every
/// `spec.tags[].from.name` of kind `DockerImage` rewritten by
/// [`rewrite_pull_spec`], unless it already starts with `registry`. `None` or
/// an empty registry leaves the stream as it is, as upstream's empty
/// samplesRegistry does.
pub fn with_samples_registry(stream: &ImageStream, registry: Option<&str>) -> ImageStream {
    let mut stream = stream.clone();
    let Some(registry) = registry.filter(|registry| !registry.is_empty()) else {
        return stream;
    };
    if let Some(Value::String(repository)) = stream.spec.get_mut("dockerImageRepository")
        && !repository.is_empty()
    {
        rewrite_in_place(repository, registry);
    }
    let tags = stream
        .spec
        .get_mut("tags")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten();
    for tag in tags {
        let Some(from) = tag.get_mut("from").and_then(Value::as_object_mut) else {
            continue;
        };
        if from.get("kind").and_then(Value::as_str) != Some(DOCKER_IMAGE_KIND) {
            continue;
        }
        if let Some(Value::String(name)) = from.get_mut("name") {
            rewrite_in_place(name, registry);
        }
    }
    stream
}

/// Rewrites `pull_spec` unless it already names `registry`, which is what
/// makes the rewrite safe to apply to an already rewritten stream.
fn rewrite_in_place(pull_spec: &mut String, registry: &str) {
    if !pull_spec.starts_with(registry) {
        *pull_spec = rewrite_pull_spec(pull_spec, registry);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    const MIRROR: &str = "mirror.example.com:5000";

    #[test]
    fn pull_specs_are_rewritten_as_upstream_rewrites_them() {
        let cases = [
            // A known registry is replaced.
            (
                "registry.redhat.io/ubi8/httpd-24:latest",
                "mirror.example.com:5000/ubi8/httpd-24:latest",
            ),
            (
                "registry.access.redhat.com/fixture/ruby:3.3",
                "mirror.example.com:5000/fixture/ruby:3.3",
            ),
            (
                "quay.io/fixture/nginx@sha256:abc",
                "mirror.example.com:5000/fixture/nginx@sha256:abc",
            ),
            (
                "docker.io/fixture/php:8",
                "mirror.example.com:5000/fixture/php:8",
            ),
            (
                "registry.svc.ci.openshift.org/fixture/go:1",
                "mirror.example.com:5000/fixture/go:1",
            ),
            // An unknown registry: its segment is replaced.
            ("icr.io/a/b:1", "mirror.example.com:5000/a/b:1"),
            // One slash: no registry, so one is put in front.
            ("fixture/perl:5", "mirror.example.com:5000/fixture/perl:5"),
            // No slash at all.
            ("perl:5", "mirror.example.com:5000/perl:5"),
            // Three slashes: prefixed, even though a registry is there.
            ("quay.io/a/b/c:1", "mirror.example.com:5000/quay.io/a/b/c:1"),
            // QUIRK: the prefix match is not by segment.
            ("quay.iox/a/b:1", "mirror.example.com:5000x/a/b:1"),
        ];
        for (pull_spec, expected) in cases {
            assert_eq!(
                rewrite_pull_spec(pull_spec, MIRROR),
                expected,
                "{pull_spec}"
            );
        }
    }

    fn fixture_stream(spec: Value) -> ImageStream {
        serde_json::from_value(json!({
            "apiVersion": "image.openshift.io/v1",
            "kind": "ImageStream",
            "metadata": {"name": "fixture-ruby"},
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn a_stream_gets_its_docker_images_rewritten_and_nothing_else() {
        let stream = fixture_stream(json!({
            "lookupPolicy": {"local": false},
            "tags": [
                {"name": "3.3", "from": {"kind": "DockerImage", "name": "registry.redhat.io/ubi9/fixture-ruby:3.3"},
                 "importPolicy": {"scheduled": true}},
                {"name": "latest", "from": {"kind": "ImageStreamTag", "name": "3.3"}},
                {"name": "pinned", "from": {"kind": "ImageStreamImage", "name": "fixture-ruby@sha256:abc"}},
                {"name": "mirrored", "from": {"kind": "DockerImage", "name": "mirror.example.com:5000/x/y:1"}},
                {"name": "bare"},
            ],
        }));
        let rewritten = with_samples_registry(&stream, Some(MIRROR));
        assert_eq!(
            rewritten.spec,
            json!({
                "lookupPolicy": {"local": false},
                "tags": [
                    {"name": "3.3", "from": {"kind": "DockerImage", "name": "mirror.example.com:5000/ubi9/fixture-ruby:3.3"},
                     "importPolicy": {"scheduled": true}},
                    {"name": "latest", "from": {"kind": "ImageStreamTag", "name": "3.3"}},
                    {"name": "pinned", "from": {"kind": "ImageStreamImage", "name": "fixture-ruby@sha256:abc"}},
                    {"name": "mirrored", "from": {"kind": "DockerImage", "name": "mirror.example.com:5000/x/y:1"}},
                    {"name": "bare"},
                ],
            })
        );
        assert_eq!(rewritten.metadata, stream.metadata);
    }

    #[test]
    fn the_docker_image_repository_is_rewritten_only_when_set() {
        let cases = [
            (
                json!({"dockerImageRepository": "quay.io/fixture/ruby"}),
                json!({"dockerImageRepository": "mirror.example.com:5000/fixture/ruby"}),
            ),
            (
                json!({"dockerImageRepository": ""}),
                json!({"dockerImageRepository": ""}),
            ),
            (
                json!({"dockerImageRepository": "mirror.example.com:5000/fixture/ruby"}),
                json!({"dockerImageRepository": "mirror.example.com:5000/fixture/ruby"}),
            ),
            (json!({}), json!({})),
        ];
        for (spec, expected) in cases {
            let rewritten = with_samples_registry(&fixture_stream(spec.clone()), Some(MIRROR));
            assert_eq!(rewritten.spec, expected, "{spec}");
        }
    }

    #[test]
    fn no_registry_or_an_empty_one_changes_nothing() {
        let stream = fixture_stream(json!({"tags": [
            {"name": "1", "from": {"kind": "DockerImage", "name": "quay.io/fixture/a:1"}},
        ]}));
        assert_eq!(with_samples_registry(&stream, None), stream);
        assert_eq!(with_samples_registry(&stream, Some("")), stream);
    }

    fn pull_spec_strategy() -> impl Strategy<Value = String> {
        let registry = prop_oneof![
            Just("docker.io".to_owned()),
            Just("registry.redhat.io".to_owned()),
            Just("quay.io".to_owned()),
            Just("icr.io".to_owned()),
            "[a-z.:0-9]{1,12}",
        ];
        let path = proptest::collection::vec("[a-z0-9-]{1,8}", 0..4);
        (registry, path, "[a-z0-9.@:-]{0,8}").prop_map(|(registry, path, tag)| {
            let mut spec = registry;
            for segment in path {
                spec.push('/');
                spec.push_str(&segment);
            }
            spec.push_str(&tag);
            spec
        })
    }

    fn stream_strategy() -> impl Strategy<Value = ImageStream> {
        let kind = prop_oneof![
            Just("DockerImage"),
            Just("ImageStreamTag"),
            Just("ImageStreamImage")
        ];
        let tag = (kind, pull_spec_strategy())
            .prop_map(|(kind, name)| json!({"name": "t", "from": {"kind": kind, "name": name}}));
        (
            proptest::option::of(pull_spec_strategy()),
            proptest::collection::vec(tag, 0..5),
        )
            .prop_map(|(repository, tags)| {
                let mut spec = json!({"tags": tags});
                if let Some(repository) = repository {
                    spec["dockerImageRepository"] = Value::String(repository);
                }
                fixture_stream(spec)
            })
    }

    proptest! {
        #[test]
        fn a_rewritten_pull_spec_starts_with_the_registry(
            pull_spec in pull_spec_strategy(),
            registry in "[a-z.:0-9]{1,16}",
        ) {
            prop_assert!(rewrite_pull_spec(&pull_spec, &registry).starts_with(&registry));
        }

        #[test]
        fn rewriting_a_stream_twice_is_rewriting_it_once(
            stream in stream_strategy(),
            registry in "[a-z.:0-9/]{0,16}",
        ) {
            let once = with_samples_registry(&stream, Some(&registry));
            let twice = with_samples_registry(&once, Some(&registry));
            prop_assert_eq!(once, twice);
        }

        #[test]
        fn an_empty_registry_is_the_identity(stream in stream_strategy()) {
            prop_assert_eq!(with_samples_registry(&stream, Some("")), stream.clone());
            prop_assert_eq!(with_samples_registry(&stream, None), stream);
        }

        #[test]
        fn every_docker_image_ends_up_at_the_registry_and_nothing_else_moves(
            stream in stream_strategy(),
            registry in "[a-z.:0-9]{1,16}",
        ) {
            let rewritten = with_samples_registry(&stream, Some(&registry));
            let (before, after) = (stream.spec_tags(), rewritten.spec_tags());
            prop_assert_eq!(before.len(), after.len());
            for (before, after) in before.iter().zip(&after) {
                let (before, after) = (before.from.as_ref().unwrap(), after.from.as_ref().unwrap());
                if before.kind == "DockerImage" {
                    prop_assert!(after.name.starts_with(&registry));
                } else {
                    prop_assert_eq!(before, after);
                }
            }
        }
    }
}
