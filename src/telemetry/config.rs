//! The configuration's series: `scangate_config_old_keys`, the keys of an
//! earlier release the config file carries over, as last read.

use super::Telemetry;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The configuration's series.
#[derive(Default)]
pub(super) struct ConfigMetrics {
    old_keys: Gauge,
}

impl ConfigMetrics {
    /// Registered in `registry`, at zero.
    pub(super) fn register(registry: &mut Registry) -> ConfigMetrics {
        let m = ConfigMetrics::default();
        registry.register(
            "scangate_config_old_keys",
            "Keys of an earlier release in the config file, carried over (read under their new name, or ignored) and each warned of with its fix, as read at start or the last reload (0: none)",
            m.old_keys.clone(),
        );
        m
    }
}

impl Telemetry {
    /// The config file just read carries `count` keys of an earlier
    /// release over ([`crate::events::OldConfigKeys`]).
    pub(crate) fn config_old_keys(&self, count: usize) {
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        self.inner.config.old_keys.set(count);
    }
}
