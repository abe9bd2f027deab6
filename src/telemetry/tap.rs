//! What `scangate tap` shows: every read, its decision, its ACK and what
//! its scanner was told, as JSON lines fanned out to whoever listens on
//! the tap socket (`daemon::tap` serves it; `cmd::tap` reads it).
//!
//! The fan-out is a [`tokio::sync::broadcast`] channel: sending never
//! waits, whatever the readers do. A reader that falls more than
//! [`TAP_LINES`] behind loses the oldest lines and is told how many
//! (`scangate_tap_lost_lines_total` counts them), so a slow or stopped
//! `tap` never slows a scanner or the writer. With no reader attached
//! nothing is built: each call site asks [`Telemetry::tapped`] (one atomic
//! load) first.
//!
//! Product identity only: GTIN, NDC, lot, expiry, serial, the symbology.
//! The raw bytes of a read (which, on a pharmacy's own label, could hold
//! anything) go only to a reader that asked for them (`--raw`).

use super::Telemetry;
use crate::model::{Decision, Told, Verdict};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::broadcast;

/// How many lines a reader may fall behind before it loses the oldest.
pub const TAP_LINES: usize = 4096;

/// One line for the readers: its JSON, and for a read the same with its
/// raw bytes (sent only to a reader that asked for them).
#[derive(Clone, Debug)]
pub struct TapLine {
    /// The line every reader gets.
    pub json: Arc<str>,
    /// The line with the raw bytes, for a `--raw` reader (a read only,
    /// and only while such a reader is attached).
    pub raw: Option<Arc<str>>,
}

/// A read as the tap shows it: what its scanner sent, decoded.
#[derive(Debug, Default, Serialize)]
pub struct TapRead<'a> {
    /// `read`.
    pub event: &'static str,
    /// The capture UUID.
    pub scan_uuid: &'a str,
    /// When it was read (Unix ms, UTC).
    pub at_ms: i64,
    /// The scanner's name.
    pub scanner: &'a str,
    /// dispense, receive, …
    pub scan_type: &'a str,
    /// AIM symbology identifier (`]d2`), absent when it did not decode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aim: Option<&'a str>,
    /// The symbology's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbology: Option<&'a str>,
    /// GTIN-14.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gtin: Option<&'a str>,
    /// NDC, 10 digits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ndc: Option<&'a str>,
    /// Batch / lot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lot: Option<&'a str>,
    /// Expiry, YYYY-MM-DD.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ymd")]
    pub expiry: Option<chrono::NaiveDate>,
    /// Serial number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serial: Option<&'a str>,
    /// Why it did not decode (never repeats the data).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undecoded: Option<String>,
    /// A control label: what it declares.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control: Option<&'a str>,
    /// Its length in bytes.
    pub bytes: usize,
    /// Its bytes, in hex: set here for a reader that asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

/// A date as YYYY-MM-DD, written digit by digit (chrono's formatter
/// costs more than the rest of the line).
fn ymd<S: serde::Serializer>(d: &Option<chrono::NaiveDate>, s: S) -> Result<S::Ok, S::Error> {
    use chrono::Datelike as _;
    let Some(d) = d else {
        return s.serialize_none();
    };
    let mut b = *b"0000-00-00";
    let mut put = |at: usize, n: u32, width: usize| {
        let mut n = n;
        for i in (0..width).rev() {
            b[at + i] = b'0' + (n % 10) as u8;
            n /= 10;
        }
    };
    put(0, d.year().clamp(0, 9999) as u32, 4);
    put(5, d.month(), 2);
    put(8, d.day(), 2);
    s.serialize_str(std::str::from_utf8(&b).expect("digits"))
}

/// The fan-out and its series.
pub(super) struct TapHub {
    tx: broadcast::Sender<TapLine>,
    /// Readers attached, and those of them that asked for raw bytes.
    readers: AtomicUsize,
    raw_readers: AtomicUsize,
    attached: Gauge,
    lost: Counter,
}

impl TapHub {
    /// Registered in `registry`.
    pub(super) fn register(registry: &mut Registry) -> TapHub {
        let (tx, _) = broadcast::channel(TAP_LINES);
        let hub = TapHub {
            tx,
            readers: AtomicUsize::new(0),
            raw_readers: AtomicUsize::new(0),
            attached: Gauge::default(),
            lost: Counter::default(),
        };
        registry.register(
            "scangate_tap_readers",
            "`scangate tap` and `scangate top` readers attached to the tap socket now",
            hub.attached.clone(),
        );
        registry.register(
            "scangate_tap_lost_lines",
            "Lines tap readers lost since start because they fell behind (each reader is told its own count; the pipeline never waits for one)",
            hub.lost.clone(),
        );
        hub
    }
}

/// A reader's place on the tap: lines from now on; detached when dropped.
pub struct TapReader {
    rx: broadcast::Receiver<TapLine>,
    raw: bool,
    telemetry: Telemetry,
}

/// What a reader gets next.
pub enum Next {
    /// A line (its JSON, without a newline).
    Line(Arc<str>),
    /// It fell behind: this many lines were lost.
    Lost(u64),
    /// The daemon is stopping.
    Closed,
}

impl TapReader {
    /// The next line for this reader (raw bytes only if it asked).
    pub async fn next(&mut self) -> Next {
        let got = self.rx.recv().await;
        self.take(got)
    }

    /// The next line if one is waiting (`None`: none is).
    pub fn next_now(&mut self) -> Option<Next> {
        match self.rx.try_recv() {
            Ok(line) => Some(self.take(Ok(line))),
            Err(broadcast::error::TryRecvError::Lagged(n)) => {
                Some(self.take(Err(broadcast::error::RecvError::Lagged(n))))
            }
            Err(broadcast::error::TryRecvError::Closed) => Some(Next::Closed),
            Err(broadcast::error::TryRecvError::Empty) => None,
        }
    }

    fn take(&self, got: Result<TapLine, broadcast::error::RecvError>) -> Next {
        match got {
            Ok(line) => Next::Line(match (self.raw, line.raw) {
                (true, Some(raw)) => raw,
                _ => line.json,
            }),
            Err(broadcast::error::RecvError::Lagged(n)) => {
                self.telemetry.inner.tap.lost.inc_by(n);
                Next::Lost(n)
            }
            Err(broadcast::error::RecvError::Closed) => Next::Closed,
        }
    }
}

impl Drop for TapReader {
    fn drop(&mut self) {
        let hub = &self.telemetry.inner.tap;
        hub.readers.fetch_sub(1, Ordering::Relaxed);
        if self.raw {
            hub.raw_readers.fetch_sub(1, Ordering::Relaxed);
        }
        hub.attached.dec();
    }
}

/// The decision line's fields.
#[derive(Serialize)]
struct DecidedLine<'a> {
    event: &'static str,
    scan_uuid: &'a str,
    scanner: &'a str,
    /// committed, echo, ambiguous, rejected, waiting, control.
    decision: &'static str,
    /// The scan's state in the outbox (`suppressed` for an echo, …).
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    echoes: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    ambiguous: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    control: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    alert: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    decided_ms: Option<f64>,
}

impl Telemetry {
    /// Whether a tap reader is attached (build a line only then).
    pub fn tapped(&self) -> bool {
        self.inner.tap.readers.load(Ordering::Relaxed) > 0
    }

    /// Whether a reader that asked for raw bytes is attached.
    pub fn tapped_raw(&self) -> bool {
        self.inner.tap.raw_readers.load(Ordering::Relaxed) > 0
    }

    /// Attach a reader (raw bytes too when `raw`).
    pub fn tap(&self, raw: bool) -> TapReader {
        let hub = &self.inner.tap;
        let rx = hub.tx.subscribe();
        hub.readers.fetch_add(1, Ordering::Relaxed);
        if raw {
            hub.raw_readers.fetch_add(1, Ordering::Relaxed);
        }
        hub.attached.inc();
        TapReader {
            rx,
            raw,
            telemetry: self.clone(),
        }
    }

    /// Readers attached now.
    pub fn tap_readers(&self) -> usize {
        self.inner.tap.readers.load(Ordering::Relaxed)
    }

    fn tap_send(&self, line: TapLine) {
        // No receiver: nobody listens any more (an error only then).
        let _ = self.inner.tap.tx.send(line);
    }

    /// A read, as its source queued it; `raw`: its bytes, when
    /// [`Telemetry::tapped_raw`].
    pub(crate) fn tap_read(&self, mut read: TapRead<'_>, raw: Option<&[u8]>) {
        read.event = "read";
        let json = line(&read);
        let raw = raw.map(|bytes| {
            read.raw = Some(hex::encode(bytes));
            line(&read)
        });
        self.tap_send(TapLine { json, raw });
    }

    /// Decisions, as they were committed; `now` on the boot clock (ns).
    pub(crate) fn tap_decided(&self, decisions: &[Decision], now: i64) {
        for d in decisions {
            let (reason, echoes, control) = match &d.verdict {
                Verdict::Rejected { reason } | Verdict::Unresolved { reason } => {
                    (Some(reason.as_str()), None, None)
                }
                Verdict::Suppressed { twin } => (None, Some(twin.as_str()), None),
                Verdict::Control { control } => (None, None, Some(control.as_str())),
                Verdict::Committed | Verdict::Pending => (None, None, None),
            };
            let json = line(&DecidedLine {
                event: "decided",
                scan_uuid: &d.scan_uuid,
                scanner: &d.scanner,
                decision: decision_word(d),
                state: d.verdict.state().as_str(),
                reason,
                echoes,
                ambiguous: d.ambiguous,
                control,
                alert: d.alert.map(|a| a.as_str()),
                decided_ms: d.read_boot_ns.map(|read| ms(now - read)),
            });
            self.tap_send(TapLine { json, raw: None });
        }
    }

    /// Scanner `scanner` was ACKed for read `scan_uuid`, `took` after
    /// its frame was read.
    pub(crate) fn tap_acked(&self, scanner: &str, scan_uuid: Option<&str>, took: Duration) {
        #[derive(Serialize)]
        struct Line<'a> {
            event: &'static str,
            scanner: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            scan_uuid: Option<&'a str>,
            ack_ms: f64,
        }
        let json = line(&Line {
            event: "acked",
            scanner,
            scan_uuid,
            ack_ms: took.as_secs_f64() * 1e3,
        });
        self.tap_send(TapLine { json, raw: None });
    }

    /// Scanner `scanner` was told `told` (`via` its channel), `took`
    /// after the read (when it was read during this boot).
    pub(crate) fn tap_told(&self, scanner: &str, told: Told, via: &str, took: Option<Duration>) {
        #[derive(Serialize)]
        struct Line<'a> {
            event: &'static str,
            scanner: &'a str,
            told: &'static str,
            via: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            told_ms: Option<f64>,
        }
        let json = line(&Line {
            event: "told",
            scanner,
            told: told.as_str(),
            via,
            told_ms: took.map(|t| t.as_secs_f64() * 1e3),
        });
        self.tap_send(TapLine { json, raw: None });
    }
}

/// What the tap calls a decision: committed, echo, ambiguous, rejected,
/// waiting, control (the words a technician reads at the counter).
pub fn decision_word(d: &Decision) -> &'static str {
    match &d.verdict {
        Verdict::Committed => "committed",
        Verdict::Suppressed { .. } if d.ambiguous => "ambiguous",
        Verdict::Suppressed { .. } => "echo",
        Verdict::Rejected { .. } => "rejected",
        Verdict::Unresolved { .. } | Verdict::Pending => "waiting",
        Verdict::Control { .. } => "control",
    }
}

/// Every word [`decision_word`] gives.
#[cfg(test)]
pub const DECISION_WORDS: [&str; 6] = [
    "committed",
    "echo",
    "ambiguous",
    "rejected",
    "waiting",
    "control",
];

/// Milliseconds, to the microsecond, from nanoseconds.
fn ms(ns: i64) -> f64 {
    (ns.max(0) / 1000) as f64 / 1e3
}

/// One JSON line (no newline), written into a buffer this thread keeps
/// (one allocation per line: its own).
fn line(value: &impl Serialize) -> Arc<str> {
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUF.with_borrow_mut(|buf| {
        buf.clear();
        serde_json::to_writer(&mut *buf, value).expect("a tap line serialises");
        Arc::from(std::str::from_utf8(buf).expect("serde_json writes UTF-8"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ScanState;

    fn decision(verdict: Verdict) -> Decision {
        Decision {
            scan_uuid: "u1".into(),
            verdict,
            content_key: None,
            ambiguous: false,
            scanner: "counter-1".into(),
            read_boot_ns: Some(1_000_000),
            was: ScanState::Pending,
            told_as: None,
            alert: None,
            acknowledged: None,
        }
    }

    fn take(r: &mut TapReader) -> String {
        match r.rx.try_recv() {
            Ok(line) => match (r.raw, line.raw) {
                (true, Some(raw)) => raw.to_string(),
                _ => line.json.to_string(),
            },
            Err(e) => panic!("no line: {e:?}"),
        }
    }

    #[test]
    fn nothing_is_tapped_without_a_reader_and_a_dropped_reader_detaches() {
        let t = Telemetry::new(&["counter-1".into()], None);
        assert!(!t.tapped());
        let r = t.tap(true);
        assert!(t.tapped() && t.tapped_raw());
        drop(r);
        assert!(!t.tapped() && !t.tapped_raw());
        assert!(t.encode().contains("scangate_tap_readers 0"));
    }

    #[test]
    fn raw_bytes_reach_only_a_reader_that_asked() {
        let t = Telemetry::new(&["counter-1".into()], None);
        let mut plain = t.tap(false);
        let mut raw = t.tap(true);
        let read = TapRead {
            scan_uuid: "u1",
            scanner: "counter-1",
            gtin: Some("00312345678906"),
            bytes: 3,
            ..TapRead::default()
        };
        t.tap_read(read, Some(b"abc"));
        let (p, r) = (take(&mut plain), take(&mut raw));
        assert!(
            !p.contains("616263") && p.contains("\"gtin\":\"00312345678906\""),
            "{p}"
        );
        assert!(r.contains("\"raw\":\"616263\""), "{r}");
    }

    #[test]
    fn an_expiry_is_written_as_a_date() {
        let t = Telemetry::new(&["counter-1".into()], None);
        let mut r = t.tap(false);
        let read = TapRead {
            expiry: chrono::NaiveDate::from_ymd_opt(2027, 1, 9),
            ..TapRead::default()
        };
        t.tap_read(read, None);
        assert!(take(&mut r).contains("\"expiry\":\"2027-01-09\""));
    }

    #[test]
    fn a_decision_line_says_what_was_decided_and_what_it_echoes() {
        let t = Telemetry::new(&["counter-1".into()], None);
        let mut r = t.tap(false);
        t.tap_decided(
            &[decision(Verdict::Suppressed { twin: "u0".into() })],
            3_500_000,
        );
        let v: serde_json::Value = serde_json::from_str(&take(&mut r)).unwrap();
        assert_eq!(v["event"], "decided");
        assert_eq!(v["decision"], "echo");
        assert_eq!(v["state"], "suppressed");
        assert_eq!(v["echoes"], "u0");
        assert_eq!(v["decided_ms"], 2.5);
    }

    #[test]
    fn a_reader_that_falls_behind_is_told_how_many_lines_it_lost() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let t = Telemetry::new(&["counter-1".into()], None);
        let mut r = t.tap(false);
        for _ in 0..TAP_LINES + 10 {
            t.tap_acked("counter-1", None, Duration::from_millis(1));
        }
        rt.block_on(async {
            assert!(matches!(r.next().await, Next::Lost(10)));
            assert!(matches!(r.next().await, Next::Line(_)));
        });
        assert!(t.encode().contains("scangate_tap_lost_lines_total 10"));
    }
}
