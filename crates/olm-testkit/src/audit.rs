//! Reading kube-apiserver's audit log (see [`crate::AUDIT_ENV`]): how many
//! requests each client made, for benchmarks that report API requests per
//! operation.

use std::{
    collections::BTreeMap,
    io::{BufRead, Seek, SeekFrom},
    path::{Path, PathBuf},
};

use crate::Error;

/// One request, as the audit log records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The client's `User-Agent` header (empty when it sent none).
    pub user_agent: String,
    /// The verb: `get`, `list`, `watch`, `create`, `update`, `patch`,
    /// `delete`, ...
    pub verb: String,
    /// The resource (with `/subresource` when there is one), or the path for
    /// non-resource requests.
    pub resource: String,
    /// Who made it (`system:serviceaccount:<namespace>:<name>`, ...).
    pub user: String,
    /// The namespace of the object (empty for cluster-scoped ones).
    pub namespace: String,
    /// The response's status code, when the event records one.
    pub code: Option<u16>,
}

/// Reads an audit log from an offset on, so that a benchmark counts only
/// what happened after it started.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    offset: u64,
}

impl AuditLog {
    /// Starts reading `path` at its current end.
    pub fn from_end(path: &Path) -> Result<Self, Error> {
        let offset = std::fs::metadata(path)
            .map_err(|source| Error::io(path, source))?
            .len();
        Ok(Self {
            path: path.to_owned(),
            offset,
        })
    }

    /// The requests logged since the last call (or since [`Self::from_end`]).
    /// A line that is not a complete audit event (the writer's last, half
    /// written line) is left for the next call.
    pub fn read_new(&mut self) -> Result<Vec<Request>, Error> {
        let mut file =
            std::fs::File::open(&self.path).map_err(|source| Error::io(&self.path, source))?;
        file.seek(SeekFrom::Start(self.offset))
            .map_err(|source| Error::io(&self.path, source))?;
        let mut reader = std::io::BufReader::new(file);
        let mut requests = Vec::new();
        let mut line = String::new();
        loop {
            line.clear();
            let read = reader
                .read_line(&mut line)
                .map_err(|source| Error::io(&self.path, source))?;
            if read == 0 || !line.ends_with('\n') {
                break;
            }
            self.offset += read as u64;
            if let Some(request) = parse_event(&line) {
                requests.push(request);
            }
        }
        Ok(requests)
    }
}

/// The request an audit event line describes; `None` for lines that are not
/// audit events, and for the second event of a watch (a watch is logged when
/// its response starts and again when it ends; it counts once).
pub fn parse_event(line: &str) -> Option<Request> {
    let event: serde_json::Value = serde_json::from_str(line).ok()?;
    let verb = event.get("verb")?.as_str()?.to_owned();
    if verb == "watch" && event.get("stage").and_then(|s| s.as_str()) == Some("ResponseComplete") {
        return None;
    }
    let user_agent = event
        .get("userAgent")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let object = event.get("objectRef");
    let resource = match object
        .and_then(|o| o.get("resource"))
        .and_then(|r| r.as_str())
    {
        Some(resource) => match object
            .and_then(|o| o.get("subresource"))
            .and_then(|s| s.as_str())
        {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource.to_owned(),
        },
        None => event
            .get("requestURI")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    };
    let user = event
        .pointer("/user/username")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let namespace = object
        .and_then(|o| o.get("namespace"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let code = event
        .pointer("/responseStatus/code")
        .and_then(serde_json::Value::as_u64)
        .and_then(|code| u16::try_from(code).ok());
    Some(Request {
        user_agent,
        verb,
        resource,
        user,
        namespace,
        code,
    })
}

impl Request {
    /// Whether the request changed something: a create, update, patch,
    /// delete or deletecollection.
    pub fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }
}

/// Counts `requests` by a key of the caller's choosing (user agent, verb,
/// resource, or a mix).
pub fn count_by<K: Ord>(requests: &[Request], key: impl Fn(&Request) -> K) -> BTreeMap<K, usize> {
    let mut counts = BTreeMap::new();
    for request in requests {
        *counts.entry(key(request)).or_insert(0) += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_changes_are_writes() {
        let request = |verb: &str| Request {
            user_agent: String::new(),
            verb: verb.into(),
            resource: "pods".into(),
            user: String::new(),
            namespace: String::new(),
            code: None,
        };
        for verb in ["create", "update", "patch", "delete", "deletecollection"] {
            assert!(request(verb).is_write(), "{verb}");
        }
        for verb in ["get", "list", "watch", ""] {
            assert!(!request(verb).is_write(), "{verb}");
        }
    }

    #[test]
    fn events_become_requests() {
        let line = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/a/pods/p/status","verb":"patch","user":{"username":"system:serviceaccount:olm:olm-operator"},"userAgent":"olm-operator/0.1.0","objectRef":{"resource":"pods","namespace":"a","name":"p","subresource":"status"},"responseStatus":{"code":403}}"#;
        assert_eq!(
            parse_event(line),
            Some(Request {
                user_agent: "olm-operator/0.1.0".into(),
                verb: "patch".into(),
                resource: "pods/status".into(),
                user: "system:serviceaccount:olm:olm-operator".into(),
                namespace: "a".into(),
                code: Some(403),
            })
        );
        let non_resource = r#"{"verb":"get","requestURI":"/healthz"}"#;
        assert_eq!(
            parse_event(non_resource).map(|r| (r.user_agent, r.resource)),
            Some((String::new(), "/healthz".into()))
        );
        let watch = |stage: &str| {
            format!(r#"{{"stage":"{stage}","verb":"watch","objectRef":{{"resource":"pods"}}}}"#)
        };
        assert!(parse_event(&watch("ResponseStarted")).is_some());
        assert_eq!(
            parse_event(&watch("ResponseComplete")),
            None,
            "a watch counts once"
        );
        assert_eq!(parse_event("not json"), None);
        assert_eq!(parse_event(r#"{"kind":"Event"}"#), None);
    }

    #[test]
    fn only_new_complete_lines_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let event = |verb: &str| format!("{{\"verb\":\"{verb}\",\"requestURI\":\"/x\"}}\n");
        std::fs::write(&path, event("get")).unwrap();
        let mut log = AuditLog::from_end(&path).unwrap();
        assert!(
            log.read_new().unwrap().is_empty(),
            "what came before is skipped"
        );
        let half = event("list");
        let (first, rest) = half.split_at(5);
        std::fs::write(&path, format!("{}{}{first}", event("get"), event("create"))).unwrap();
        let verbs: Vec<_> = log
            .read_new()
            .unwrap()
            .into_iter()
            .map(|r| r.verb)
            .collect();
        assert_eq!(verbs, ["create"]);
        std::fs::write(
            &path,
            format!("{}{}{first}{rest}", event("get"), event("create")),
        )
        .unwrap();
        let verbs: Vec<_> = log
            .read_new()
            .unwrap()
            .into_iter()
            .map(|r| r.verb)
            .collect();
        assert_eq!(verbs, ["list"], "the half line is read once complete");
        let counts = count_by(
            &[
                parse_event(&event("get")).unwrap(),
                parse_event(&event("get")).unwrap(),
            ],
            |r| r.verb.clone(),
        );
        assert_eq!(counts.get("get"), Some(&2));
    }
}
