//! Serial and USB CDC-ACM scanners (`/dev/ttyUSB*`, `/dev/ttyACM*`, or the
//! udev name `/dev/scangate/<name>`), read with tokio-serial.
//!
//! The task opens the device, reads and frames, and reconnects with capped
//! back-off whenever the device is missing or fails (unplugged cable, EIO).
//! A failing scanner logs once per distinct problem and never affects others.

use super::framing::Framer;
use super::{ACK, Captured, NAK};
use crate::capture::{Profile, Scan};
use crate::config::ScannerConfig;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};
use tokio_serial::SerialPortBuilderExt;

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Read one serial scanner until `shutdown` turns true.
pub async fn run(
    cfg: ScannerConfig,
    out: mpsc::Sender<Captured>,
    mut shutdown: watch::Receiver<bool>,
) {
    let profile = Profile {
        scanner: cfg.name.clone(),
        scan_type: cfg.scan_type,
        quantity: cfg.quantity,
    };
    let path = cfg.path.display().to_string();
    let mut backoff = BACKOFF_MIN;
    let mut last_error: Option<String> = None;
    while !*shutdown.borrow() {
        let port = tokio_serial::new(&path, cfg.baud).open_native_async();
        let mut port = match port {
            Ok(p) => p,
            Err(e) => {
                let msg = e.to_string();
                if last_error.as_deref() != Some(msg.as_str()) {
                    tracing::warn!(
                        scanner = %cfg.name, device = %path,
                        "cannot open scanner: {msg}; retrying every {}s at most. Check the cable, \
                         the udev rule for /dev/scangate/{} and the service user's access (dialout group)",
                        BACKOFF_MAX.as_secs(), cfg.name
                    );
                    last_error = Some(msg);
                }
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = shutdown.changed() => {}
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        tracing::info!(scanner = %cfg.name, device = %path, baud = cfg.baud, "scanner connected");
        backoff = BACKOFF_MIN;
        last_error = None;
        let (durable_tx, mut durable_rx) = mpsc::unbounded_channel::<()>();
        let mut framer = Framer::new(cfg.max_frame_bytes);
        let mut buf = [0u8; 1024];
        let reason = loop {
            tokio::select! {
                biased;
                _ = shutdown.changed() => break None,
                Some(()) = durable_rx.recv() => {
                    if let Err(e) = port.write_all(&[ACK]).await {
                        break Some(format!("writing ACK failed: {e}"));
                    }
                }
                read = port.read(&mut buf) => match read {
                    Ok(0) => break Some("end of file".to_string()),
                    Err(e) => break Some(e.to_string()),
                    Ok(n) => {
                        for raw in framer.push(&buf[..n]) {
                            let scan = Scan::capture(&profile, raw);
                            // A frame that does not decode (over-long, torn by a
                            // reconnect, misread) is stored and audited as
                            // rejected, and NAKed so the scanner sends it again:
                            // an ACK must only ever confirm a usable scan.
                            let usable = scan.decoded.is_ok();
                            if !usable && cfg.ack && port.write_all(&[NAK]).await.is_err() {
                                tracing::warn!(scanner = %cfg.name, "writing NAK failed");
                            }
                            let durable = (cfg.ack && usable).then(|| durable_tx.clone());
                            if out.send(Captured { scan, durable }).await.is_err() {
                                return; // the outbox writer is gone: shutting down
                            }
                        }
                    }
                },
            }
        };
        match reason {
            None => return,
            Some(reason) => {
                if framer.partial() > 0 {
                    tracing::warn!(
                        scanner = %cfg.name, device = %path, bytes = framer.partial(),
                        "scanner went away mid-frame; the partial frame was never a complete read"
                    );
                }
                tracing::warn!(scanner = %cfg.name, device = %path, "scanner disconnected: {reason}; reconnecting");
            }
        }
    }
}
