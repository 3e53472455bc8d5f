//! Table output for kubectl (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`)
//! with upstream's columns Name, Catalog and Age, and the human-readable
//! durations kubectl users know.

use std::time::SystemTime;

use olm_api::package_manifest::PackageManifest;
use serde_json::{Value, json};

/// Description of the Name column (ObjectMeta's `name` documentation).
pub const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// Description of the Catalog column, as upstream.
pub const CATALOG_DESCRIPTION: &str = "The source catalog for this package";

/// Description of the Age column (ObjectMeta's `creationTimestamp`
/// documentation).
pub const AGE_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// What a Table row embeds of each object (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// Nothing.
    None,
    /// `PartialObjectMetadata` (the default).
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query parameter.
    pub fn parse(value: Option<&str>) -> Result<Self, String> {
        match value {
            None | Some("" | "Metadata") => Ok(Self::Metadata),
            Some("None") => Ok(Self::None),
            Some("Object") => Ok(Self::Object),
            Some(other) => Err(format!("unsupported includeObject value: {other:?}")),
        }
    }
}

/// Whether an Accept header asks for a `meta.k8s.io` Table.
pub fn wants_table(accept: &str) -> bool {
    accept.split(',').any(|media| {
        let mut params = media.split(';').map(str::trim);
        let base = params.next().unwrap_or_default();
        let params: Vec<&str> = params.collect();
        (base == "application/json" || base == "*/*")
            && params.contains(&"as=Table")
            && params.contains(&"g=meta.k8s.io")
            && (params.contains(&"v=v1") || params.contains(&"v=v1beta1"))
    })
}

/// Go's `duration.HumanDuration`, as kubectl prints ages.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    if seconds < 0 {
        return "0s".to_owned();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = (hours / 24) % 365;
        return if days == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{days}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn age(manifest: &PackageManifest, now: SystemTime) -> String {
    let Some(created) = &manifest.metadata.creation_timestamp else {
        return "<unknown>".to_owned();
    };
    let now = jiff::Timestamp::try_from(now).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    human_duration(now.as_second() - created.0.as_second())
}

/// The column definitions upstream's printer declares.
pub fn column_definitions() -> Value {
    json!([
        {"name": "Name", "type": "string", "format": "name", "description": NAME_DESCRIPTION, "priority": 0},
        {"name": "Catalog", "type": "string", "format": "", "description": CATALOG_DESCRIPTION, "priority": 0},
        {"name": "Age", "type": "string", "format": "", "description": AGE_DESCRIPTION, "priority": 0},
    ])
}

/// A Table of `manifests` (already in the request's namespace).
pub fn table(
    manifests: &[PackageManifest],
    resource_version: &str,
    include: IncludeObject,
    now: SystemTime,
) -> Value {
    let rows: Vec<Value> = manifests
        .iter()
        .map(|m| {
            let mut row = json!({
                "cells": [
                    m.metadata.name.clone().unwrap_or_default(),
                    m.status.catalog_source_display_name,
                    age(m, now),
                ],
            });
            let object = match include {
                IncludeObject::None => None,
                IncludeObject::Metadata => Some(json!({
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": m.metadata,
                })),
                IncludeObject::Object => serde_json::to_value(m).ok(),
            };
            if let (Some(object), Some(row)) = (object, row.as_object_mut()) {
                row.insert("object".to_owned(), object);
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": column_definitions(),
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_kubectl() {
        let table = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (150, "2m30s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 120, "3h2m"),
            (10 * 3600, "10h"),
            (50 * 3600, "2d2h"),
            (48 * 3600, "2d"),
            (30 * 86400, "30d"),
            (3 * 365 * 86400 + 86400, "3y1d"),
            (10 * 365 * 86400, "10y"),
        ];
        for (seconds, want) in table {
            assert_eq!(human_duration(seconds), want, "{seconds}");
        }
    }

    #[test]
    fn accept_headers_select_tables() {
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        ));
        assert!(wants_table(
            "application/json; as=Table; g=meta.k8s.io; v=v1"
        ));
        assert!(!wants_table("application/json"));
        assert!(!wants_table("application/json;as=Table;g=other;v=v1"));
        assert!(!wants_table(""));
    }

    #[test]
    fn rows_carry_upstream_cells() {
        let mut m = PackageManifest::default();
        m.metadata.name = Some("widget".into());
        m.status.catalog_source_display_name = "Widget Index".into();
        let t = table(&[m], "7", IncludeObject::Metadata, SystemTime::now());
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["widget", "Widget Index", "<unknown>"])
        );
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .map(|c| c.iter().filter_map(|d| d["name"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(names, ["Name", "Catalog", "Age"]);
        assert!(IncludeObject::parse(Some("Bogus")).is_err());
    }
}
