//! The bus's counters as Prometheus metrics, read from [`Bus::stats`] at
//! each scrape: events published, received, dropped while NATS was away,
//! failed publishes and undecodable messages. Register a [`BusCollector`]
//! under the service's prefix before the admin server starts, and
//! [`attach`](BusCollector::attach) the bus once it is connected; until
//! then nothing is exported.

use std::sync::{Arc, OnceLock};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric as _},
    metrics::{TypedMetric as _, counter::ConstCounter},
};

use crate::{Bus, BusStats};

/// One exported counter: its name (without the service's prefix and the
/// `_total` suffix the encoder adds), its help text, and its value.
type BusCounter = (&'static str, &'static str, fn(&BusStats) -> u64);

/// The counters.
const COUNTERS: [BusCounter; 5] = [
    (
        "bus_published",
        "Events sent to NATS (or stored in JetStream).",
        |s| s.published,
    ),
    (
        "bus_received",
        "Events and work requests received and decoded.",
        |s| s.received,
    ),
    (
        "bus_dropped",
        "Events dropped because NATS was not connected (the change is in Kubernetes already).",
        |s| s.dropped,
    ),
    (
        "bus_publish_errors",
        "Publishes that failed or timed out.",
        |s| s.publish_errors,
    ),
    (
        "bus_decode_errors",
        "Received messages that could not be decoded.",
        |s| s.decode_errors,
    ),
];

/// Exports a bus's counters; cheap to clone (clones share the bus).
#[derive(Clone, Debug, Default)]
pub struct BusCollector {
    bus: Arc<OnceLock<Bus>>,
}

impl BusCollector {
    /// A collector with no bus yet: it exports nothing until
    /// [`BusCollector::attach`].
    pub fn new() -> Self {
        Self::default()
    }

    /// The bus whose counters to export; a second call is ignored.
    pub fn attach(&self, bus: &Bus) {
        let _ = self.bus.set(bus.clone());
    }
}

impl Collector for BusCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(bus) = self.bus.get() else {
            return Ok(());
        };
        let stats = bus.stats();
        for (name, help, value) in COUNTERS {
            let counter = ConstCounter::new(value(&stats));
            let metric = encoder.encode_descriptor(name, help, None, ConstCounter::<u64>::TYPE)?;
            counter.encode(metric)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::registry::Registry;

    use super::*;

    fn text(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).expect("encodes");
        text
    }

    #[tokio::test]
    async fn counters_appear_once_a_bus_is_attached() {
        let mut root = Registry::default();
        let collector = BusCollector::new();
        root.sub_registry_with_prefix("sample_service")
            .register_collector(Box::new(collector.clone()));
        assert!(!text(&root).contains("bus_"), "{}", text(&root));
        collector.attach(&Bus::disabled());
        let encoded = text(&root);
        for name in [
            "sample_service_bus_published_total 0",
            "sample_service_bus_received_total 0",
            "sample_service_bus_dropped_total 0",
            "sample_service_bus_publish_errors_total 0",
            "sample_service_bus_decode_errors_total 0",
        ] {
            assert!(encoded.contains(name), "{name} in {encoded}");
        }
        assert!(
            encoded.contains("# TYPE sample_service_bus_published counter"),
            "{encoded}"
        );
    }
}
