//! One sink's thread: the held batch (or a new one from the entries after
//! its cursor), POSTed until the receiver takes it, then the cursor moved
//! past it; at-least-once, in ledger order, nothing dropped.
//!
//! ```text
//! loop {
//!     held = the held batch, else: page after the cursor → batch → hold (commit)
//!     none: wait for a commit (PRAGMA data_version), a reload, the stop
//!     POST it (same bytes, same Idempotency-Key, every time)
//!     2xx:   cursor → its last entry, held batch removed (one commit)
//!     retry: failure recorded; wait 1 s doubling to 60 s (or Retry-After)
//!     block: failure recorded; wait 10 min, or until a reload (SIGHUP)
//! }
//! ```

use super::batch;
use super::config::{SinkSettings, consumer_name};
use super::deliver::{self, Delivery};
use super::held::{self, Held};
use crate::backoff::Backoff;
use crate::events::{Event as _, SinkEvent};
use crate::ledger::cursor;
use crate::shutdown::Stop;
use crate::store::{Store, StoreError};
use crate::telemetry::Telemetry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The first retry's delay; it doubles with each failure up to
/// [`RETRY_MAX`].
pub const RETRY_MIN: Duration = Duration::from_secs(1);
/// The longest delay between two retries.
pub const RETRY_MAX: Duration = Duration::from_secs(60);
/// A blocked batch is tried again this often (and at each reload).
pub const BLOCKED_RETRY: Duration = Duration::from_secs(600);
/// The longest `Retry-After` honoured.
pub const RETRY_AFTER_MAX: Duration = Duration::from_secs(3600);
/// How often an idle sink looks for new entries (a commit), a reload and
/// the stop.
pub const POLL: Duration = Duration::from_millis(200);

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// A running sink's settings, replaced at a reload (the files read again),
/// and the count of reloads, which wakes a waiting sink.
pub struct Control {
    settings: Mutex<SinkSettings>,
    reloads: AtomicU64,
}

impl Control {
    /// A sink's control, with its settings at start.
    pub fn new(settings: SinkSettings) -> Arc<Control> {
        Arc::new(Control {
            settings: Mutex::new(settings),
            reloads: AtomicU64::new(0),
        })
    }

    /// A reload: `settings` from now on, and a blocked or waiting batch is
    /// tried again now.
    pub fn reload(&self, settings: SinkSettings) {
        *self.settings.lock().unwrap_or_else(|p| p.into_inner()) = settings;
        self.reloads.fetch_add(1, Ordering::SeqCst);
    }

    fn settings(&self) -> SinkSettings {
        self.settings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn reloads(&self) -> u64 {
        self.reloads.load(Ordering::SeqCst)
    }
}

/// What there is to send.
enum ToSend {
    /// This batch, held.
    Held(Box<Held>),
    /// Nothing after the cursor.
    Nothing,
    /// An entry that cannot be an EPCIS event: nothing is sent (logged).
    Unmappable,
}

/// What a wait ended with.
#[derive(Debug, PartialEq, Eq)]
enum Wakeup {
    Stop,
    Reload,
    Commit,
    Time,
}

/// One sink's loop and what it holds.
pub struct Sink {
    /// Its own connection (a yielding companion of the writer's).
    pub store: Store,
    /// Its settings and reloads.
    pub control: Arc<Control>,
    /// The daemon's stop.
    pub stop: Stop,
    /// Metrics.
    pub telemetry: Telemetry,
    /// `[gateway] gln`, for EPCIS events.
    pub gln: Option<String>,
}

impl Sink {
    /// Deliver until the stop.
    pub fn run(mut self) {
        let name = self.control.settings().config.name.clone();
        let consumer = consumer_name(&name);
        let mut backoff = Backoff::new(RETRY_MIN, RETRY_MAX);
        let mut agent: Option<(u64, ureq::Agent)> = None;
        let mut seen_reloads = self.control.reloads();
        let mut version = self.data_version().unwrap_or(0);
        loop {
            if self.stop.is_set() {
                return;
            }
            // (The count first: a reload after it is seen at the next turn.)
            let reloads = self.control.reloads();
            let settings = self.control.settings();
            let held = match self.next_batch(&name, &consumer, &settings) {
                Ok(ToSend::Held(held)) => held,
                Ok(ToSend::Nothing) => {
                    match self.wait(RETRY_MAX, &mut seen_reloads, Some(&mut version)) {
                        Wakeup::Stop => return,
                        _ => continue,
                    }
                }
                Ok(ToSend::Unmappable) => {
                    if self.wait(BLOCKED_RETRY, &mut seen_reloads, None) == Wakeup::Stop {
                        return;
                    }
                    continue;
                }
                Err(e) => {
                    self.store_failed(&name, &e, backoff.peek());
                    if self.wait(backoff.failed(), &mut seen_reloads, None) == Wakeup::Stop {
                        return;
                    }
                    continue;
                }
            };
            if agent.as_ref().is_none_or(|(r, _)| *r != reloads) {
                match deliver::agent(&settings) {
                    Ok(a) => agent = Some((reloads, a)),
                    Err(error) => {
                        self.blocked(&settings, &held, "ca_file", &error);
                        if self.wait(BLOCKED_RETRY, &mut seen_reloads, None) == Wakeup::Stop {
                            return;
                        }
                        continue;
                    }
                }
            }
            let Some((_, client)) = &agent else {
                unreachable!("made above")
            };
            // The batch is held (durable): a stop need not wait for a POST.
            if self.stop.is_set() {
                return;
            }
            let wait = match deliver::post(client, &settings, &held.batch) {
                Delivery::Delivered(status) => {
                    match self.delivered(&name, &consumer, &settings, &held, status) {
                        Ok(()) => {
                            backoff.reset();
                            continue;
                        }
                        // Not recorded (the disk full, an I/O error): sent
                        // again after the back-off, not at once (the
                        // receiver dedups by its key).
                        Err(e) => {
                            let delay = backoff.failed();
                            self.store_failed(&name, &e, delay);
                            delay
                        }
                    }
                }
                Delivery::Retry {
                    kind,
                    error,
                    retry_after,
                } => {
                    let delay = backoff.failed();
                    // (Never sooner than RETRY_MIN: `Retry-After: 0` would spin.)
                    let delay = retry_after.map_or(delay, |r| r.clamp(RETRY_MIN, RETRY_AFTER_MAX));
                    self.record(&name, kind, &error, false);
                    SinkEvent::Failed {
                        sink: &name,
                        url: &settings.config.shown_url(),
                        kind,
                        error: &error,
                        attempts: held.state.attempts + 1,
                        first_seq: held.batch.first_seq,
                        last_seq: held.batch.last_seq,
                        retry_in: delay,
                        telemetry: &self.telemetry,
                    }
                    .emit();
                    delay
                }
                Delivery::Blocked { kind, error } => {
                    self.blocked(&settings, &held, kind, &error);
                    BLOCKED_RETRY
                }
            };
            if self.wait(wait, &mut seen_reloads, None) == Wakeup::Stop {
                return;
            }
        }
    }

    /// The held batch, else a new one of the entries after the cursor,
    /// held (committed) before it is sent; `None`: nothing to send.
    fn next_batch(
        &mut self,
        name: &str,
        consumer: &str,
        settings: &SinkSettings,
    ) -> Result<ToSend, StoreError> {
        let format = settings.config.format;
        let (held, page) = {
            let r = self.store.read()?;
            let held = held::get(&r, name).map_err(|e| self.store.err_at(e))?;
            let owed = cursor::registered(&r, consumer).map_err(|e| self.store.err_at(e))?;
            // Sent again as it is unless its format changed, `batch` was
            // lowered below it (a receiver refusing its size: 413), or its
            // consumer was removed (then from the first entry kept).
            if let Some(h) = held.as_ref().filter(|h| {
                owed && h.batch.format == format && h.batch.entries <= settings.config.batch as i64
            }) {
                return Ok(ToSend::Held(Box::new(h.clone())));
            }
            let page = cursor::page(&r, consumer, settings.config.batch)
                .map_err(|e| self.store.err_at(e))?;
            (held, page)
        };
        let now = now_ms();
        let Some(page) = page else {
            // Not registered (first start, or removed by an operator):
            // from the first entry the ledger keeps.
            let w = self.store.write()?;
            if held.is_some() {
                held::forget(&w, name).map_err(|e| w.err(e))?;
            }
            let new = cursor::register(&w, consumer, now).map_err(|e| w.err(e))?;
            w.commit()?;
            if new {
                crate::events::LedgerConsumer::Registered { consumer }.emit();
            }
            // Its page now, not after a wait: the entries already in the
            // ledger are owed, and only another connection's commit would
            // end the wait (its own registration does not).
            return self.next_batch(name, consumer, settings);
        };
        if page.restarted {
            crate::events::LedgerConsumer::Restarted { consumer }.emit();
        }
        if page.entries.is_empty() {
            return Ok(ToSend::Nothing);
        }
        let batch = match batch::build(name, format, &page.entries, self.gln.as_deref(), now) {
            Ok(b) => b,
            Err(e) => {
                // An entry that cannot be an event: nothing is sent or
                // skipped; the operator exports it as JSON and reports it.
                SinkEvent::Unmappable {
                    sink: name,
                    error: &e.to_string(),
                    telemetry: &self.telemetry,
                }
                .emit();
                return Ok(ToSend::Unmappable);
            }
        };
        if let Some(h) = &held {
            let why = if h.batch.format != format {
                "the format changed"
            } else {
                "[[sink]] batch was lowered below its size"
            };
            SinkEvent::Recut { sink: name, why }.emit();
        }
        let w = self.store.write()?;
        held::hold(&w, name, &batch, now).map_err(|e| w.err(e))?;
        w.commit()?;
        SinkEvent::Held {
            sink: name,
            first_seq: batch.first_seq,
            last_seq: batch.last_seq,
            entries: batch.entries,
            key: &batch.key,
        }
        .emit();
        Ok(ToSend::Held(Box::new(Held {
            sink: name.to_string(),
            batch,
            held_ms: now,
            state: Default::default(),
        })))
    }

    /// A 2xx: move the cursor and drop the held batch, in one commit.
    fn delivered(
        &mut self,
        name: &str,
        consumer: &str,
        settings: &SinkSettings,
        held: &Held,
        status: u16,
    ) -> Result<(), StoreError> {
        let acked = {
            let w = self.store.write()?;
            let acked =
                held::delivered(&w, name, consumer, &held.batch, now_ms()).map_err(|e| w.err(e))?;
            w.commit()?;
            acked
        };
        SinkEvent::Delivered {
            sink: name,
            url: &settings.config.shown_url(),
            status,
            entries: held.batch.entries,
            through_seq: held.batch.last_seq,
            attempts: held.state.attempts + 1,
            consumer_gone: !acked,
            telemetry: &self.telemetry,
        }
        .emit();
        Ok(())
    }

    /// The receiver refused the batch for good: recorded, logged, counted.
    fn blocked(&mut self, settings: &SinkSettings, held: &Held, kind: &str, error: &str) {
        let name = &settings.config.name;
        self.record(name, kind, error, true);
        SinkEvent::Blocked {
            sink: name,
            url: &settings.config.shown_url(),
            kind,
            error,
            first_seq: held.batch.first_seq,
            last_seq: held.batch.last_seq,
            retry_in: BLOCKED_RETRY,
            telemetry: &self.telemetry,
        }
        .emit();
    }

    /// Record a failed attempt on the held batch (a failure to record it
    /// is logged: the attempt is made again all the same).
    fn record(&mut self, name: &str, kind: &str, error: &str, blocked: bool) {
        let done = (|| {
            let w = self.store.write()?;
            held::failed(&w, name, kind, error, blocked, now_ms()).map_err(|e| w.err(e))?;
            w.commit()
        })();
        if let Err(e) = done {
            self.store_failed(name, &e, RETRY_MIN);
        }
    }

    fn store_failed(&self, name: &str, e: &StoreError, retry_in: Duration) {
        SinkEvent::StoreFailed {
            sink: name,
            error: &e.to_string(),
            retry_in,
            telemetry: &self.telemetry,
        }
        .emit();
    }

    /// `PRAGMA data_version`: changes when another connection commits.
    fn data_version(&self) -> Result<i64, StoreError> {
        self.store
            .conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .map_err(|e| self.store.err_at(e))
    }

    /// Wait up to `d`, in [`POLL`] slices, for the stop, a reload, or
    /// (with `version`) another connection's commit.
    fn wait(&self, d: Duration, seen_reloads: &mut u64, mut version: Option<&mut i64>) -> Wakeup {
        let until = Instant::now() + d;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Wakeup::Time;
            }
            if self.stop.sleep(left.min(POLL)) {
                return Wakeup::Stop;
            }
            let reloads = self.control.reloads();
            if reloads != *seen_reloads {
                *seen_reloads = reloads;
                return Wakeup::Reload;
            }
            if let Some(seen) = version.as_deref_mut()
                && let Ok(now) = self.data_version()
                && now != *seen
            {
                *seen = now;
                return Wakeup::Commit;
            }
        }
    }
}
