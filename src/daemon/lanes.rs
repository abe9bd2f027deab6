//! The facility claimer's two lanes as daemon stages: connected once at
//! start, then each on a thread of its own under the supervisor, watched
//! by the systemd watchdog's progress rule.

use super::claimer::{Kicker, LaneStop, Link, lanes, records};
use super::supervisor::{Stage, StageResult};
use super::{DaemonError, Wiring};
use crate::config::{Config, RedisSettings};
use crate::events::{self, Event as _};
use crate::gate::Gate;
use crate::gate::facility::LaneKind;
use crate::model::Decision;
use crate::store::Store;
use crate::telemetry::Telemetry;

/// The claimer, started ([`start`]).
pub(super) struct Started {
    /// Wakes the live lane: the writer's side.
    pub(super) kick: Kicker,
    /// Stops the lanes, in the daemon's stop order.
    pub(super) lane_stop: LaneStop,
    /// The lanes' shared link (told of reloaded scanners).
    pub(super) link: Link,
}

/// Start the claimer as `[redis]` says: connect once (off the async
/// runtime: the redis client blocks) — a facility store that refuses this
/// gateway or is set up so claims could be lost fails the start — record
/// what the connection learned, and start both lanes as stages, each
/// watched with its own stall bound. A store that
/// does not answer yet is no failure: the lanes keep trying.
pub(super) async fn start(
    wiring: &mut Wiring,
    store: &mut Store,
    gate: Gate,
    cfg: &Config,
    redis: &RedisSettings,
    telemetry: &Telemetry,
    signals: &crate::source::signal::Signals,
) -> Result<Started, DaemonError> {
    let link = Link::new(cfg, redis);
    let (connecting, first) = {
        let link = link.clone();
        tokio::task::spawn_blocking(move || {
            let first = link.connect_checked();
            (link, first)
        })
        .await
        .expect("the connect task does not panic")
    };
    let first = match first {
        Err(e) if e.needs_technician() => return Err(DaemonError::Facility(e)),
        first => first,
    };
    if let Ok(f) = &first {
        records::set_scanner_clones(store, f.clones())?;
        if let Some(clock) = f.clock() {
            records::set_clock(store, clock)?;
        }
    }
    let observe = {
        let telemetry = telemetry.clone();
        let signals = signals.clone();
        move |decisions: &[Decision]| {
            events::Decided {
                decisions,
                telemetry: &telemetry,
            }
            .emit();
            signals.tell(decisions);
        }
    };
    let (kick, lane_stop, lanes) = lanes(store, gate, connecting, first.ok(), observe)?;
    for lane in lanes {
        let stall = wiring.stall(lane.stall_bound());
        wiring.watch.add(lane.progress(), stall, None);
        let stage = match lane.kind() {
            LaneKind::Live => Stage::LiveLane,
            LaneKind::Replay => Stage::ReplayLane,
        };
        wiring.stages.thread(stage, &lane.thread_name(), move || {
            StageResult::Lane(lane.run())
        });
    }
    Ok(Started {
        kick,
        lane_stop,
        link,
    })
}
