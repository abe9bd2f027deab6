//! Each event logs once, at its level, under its module's target, with
//! its fields, and moves its metric: the helpers that capture the log, and
//! the tests of the scanners', decisions', store's and daemon's events;
//! the facility claimer's are in `facility.rs`; the feedback's, a lane
//! probe's and a migration copy's in `targets.rs`.

mod facility;
mod targets;

use super::*;
use crate::capture::clock::boot_ns;
use crate::model::ScanState;
use crate::model::{Decision, Verdict};
use crate::telemetry::Telemetry;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::field::{Field, Visit};

/// One captured log event: level, target, fields (`message` too).
#[derive(Debug, Clone)]
struct Logged {
    level: tracing::Level,
    target: String,
    fields: Vec<(String, String)>,
}

impl Logged {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

struct Capture(Arc<Mutex<Vec<Logged>>>);

struct Fields<'a>(&'a mut Vec<(String, String)>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .push((field.name().to_string(), format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().to_string(), value.to_string()));
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let mut fields = Vec::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(Logged {
            level: *event.metadata().level(),
            target: event.metadata().target().to_string(),
            fields,
        });
    }
}

/// What `f` logged (every level).
fn logged(f: impl FnOnce()) -> Vec<Logged> {
    use tracing_subscriber::prelude::*;
    let got = Arc::new(Mutex::new(Vec::new()));
    let subscriber = tracing_subscriber::registry().with(Capture(got.clone()));
    tracing::subscriber::with_default(subscriber, f);
    got.lock().unwrap().clone()
}

fn telemetry() -> Telemetry {
    Telemetry::new(&["counter-1".to_string()], None)
}

/// The value of the series line starting `prefix` (labels included).
fn value(t: &Telemetry, prefix: &str) -> Option<f64> {
    t.encode()
        .lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

fn one(logs: &[Logged]) -> &Logged {
    assert_eq!(logs.len(), 1, "{logs:?}");
    &logs[0]
}

const UP: &str = "scangate_scanner_up{scanner=\"counter-1\"}";

#[test]
fn scanner_events_log_once_and_move_scanner_up() {
    let t = telemetry();
    let logs = logged(|| {
        SerialConnected {
            scanner: "counter-1",
            device: "/dev/ttyUSB0",
            baud: 9600,
            line: "8N1".into(),
            framing: "CR LF".into(),
            ack: true,
            identity: None,
            telemetry: &t,
        }
        .emit()
    });
    let l = one(&logs);
    assert_eq!(
        (l.level, l.field("message"), l.field("scanner")),
        (
            tracing::Level::INFO,
            Some("scanner connected"),
            Some("counter-1")
        )
    );
    assert_eq!(l.target, "scangate::source::serial");
    assert_eq!(value(&t, UP), Some(1.0));
    assert!(t.live().scanners[0].connected);

    let logs = logged(|| {
        SerialLost {
            scanner: "counter-1",
            device: "/dev/ttyUSB0",
            reason: "unplugged",
            partial_bytes: 0,
            telemetry: &t,
        }
        .emit()
    });
    let l = one(&logs);
    assert_eq!(
        (l.level, l.field("reason")),
        (tracing::Level::WARN, Some("unplugged"))
    );
    assert_eq!(value(&t, UP), Some(0.0));

    logged(|| {
        HidConnected {
            scanner: "counter-1",
            mode: "pos",
            device: "hidraw0",
            identity: None,
            telemetry: &t,
        }
        .emit()
    });
    assert_eq!(value(&t, UP), Some(1.0));
    let logs = logged(|| {
        HidLost {
            scanner: "counter-1",
            reason: "gone",
            telemetry: &t,
        }
        .emit()
    });
    assert_eq!(one(&logs).level, tracing::Level::WARN);
    assert_eq!(value(&t, UP), Some(0.0));

    logged(|| {
        HidConnected {
            scanner: "counter-1",
            mode: "pos",
            device: "hidraw0",
            identity: None,
            telemetry: &t,
        }
        .emit()
    });
    let logs = logged(|| {
        ScannerClosed {
            scanner: "counter-1",
            telemetry: &t,
        }
        .emit()
    });
    assert_eq!(one(&logs).level, tracing::Level::DEBUG);
    assert_eq!(value(&t, UP), Some(0.0));
}

#[test]
fn a_partial_frame_lost_is_one_more_warning() {
    let t = telemetry();
    let logs = logged(|| {
        SerialLost {
            scanner: "counter-1",
            device: "/dev/ttyUSB0",
            reason: "unplugged",
            partial_bytes: 7,
            telemetry: &t,
        }
        .emit()
    });
    assert_eq!(logs.len(), 2, "{logs:?}");
    assert_eq!(logs[0].field("bytes"), Some("7"));
}

#[test]
fn reads_and_acks_are_counted_and_logged_once() {
    let t = telemetry();
    let logs = logged(|| {
        ScanRead {
            scanner: "counter-1",
            tapped: None,
            telemetry: &t,
        }
        .emit()
    });
    assert_eq!(one(&logs).level, tracing::Level::TRACE);
    assert_eq!(
        value(&t, "scangate_scans_read_total{scanner=\"counter-1\"}"),
        Some(1.0)
    );
    let logs = logged(|| {
        Acked {
            scanner: "counter-1",
            scan_uuid: None,
            took: Duration::from_millis(3),
            telemetry: &t,
        }
        .emit()
    });
    one(&logs);
    assert_eq!(value(&t, "scangate_ack_latency_seconds_count"), Some(1.0));
}

#[test]
fn each_decision_is_logged_once_and_counted_a_reject_at_warn_with_its_reason() {
    let t = telemetry();
    let d = |verdict: Verdict| Decision {
        scan_uuid: "u-1".into(),
        verdict,
        content_key: None,
        ambiguous: false,
        scanner: "counter-1".into(),
        read_boot_ns: Some(crate::capture::clock::boot_ns()),
        was: ScanState::Pending,
        told_as: None,
        alert: None,
        acknowledged: None,
    };
    let decisions = [
        d(Verdict::Committed),
        d(Verdict::Rejected {
            reason: "bad check digit".into(),
        }),
    ];
    let logs = logged(|| {
        Decided {
            decisions: &decisions,
            telemetry: &t,
        }
        .emit()
    });
    assert_eq!(logs.len(), 2, "{logs:?}");
    assert_eq!(
        (logs[0].level, logs[0].field("decision")),
        (tracing::Level::DEBUG, Some("committed"))
    );
    let r = &logs[1];
    assert_eq!(
        (
            r.level,
            r.field("decision"),
            r.field("reason"),
            r.field("scan_uuid"),
            r.field("scanner")
        ),
        (
            tracing::Level::WARN,
            Some("rejected"),
            Some("bad check digit"),
            Some("u-1"),
            Some("counter-1")
        )
    );
    assert!(r.field("message").unwrap().contains("bad check digit"));
    assert_eq!(r.target, REJECT_TARGET);
    for (decision, n) in [("committed", 1.0), ("rejected", 1.0), ("suppressed", 0.0)] {
        let series =
            format!("scangate_decisions_total{{scanner=\"counter-1\",decision=\"{decision}\"}}");
        assert_eq!(value(&t, &series), Some(n), "{decision}");
    }
    assert_eq!(
        value(&t, "scangate_commit_latency_seconds_count"),
        Some(2.0)
    );
    assert_eq!(t.live().scanners[0].rejects_today, 1);
}

#[test]
fn failures_log_once_at_their_level() {
    let e = "disk full";
    let logs = logged(|| {
        OutboxWriteFailed {
            db: std::path::Path::new("/state/scangate.db"),
            scans: 3,
            error: &e,
            retry_in: Duration::from_millis(50),
        }
        .emit()
    });
    assert_eq!(one(&logs).level, tracing::Level::ERROR);
    assert!(one(&logs).field("message").unwrap().contains("disk full"));
    let logs = logged(|| {
        ScanNotStored {
            scanner: "counter-1",
            scan_uuid: "u-1",
        }
        .emit()
    });
    assert_eq!(one(&logs).level, tracing::Level::ERROR);
    for place in [
        AnchorPlace::StateFile,
        AnchorPlace::StateFileAtStop,
        AnchorPlace::Facility,
    ] {
        let logs = logged(|| AnchorFailed { place, error: &e }.emit());
        assert_eq!(one(&logs).level, tracing::Level::WARN, "{place:?}");
    }
    let logs = logged(|| {
        AnchorWritten {
            state_id: "s",
            seq: 4,
            hash: "h",
        }
        .emit()
    });
    assert_eq!(one(&logs).target, "scangate::anchor");
    assert_eq!(one(&logs).field("audit_head_seq"), Some("4"));
}

#[test]
fn disk_failures_log_once_at_their_level() {
    let (e, db) = (
        "disk I/O error",
        std::path::Path::new("/var/lib/scangate/scangate.db"),
    );
    for then in [
        DecidingThen::StoredPending,
        DecidingThen::RetriedEvery(Duration::from_secs(1)),
    ] {
        let logs = logged(|| DecidingFailed { error: &e, then }.emit());
        assert_eq!(one(&logs).level, tracing::Level::ERROR, "{then:?}");
    }
    let every = Duration::from_secs(600);
    for (step, level) in [
        (SweepStep::PageCheck { every }, tracing::Level::ERROR),
        (SweepStep::ShrinkCache, tracing::Level::WARN),
        (SweepStep::ClearRaw { every }, tracing::Level::WARN),
        (SweepStep::TruncateWal, tracing::Level::WARN),
    ] {
        let logs = logged(|| {
            SweepFailed {
                db,
                step,
                error: &e,
            }
            .emit()
        });
        assert_eq!(one(&logs).level, level, "{step:?}");
        assert_eq!(one(&logs).field("db"), Some(db.to_str().unwrap()));
    }
    let logs = logged(|| CheckpointFailed { db, error: &e }.emit());
    assert_eq!(one(&logs).level, tracing::Level::WARN);
}

#[test]
fn lifecycle_events_log_once_with_their_fields() {
    let db = std::path::Path::new("/var/lib/scangate/scangate.db");
    let logs = logged(|| {
        Starting {
            db,
            facility: "f-1",
            gateway: "g-1",
            scanners: 2,
            window_ms: 3000,
            facility_redis: false,
        }
        .emit()
    });
    let l = one(&logs);
    let message = format!(
        "scangate starting: release {}, schema {}",
        crate::build::VERSION,
        crate::build::SCHEMA_VERSION
    );
    let schema = crate::build::SCHEMA_VERSION.to_string();
    assert_eq!(
        (
            l.level,
            l.field("message"),
            l.field("store"),
            l.field("scanners"),
            l.field("version"),
            l.field("schema"),
        ),
        (
            tracing::Level::INFO,
            Some(message.as_str()),
            Some("embedded"),
            Some("2"),
            Some(crate::build::VERSION),
            Some(schema.as_str()),
        )
    );
    assert_eq!(l.target, "scangate::daemon");
    let stats = crate::model::GateStats {
        committed: 5,
        ..Default::default()
    };
    let logs = logged(|| Lifecycle::Stopped { stats: &stats }.emit());
    assert_eq!(
        (one(&logs).level, one(&logs).field("committed")),
        (tracing::Level::INFO, Some("5"))
    );
    let logs = logged(|| {
        Lifecycle::StopExtended {
            line: "stopping: draining for 3 s",
            by: Duration::from_secs(10),
        }
        .emit()
    });
    assert_eq!(
        one(&logs).field("message"),
        Some("stopping: draining for 3 s; the stop timeout is extended by 10s")
    );
    let logs = logged(|| StartWarning::NoFacilityStore { waiting: 4 }.emit());
    assert_eq!(
        (one(&logs).level, one(&logs).field("scans")),
        (tracing::Level::WARN, Some("4"))
    );
    let logs = logged(|| {
        StageFailed::Panicked {
            stage: &"outbox writer",
            why: "panicked: boom",
        }
        .emit()
    });
    assert_eq!(
        (one(&logs).level, one(&logs).field("message")),
        (
            tracing::Level::ERROR,
            Some("the outbox writer panicked: boom")
        )
    );
    let logs = logged(|| {
        StageFailed::Corrupt {
            db,
            detail: "bad page",
            stopping: true,
        }
        .emit()
    });
    assert_eq!(one(&logs).field("db"), Some(db.to_str().unwrap()));
    assert_eq!(
        one(&logged(|| StageFailed::AnchorThreadPanicked.emit())).level,
        tracing::Level::WARN
    );
}

#[test]
fn a_reload_sets_the_scanners_and_a_refusal_names_the_keys() {
    let t = telemetry();
    let names = ["counter-1".to_string(), "counter-2".to_string()];
    let logs = logged(|| {
        Reloaded {
            added: 1,
            removed: 0,
            changed: 0,
            described: "added counter-2",
            scanners: &names,
            telemetry: &t,
        }
        .emit()
    });
    let l = one(&logs);
    assert_eq!(
        (l.level, l.target.as_str(), l.field("added")),
        (tracing::Level::INFO, "scangate::reload", Some("1"))
    );
    assert_eq!(
        value(&t, "scangate_scanner_up{scanner=\"counter-2\"}"),
        Some(0.0)
    );
    let keys = ["gateway.id".to_string()];
    let logs = logged(|| ReloadRefused::NeedsRestart { keys: &keys }.emit());
    assert_eq!(
        (one(&logs).level, one(&logs).field("keys")),
        (tracing::Level::WARN, Some("gateway.id"))
    );
    let e = "expected `=`";
    let logs = logged(|| {
        ReloadRefused::ConfigError {
            at: " (line 3)",
            error: &e,
            scanners: 1,
        }
        .emit()
    });
    assert_eq!(one(&logs).level, tracing::Level::ERROR);
}

#[test]
fn old_config_keys_warn_each_and_set_the_gauge_at_each_read() {
    let t = telemetry();
    let gauge = "scangate_config_old_keys ";
    assert_eq!(value(&t, gauge), Some(0.0));
    let keys = [
        OldConfigKey {
            key: "redis.require_synced_clock",
            warning: "`redis.require_synced_clock` (line 9) is deprecated",
        },
        OldConfigKey {
            key: "scanner[1].old_name",
            warning: "`scanner[1].old_name` (line 14) is deprecated",
        },
    ];
    let logs = logged(|| {
        OldConfigKeys {
            keys: &keys,
            telemetry: &t,
        }
        .emit()
    });
    let told: Vec<_> = logs
        .iter()
        .map(|l| {
            (
                l.level,
                l.target.as_str(),
                l.field("key"),
                l.field("message"),
            )
        })
        .collect();
    assert_eq!(
        told,
        keys.iter()
            .map(|k| (
                tracing::Level::WARN,
                "scangate::daemon",
                Some(k.key),
                Some(k.warning)
            ))
            .collect::<Vec<_>>()
    );
    assert_eq!(value(&t, gauge), Some(2.0));
    // A reload of a file edited since: none left, nothing told.
    assert!(
        logged(|| OldConfigKeys {
            keys: &[],
            telemetry: &t
        }
        .emit())
        .is_empty()
    );
    assert_eq!(value(&t, gauge), Some(0.0));
}

#[test]
fn source_and_watchdog_events_log_once_with_their_fields() {
    let h = "p50 1 ms";
    let logs = logged(|| {
        AckLatency {
            scanner: "counter-1",
            naks: 2,
            span: AckSpan::Last(Duration::from_secs(60)),
            summary: &h,
        }
        .emit()
    });
    let l = one(&logs);
    assert_eq!(
        (l.target.as_str(), l.field("naks"), l.field("scanner")),
        ("scangate::ack_latency", Some("2"), Some("counter-1"))
    );
    assert!(l.field("message").unwrap().contains("last 60s: p50 1 ms"));
    let logs = logged(|| {
        HidGrab::NoNode {
            scanner: "counter-1",
            device: std::path::Path::new("/dev/hidraw0"),
            name: "hidraw0",
        }
        .emit()
    });
    assert_eq!(
        (one(&logs).level, one(&logs).target.as_str()),
        (tracing::Level::ERROR, "scangate::source::hid::device")
    );
    let e = "permission denied";
    let logs = logged(|| {
        SourceFailed::SerialOpen {
            scanner: "counter-1",
            device: "/dev/ttyUSB0",
            error: e,
            every: Duration::from_secs(5),
        }
        .emit()
    });
    assert_eq!(
        (one(&logs).level, one(&logs).field("device")),
        (tracing::Level::WARN, Some("/dev/ttyUSB0"))
    );
    let logs = logged(|| {
        Wedge::Stuck {
            stage: "outbox writer",
            bound: Duration::from_secs(30),
        }
        .emit()
    });
    assert_eq!(
        (one(&logs).level, one(&logs).field("stage")),
        (tracing::Level::ERROR, Some("outbox writer"))
    );
    assert_eq!(
        one(&logged(|| Wedge::Moves {
            stage: "outbox writer"
        }
        .emit()))
        .level,
        tracing::Level::INFO
    );
    let w = "2 days left";
    assert_eq!(
        one(&logged(|| DiskSpace::Short { warning: &w }.emit())).level,
        tracing::Level::WARN
    );
    assert_eq!(
        one(&logged(|| DiskSpace::Lasts.emit())).level,
        tracing::Level::INFO
    );
    for (step, level, target) in [
        (
            MetricsStep::Sampling,
            tracing::Level::ERROR,
            "scangate::metrics",
        ),
        (
            MetricsStep::Accept,
            tracing::Level::WARN,
            "scangate::metrics::http",
        ),
    ] {
        let logs = logged(|| MetricsFailed { step, error: &e }.emit());
        assert_eq!(
            (one(&logs).level, one(&logs).target.as_str()),
            (level, target)
        );
    }
    let logs = logged(|| AuditRecordUnreadable { seq: 9, error: &e }.emit());
    assert_eq!(one(&logs).target, "scangate::audit");
}

fn decided_as(verdict: Verdict, was: ScanState) -> Decision {
    Decision {
        scan_uuid: "u".into(),
        verdict,
        content_key: None,
        ambiguous: false,
        scanner: "counter-1".into(),
        read_boot_ns: Some(boot_ns()),
        was,
        told_as: None,
        alert: None,
        acknowledged: None,
    }
}

#[test]
fn a_retried_unresolved_scan_counts_once_and_rejects_count_today() {
    let t = telemetry();
    let decided = |d: Decision| {
        Decided {
            decisions: &[d],
            telemetry: &t,
        }
        .emit()
    };
    t.scan_read("counter-1");
    decided(decided_as(
        Verdict::Unresolved { reason: "x".into() },
        ScanState::Pending,
    ));
    decided(decided_as(
        Verdict::Unresolved { reason: "x".into() },
        ScanState::Unresolved,
    ));
    decided(decided_as(Verdict::Committed, ScanState::Unresolved));
    decided(decided_as(
        Verdict::Rejected { reason: "x".into() },
        ScanState::Pending,
    ));
    let text = t.encode();
    let count = |d: &str| {
        text.lines()
            .find(|l| l.starts_with("scangate_decisions_total") && l.contains(&format!("\"{d}\"")))
            .and_then(|l| l.rsplit(' ').next())
            .map(str::to_string)
    };
    assert_eq!(count("unresolved").as_deref(), Some("1"), "{text}");
    assert_eq!(count("committed").as_deref(), Some("1"), "{text}");
    assert_eq!(count("rejected").as_deref(), Some("1"), "{text}");
    assert!(
        text.contains("scangate_commit_latency_seconds_count 2"),
        "{text}"
    );
    let live = t.live();
    assert_eq!(
        (live.scanners[0].reads_today, live.scanners[0].rejects_today),
        (1, 1)
    );
}

#[test]
fn metrics_connections_dropped_are_counted_each_and_told_as_one_warning() {
    let t = telemetry();
    let series = |reason: &str| {
        format!("scangate_metrics_http_dropped_connections_total{{reason=\"{reason}\"}}")
    };
    for reason in MetricsDrop::ALL {
        assert_eq!(value(&t, &series(reason.as_str())), Some(0.0), "{reason:?}");
    }
    let peer: std::net::IpAddr = "192.0.2.7".parse().unwrap();
    let logs = logged(|| {
        for _ in 0..3 {
            MetricsConnectionDropped {
                reason: MetricsDrop::Room,
                peer,
                telemetry: &t,
            }
            .emit()
        }
        MetricsConnectionDropped {
            reason: MetricsDrop::HeadTimeout,
            peer,
            telemetry: &t,
        }
        .emit()
    });
    assert!(
        logs.iter().all(|l| l.level == tracing::Level::DEBUG),
        "{logs:?}"
    );
    assert_eq!(value(&t, &series("room")), Some(3.0));
    assert_eq!(value(&t, &series("head_timeout")), Some(1.0));
    let logs = logged(|| {
        MetricsConnectionsDropped {
            room: 3,
            head_timeout: 1,
            write_timeout: 0,
            last_peer: peer,
        }
        .emit()
    });
    let l = one(&logs);
    assert_eq!(
        (
            l.level,
            l.target.as_str(),
            l.field("closed"),
            l.field("peer")
        ),
        (
            tracing::Level::WARN,
            "scangate::metrics::http",
            Some("4"),
            Some("192.0.2.7")
        )
    );
    let w = "[metrics] listen = \"0.0.0.0:9464\" is not a loopback address";
    let logs = logged(|| {
        MetricsExposed {
            listen: "0.0.0.0:9464".parse().unwrap(),
            warning: w,
        }
        .emit()
    });
    assert_eq!(
        (one(&logs).level, one(&logs).field("message")),
        (tracing::Level::WARN, Some(w))
    );
}
