//! The feedback's, a lane probe's, a migration copy's and the tap
//! socket's events: each at its level, under its target, with its fields
//! and message (operators filter on them: pinned here).

use super::*;
use crate::model::Told;

/// Level, target and message of the one line `logs` holds.
fn line(logs: &[Logged]) -> (tracing::Level, &str, Option<&str>) {
    let l = one(logs);
    (l.level, l.target.as_str(), l.field("message"))
}

#[test]
fn a_hid_pos_scanners_outputs_are_told_at_info_and_none_at_warn() {
    for (usable, level) in [(true, tracing::Level::INFO), (false, tracing::Level::WARN)] {
        let logs = logged(|| {
            HidPosOutputs {
                scanner: "counter-1",
                usable,
                note: "what it offers",
            }
            .emit()
        });
        assert_eq!(
            line(&logs),
            (level, "scangate::feedback", Some("what it offers"))
        );
        assert_eq!(logs[0].field("scanner"), Some("counter-1"));
    }
}

#[test]
fn a_failed_feedback_write_is_counted_each_time_and_warned_once_per_error() {
    let t = telemetry();
    let failed = |gone, repeated| {
        logged(|| {
            FeedbackFailed {
                scanner: "counter-1",
                told: Told::Committed,
                error: &"no such device",
                gone,
                repeated,
                telemetry: &t,
            }
            .emit()
        })
    };
    assert_eq!(
        line(&failed(true, false)),
        (
            tracing::Level::WARN,
            "scangate::feedback",
            Some(
                "the scanner was not told committed: no such device (it is reopened when it is back)"
            )
        )
    );
    let logs = failed(false, false);
    assert_eq!(
        line(&logs),
        (
            tracing::Level::WARN,
            "scangate::feedback",
            Some("the scanner was not told committed: no such device; scanning goes on")
        )
    );
    assert_eq!(
        (logs[0].field("scanner"), logs[0].field("told")),
        (Some("counter-1"), Some("committed"))
    );
    assert_eq!(
        line(&failed(false, true)),
        (
            tracing::Level::DEBUG,
            "scangate::feedback",
            Some("the scanner was not told committed: no such device")
        )
    );
    let failures =
        "scangate_feedback_total{scanner=\"counter-1\",told=\"committed\",outcome=\"failed\"}";
    assert_eq!(value(&t, failures), Some(3.0));
}

#[test]
fn a_failed_lost_commit_probe_is_debug_detail_under_the_lane() {
    let logs = logged(|| {
        LostCommitProbeFailed {
            redis: "redis://f:6379/",
            error: &"connection reset",
        }
        .emit()
    });
    assert_eq!(
        line(&logs),
        (
            tracing::Level::DEBUG,
            "scangate::daemon::claimer::lane",
            Some(
                "probing the facility Redis for this gateway's latest commits failed: connection reset"
            )
        )
    );
    assert_eq!(logs[0].field("redis"), Some("redis://f:6379/"));
}

#[test]
fn a_copy_not_made_before_a_migration_is_a_warning_under_the_store() {
    let logs = logged(|| {
        MigrationCopy::Failed {
            error: &"disk full",
        }
        .emit()
    });
    assert_eq!(
        line(&logs),
        (
            tracing::Level::WARN,
            "scangate::store",
            Some(
                "no copy of the database is kept before the migration (disk full); the migration goes ahead, but a rollback to the earlier release will need a backup of your own"
            )
        )
    );
}

#[test]
fn the_tap_sockets_events_are_under_their_target_at_their_level() {
    let e = std::io::Error::other("too many open files");
    let path = std::path::Path::new("/var/lib/scangate/tap.sock");
    for (event, level) in [
        (Tap::Unavailable { path, error: &e }, tracing::Level::WARN),
        (Tap::AcceptFailed { error: &e }, tracing::Level::WARN),
        (Tap::Refused { why: "no greeting" }, tracing::Level::WARN),
        (
            Tap::Attached {
                readers: 1,
                raw: false,
            },
            tracing::Level::INFO,
        ),
        (
            Tap::Detached {
                readers: 0,
                lost: 3,
            },
            tracing::Level::INFO,
        ),
    ] {
        let logs = logged(|| event.emit());
        assert_eq!(line(&logs).0, level);
        assert_eq!(line(&logs).1, "scangate::tap");
    }
}
