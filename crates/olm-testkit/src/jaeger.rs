//! A private Jaeger (v2) with an in-memory trace store, one per test that
//! asks for it: services export their spans to it over OTLP/gRPC, and the
//! test reads the stored traces back through Jaeger's query API, as a person
//! looking at the trace would.
//!
//! ```no_run
//! # async fn example() -> Result<(), olm_testkit::Error> {
//! use olm_testkit::jaeger::Jaeger;
//!
//! let jaeger = Jaeger::start()?;
//! // Start a service with `--otlp-endpoint <jaeger.otlp_endpoint()>`, make
//! // it do something, and read the trace by the id it logged.
//! if let Some(trace) = jaeger.trace("4bf92f3577b34da6a3ce929d0e0e4736").await? {
//!     let reconcile = trace.span("reconcile").expect("a reconcile span");
//!     assert_eq!(reconcile.service_name, "catalog-operator");
//! }
//! # Ok(())
//! # }
//! ```

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    time::Duration,
};

use crate::control_plane::error_chain;
use crate::{
    Error, assets,
    process::{Supervised, free_port, wait_for_port},
};

/// How long Jaeger may take to accept connections (it takes under a second).
const JAEGER_START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one query may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);
/// How many traces the in-memory store keeps before it forgets the oldest.
const MAX_TRACES: usize = 10_000;
/// How long the batch processor holds spans before it stores them: short, so
/// that a trace is readable soon after it is exported.
const BATCH_TIMEOUT: &str = "100ms";

/// A running Jaeger that keeps traces in memory, listening for OTLP/gRPC
/// ([`Jaeger::otlp_endpoint`]) and for queries ([`Jaeger::query_url`]) on
/// loopback. Dropping it stops it and forgets its traces.
///
/// A module build of Jaeger has no UI assets: its UI page is a placeholder,
/// while the JSON API under `/api` works.
#[derive(Debug)]
pub struct Jaeger {
    otlp_port: u16,
    query_port: u16,
    http: reqwest::Client,
    // Field order is drop order: the process stops before its folder goes.
    process: Supervised,
    dir: tempfile::TempDir,
}

impl Jaeger {
    /// Starts a new Jaeger on free loopback ports and waits until it accepts
    /// spans and queries. [`Error::MissingBinary`] when `cargo xtask envtest`
    /// has not built it.
    pub fn start() -> Result<Jaeger, Error> {
        Jaeger::start_with_otlp_on("127.0.0.1")
    }

    /// Starts a new Jaeger whose OTLP receiver listens on `address`, `0.0.0.0`
    /// for example, so that pods on a real node reach it at the node's
    /// address ([`Jaeger::otlp_endpoint_at`]); the query API stays on
    /// loopback.
    pub fn start_with_otlp_on(address: &str) -> Result<Jaeger, Error> {
        let binary = assets::find_pinned("jaeger")?;
        let dir = tempfile::Builder::new()
            .prefix("olm-jaeger-")
            .tempdir()
            .map_err(|source| Error::io(std::env::temp_dir(), source))?;
        let otlp_port = free_port()?;
        let query_port = free_port()?;
        let query_grpc_port = free_port()?;
        let config_path = dir.path().join("jaeger.yaml");
        std::fs::write(
            &config_path,
            config(address, otlp_port, query_port, query_grpc_port),
        )
        .map_err(|source| Error::io(config_path.clone(), source))?;
        let log = dir.path().join("jaeger.log");
        let args = vec![
            "--config".to_owned(),
            format!("file:{}", config_path.display()),
        ];
        let mut process = Supervised::spawn("jaeger", &binary, &args, &log, &[])?;
        wait_for_port(&mut process, otlp_port, JAEGER_START_TIMEOUT)?;
        wait_for_port(&mut process, query_port, JAEGER_START_TIMEOUT)?;
        let http = reqwest::Client::builder()
            .timeout(QUERY_TIMEOUT)
            // Loopback only: an HTTP_PROXY from the environment must not
            // see these requests.
            .no_proxy()
            .build()
            .map_err(|source| Error::Http {
                url: format!("http://127.0.0.1:{query_port}"),
                source,
            })?;
        Ok(Jaeger {
            otlp_port,
            query_port,
            http,
            process,
            dir,
        })
    }

    /// Starts Jaeger for a test, or says why the test is skipped: when the
    /// binary is missing, CI (`CI` set) fails loudly, and elsewhere this
    /// prints how to install it and returns `None`. Any other start-up
    /// failure panics.
    pub fn start_or_skip() -> Option<Jaeger> {
        crate::assets::pinned_or_skip("jaeger", "the tracing tests")?;
        match Jaeger::start() {
            Ok(jaeger) => Some(jaeger),
            Err(err) => panic!("starting jaeger: {}", error_chain(&err)),
        }
    }

    /// Where services send spans: `http://127.0.0.1:<port>`, what their
    /// `--otlp-endpoint` (`OTEL_EXPORTER_OTLP_ENDPOINT`) takes (OTLP/gRPC).
    pub fn otlp_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.otlp_port)
    }

    /// Where pods reach the OTLP receiver of a Jaeger started with
    /// [`Jaeger::start_with_otlp_on`]: `http://<host>:<port>`.
    pub fn otlp_endpoint_at(&self, host: &str) -> String {
        format!("http://{host}:{}", self.otlp_port)
    }

    /// The query service, `http://127.0.0.1:<port>`: the JSON API under
    /// `/api` (for example `/api/traces?service=catalog-operator`).
    pub fn query_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.query_port)
    }

    /// Jaeger's log file.
    pub fn log(&self) -> &Path {
        self.process.log()
    }

    /// The folder holding Jaeger's configuration and log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The names of the services that have stored spans, sorted.
    pub async fn services(&self) -> Result<Vec<String>, Error> {
        let url = format!("{}/api/services", self.query_url());
        let mut services: Vec<String> = self.get(&url).await?.unwrap_or_default();
        services.sort();
        Ok(services)
    }

    /// The trace with this id (hexadecimal, as OpenTelemetry prints it), or
    /// `None` when Jaeger has stored no span of it. Spans arrive one batch
    /// at a time: poll (with [`crate::eventually`] or
    /// [`Jaeger::eventually_trace`]) until the spans a test expects are there.
    pub async fn trace(&self, trace_id: &str) -> Result<Option<Trace>, Error> {
        let url = format!(
            "{}/api/traces/{}",
            self.query_url(),
            normalize_id(trace_id, 32)
        );
        let traces: Option<Vec<json::Trace>> = self.get(&url).await?;
        Ok(traces
            .unwrap_or_default()
            .into_iter()
            .map(Trace::from)
            .find(|trace| !trace.spans.is_empty()))
    }

    /// The most recent traces (at most `limit`, within the last hour) with a
    /// span of `service`.
    pub async fn traces(&self, service: &str, limit: usize) -> Result<Vec<Trace>, Error> {
        let mut url = reqwest::Url::parse(&format!("{}/api/traces", self.query_url()))
            .expect("the query URL is a valid URL");
        url.query_pairs_mut()
            .append_pair("service", service)
            .append_pair("limit", &limit.to_string())
            .append_pair("lookback", "1h");
        let traces: Option<Vec<json::Trace>> = self.get(url.as_str()).await?;
        Ok(traces
            .unwrap_or_default()
            .into_iter()
            .map(Trace::from)
            .collect())
    }

    /// Polls until the trace exists and `complete` holds for it, and returns
    /// it; panics, showing the spans seen so far, when `deadline` passes
    /// first.
    pub async fn eventually_trace(
        &self,
        trace_id: &str,
        deadline: Duration,
        complete: impl Fn(&Trace) -> bool,
    ) -> Trace {
        let what = format!("trace {trace_id} in jaeger ({})", self.query_url());
        crate::eventually(&what, deadline, || async {
            match self.trace(trace_id).await {
                Ok(Some(trace)) if complete(&trace) => Ok(trace),
                Ok(Some(trace)) => Err(format!("incomplete: {}", trace.summary())),
                Ok(None) => Err("no span stored yet".to_owned()),
                Err(err) => Err(error_chain(&err)),
            }
        })
        .await
    }

    /// `GET url`, the `data` of Jaeger's answer; `None` for 404 (no such
    /// trace) and for a `null` answer.
    async fn get<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<Option<T>, Error> {
        let http_error = |source| Error::Http {
            url: url.to_owned(),
            source,
        };
        let response = self.http.get(url).send().await.map_err(http_error)?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let body = response.bytes().await.map_err(http_error)?;
        if !status.is_success() {
            return Err(Error::HttpStatus {
                url: url.to_owned(),
                status: status.as_u16(),
                body: String::from_utf8_lossy(&body).into_owned(),
            });
        }
        let answer: json::Answer<T> =
            serde_json::from_slice(&body).map_err(|source| Error::Decode {
                url: url.to_owned(),
                source,
            })?;
        Ok(answer.data)
    }
}

/// A trace as Jaeger stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    /// The trace id: 32 lowercase hexadecimal digits, as OpenTelemetry
    /// prints it.
    pub trace_id: String,
    /// Its spans, in the order Jaeger returns them (not necessarily by time).
    pub spans: Vec<Span>,
}

impl Trace {
    /// The first span named `operation`.
    pub fn span(&self, operation: &str) -> Option<&Span> {
        self.spans
            .iter()
            .find(|span| span.operation_name == operation)
    }

    /// The spans named `operation`.
    pub fn spans_named<'a>(&'a self, operation: &'a str) -> impl Iterator<Item = &'a Span> {
        self.spans
            .iter()
            .filter(move |span| span.operation_name == operation)
    }

    /// The span with this id.
    pub fn span_by_id(&self, span_id: &str) -> Option<&Span> {
        let span_id = normalize_id(span_id, 16);
        self.spans.iter().find(|span| span.span_id == span_id)
    }

    /// The parent of `span`, when it is in this trace.
    pub fn parent(&self, span: &Span) -> Option<&Span> {
        self.span_by_id(span.parent_span_id.as_deref()?)
    }

    /// The spans whose parent is `span`.
    pub fn children<'a>(&'a self, span: &'a Span) -> impl Iterator<Item = &'a Span> {
        self.spans
            .iter()
            .filter(move |child| child.parent_span_id.as_deref() == Some(span.span_id.as_str()))
    }

    /// The spans without a parent in this trace.
    pub fn roots(&self) -> impl Iterator<Item = &Span> {
        self.spans.iter().filter(|span| self.parent(span).is_none())
    }

    /// The services that contributed spans, sorted.
    pub fn services(&self) -> BTreeSet<&str> {
        self.spans
            .iter()
            .map(|span| span.service_name.as_str())
            .collect()
    }

    /// One line per span, `service operation span-id <- parent-id`, for
    /// failure messages.
    pub fn summary(&self) -> String {
        self.spans
            .iter()
            .map(|span| {
                format!(
                    "{} {} {} <- {}",
                    span.service_name,
                    span.operation_name,
                    span.span_id,
                    span.parent_span_id.as_deref().unwrap_or("-")
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// One stored span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// The trace id: 32 lowercase hexadecimal digits.
    pub trace_id: String,
    /// The span id: 16 lowercase hexadecimal digits.
    pub span_id: String,
    /// The parent span's id (its `CHILD_OF` reference), `None` for a root.
    pub parent_span_id: Option<String>,
    /// The span's name.
    pub operation_name: String,
    /// The `service.name` of the process that exported it.
    pub service_name: String,
    /// When it started, in microseconds since the Unix epoch.
    pub start_time_micros: u64,
    /// How long it lasted.
    pub duration: Duration,
    /// Its attributes, every value as a string (`true`, `42`), with what
    /// Jaeger derives from the span: `span.kind`, `otel.status_code`,
    /// `error`, `otel.scope.name`.
    pub tags: BTreeMap<String, String>,
    /// The resource attributes of the process that exported it
    /// (`service.version`, `telemetry.sdk.language`, ...).
    pub process_tags: BTreeMap<String, String>,
    /// Its events (Jaeger's logs), each as its fields; the event's name is
    /// the field `event`.
    pub events: Vec<BTreeMap<String, String>>,
    /// Its links to other spans (Jaeger's `FOLLOWS_FROM` references).
    pub links: Vec<SpanRef>,
}

impl Span {
    /// The tag `key`, when it is set.
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tags.get(key).map(String::as_str)
    }
}

/// A reference from one span to another.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SpanRef {
    /// The other span's trace id: 32 lowercase hexadecimal digits.
    pub trace_id: String,
    /// The other span's id: 16 lowercase hexadecimal digits.
    pub span_id: String,
}

impl From<json::Trace> for Trace {
    fn from(trace: json::Trace) -> Self {
        let processes = trace.processes;
        let spans = trace
            .spans
            .into_iter()
            .map(|span| {
                let trace_id = normalize_id(&span.trace_id, 32);
                let process = processes.get(&span.process_id);
                let mut parent_span_id = None;
                let mut links = Vec::new();
                for reference in span.references {
                    let target = SpanRef {
                        trace_id: normalize_id(&reference.trace_id, 32),
                        span_id: normalize_id(&reference.span_id, 16),
                    };
                    if reference.ref_type == "CHILD_OF"
                        && parent_span_id.is_none()
                        && target.trace_id == trace_id
                    {
                        parent_span_id = Some(target.span_id);
                    } else {
                        links.push(target);
                    }
                }
                Span {
                    span_id: normalize_id(&span.span_id, 16),
                    trace_id,
                    parent_span_id,
                    operation_name: span.operation_name,
                    service_name: process
                        .map(|process| process.service_name.clone())
                        .unwrap_or_default(),
                    start_time_micros: span.start_time,
                    duration: Duration::from_micros(span.duration),
                    tags: json::tags(span.tags),
                    process_tags: process
                        .map(|process| json::tags(process.tags.clone()))
                        .unwrap_or_default(),
                    events: span
                        .logs
                        .into_iter()
                        .map(|log| json::tags(log.fields))
                        .collect(),
                    links,
                }
            })
            .collect();
        Trace {
            trace_id: normalize_id(&trace.trace_id, 32),
            spans,
        }
    }
}

/// A trace or span id as OpenTelemetry prints it: lowercase, zero-padded to
/// `width` digits (Jaeger drops leading zeros).
fn normalize_id(id: &str, width: usize) -> String {
    let id = id.trim().to_ascii_lowercase();
    format!("{id:0>width$}")
}

/// Jaeger's configuration: OTLP/gRPC in on `otlp_address`, an in-memory
/// store, the query service over HTTP and gRPC on loopback; no metrics
/// endpoint (it would take a fixed port), warnings only in the log. The
/// query service does not trace itself: it would export to
/// `localhost:4317`, someone else's collector or nobody, and then wait 10 s
/// for that export when stopped.
fn config(otlp_address: &str, otlp_port: u16, query_port: u16, query_grpc_port: u16) -> String {
    format!(
        "# Written by olm-testkit.
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    enable_tracing: false
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:{query_port}
    grpc:
      endpoint: 127.0.0.1:{query_grpc_port}
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: {MAX_TRACES}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: {otlp_address}:{otlp_port}
processors:
  batch:
    timeout: {BATCH_TIMEOUT}
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
"
    )
}

/// The query API's JSON (Jaeger's `model/json`, what its UI reads).
mod json {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    /// `{"data": ..., "errors": ...}`.
    #[derive(Debug, Deserialize)]
    pub(super) struct Answer<T> {
        pub(super) data: Option<T>,
    }

    #[derive(Debug, Deserialize)]
    pub(super) struct Trace {
        #[serde(rename = "traceID")]
        pub(super) trace_id: String,
        #[serde(default)]
        pub(super) spans: Vec<Span>,
        #[serde(default)]
        pub(super) processes: BTreeMap<String, Process>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub(super) struct Span {
        #[serde(rename = "traceID")]
        pub(super) trace_id: String,
        #[serde(rename = "spanID")]
        pub(super) span_id: String,
        pub(super) operation_name: String,
        #[serde(default)]
        pub(super) references: Vec<Reference>,
        #[serde(default)]
        pub(super) start_time: u64,
        #[serde(default)]
        pub(super) duration: u64,
        #[serde(default)]
        pub(super) tags: Vec<Tag>,
        #[serde(default)]
        pub(super) logs: Vec<Log>,
        #[serde(rename = "processID", default)]
        pub(super) process_id: String,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub(super) struct Reference {
        pub(super) ref_type: String,
        #[serde(rename = "traceID")]
        pub(super) trace_id: String,
        #[serde(rename = "spanID")]
        pub(super) span_id: String,
    }

    #[derive(Debug, Clone, Deserialize)]
    pub(super) struct Tag {
        pub(super) key: String,
        pub(super) value: serde_json::Value,
    }

    #[derive(Debug, Deserialize)]
    pub(super) struct Log {
        #[serde(default)]
        pub(super) fields: Vec<Tag>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub(super) struct Process {
        pub(super) service_name: String,
        #[serde(default)]
        pub(super) tags: Vec<Tag>,
    }

    /// Tags as strings: a string as it is, anything else as JSON (`true`,
    /// `42`).
    pub(super) fn tags(tags: Vec<Tag>) -> BTreeMap<String, String> {
        tags.into_iter()
            .map(|tag| {
                let value = match tag.value {
                    serde_json::Value::String(value) => value,
                    other => other.to_string(),
                };
                (tag.key, value)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry::{
        KeyValue,
        trace::{Link, Span as _, TraceContextExt as _, Tracer as _, TracerProvider as _},
    };
    use opentelemetry_otlp::WithExportConfig as _;
    use opentelemetry_sdk::{Resource, trace::SdkTracerProvider};

    use super::*;

    /// What the query API answers, in the shape Jaeger 1.76 gives it: a
    /// trace id without its leading zero, a parent, a link, tags of every
    /// type and an event.
    const ANSWER: &str = r#"{"data":[{"traceID":"af92f3577b34da6a3ce929d0e0e4736","spans":[
        {"traceID":"af92f3577b34da6a3ce929d0e0e4736","spanID":"00f067aa0ba902b7",
         "operationName":"reconcile","references":[],"startTime":1700000000000000,
         "duration":1500,"tags":[{"key":"span.kind","type":"string","value":"internal"}],
         "logs":[],"processID":"p1","warnings":null},
        {"traceID":"af92f3577b34da6a3ce929d0e0e4736","spanID":"1111111111111111",
         "operationName":"apply","references":[
           {"refType":"CHILD_OF","traceID":"af92f3577b34da6a3ce929d0e0e4736","spanID":"f067aa0ba902b7"},
           {"refType":"FOLLOWS_FROM","traceID":"22222222222222222222222222222222","spanID":"3333333333333333"}],
         "startTime":1700000000000100,"duration":20,
         "tags":[{"key":"olm.kind","type":"string","value":"Deployment"},
                 {"key":"olm.count","type":"int64","value":3},
                 {"key":"error","type":"bool","value":true}],
         "logs":[{"timestamp":1700000000000110,"fields":[{"key":"event","type":"string","value":"applied"}]}],
         "processID":"p1","warnings":null}],
      "processes":{"p1":{"serviceName":"fixture-operator",
         "tags":[{"key":"service.version","type":"string","value":"0.0.1"}]}},
      "warnings":null}],"total":0,"limit":0,"offset":0,"errors":null}"#;

    #[test]
    fn reads_parents_links_tags_and_services_from_the_query_api() {
        let answer: json::Answer<Vec<json::Trace>> = serde_json::from_str(ANSWER).unwrap();
        let trace = Trace::from(answer.data.unwrap().remove(0));
        assert_eq!(trace.trace_id, "0af92f3577b34da6a3ce929d0e0e4736");
        let root = trace.span("reconcile").unwrap();
        let child = trace.span("apply").unwrap();
        assert_eq!(root.service_name, "fixture-operator");
        assert_eq!(root.parent_span_id, None);
        assert_eq!(child.parent_span_id.as_deref(), Some("00f067aa0ba902b7"));
        assert_eq!(trace.parent(child), Some(root));
        assert_eq!(trace.children(root).collect::<Vec<_>>(), vec![child]);
        assert_eq!(trace.roots().collect::<Vec<_>>(), vec![root]);
        assert_eq!(
            child.links,
            vec![SpanRef {
                trace_id: "2".repeat(32),
                span_id: "3".repeat(16),
            }]
        );
        assert_eq!(child.tag("olm.kind"), Some("Deployment"));
        assert_eq!(child.tag("olm.count"), Some("3"));
        assert_eq!(child.tag("error"), Some("true"));
        assert_eq!(child.events[0]["event"], "applied");
        assert_eq!(child.process_tags["service.version"], "0.0.1");
        assert_eq!(root.duration, Duration::from_micros(1500));
        assert_eq!(
            trace.services().into_iter().collect::<Vec<_>>(),
            vec!["fixture-operator"]
        );
    }

    /// A span exported through the workspace's OTLP exporter, as OLM's
    /// services export theirs, is read back with its service, name, parent,
    /// attributes and link.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_span_exported_over_otlp_is_read_back_with_its_parent_and_link() {
        let Some(jaeger) = Jaeger::start_or_skip() else {
            return;
        };
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(jaeger.otlp_endpoint())
            .build()
            .unwrap();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                Resource::builder()
                    .with_service_name("testkit-probe")
                    .build(),
            )
            .build();
        let tracer = provider.tracer("olm-testkit");

        let mut earlier = tracer.start("probe-earlier");
        let earlier_context = earlier.span_context().clone();
        earlier.end();
        let root = tracer.start("probe-reconcile");
        let root_context = opentelemetry::Context::current_with_span(root);
        let mut child = tracer
            .span_builder("probe-apply")
            .with_attributes([KeyValue::new("olm.kind", "Deployment")])
            .with_links(vec![Link::with_context(earlier_context.clone())])
            .start_with_context(&tracer, &root_context);
        child.add_event("applied", vec![]);
        child.end();
        root_context.span().end();
        let trace_id = root_context.span().span_context().trace_id().to_string();
        let root_span_id = root_context.span().span_context().span_id().to_string();
        let flushed = tokio::task::spawn_blocking(move || provider.force_flush())
            .await
            .unwrap();
        flushed.unwrap();

        let trace = jaeger
            .eventually_trace(&trace_id, Duration::from_secs(20), |trace| {
                trace.spans.len() == 2
            })
            .await;
        assert_eq!(trace.trace_id, trace_id);
        let root = trace.span("probe-reconcile").unwrap();
        let child = trace.span("probe-apply").unwrap();
        assert_eq!(root.span_id, root_span_id);
        assert_eq!(root.parent_span_id, None);
        assert_eq!(child.service_name, "testkit-probe");
        assert_eq!(child.parent_span_id.as_deref(), Some(root_span_id.as_str()));
        assert_eq!(child.tag("olm.kind"), Some("Deployment"));
        assert_eq!(
            child.events[0].get("event").map(String::as_str),
            Some("applied")
        );
        assert_eq!(
            child.links,
            vec![SpanRef {
                trace_id: earlier_context.trace_id().to_string(),
                span_id: earlier_context.span_id().to_string(),
            }]
        );
        assert!(
            jaeger
                .services()
                .await
                .unwrap()
                .contains(&"testkit-probe".to_owned())
        );
        let found = jaeger.traces("testkit-probe", 10).await.unwrap();
        assert!(
            found.iter().any(|found| found.trace_id == trace_id),
            "{found:?}"
        );
    }

    #[tokio::test]
    async fn an_unknown_trace_is_none() {
        let Some(jaeger) = Jaeger::start_or_skip() else {
            return;
        };
        let trace = jaeger
            .trace("0123456789abcdef0123456789abcdef")
            .await
            .unwrap();
        assert_eq!(trace, None);
        assert_eq!(jaeger.services().await.unwrap(), Vec::<String>::new());
    }
}
