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

/// `d` stretched by `SCANGATE_TEST_TIME_SCALE`: a deadline that is what a
/// test asserts (an answer within 1 s), where everything runs slower.
pub fn scaled(d: Duration) -> Duration {
    d * time_scale()
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

/// Poll `poll` every [`POLL`] until it says done; `poll` also gives a
/// figure of progress (scans decided so far). Long work that keeps going
/// is waited for however long it takes (how fast is the benchmarks'
/// business); the wait fails, naming `what` and where it stood, when the
/// figure has not moved for [`event_timeout`].
pub fn wait_progressing(what: &str, mut poll: impl FnMut() -> (bool, i64)) {
    let stall = event_timeout();
    let mut last: Option<i64> = None;
    let mut moved = Instant::now();
    loop {
        let (done, progress) = poll();
        if done {
            return;
        }
        if last != Some(progress) {
            last = Some(progress);
            moved = Instant::now();
        }
        if moved.elapsed() >= stall {
            panic!("no progress for {stall:?} (stuck at {progress}) waiting for: {what}");
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
