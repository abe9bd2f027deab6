//! Telling a scanner's decisions to the person at the counter
//! ([`crate::feedback`]): which [`Told`] a decision is for this scanner,
//! whether it is still due, and the gateway LED's task. The serial source
//! writes its protocol's bytes itself (`serial.rs`), after the ACK.

use super::signal::Signal;
use crate::capture::Unserialised;
use crate::events::Event as _;
use crate::feedback::led::Led;
use crate::feedback::{FeedbackConfig, Told};
use crate::telemetry::Telemetry;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// What `signal` tells a scanner of policy `policy`, if it is still due
/// (else the skip is counted): an ambiguous echo is told as such only
/// under `unserialised = "ask"` (elsewhere it is an echo: under
/// `double-fire` a double-fire, under `window` the site's choice).
pub fn due(
    fb: &FeedbackConfig,
    signal: Signal,
    policy: Unserialised,
    scanner: &str,
    telemetry: &Telemetry,
) -> Option<Told> {
    let told = match signal.told {
        Told::Ambiguous if policy != Unserialised::Ask => Told::Echo,
        told => told,
    };
    let after = signal
        .read_boot_ns
        .map(|read| Duration::from_nanos((crate::capture::clock::boot_ns() - read).max(0) as u64));
    match after.map(|a| fb.due(a)) {
        Some(Ok(())) => Some(told),
        _ => {
            crate::events::FeedbackSkipped {
                scanner,
                told,
                after,
                bound: fb.max_delay(),
                telemetry,
            }
            .emit();
            None
        }
    }
}

/// Show scanner `scanner`'s decisions on the gateway LED `fb.led` until
/// `signals` closes: each pattern played on a blocking thread, one at a
/// time (a burst of reads is shown in order, late ones skipped).
pub async fn led(
    fb: FeedbackConfig,
    scanner: String,
    policy: Unserialised,
    mut signals: mpsc::UnboundedReceiver<Signal>,
    telemetry: Telemetry,
) {
    let Some(name) = fb.led.clone() else { return };
    // A name in /sys/class/leds, or an LED class device's directory.
    let opened = tokio::task::spawn_blocking(move || {
        let path = std::path::Path::new(&name);
        match (path.is_absolute(), path.parent(), path.file_name()) {
            (true, Some(root), Some(leaf)) => Led::open(root, &leaf.to_string_lossy()),
            _ => Led::open_sysfs(&name),
        }
    })
    .await;
    let led = match opened {
        Ok(Ok(led)) => Arc::new(led),
        Ok(Err(e)) => {
            crate::events::LedFailed {
                scanner: &scanner,
                error: &e,
            }
            .emit();
            return;
        }
        Err(_) => return,
    };
    while let Some(signal) = signals.recv().await {
        let Some(told) = due(&fb, signal, policy, &scanner, &telemetry) else {
            continue;
        };
        let shown = Arc::clone(&led);
        match tokio::task::spawn_blocking(move || shown.show(told)).await {
            Ok(Ok(())) => crate::events::ScannerTold {
                scanner: &scanner,
                told,
                via: "led",
                read_boot_ns: signal.read_boot_ns,
                telemetry: &telemetry,
            }
            .emit(),
            Ok(Err(e)) => crate::events::LedFailed {
                scanner: &scanner,
                error: &e,
            }
            .emit(),
            Err(_) => return,
        }
    }
}
