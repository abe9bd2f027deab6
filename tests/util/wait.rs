//! Waiting for an observable condition against a deadline.
//!
//! Nothing in these tests sleeps to "let things settle": waits poll an
//! observable condition (a file, `/proc/<pid>/fd`, the outbox) against a
//! deadline and fail with a message that says what was awaited.

use std::time::{Duration, Instant};

/// How long any awaited event may take before the test fails (before
/// `SCANGATE_TEST_TIME_SCALE`).
const EVENT_TIMEOUT: Duration = Duration::from_secs(20);

/// How long any awaited event may take before the test fails, stretched
/// by `SCANGATE_TEST_TIME_SCALE`.
pub fn event_timeout() -> Duration {
    EVENT_TIMEOUT * time_scale()
}
/// How often awaited conditions are polled.
pub const POLL: Duration = Duration::from_millis(20);

/// Poll `cond` every [`POLL`] until it holds; panic naming `what` after
/// [`event_timeout`].
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    wait_until_for(what, EVENT_TIMEOUT, &mut cond)
}

/// [`wait_until`] with an explicit deadline, stretched by
/// `SCANGATE_TEST_TIME_SCALE` (a whole number, default 1) where everything
/// runs slower: the aarch64 build under qemu-user in CI runs with 5.
pub fn wait_until_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let timeout = timeout * time_scale();
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for: {what}");
        }
        std::thread::sleep(POLL);
    }
}

/// `SCANGATE_TEST_TIME_SCALE`, read once.
fn time_scale() -> u32 {
    static SCALE: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *SCALE.get_or_init(|| {
        std::env::var("SCANGATE_TEST_TIME_SCALE")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n >= 1)
            .unwrap_or(1)
    })
}
