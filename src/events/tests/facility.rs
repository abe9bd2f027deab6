//! The facility claimer's events: the store reached, lost, refusing;
//! its clock; a lane's database steps; the ledger stream followed.

use super::*;

#[test]
fn facility_events_log_once_at_their_level() {
    let down = |outage| {
        logged(|| {
            FacilityUnavailable {
                redis: "redis://f:6379/",
                lane: "replay",
                reason: "connection refused",
                outage,
            }
            .emit()
        })
    };
    let begins = down(Outage::Begins);
    assert_eq!(one(&begins).level, tracing::Level::WARN);
    assert_eq!(one(&begins).field("reason"), Some("connection refused"));
    assert_eq!(one(&down(Outage::Continues)).level, tracing::Level::DEBUG);
    let backlog = down(Outage::Backlog {
        waiting: Ok((3, 40)),
        next: Duration::from_secs(1),
    });
    assert!(
        one(&backlog)
            .field("message")
            .unwrap()
            .contains("3 scans wait in the outbox"),
        "{backlog:?}"
    );
    let up = logged(|| {
        FacilityAnswers {
            redis: "redis://f:6379/",
            lane: "live",
            outage: Duration::from_secs(5),
            doing: "new scans are claimed as they come",
        }
        .emit()
    });
    assert_eq!(
        (one(&up).level, one(&up).field("outage_s")),
        (tracing::Level::INFO, Some("5"))
    );
    let reloaded = logged(|| {
        ScriptReloaded {
            redis: "redis://f:6379/",
        }
        .emit()
    });
    assert_eq!(one(&reloaded).level, tracing::Level::INFO);
    let clock = |offset_ms| {
        logged(|| {
            ClockMeasured {
                redis: "r",
                offset_ms,
                bound_ms: 2.0,
                worth_ms: 150.0,
                window_ms: 3000,
            }
            .emit()
        })
    };
    let off = clock(-4000.0);
    assert_eq!(one(&off).level, tracing::Level::WARN);
    assert!(
        one(&off)
            .field("message")
            .unwrap()
            .contains("4.000 s ahead of the facility Redis's (± 2.0 ms), more than 150 ms (5 % of the 3000 ms window)"),
        "{off:?}"
    );
    assert_eq!(one(&clock(10.0)).level, tracing::Level::INFO);
    let e = "timeout";
    let failed = logged(|| {
        ClockMeasureFailed {
            redis: "r",
            error: &e,
        }
        .emit()
    });
    assert_eq!(one(&failed).level, tracing::Level::WARN);
    let publish = logged(|| {
        PublishFailed {
            errors: Some("disk full"),
        }
        .emit()
    });
    assert_eq!(one(&publish).level, tracing::Level::WARN);
    let again = logged(|| PublishFailed { errors: None }.emit());
    assert_eq!(one(&again).level, tracing::Level::INFO);
    let past = logged(|| {
        CommittedPastRetention {
            scans: 2,
            retention: Duration::from_secs(72 * 3600),
        }
        .emit()
    });
    assert_eq!(one(&past).level, tracing::Level::WARN);
    assert_eq!(one(&past).target, "scangate::gate");
    assert_eq!(one(&past).field("scans"), Some("2"));
    assert_eq!(one(&past).field("retention_h"), Some("72"));
}

#[test]
fn lane_database_failures_and_clock_waits_log_once() {
    let e = "disk I/O error";
    for step in [LaneDbStep::Reading, LaneDbStep::Writing] {
        let logs = logged(|| {
            LaneDbFailed {
                lane: "live",
                step,
                error: &e,
                retry_in: Duration::from_millis(400),
            }
            .emit()
        });
        assert_eq!(one(&logs).level, tracing::Level::ERROR, "{step:?}");
        assert!(
            one(&logs)
                .field("message")
                .unwrap()
                .contains("retrying in 400ms"),
            "{logs:?}"
        );
    }
    let waiting = |n| {
        logged(|| {
            ClockWaiting {
                redis: "r",
                lane: "replay",
                waiting: n,
                max_clock_error_ms: 500,
            }
            .emit()
        })
    };
    assert_eq!(one(&waiting(3)).level, tracing::Level::WARN);
    assert_eq!(one(&waiting(0)).level, tracing::Level::INFO);
}

#[test]
fn claimer_events_keep_their_module_targets_and_levels() {
    let info = crate::model::ServerInfo {
        version: "7.2.4".into(),
        maxmemory_policy: "noeviction".into(),
        appendonly: "yes".into(),
        save: String::new(),
        role: "master".into(),
        connected_replicas: 1,
        has_waitaof: true,
    };
    let logs = logged(|| {
        FacilityConnected {
            redis: "redis://f:6379/",
            server: "f:6379",
            lane: "live",
            info: &info,
        }
        .emit()
    });
    let l = one(&logs);
    assert_eq!(
        (
            l.level,
            l.target.as_str(),
            l.field("replicas"),
            l.field("role")
        ),
        (
            tracing::Level::INFO,
            "scangate::daemon::claimer",
            Some("1"),
            Some("master")
        )
    );
    let unwaited = logged(|| {
        Confirmation::Unwaited {
            redis: "r",
            lane: "live",
            connected: 2,
        }
        .emit()
    });
    assert_eq!(one(&unwaited).level, tracing::Level::WARN);
    let e = "disk I/O error";
    for (what, target) in [
        (Recording::FacilityState, "scangate::daemon::claimer"),
        (Recording::LedgerStream, "scangate::daemon::claimer::lane"),
    ] {
        let logs = logged(|| RecordingFailed { what, error: &e }.emit());
        assert_eq!(
            (one(&logs).level, one(&logs).target.as_str()),
            (tracing::Level::WARN, target)
        );
    }
    let done = crate::model::Reconciliation {
        at_ms: 0,
        lost_marker: "m".into(),
        republished: 12,
        conflicts: 1,
        took_ms: 30,
    };
    let logs = logged(|| {
        Reconcile::Done {
            redis: "r",
            lane: "replay",
            done: &done,
        }
        .emit()
    });
    assert_eq!(one(&logs).field("republished"), Some("12"));
    assert!(
        one(&logs)
            .field("message")
            .unwrap()
            .contains("1 conflict(s): picks")
    );
    let logs = logged(|| {
        Reconcile::Conflict {
            scan: "u-1",
            other_scan: "u-2",
            other_gateway: None,
            by: "another gateway",
        }
        .emit()
    });
    assert_eq!(
        (
            one(&logs).target.as_str(),
            one(&logs).field("other_gateway")
        ),
        ("scangate::daemon::claimer::reconcile", Some("unknown"))
    );
    let refused = logged(|| {
        FacilityRefuses {
            redis: "r",
            lane: "live",
            reason: "WRONGPASS",
        }
        .emit()
    });
    assert_eq!(one(&refused).level, tracing::Level::ERROR);
    let trimmed = logged(|| {
        LedgerTrim::Trimmed {
            redis: "r",
            trimmed: 5,
            entries: 7,
        }
        .emit()
    });
    assert_eq!(
        (one(&trimmed).level, one(&trimmed).field("trimmed")),
        (tracing::Level::INFO, Some("5"))
    );
}

#[test]
fn a_facility_clock_step_is_a_warning_with_its_size() {
    let logs = logged(|| {
        FacilityClockStepped {
            step_ms: 5000.0,
            window_ms: 3000,
        }
        .emit()
    });
    assert_eq!(one(&logs).level, tracing::Level::WARN);
    assert_eq!(one(&logs).field("step_ms"), Some("5000.0"));
    assert!(
        one(&logs).field("message").unwrap().contains("5000 ms"),
        "{logs:?}"
    );
    let slewed = logged(|| {
        FacilityClockStepped {
            step_ms: -40.0,
            window_ms: 3000,
        }
        .emit()
    });
    assert_eq!(one(&slewed).level, tracing::Level::INFO);
}

#[test]
fn ledger_follow_events_log_once_at_their_level() {
    let claimed = logged(|| {
        LedgerFollow::Claimed {
            group: "inventory",
            consumer: "new",
            entries: 3,
            idle: Duration::from_secs(3600),
        }
        .emit()
    });
    assert_eq!(one(&claimed).level, tracing::Level::WARN);
    assert_eq!(one(&claimed).field("entries"), Some("3"));
    assert_eq!(one(&claimed).target, "scangate::facility::stream");
    let created = logged(|| {
        LedgerFollow::GroupCreated {
            stream: "scangate:{f}:ledger",
            group: "inventory",
        }
        .emit()
    });
    assert_eq!(one(&created).level, tracing::Level::INFO);
    let refused = logged(|| {
        LedgerFollow::ClaimRefused {
            group: "inventory",
            consumer: "new",
            error: &"NOPERM",
        }
        .emit()
    });
    assert_eq!(one(&refused).level, tracing::Level::WARN);
    assert!(
        one(&refused)
            .field("message")
            .unwrap()
            .contains("+xautoclaim"),
        "{refused:?}"
    );
}
