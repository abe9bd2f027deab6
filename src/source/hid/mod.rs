//! USB HID scanners: HID POS (usage page 0x8C) and keyboard wedge, read
//! from hidraw through hidapi.
//!
//! ```text
//!  reader thread (one per scanner)                         async runtime
//!  ──────────────────────────────                          ─────────────
//!  open (DeviceOpener: match vid/pid/serial/port, grab)
//!  read_report(≤100 ms) ─► HidDecoder ─► RawScan ─► Scan::capture ─► ToOutbox::send
//!  ├ pos:      reassemble 56-byte pieces by the "more" flag
//!  └ keyboard: press/release → layout → GS convention → until Enter/Tab
//!  read error = unplugged: reject the torn scan, reopen (≤1 s polling)
//!  between reads (hid-pos feedback): decisions → output reports → write
//! ```
//!
//! - [`pos`], [`keyboard`], [`layout`]: the pure decoders.
//! - [`HidDecoder`]: either decoder plus the pause that tears or ends a
//!   scan — exactly what the live source, `scangate decode --hid` and the
//!   tests feed reports through.
//! - [`device`]: the seam (`DeviceOpener` / `ReportDevice`), hidapi behind
//!   it live, scripted report streams in tests.
//! - [`devices`]: enumeration, matching, sysfs walks, the evdev grab.
//! - [`feedback`]: `feedback = { protocol = "hid-pos" }`, decisions written
//!   to the scanner as output reports between reads.
//!
//! HID scanners are not ACKed (HID has no ACK): a scan is captured when its
//! last report is read and queued for the outbox like a serial frame.

pub(crate) mod config;
pub mod device;
pub(crate) mod devices;
pub(crate) mod feedback;
pub mod keyboard;
pub mod layout;
pub mod pos;

use super::Scanner;
use super::ToOutbox;
use crate::backoff::Backoff;
use crate::capture::{RawScan, Scan};
use crate::events::Event as _;
use crate::shutdown::Stop;
use config::{GsKey, HidConfig, ModeConfig, TerminatorKey};
use device::{DeviceErrorKind, DeviceOpener};
use keyboard::{GsConvention, KeyboardScanner, Terminators};
use layout::Layout;
use pos::PosAssembler;
use std::time::{Duration, Instant};

/// First reopen delay after a failure.
pub const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// Longest reopen delay: a scanner plugged in is found within about this.
pub const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Longest single blocking read: bounds how late shutdown and a scan's
/// timeout are noticed.
pub const READ_SLICE: Duration = Duration::from_millis(100);

/// Either decoder, with the pause handling the source needs.
#[derive(Debug, Clone)]
pub struct HidDecoder {
    kind: Kind,
    timeout: Duration,
    last_report: Option<Instant>,
}

#[derive(Debug, Clone)]
enum Kind {
    Pos(PosAssembler),
    Keyboard(KeyboardScanner),
}

impl HidDecoder {
    /// A HID POS decoder.
    pub fn pos(report_id: u8, max_bytes: usize, timeout: Duration) -> HidDecoder {
        HidDecoder {
            kind: Kind::Pos(PosAssembler::new(report_id, max_bytes)),
            timeout,
            last_report: None,
        }
    }

    /// A keyboard-wedge decoder.
    pub fn keyboard(
        layout: Layout,
        gs: GsConvention,
        terminators: Terminators,
        max_bytes: usize,
        timeout: Duration,
    ) -> HidDecoder {
        HidDecoder {
            kind: Kind::Keyboard(KeyboardScanner::new(layout, gs, terminators, max_bytes)),
            timeout,
            last_report: None,
        }
    }

    /// The decoder a `kind = "hid"` scanner entry describes.
    pub fn from_config(cfg: &Scanner<HidConfig>) -> HidDecoder {
        let timeout = Duration::from_millis(cfg.kind.timeout_ms());
        match &cfg.kind.mode {
            ModeConfig::Pos(p) => HidDecoder::pos(
                p.report_id.unwrap_or(pos::DEFAULT_REPORT_ID),
                cfg.max_frame_bytes,
                timeout,
            ),
            ModeConfig::Keyboard(k) => {
                let gs = match k.gs.unwrap_or(GsKey::Auto) {
                    GsKey::Auto => GsConvention::Auto,
                    GsKey::CtrlBracket => GsConvention::CtrlBracket,
                    GsKey::F8 => GsConvention::F8,
                    GsKey::None => GsConvention::None,
                    GsKey::Substitute => GsConvention::Substitute(
                        k.gs_substitute.clone().unwrap_or_default().into_bytes(),
                    ),
                };
                let terminators = match &k.terminator {
                    None => Terminators::default(),
                    Some(keys) => Terminators {
                        enter: keys.contains(&TerminatorKey::Enter),
                        tab: keys.contains(&TerminatorKey::Tab),
                    },
                };
                HidDecoder::keyboard(
                    k.layout.unwrap_or(Layout::Us),
                    gs,
                    terminators,
                    cfg.max_frame_bytes,
                    timeout,
                )
            }
        }
    }

    /// Feed one report read at `at`; complete (or rejected) scans are
    /// appended to `out`. Returns a note when the report was skipped
    /// (not scan data), for debug logs.
    pub fn push(&mut self, report: &[u8], at: Instant, out: &mut Vec<RawScan>) -> Option<String> {
        self.last_report = Some(at);
        match &mut self.kind {
            Kind::Pos(p) => p.push(report, out).err().map(|s| format!("{s:?}")),
            Kind::Keyboard(k) => k.push(report, out).err().map(|s| format!("{s:?}")),
        }
    }

    /// Whether part of a scan has been read.
    pub fn pending(&self) -> bool {
        match &self.kind {
            Kind::Pos(p) => p.pending(),
            Kind::Keyboard(k) => k.pending(),
        }
    }

    /// When the scan in progress times out, if one is.
    pub fn deadline(&self) -> Option<Instant> {
        if !self.pending() {
            return None;
        }
        self.last_report.map(|t| t + self.timeout)
    }

    /// Call when nothing arrived until `now`: a scan in progress whose
    /// deadline passed ends (keyboard without terminator key) or is
    /// rejected as torn.
    pub fn expire(&mut self, now: Instant, out: &mut Vec<RawScan>) {
        if self.deadline().is_none_or(|d| now < d) {
            return;
        }
        let ms = self.timeout.as_millis();
        match &mut self.kind {
            Kind::Keyboard(k) if k.ends_by_pause() => k.end_by_pause(out),
            Kind::Keyboard(k) => out.extend(k.abort(&format!("silent for {ms} ms"))),
            Kind::Pos(p) => {
                out.extend(p.abort(&format!("the next report did not come within {ms} ms")))
            }
        }
    }

    /// The device went away or the input ended: a scan in progress is
    /// rejected (never merged with what comes after a reconnect).
    pub fn abort(&mut self, why: &str) -> Option<RawScan> {
        match &mut self.kind {
            Kind::Pos(p) => p.abort(why),
            Kind::Keyboard(k) => k.abort(why),
        }
    }

    /// The end of a finite input (`scangate decode --hid`): a keyboard scan
    /// without terminator key ends as a pause would end it; anything else
    /// unfinished is rejected.
    pub fn finish(&mut self, out: &mut Vec<RawScan>) {
        match &mut self.kind {
            Kind::Keyboard(k) if k.ends_by_pause() => k.end_by_pause(out),
            _ => out.extend(self.abort("the input ended mid-scan")),
        }
    }
}

/// Read one HID scanner (found live through hidapi) until `shutdown`.
pub async fn run(cfg: Scanner<HidConfig>, out: ToOutbox, shutdown: Stop) {
    let opener = device::HidapiOpener::from_config(&cfg);
    run_with(cfg, Box::new(opener), out, shutdown).await
}

/// Read one HID scanner through `opener` until `shutdown` turns true (or
/// the outbox is gone).
///
/// The reads run on a thread of their own, not on the async runtime:
/// hidapi's `read_timeout` blocks the calling thread (it polls the hidraw
/// fd), and a blocking call on one of the runtime's two workers would stall
/// every other scanner's task; `spawn_blocking` is meant for short jobs,
/// this one lives as long as the daemon. The thread hands each captured
/// scan to the async outbox queue with `Handle::block_on`.
pub async fn run_with(
    cfg: Scanner<HidConfig>,
    opener: Box<dyn DeviceOpener>,
    out: ToOutbox,
    shutdown: Stop,
) {
    let handle = tokio::runtime::Handle::current();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    let name = cfg.name.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("hid-{}", cfg.name))
        .spawn(move || {
            reader(cfg, opener, out, shutdown, handle);
            let _ = done_tx.send(());
        });
    match spawned {
        Ok(_) => {
            let _ = done_rx.await;
        }
        Err(e) => crate::events::SourceFailed::HidThread {
            scanner: &name,
            error: &e,
        }
        .emit(),
    }
}

/// The reader thread: open, read, decode, capture, send; reopen on loss.
fn reader(
    cfg: Scanner<HidConfig>,
    mut opener: Box<dyn DeviceOpener>,
    out: ToOutbox,
    shutdown: Stop,
    handle: tokio::runtime::Handle,
) {
    let profile = cfg.profile();
    let mode = cfg.kind.mode().as_str();
    let stopping = || shutdown.is_set();
    let send = |raw: RawScan| -> bool {
        let scan = Scan::capture(&profile, raw);
        handle.block_on(out.send(scan, None)).is_ok()
    };
    let mut backoff = Backoff::new(BACKOFF_MIN, BACKOFF_MAX);
    let mut last_error: Option<String> = None;
    let mut raws = Vec::new();
    let mut pos_feedback = feedback::PosFeedback::of(&cfg);
    while !stopping() {
        let mut dev = match opener.open() {
            Ok(d) => d,
            Err(e) => {
                if last_error.as_deref() != Some(e.message.as_str()) {
                    let hint = match e.kind {
                        DeviceErrorKind::NotFound => "waiting for it to be plugged in",
                        _ => "retrying",
                    };
                    crate::events::SourceFailed::HidOpen {
                        scanner: &cfg.name,
                        mode,
                        error: &e,
                        hint,
                        every: BACKOFF_MAX,
                    }
                    .emit();
                    last_error = Some(e.message);
                }
                shutdown.sleep(backoff.failed());
                continue;
            }
        };
        let identity = dev.identity();
        crate::events::HidConnected {
            scanner: &cfg.name,
            mode,
            device: &dev.describe(),
            identity: identity.as_ref(),
            telemetry: out.telemetry(),
        }
        .emit();
        backoff.reset();
        last_error = None;
        // A fresh decoder per connection: nothing read before a reconnect
        // is ever joined to what is read after it.
        let mut decoder = HidDecoder::from_config(&cfg);
        // Decisions are told to this connection only (like a serial
        // scanner's): listened for from before its first read.
        let mut told = pos_feedback
            .as_mut()
            .and_then(|f| f.connect(dev.as_mut(), &out));
        loop {
            if stopping() {
                raws.extend(decoder.abort("scangate stopped mid-scan"));
                for raw in raws.drain(..) {
                    send(raw);
                }
                return;
            }
            let mut slice = match decoder.deadline() {
                Some(d) => d.saturating_duration_since(Instant::now()).min(READ_SLICE),
                None => READ_SLICE,
            };
            if let (Some(f), Some(conn)) = (pos_feedback.as_mut(), told.as_mut()) {
                f.tell(conn, dev.as_mut(), out.telemetry());
                slice = slice.min(feedback::FEEDBACK_SLICE);
            }
            match dev.read_report(slice) {
                Ok(Some(report)) => {
                    if let Some(note) = decoder.push(&report, Instant::now(), &mut raws) {
                        tracing::debug!(scanner = %cfg.name, "HID report skipped: {note}");
                    }
                }
                Ok(None) => decoder.expire(Instant::now(), &mut raws),
                Err(e) => {
                    raws.extend(decoder.abort("the device went away mid-scan"));
                    for raw in raws.drain(..) {
                        if !send(raw) {
                            return;
                        }
                    }
                    crate::events::HidLost {
                        scanner: &cfg.name,
                        reason: &e.to_string(),
                        telemetry: out.telemetry(),
                    }
                    .emit();
                    break;
                }
            }
            for raw in raws.drain(..) {
                if !send(raw) {
                    return; // the outbox writer is gone: shutting down
                }
            }
        }
    }
}
