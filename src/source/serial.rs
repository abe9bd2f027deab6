//! Serial and USB CDC-ACM scanners (`/dev/ttyUSB*`, `/dev/ttyACM*`, or the
//! udev name `/dev/scangate/<name>`), read with tokio-serial.
//!
//! The task opens the device with the configured line settings (baud, data
//! bits, parity, stop bits, flow control; 8N1 by default), reads and frames
//! ([`framing`]), and writes ACK/NAK when configured:
//!
//! - **ACK** (0x06) only when the outbox writer reports the scan durable
//!   (its transaction committed), in read order;
//! - **NAK** (0x15) right after capture for a frame that cannot be used
//!   (framing error, over-long, missing prefix, does not decode). The frame is
//!   still stored and audited as rejected; the scanner resends.
//!
//! **Faults and hot-plug.** Any read or write error (EIO, ENODEV, a hang-up
//! that reads as end of file) ends the connection; so does the configured
//! path vanishing or leading to a *different* device than the one open
//! (checked every [`PATH_CHECK`]: a udev symlink re-pointed at the scanner's
//! new tty after a replug). The source then logs once, and reopens the path
//! with capped exponential back-off ([`BACKOFF_MIN`]…[`BACKOFF_MAX`]); while
//! it waits it watches the path, so a device that reappears is opened within
//! [`PATH_POLL`] rather than at the end of a long back-off. Each scanner is
//! its own task with its own state: a failing scanner never affects another.
//!
//! **ACK latency** (frame end read → ACK written) goes into a small
//! histogram, logged per scanner every [`REPORT_EVERY`] (for that interval,
//! when there was traffic) and for the whole run when the source stops,
//! target `scangate::ack_latency`.

pub(crate) mod config;
pub(crate) mod framing;
pub(crate) mod ssi_replies;

/// How long a Zebra SSI scanner's answer to the revision request sent at
/// connect is awaited.
const REVISION_WAIT: Duration = Duration::from_secs(2);

use super::Scanner;
use super::latency::Histogram;
use super::{ACK, DurableAck, NAK, ToOutbox};
use crate::backoff::Backoff;
use crate::capture::{Profile, RawScan, Scan};
use crate::events::Event as _;
use crate::shutdown::Stop;
use config::{FlowControl, Parity, SerialConfig};
use framing::{FrameSpec, Framer};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_serial::{SerialPortBuilderExt, SerialStream};

/// First reconnect delay.
pub const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// Longest reconnect delay (the back-off cap).
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// While waiting to reconnect, how often the path is checked for a device.
pub const PATH_POLL: Duration = Duration::from_millis(100);
/// While connected, how often the path is checked to still lead to the
/// open device.
pub const PATH_CHECK: Duration = Duration::from_millis(500);
/// How often the ACK latency of the last interval is logged.
pub const REPORT_EVERY: Duration = Duration::from_secs(60);

/// Identity of the device a path leads to now (symlinks followed).
type DeviceId = Option<(u64, u64, u64)>;

fn device_id(path: &Path) -> DeviceId {
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino(), m.rdev()))
}

/// ACK/NAK traffic of one scanner.
struct AckStats {
    total: Histogram,
    interval: Histogram,
    naks: u64,
    interval_naks: u64,
}

impl AckStats {
    /// An ACK written `took` after its frame was read.
    fn acked(&mut self, took: Duration) {
        self.total.record(took);
        self.interval.record(took);
    }

    /// A NAK written.
    fn naked(&mut self) {
        self.naks += 1;
        self.interval_naks += 1;
    }

    fn log_interval(&mut self, scanner: &str) {
        if self.interval.count() + self.interval_naks > 0 {
            crate::events::AckLatency {
                scanner,
                naks: self.interval_naks,
                span: crate::events::AckSpan::Last(REPORT_EVERY),
                summary: &self.interval,
            }
            .emit();
        }
        self.interval.reset();
        self.interval_naks = 0;
    }
}

/// The frames the scanner may resend: those waiting for their ACK on
/// this connection, in read order (ACKs go out in it), and those a lost
/// connection left unacknowledged, for [`RESEND_WITHIN`] after their read
/// (the scanner resends them once the line is back).
#[derive(Default)]
struct Resends {
    unacked: std::collections::VecDeque<Vec<u8>>,
    orphans: Vec<(Vec<u8>, Instant)>,
}

/// How long after its read a frame a lost connection left unacknowledged
/// may still come again as the scanner's resend.
const RESEND_WITHIN: Duration = Duration::from_secs(10);

impl Resends {
    /// A new connection: what the last one left waiting may be resent.
    fn reconnected(&mut self) {
        let now = Instant::now();
        self.orphans
            .extend(self.unacked.drain(..).map(|frame| (frame, now)));
        self.orphans
            .retain(|(_, at)| now.duration_since(*at) < RESEND_WITHIN);
    }

    /// Whether `frame` may be the scanner resending one it sent before.
    fn may_be_resent(&self, frame: &[u8]) -> bool {
        self.unacked.iter().any(|f| f == frame)
            || self
                .orphans
                .iter()
                .any(|(f, at)| f == frame && at.elapsed() < RESEND_WITHIN)
    }
}

/// Why a connection ended.
enum Ended {
    /// Shutdown requested or the outbox writer is gone.
    Stop,
    /// The device failed or went away: reconnect.
    Lost(String),
}

/// Read one serial scanner until `shutdown` turns true.
pub async fn run(cfg: Scanner<SerialConfig>, out: ToOutbox, mut shutdown: Stop) {
    let profile = cfg.profile();
    let spec = FrameSpec::from_config(&cfg.kind, cfg.max_frame_bytes);
    let path = cfg.kind.path.display().to_string();
    let mut stats = AckStats {
        total: Histogram::new(),
        interval: Histogram::new(),
        naks: 0,
        interval_naks: 0,
    };
    let mut backoff = Backoff::new(BACKOFF_MIN, BACKOFF_MAX);
    let mut resends = Resends::default();
    let mut last_error: Option<String> = None;
    while !shutdown.is_set() {
        let seen = device_id(&cfg.kind.path);
        let mut port = match open(&cfg.kind) {
            Ok(p) => p,
            Err(e) => {
                let msg = e.to_string();
                if last_error.as_deref() != Some(msg.as_str()) {
                    crate::events::SourceFailed::SerialOpen {
                        scanner: &cfg.name,
                        device: &path,
                        error: &msg,
                        every: BACKOFF_MAX,
                    }
                    .emit();
                    last_error = Some(msg);
                }
                wait_to_retry(&cfg.kind.path, seen, backoff.failed(), &mut shutdown).await;
                continue;
            }
        };
        // The device actually open (not whatever the path leads to later).
        let open_id = std::fs::metadata(format!("/proc/self/fd/{}", port.as_raw_fd()))
            .ok()
            .map(|m| m.rdev());
        // What it says it is (its USB descriptors, a few sysfs reads; none
        // off USB).
        let identity =
            open_id.and_then(|rdev| super::identity::of_char_device(Path::new("/sys"), rdev));
        crate::events::SerialConnected {
            scanner: &cfg.name,
            device: &path,
            baud: cfg.kind.baud,
            line: format!(
                "{}{}{}",
                cfg.kind.data_bits,
                parity_letter(cfg.kind.parity),
                cfg.kind.stop_bits
            ),
            framing: spec.describe(),
            ack: cfg.kind.ack,
            identity: identity.as_ref(),
            telemetry: out.telemetry(),
        }
        .emit();
        backoff.reset();
        last_error = None;
        let mut framer = Framer::with_spec(spec.clone());
        let ended = connection(
            &cfg,
            &profile,
            &mut port,
            open_id,
            &mut framer,
            &out,
            &mut shutdown,
            &mut stats,
            &mut resends,
        )
        .await;
        drop(port);
        match ended {
            Ended::Stop => {
                crate::events::ScannerClosed {
                    scanner: &cfg.name,
                    telemetry: out.telemetry(),
                }
                .emit();
                break;
            }
            Ended::Lost(reason) => crate::events::SerialLost {
                scanner: &cfg.name,
                device: &path,
                reason: &reason,
                partial_bytes: framer.partial(),
                telemetry: out.telemetry(),
            }
            .emit(),
        }
    }
    if stats.total.count() + stats.naks > 0 {
        crate::events::AckLatency {
            scanner: &cfg.name,
            naks: stats.naks,
            span: crate::events::AckSpan::SinceStart,
            summary: &stats.total,
        }
        .emit();
    }
}

fn parity_letter(p: Parity) -> char {
    match p {
        Parity::None => 'N',
        Parity::Odd => 'O',
        Parity::Even => 'E',
    }
}

/// Open the device with the configured line settings.
fn open(cfg: &SerialConfig) -> tokio_serial::Result<SerialStream> {
    use tokio_serial::{DataBits, FlowControl as Fc, Parity as P, StopBits};
    let data_bits = match cfg.data_bits {
        5 => DataBits::Five,
        6 => DataBits::Six,
        7 => DataBits::Seven,
        _ => DataBits::Eight,
    };
    let parity = match cfg.parity {
        Parity::None => P::None,
        Parity::Odd => P::Odd,
        Parity::Even => P::Even,
    };
    let stop_bits = if cfg.stop_bits == 2 {
        StopBits::Two
    } else {
        StopBits::One
    };
    let flow = match cfg.flow_control {
        FlowControl::None => Fc::None,
        FlowControl::Software => Fc::Software,
        FlowControl::Hardware => Fc::Hardware,
    };
    let opened = tokio_serial::new(cfg.path.to_string_lossy(), cfg.baud)
        .data_bits(data_bits)
        .parity(parity)
        .stop_bits(stop_bits)
        .flow_control(flow)
        .open_native_async();
    match opened {
        Err(e) if termios2_refused(&e) => {
            tracing::debug!(device = %cfg.path.display(), "termios2 refused ({e}); setting the line with termios");
            open_with_termios(cfg).map_err(|fallback| {
                tokio_serial::Error::new(
                    tokio_serial::ErrorKind::Unknown,
                    format!("{e}; and with termios instead of termios2: {fallback}"),
                )
            })
        }
        other => other,
    }
}

/// Whether opening failed because the kernel or emulator does not know
/// the termios2 ioctls (`TCGETS2`/`TCSETS2`: qemu-user 7.2, some old
/// kernels), which the serial library uses for every rate.
fn termios2_refused(e: &tokio_serial::Error) -> bool {
    use nix::errno::Errno;
    e.kind() == tokio_serial::ErrorKind::Unknown
        && [Errno::ENOSYS, Errno::ENOTTY, Errno::EINVAL]
            .iter()
            .any(|errno| e.description == errno.desc())
}

/// Open the device and set its line with the classic termios ioctls
/// (`TCGETS`/`TCSETS`): the standard rates only. As the serial library
/// does: exclusive (`flock` and `TIOCEXCL`), raw, receiver on, no modem
/// control lines.
fn open_with_termios(cfg: &SerialConfig) -> Result<SerialStream, String> {
    use nix::fcntl::{Flock, FlockArg, OFlag, open};
    use nix::sys::stat::Mode;
    use nix::sys::termios::{self, BaudRate, ControlFlags, InputFlags, SetArg};
    use std::os::fd::IntoRawFd;
    let baud = match cfg.baud {
        1200 => BaudRate::B1200,
        2400 => BaudRate::B2400,
        4800 => BaudRate::B4800,
        9600 => BaudRate::B9600,
        19_200 => BaudRate::B19200,
        38_400 => BaudRate::B38400,
        57_600 => BaudRate::B57600,
        115_200 => BaudRate::B115200,
        230_400 => BaudRate::B230400,
        460_800 => BaudRate::B460800,
        921_600 => BaudRate::B921600,
        other => {
            return Err(format!(
                "baud {other} is not a standard rate termios can set"
            ));
        }
    };
    let fd = open(
        &cfg.path,
        OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| e.desc().to_string())?;
    let fd = Flock::lock(fd, FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| format!("in use by another process ({})", e.desc()))?;
    let mut t = termios::tcgetattr(&*fd).map_err(|e| e.desc().to_string())?;
    termios::cfmakeraw(&mut t);
    termios::cfsetspeed(&mut t, baud).map_err(|e| e.desc().to_string())?;
    let c = &mut t.control_flags;
    c.remove(ControlFlags::CSIZE | ControlFlags::PARENB | ControlFlags::PARODD);
    c.remove(ControlFlags::CSTOPB | ControlFlags::CRTSCTS);
    c.insert(ControlFlags::CLOCAL | ControlFlags::CREAD);
    c.insert(match cfg.data_bits {
        5 => ControlFlags::CS5,
        6 => ControlFlags::CS6,
        7 => ControlFlags::CS7,
        _ => ControlFlags::CS8,
    });
    match cfg.parity {
        Parity::None => {}
        Parity::Odd => c.insert(ControlFlags::PARENB | ControlFlags::PARODD),
        Parity::Even => c.insert(ControlFlags::PARENB),
    }
    if cfg.stop_bits == 2 {
        c.insert(ControlFlags::CSTOPB);
    }
    t.input_flags.remove(InputFlags::IXON | InputFlags::IXOFF);
    match cfg.flow_control {
        FlowControl::None => {}
        FlowControl::Software => t.input_flags.insert(InputFlags::IXON | InputFlags::IXOFF),
        FlowControl::Hardware => t.control_flags.insert(ControlFlags::CRTSCTS),
    }
    termios::tcsetattr(&*fd, SetArg::TCSANOW, &t).map_err(|e| e.desc().to_string())?;
    // The lock goes with the descriptor (the library takes it again).
    let fd = fd.unlock().map_err(|(_, e)| e.desc().to_string())?;
    // SAFETY: `fd` is an open terminal descriptor this function owns; the
    // port takes it over (and closes it when dropped).
    let port =
        unsafe { <serialport::TTYPort as std::os::fd::FromRawFd>::from_raw_fd(fd.into_raw_fd()) };
    SerialStream::try_from(port).map_err(|e| e.to_string())
}

/// Wait `backoff`, or less if the path starts leading to another device
/// than `seen` (a replug) or shutdown is requested.
async fn wait_to_retry(path: &Path, seen: DeviceId, backoff: Duration, shutdown: &mut Stop) {
    let until = tokio::time::Instant::now() + backoff;
    loop {
        let step = until
            .saturating_duration_since(tokio::time::Instant::now())
            .min(PATH_POLL);
        if step.is_zero() {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(step) => {}
            _ = shutdown.wait() => return,
        }
        let now = device_id(path);
        if now.is_some() && now != seen {
            return;
        }
    }
}

/// Read, frame, capture and ACK/NAK until the device fails or shutdown.
#[allow(clippy::too_many_arguments)]
async fn connection(
    cfg: &Scanner<SerialConfig>,
    profile: &Profile,
    port: &mut SerialStream,
    open_id: Option<u64>,
    framer: &mut Framer,
    out: &ToOutbox,
    shutdown: &mut Stop,
    stats: &mut AckStats,
    resends: &mut Resends,
) -> Ended {
    // Durable notices for this connection only: after a reconnect, ACKs for
    // frames read on the old one are not sent (the scanner has resent them).
    let (durable_tx, mut durable_rx) = mpsc::unbounded_channel::<super::Durable>();
    resends.reconnected();
    // Decisions to tell the scanner in its protocol (`feedback`), after
    // the ACK; a scanner not set up for it is never listened for.
    let feedback = cfg
        .feedback
        .as_ref()
        .filter(|f| f.protocol.is_some_and(|p| p.is_serial()));
    let mut signals = feedback.map(|_| out.listen(&cfg.name));
    let (mut replies, mut revision_wait) = match ask_revision(port, feedback).await {
        Ok(started) => started,
        Err(lost) => return lost,
    };
    let timeout = framer.spec().timeout_ms.map(Duration::from_millis);
    let mut last_byte = tokio::time::Instant::now();
    let mut buf = [0u8; 1024];
    let mut path_check = tokio::time::interval(PATH_CHECK);
    path_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut report =
        tokio::time::interval_at(tokio::time::Instant::now() + REPORT_EVERY, REPORT_EVERY);
    report.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let idle_deadline = match timeout {
            Some(t) if framer.pending() => Some(last_byte + t),
            _ => None,
        };
        let mut frames: Vec<(RawScan, Instant)> = Vec::new();
        tokio::select! {
            biased;
            _ = shutdown.wait() => return Ended::Stop,
            Some((frame_end, scan_uuid)) = durable_rx.recv() => {
                if let Err(e) = port.write_all(&[ACK]).await {
                    return Ended::Lost(format!("writing ACK failed: {e}"));
                }
                resends.unacked.pop_front();
                let took = frame_end.elapsed();
                stats.acked(took);
                crate::events::Acked {
                    scanner: &cfg.name,
                    scan_uuid: Some(scan_uuid),
                    took,
                    telemetry: out.telemetry(),
                }
                .emit();
                continue;
            }
            Some(signal) = recv_signal(&mut signals) => {
                if let Some(fb) = feedback
                    && let Some(told) = super::tell::due(fb, signal, profile.unserialised, &cfg.name, out.telemetry())
                {
                    let bytes = crate::feedback::serial_bytes(fb, told);
                    if !bytes.is_empty() {
                        if let Err(e) = port.write_all(&bytes).await {
                            return Ended::Lost(format!("writing feedback failed: {e}"));
                        }
                        crate::events::ScannerTold {
                            scanner: &cfg.name,
                            told,
                            via: "serial",
                            read_boot_ns: signal.read_boot_ns,
                            telemetry: out.telemetry(),
                        }
                        .emit();
                    }
                }
                continue;
            }
            read = port.read(&mut buf) => match read {
                Ok(0) => return Ended::Lost("end of file (hang-up)".into()),
                Err(e) => return Ended::Lost(e.to_string()),
                Ok(n) => {
                    let now = Instant::now();
                    last_byte = tokio::time::Instant::now();
                    let pushed = match &mut replies {
                        Some(r) => framer.push(&r.filter(&buf[..n], !framer.pending())),
                        None => framer.push(&buf[..n]),
                    };
                    frames.extend(pushed.into_iter().map(|r| (r, now)));
                    if let Err(lost) = revision_answered(port, replies.as_mut(), &cfg.name, out, &mut revision_wait).await {
                        return lost;
                    }
                }
            },
            _ = sleep_until_opt(revision_wait), if revision_wait.is_some() => {
                revision_wait = None; // (no answer: no longer awaited)
                replies.iter_mut().for_each(|r| r.expect_revision(false));
                continue;
            }
            _ = sleep_until_opt(idle_deadline), if idle_deadline.is_some() => {
                if let Some(raw) = framer.expire() {
                    frames.push((raw, Instant::now()));
                }
            }
            _ = path_check.tick() => {
                let now = std::fs::metadata(&cfg.kind.path).ok().map(|m| m.rdev());
                match now {
                    None => return Ended::Lost(format!("{} vanished", cfg.kind.path.display())),
                    Some(rdev) if open_id.is_some_and(|o| o != rdev) => {
                        return Ended::Lost(format!("{} now leads to another device (replugged)", cfg.kind.path.display()));
                    }
                    Some(_) => continue,
                }
            }
            _ = report.tick() => {
                stats.log_interval(&cfg.name);
                continue;
            }
        }
        for (raw, frame_end) in frames {
            let mut scan = Scan::capture(profile, raw);
            scan.resend = cfg.kind.ack && resends.may_be_resent(&scan.raw);
            // A frame that does not decode (over-long, torn by a reconnect,
            // misread, hostile bytes) is stored and audited as rejected, and
            // NAKed so the scanner sends it again: an ACK must only ever
            // confirm a usable scan.
            let usable = scan.decoded.is_ok() || out.is_control(&scan.raw);
            if cfg.kind.ack && !usable {
                if let Err(e) = port.write_all(&[NAK]).await {
                    crate::events::SourceFailed::Nak {
                        scanner: &cfg.name,
                        error: &e,
                    }
                    .emit();
                }
                stats.naked();
            }
            let durable = (cfg.kind.ack && usable)
                .then(|| DurableAck::new(durable_tx.clone(), frame_end, scan.uuid));
            if durable.is_some() {
                resends.unacked.push_back(scan.raw.clone());
            }
            if out.send(scan, durable).await.is_err() {
                return Ended::Stop; // the outbox writer is gone: shutting down
            }
        }
    }
}

/// The next decision to tell, if the scanner is listened for.
async fn recv_signal(
    signals: &mut Option<mpsc::UnboundedReceiver<super::signal::Signal>>,
) -> Option<super::signal::Signal> {
    match signals {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// A Zebra SSI scanner's (`feedback`'s protocol) reply filter (its
/// replies are taken out before framing), and its
/// question of what software it runs, once a connection: its
/// `REPLY_REVISION` is awaited until the instant returned
/// ([`REVISION_WAIT`]), beside its reads (none waits for it; a scanner
/// that never answers costs the six bytes). Other scanners: neither.
async fn ask_revision(
    port: &mut SerialStream,
    feedback: Option<&crate::feedback::FeedbackConfig>,
) -> Result<
    (
        Option<ssi_replies::SsiReplies>,
        Option<tokio::time::Instant>,
    ),
    Ended,
> {
    if feedback.and_then(|f| f.protocol) != Some(crate::feedback::Protocol::ZebraSsi) {
        return Ok((None, None));
    }
    port.write_all(&crate::feedback::ssi::request_revision())
        .await
        .map_err(|e| Ended::Lost(format!("writing the revision request failed: {e}")))?;
    let mut replies = ssi_replies::SsiReplies::default();
    replies.expect_revision(true);
    Ok((
        Some(replies),
        Some(tokio::time::Instant::now() + REVISION_WAIT),
    ))
}

/// The scanner's `REPLY_REVISION`, if `replies` took it out of what was
/// just read: ACKed (the scanner waits for the host's ACK of its packet
/// with handshaking on; without, it ignores it) and told.
async fn revision_answered(
    port: &mut SerialStream,
    replies: Option<&mut ssi_replies::SsiReplies>,
    scanner: &str,
    out: &ToOutbox,
    wait: &mut Option<tokio::time::Instant>,
) -> Result<(), Ended> {
    let Some(data) = replies.and_then(ssi_replies::SsiReplies::take_revision) else {
        return Ok(());
    };
    *wait = None;
    port.write_all(&crate::feedback::ssi::host_ack())
        .await
        .map_err(|e| Ended::Lost(format!("writing the ACK of the revision reply failed: {e}")))?;
    crate::events::SsiRevision {
        scanner,
        data: &data,
        software: crate::feedback::ssi::software_revision(&data).as_deref(),
        telemetry: out.telemetry(),
    }
    .emit();
    Ok(())
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame a lost connection left without its ACK may come again on
    /// the next one (the scanner resends it); one that was ACKed may not,
    /// nor one left longer ago than [`RESEND_WITHIN`].
    #[test]
    fn frames_left_unacknowledged_by_a_lost_connection_may_be_resent() {
        let mut r = Resends::default();
        r.unacked.push_back(b"A".to_vec());
        r.unacked.push_back(b"B".to_vec());
        r.unacked.pop_front(); // A was ACKed
        r.reconnected();
        assert!(r.may_be_resent(b"B"));
        assert!(!r.may_be_resent(b"A"));
        r.orphans[0].1 -= RESEND_WITHIN;
        assert!(!r.may_be_resent(b"B"));
        r.reconnected();
        assert!(r.orphans.is_empty());
    }
}
