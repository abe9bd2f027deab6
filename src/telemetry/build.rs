//! `scangate_build_info`: which build runs.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    schema: i64,
    commit: &'static str,
    target: &'static str,
}

/// `scangate_build_info`: this build's version, database schema version,
/// commit and target.
pub(super) fn register(registry: &mut Registry) {
    let build = Family::<BuildLabels, Gauge>::default();
    build
        .get_or_create(&BuildLabels {
            version: crate::build::VERSION,
            schema: crate::build::SCHEMA_VERSION,
            commit: crate::build::COMMIT,
            target: crate::build::TARGET,
        })
        .set(1);
    registry.register(
        "scangate_build_info",
        "This scangate build (always 1)",
        build,
    );
}
