//! OpenShift's `ImageStream` (`image.openshift.io/v1`) and `Template`
//! (`template.openshift.io/v1`), as the samples operator reads and writes
//! them: metadata typed, the body kept whole as JSON so that nothing a newer
//! OpenShift adds is lost on a write. The few fields the operator reasons
//! about are read through the typed views below. OpenShift serves both APIs
//! (its API server, not CRDs); tests install them as open CRDs.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Resource, core::NamespaceResourceScope};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The ImageStream API group.
pub const IMAGE_GROUP: &str = "image.openshift.io";

/// The Template API group.
pub const TEMPLATE_GROUP: &str = "template.openshift.io";

/// An ImageStream: `spec` and `status` kept as JSON.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ImageStream {
    /// `image.openshift.io/v1`.
    #[serde(rename = "apiVersion", default = "image_api_version")]
    pub api_version: String,
    /// `ImageStream`.
    #[serde(default = "image_stream_kind")]
    pub kind: String,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The tags and lookup policy.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub spec: Value,
    /// What the image API imported; written by OpenShift, never by us.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub status: Value,
}

/// A Template: every field but the metadata kept as JSON (`objects`,
/// `parameters`, `labels`, `message`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Template {
    /// `template.openshift.io/v1`.
    #[serde(rename = "apiVersion", default = "template_api_version")]
    pub api_version: String,
    /// `Template`.
    #[serde(default = "template_kind")]
    pub kind: String,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Everything else.
    #[serde(flatten)]
    pub body: Map<String, Value>,
}

fn image_api_version() -> String {
    "image.openshift.io/v1".to_owned()
}

fn image_stream_kind() -> String {
    "ImageStream".to_owned()
}

fn template_api_version() -> String {
    "template.openshift.io/v1".to_owned()
}

fn template_kind() -> String {
    "Template".to_owned()
}

impl Resource for ImageStream {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("ImageStream")
    }

    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(IMAGE_GROUP)
    }

    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }

    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("imagestreams")
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl Resource for Template {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("Template")
    }

    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(TEMPLATE_GROUP)
    }

    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }

    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("templates")
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// One entry of an ImageStream's `status.tags`, as far as import tracking
/// reads it.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
pub struct NamedTagEventList {
    /// The tag.
    #[serde(default)]
    pub tag: String,
    /// The images the tag has pointed at, newest first.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub items: Vec<TagEvent>,
    /// Conditions, such as `ImportSuccess` = `False` after a failed import.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub conditions: Vec<TagEventCondition>,
}

/// One image a tag pointed at.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TagEvent {
    /// The pull spec of the image.
    #[serde(default)]
    pub docker_image_reference: String,
    /// The image's digest name.
    #[serde(default)]
    pub image: String,
    /// The spec generation that produced it.
    #[serde(default)]
    pub generation: i64,
}

/// A condition of a tag.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
pub struct TagEventCondition {
    /// `ImportSuccess`.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[serde(default)]
    pub status: String,
    /// Why, in CamelCase.
    #[serde(default)]
    pub reason: String,
    /// Why, for people.
    #[serde(default)]
    pub message: String,
    /// The spec generation it is about.
    #[serde(default)]
    pub generation: i64,
}

/// One entry of an ImageStream's `spec.tags`, as far as the operator reads it.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
pub struct TagReference {
    /// The tag.
    #[serde(default)]
    pub name: String,
    /// What it points at.
    #[serde(default)]
    pub from: Option<ObjectReferenceLite>,
    /// The spec generation the tag was last changed in (set by OpenShift).
    #[serde(default)]
    pub generation: Option<i64>,
    /// How its image is imported.
    #[serde(default, rename = "importPolicy")]
    pub import_policy: Option<TagImportPolicy>,
}

/// A tag's `importPolicy`, the part an import retry carries over.
#[derive(Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TagImportPolicy {
    /// Import from a registry without TLS verification.
    #[serde(default)]
    pub insecure: Option<bool>,
    /// Re-import periodically.
    #[serde(default)]
    pub scheduled: Option<bool>,
}

/// `{kind, name}` of a tag's source.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ObjectReferenceLite {
    /// `DockerImage` or `ImageStreamTag`.
    #[serde(default)]
    pub kind: String,
    /// The pull spec or `stream:tag`.
    #[serde(default)]
    pub name: String,
}

impl ImageStream {
    /// `spec.tags`, entries that cannot be read skipped.
    pub fn spec_tags(&self) -> Vec<TagReference> {
        read_list(self.spec.get("tags"))
    }

    /// `status.tags`, entries that cannot be read skipped.
    pub fn status_tags(&self) -> Vec<NamedTagEventList> {
        read_list(self.status.get("tags"))
    }
}

/// Reads a list that Go writes as `null` when empty.
fn null_as_empty<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(deserializer)?.unwrap_or_default())
}

fn read_list<T: serde::de::DeserializeOwned>(list: Option<&Value>) -> Vec<T> {
    list.and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| serde_json::from_value(item.clone()).ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn an_image_stream_keeps_every_field_it_does_not_know() {
        let text = r#"{
          "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
          "metadata": {"name": "fixture-ruby", "namespace": "openshift"},
          "spec": {"lookupPolicy": {"local": false}, "futureField": 1,
                   "tags": [{"name": "3.3", "from": {"kind": "DockerImage", "name": "quay.example/ruby:3.3"},
                             "importPolicy": {"importMode": "Legacy"}, "generation": 2}]},
          "status": {"dockerImageRepository": "x",
                     "tags": [{"tag": "3.3", "items": null,
                               "conditions": [{"type": "ImportSuccess", "status": "False",
                                               "message": "denied", "generation": 2}]},
                              {"tag": 7}]}
        }"#;
        let stream: ImageStream = serde_json::from_str(text).unwrap();
        assert_eq!(
            serde_json::to_value(&stream).unwrap(),
            serde_json::from_str::<Value>(text).unwrap()
        );
        let tags = stream.spec_tags();
        assert_eq!(tags[0].from.as_ref().unwrap().name, "quay.example/ruby:3.3");
        assert_eq!(tags[0].generation, Some(2));
        let status = stream.status_tags();
        assert_eq!(status.len(), 1, "the unreadable entry is skipped");
        assert_eq!(status[0].conditions[0].message, "denied");
    }

    #[test]
    fn a_template_keeps_its_body() {
        let text = r#"{"apiVersion": "template.openshift.io/v1", "kind": "Template",
          "metadata": {"name": "fixture-app"}, "objects": [{"kind": "Service"}],
          "parameters": [{"name": "NAME"}], "labels": {"app": "x"}, "message": "hi"}"#;
        let template: Template = serde_json::from_str(text).unwrap();
        assert_eq!(template.body.len(), 4);
        assert_eq!(
            serde_json::to_value(&template).unwrap(),
            serde_json::from_str::<Value>(text).unwrap()
        );
    }
}
