//! Waiting for an observable condition against a deadline.
//!
//! Nothing in these tests sleeps to "let things settle": waits poll an
//! observable condition (a file, `/proc/<pid>/fd`, the outbox) against a
//! deadline and fail with a message that says what was awaited.

use std::time::{Duration, Instant};

/// How long any awaited event may take before the test fails.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(20);
/// How often awaited conditions are polled.
pub const POLL: Duration = Duration::from_millis(20);

/// Poll `cond` every [`POLL`] until it holds; panic naming `what` after
/// [`EVENT_TIMEOUT`].
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    wait_until_for(what, EVENT_TIMEOUT, &mut cond)
}

/// [`wait_until`] with an explicit deadline.
pub fn wait_until_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
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
