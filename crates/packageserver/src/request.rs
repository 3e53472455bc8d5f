//! What a request asks for, parsed from its method, path and query as the
//! Kubernetes API server's request-info resolver does: the attributes that
//! authorization checks and that the handlers dispatch on.

use std::collections::BTreeMap;

use olm_api::package_manifest::{GROUP, ICON_SUBRESOURCE, PLURAL, VERSION};

/// Upper bound on a request path; longer ones are refused.
pub const MAX_PATH_BYTES: usize = 2048;

/// Upper bound on the query string.
pub const MAX_QUERY_BYTES: usize = 8192;

/// A request for the PackageManifest resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRequest {
    /// Verb as authorization sees it: `get`, `list`, `watch`, `create`, ...
    pub verb: String,
    /// Namespace, `None` for requests across all namespaces.
    pub namespace: Option<String>,
    /// Object name for requests on one object.
    pub name: Option<String>,
    /// Subresource (`icon`).
    pub subresource: Option<String>,
    /// The resource named in the path (authorization is asked about it even
    /// when it is not ours, so unknown resources get a 404 after authz).
    pub resource: String,
}

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestInfo {
    /// Health checks: always allowed, never authenticated.
    Health(String),
    /// A non-resource path (discovery, OpenAPI), authorized by path.
    NonResource {
        /// The path.
        path: String,
        /// `get`, `post`, ...
        verb: String,
    },
    /// A resource request in our group and version.
    Resource(ResourceRequest),
}

fn lower_verb(method: &http::Method) -> String {
    match *method {
        http::Method::GET | http::Method::HEAD => "get",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        _ => "unknown",
    }
    .to_owned()
}

/// Parses a query string into its parameters (first value wins).
pub fn query_params(query: Option<&str>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for pair in query.unwrap_or_default().split('&') {
        if pair.is_empty() {
            continue;
        }
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let (Some(k), Some(v)) = (percent_decode(k), percent_decode(v)) else {
            continue;
        };
        out.entry(k).or_insert(v);
    }
    out
}

/// Decodes `%XX` escapes and `+`; `None` for malformed escapes or non-UTF-8.
pub fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

fn is_watch(params: &BTreeMap<String, String>) -> bool {
    params.get("watch").is_some_and(|v| v == "true" || v == "1")
}

impl RequestInfo {
    /// Classifies a request.
    pub fn parse(method: &http::Method, path: &str, query: Option<&str>) -> Self {
        let verb = lower_verb(method);
        if matches!(path, "/healthz" | "/readyz" | "/livez")
            || path.starts_with("/healthz/")
            || path.starts_with("/readyz/")
            || path.starts_with("/livez/")
        {
            return Self::Health(path.to_owned());
        }
        let prefix = format!("/apis/{GROUP}/{VERSION}/");
        let Some(rest) = path.strip_prefix(&prefix) else {
            return Self::NonResource {
                path: path.to_owned(),
                verb,
            };
        };
        let segments: Vec<&str> = rest.split('/').collect();
        if segments.iter().any(|s| s.is_empty()) {
            return Self::NonResource {
                path: path.to_owned(),
                verb,
            };
        }
        let params = query_params(query);
        let (namespace, segments) = match segments.as_slice() {
            ["namespaces", ns, tail @ ..] if !tail.is_empty() => (Some((*ns).to_owned()), tail),
            _ => (None, segments.as_slice()),
        };
        let collection = |resource: &str| {
            let verb = match (verb.as_str(), is_watch(&params)) {
                ("get", true) => "watch".to_owned(),
                ("get", false) => "list".to_owned(),
                ("delete", _) => "deletecollection".to_owned(),
                (other, _) => other.to_owned(),
            };
            ResourceRequest {
                verb,
                namespace: namespace.clone(),
                name: None,
                subresource: None,
                resource: resource.to_owned(),
            }
        };
        let request = match segments {
            [resource] => collection(resource),
            [resource, name] => ResourceRequest {
                verb: verb.clone(),
                namespace: namespace.clone(),
                name: Some((*name).to_owned()),
                subresource: None,
                resource: (*resource).to_owned(),
            },
            [resource, name, sub] => ResourceRequest {
                verb: verb.clone(),
                namespace: namespace.clone(),
                name: Some((*name).to_owned()),
                subresource: Some((*sub).to_owned()),
                resource: (*resource).to_owned(),
            },
            _ => {
                return Self::NonResource {
                    path: path.to_owned(),
                    verb,
                };
            }
        };
        Self::Resource(request)
    }
}

impl ResourceRequest {
    /// Whether the request is for PackageManifests (or their icon).
    pub fn is_ours(&self) -> bool {
        self.resource == PLURAL
            && self
                .subresource
                .as_deref()
                .is_none_or(|s| s == ICON_SUBRESOURCE)
    }
}

#[cfg(test)]
mod tests {
    use http::Method;
    use proptest::prelude::*;

    use super::*;

    fn res(verb: &str, ns: Option<&str>, name: Option<&str>, sub: Option<&str>) -> RequestInfo {
        RequestInfo::Resource(ResourceRequest {
            verb: verb.into(),
            namespace: ns.map(Into::into),
            name: name.map(Into::into),
            subresource: sub.map(Into::into),
            resource: "packagemanifests".into(),
        })
    }

    #[test]
    fn paths_map_to_kubernetes_attributes() {
        let base = "/apis/packages.operators.coreos.com/v1";
        let table = [
            (
                Method::GET,
                format!("{base}/packagemanifests"),
                None,
                res("list", None, None, None),
            ),
            (
                Method::GET,
                format!("{base}/packagemanifests"),
                Some("watch=true"),
                res("watch", None, None, None),
            ),
            (
                Method::GET,
                format!("{base}/namespaces/team/packagemanifests"),
                Some("watch=1&x=y"),
                res("watch", Some("team"), None, None),
            ),
            (
                Method::GET,
                format!("{base}/namespaces/team/packagemanifests/etcd"),
                None,
                res("get", Some("team"), Some("etcd"), None),
            ),
            (
                Method::GET,
                format!("{base}/namespaces/team/packagemanifests/etcd/icon"),
                None,
                res("get", Some("team"), Some("etcd"), Some("icon")),
            ),
            (
                Method::DELETE,
                format!("{base}/namespaces/team/packagemanifests/etcd"),
                None,
                res("delete", Some("team"), Some("etcd"), None),
            ),
            (
                Method::POST,
                format!("{base}/namespaces/team/packagemanifests"),
                None,
                res("create", Some("team"), None, None),
            ),
            (
                Method::GET,
                "/healthz".to_owned(),
                None,
                RequestInfo::Health("/healthz".into()),
            ),
            (
                Method::GET,
                "/apis".to_owned(),
                None,
                RequestInfo::NonResource {
                    path: "/apis".into(),
                    verb: "get".into(),
                },
            ),
            (
                Method::GET,
                base.to_owned(),
                None,
                RequestInfo::NonResource {
                    path: base.into(),
                    verb: "get".into(),
                },
            ),
            (
                Method::GET,
                format!("{base}//packagemanifests"),
                None,
                RequestInfo::NonResource {
                    path: format!("{base}//packagemanifests"),
                    verb: "get".into(),
                },
            ),
        ];
        for (method, path, query, want) in table {
            assert_eq!(
                RequestInfo::parse(&method, &path, query),
                want,
                "{method} {path}"
            );
        }
    }

    #[test]
    fn query_strings_decode() {
        let q = query_params(Some(
            "labelSelector=catalog%3Dwidget%2Cx+in+(a)&labelSelector=ignored&bad=%zz&watch",
        ));
        assert_eq!(q["labelSelector"], "catalog=widget,x in (a)");
        assert!(!q.contains_key("bad"));
        assert_eq!(q["watch"], "");
    }

    proptest! {
        #[test]
        fn parsing_never_panics(path in "/[ -~]{0,120}", query in "[ -~]{0,80}") {
            let _ = RequestInfo::parse(&Method::GET, &path, Some(&query));
            let _ = query_params(Some(&query));
        }
    }
}
