//! The facility ledger stream (`scangate:{f}:ledger`) as its consumers and
//! its trimmer see it.
//!
//! **Consumers** read it with a consumer group (`XREADGROUP`), each entry
//! acknowledged (`XACK`) only once the consumer has kept it:
//! at-least-once, the entry's `scan_uuid` the consumer's idempotency key
//! (`scangate ledger export --follow --group NAME` is a ready one).
//! **Trimming** ([`Facility::trim_ledger`], `trim.lua`, atomic) removes
//! only entries every registered group has acknowledged and that are older
//! than the horizon (`[redis] ledger_stream_keep_days`); with no group,
//! nothing. What it found — the stream's length, each group's pending
//! entries and oldest unacknowledged entry — is what `scangate status`
//! shows ([`LedgerStream`]).

use super::{Facility, FacilityError};
use crate::events::Event as _;
use crate::model::{LedgerGroup, LedgerStream};
use redis::{Script, Value};

/// The trim script (`trim.lua`).
pub const TRIM_LUA: &str = include_str!("trim.lua");

/// One ledger entry as a consumer reads it: its stream id and the JSON
/// object `ledger export` prints.
pub type Entry = (String, serde_json::Value);

/// A stream entry's fields as the JSON object `ledger export` prints (the
/// field names of [`crate::ledger::LedgerEntry`] plus `stream_id`; quantity
/// a number, clock_synced a boolean, absent values `null`), and its
/// capture time (Unix ms) if it has one. `dea_schedule` and `alerts` are
/// left out when empty, and `alerts` is the JSON array the claim wrote.
pub fn entry_json(id: &str, fields: Vec<(String, String)>) -> (serde_json::Value, Option<i64>) {
    let mut obj = serde_json::Map::new();
    obj.insert("stream_id".into(), id.into());
    let mut captured_ms = None;
    for (k, v) in fields {
        let value = match k.as_str() {
            // (Absent from an entry without them, as `ledger export` of
            // the gateway's own ledger leaves them out.)
            "dea_schedule" | "alerts" if v.is_empty() => continue,
            "alerts" => serde_json::from_str(&v).unwrap_or_else(|_| v.clone().into()),
            "quantity" => v.parse::<i64>().map_or(v.clone().into(), Into::into),
            "clock_synced" => (v == "true").into(),
            _ if v.is_empty() => serde_json::Value::Null,
            _ => v.clone().into(),
        };
        if k == "captured_at" {
            captured_ms = chrono::DateTime::parse_from_rfc3339(&v)
                .ok()
                .map(|d| d.timestamp_millis());
        }
        obj.insert(k, value);
    }
    (obj.into(), captured_ms)
}

impl Facility {
    /// Trim the ledger stream to what every consumer group has
    /// acknowledged, keeping entries younger than `keep_ms` (the server's
    /// clock) whatever they say; nothing without a group. One atomic
    /// script: safe beside other gateways trimming, and beside consumers.
    pub fn trim_ledger(&mut self, keep_ms: i64) -> Result<LedgerStream, FacilityError> {
        let reply: Vec<Value> = Script::new(TRIM_LUA)
            .key(self.ledger_key())
            .arg(keep_ms)
            .invoke(&mut self.conn)
            .map_err(|e| self.unavailable(e))?;
        let protocol = |what: &str| FacilityError::Protocol {
            url: self.url.clone(),
            reply: format!("trim script: {what}"),
        };
        let int = |v: &Value| -> Result<i64, FacilityError> {
            redis::from_redis_value_ref::<i64>(v).map_err(|_| protocol("not a number"))
        };
        let text = |v: &Value| -> Result<String, FacilityError> {
            redis::from_redis_value_ref::<String>(v).map_err(|_| protocol("not a string"))
        };
        if reply.len() < 4 {
            return Err(protocol("too short"));
        }
        let mut groups = Vec::new();
        for g in reply[4..].chunks(3) {
            let [name, pending, oldest] = g else {
                return Err(protocol("a group of fewer than 3 fields"));
            };
            let oldest = text(oldest)?;
            groups.push(LedgerGroup {
                name: text(name)?,
                pending: int(pending)?.max(0) as u64,
                oldest_unacked: (!oldest.is_empty()).then_some(oldest),
            });
        }
        Ok(LedgerStream {
            trimmed: int(&reply[0])?.max(0) as u64,
            length: int(&reply[1])?.max(0) as u64,
            at_ms: int(&reply[2])?,
            groups,
        })
    }

    /// Create consumer group `group` on the ledger stream if it is not
    /// there, reading from the stream's first entry (the stream is made if
    /// missing). `true` if it was created now.
    pub fn ensure_ledger_group(&mut self, group: &str) -> Result<bool, FacilityError> {
        let made: redis::RedisResult<()> = self.run(
            redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(self.ledger_key())
                .arg(group)
                .arg("0")
                .arg("MKSTREAM"),
        );
        match made {
            Ok(()) => Ok(true),
            Err(e) if e.code() == Some("BUSYGROUP") => Ok(false),
            Err(e) => Err(self.unavailable(e)),
        }
    }

    /// Up to `count` ledger entries for `consumer` of `group`, oldest
    /// first: with `pending`, those delivered to it before and not
    /// acknowledged (a restart's first reads); else new ones, waiting up
    /// to `block_ms` for one.
    pub fn read_ledger_group(
        &mut self,
        group: &str,
        consumer: &str,
        pending: bool,
        count: usize,
        block_ms: u64,
    ) -> Result<Vec<Entry>, FacilityError> {
        loop {
            let mut cmd = redis::cmd("XREADGROUP");
            cmd.arg("GROUP")
                .arg(group)
                .arg(consumer)
                .arg("COUNT")
                .arg(count);
            if !pending {
                cmd.arg("BLOCK").arg(block_ms);
            }
            cmd.arg("STREAMS")
                .arg(self.ledger_key())
                .arg(if pending { "0" } else { ">" });
            type Page = Option<Vec<(String, Vec<(String, Option<Vec<(String, String)>>)>)>>;
            let page: Page = self.run(&cmd).map_err(|e| self.unavailable(e))?;
            let mut entries = Vec::new();
            let mut gone = Vec::new();
            for (id, fields) in page.into_iter().flatten().flat_map(|(_, e)| e) {
                match fields {
                    Some(fields) => entries.push((id.clone(), entry_json(&id, fields).0)),
                    // A pending entry deleted by hand (trimming keeps every
                    // pending entry): nothing to deliver, and it would hold
                    // the trim for ever.
                    None => gone.push(id),
                }
            }
            self.ack_ledger(group, &gone)?;
            // (A page of deleted pending entries alone: read on.)
            if !(pending && entries.is_empty() && !gone.is_empty()) {
                return Ok(entries);
            }
        }
    }

    /// Up to `count` entries of `group` delivered to any consumer and not
    /// acknowledged for at least `min_idle_ms`, from `cursor` (`0-0` to
    /// begin), claimed for `consumer` (`XAUTOCLAIM`: they are its pending
    /// entries now), and the cursor to go on from (`0-0` when done).
    /// Entries deleted meanwhile are dropped from the pending list (by
    /// Redis 7 itself; on 6.2, acknowledged here) and not returned.
    pub fn claim_idle_ledger(
        &mut self,
        group: &str,
        consumer: &str,
        min_idle_ms: u64,
        cursor: &str,
        count: usize,
    ) -> Result<(String, Vec<Entry>), FacilityError> {
        let reply: Vec<Value> = self
            .run(
                redis::cmd("XAUTOCLAIM")
                    .arg(self.ledger_key())
                    .arg(group)
                    .arg(consumer)
                    .arg(min_idle_ms)
                    .arg(cursor)
                    .arg("COUNT")
                    .arg(count),
            )
            .map_err(|e| self.unavailable(e))?;
        let protocol = |what: &str| FacilityError::Protocol {
            url: self.url.clone(),
            reply: format!("XAUTOCLAIM: {what}"),
        };
        let (Some(next), Some(claimed)) = (reply.first(), reply.get(1)) else {
            return Err(protocol("fewer than 2 parts"));
        };
        let next: String = redis::from_redis_value_ref(next).map_err(|_| protocol("no cursor"))?;
        let Value::Array(claimed) = claimed else {
            return Err(protocol("entries not an array"));
        };
        let mut entries = Vec::new();
        let mut gone = Vec::new();
        for item in claimed {
            // Redis 7 lists entries deleted meanwhile apart, and drops them
            // from the pending list; 6.2 answers them with nil fields and
            // keeps them pending (acknowledged here, as by a read).
            type Claimed = Option<(String, Option<Vec<(String, String)>>)>;
            match redis::from_redis_value_ref::<Claimed>(item) {
                Ok(Some((id, Some(fields)))) => {
                    let json = entry_json(&id, fields).0;
                    entries.push((id, json));
                }
                Ok(Some((id, None))) => gone.push(id),
                Ok(None) => {}
                Err(_) => return Err(protocol("an entry unreadable")),
            }
        }
        self.ack_ledger(group, &gone)?;
        Ok((next, entries))
    }

    /// Acknowledge `ids` for `group`: they are kept, and may be trimmed.
    pub fn ack_ledger(&mut self, group: &str, ids: &[String]) -> Result<(), FacilityError> {
        if ids.is_empty() {
            return Ok(());
        }
        self.run::<i64>(
            redis::cmd("XACK")
                .arg(self.ledger_key())
                .arg(group)
                .arg(ids),
        )
        .map_err(|e| self.unavailable(e))?;
        Ok(())
    }
}

/// Entries a consumer reads per `XREADGROUP`.
const FOLLOW_PAGE: usize = 100;

/// How often a follower looks for entries other consumers left idle.
const CLAIM_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Follow the ledger stream as `consumer` of `group` (created if missing,
/// from the stream's first entry): first the entries delivered to this
/// consumer before and never acknowledged (a restart after a crash), then
/// new ones as they come, each page waiting at most `block_ms`. With
/// `claim_idle`, then and every `CLAIM_EVERY`, the entries other
/// consumers of the group were given and left unacknowledged that long are
/// claimed and printed too (a consumer gone under another name would hold
/// the trim for ever). `emit`
/// gets every page and must have written **and flushed** it when it
/// returns; only then is the page acknowledged (at-least-once: a crash in
/// between delivers it again, so a consumer dedups by `scan_uuid`).
/// Returns when `emit` fails (the reader is gone), unacknowledged; an
/// error of the facility store ends it too.
pub fn follow(
    f: &mut Facility,
    group: &str,
    consumer: &str,
    block_ms: u64,
    claim_idle: Option<std::time::Duration>,
    mut emit: impl FnMut(&[Entry]) -> std::io::Result<()>,
) -> Result<(), FacilityError> {
    if f.ensure_ledger_group(group)? {
        crate::events::LedgerFollow::GroupCreated {
            stream: &f.ledger_key(),
            group,
        }
        .emit();
    }
    let mut pending = true;
    let mut claim_idle = claim_idle;
    let mut claim_due = std::time::Instant::now();
    loop {
        if let Some(idle) = claim_idle.filter(|_| !pending)
            && std::time::Instant::now() >= claim_due
        {
            claim_due = std::time::Instant::now() + CLAIM_EVERY;
            match claim_idle_entries(f, group, consumer, idle, &mut emit)? {
                Delivered::All => {}
                Delivered::ReaderGone => return Ok(()),
                Delivered::Refused => claim_idle = None,
            }
        }
        let page = f.read_ledger_group(group, consumer, pending, FOLLOW_PAGE, block_ms)?;
        if pending && page.is_empty() {
            pending = false; // caught up with what was delivered before
            continue;
        }
        if !deliver(f, group, page, &mut emit)? {
            return Ok(());
        }
    }
}

/// How [`claim_idle_entries`] ended.
enum Delivered {
    /// Every idle entry was claimed, printed and acknowledged.
    All,
    /// `emit` failed: the reader is gone.
    ReaderGone,
    /// The server refuses `XAUTOCLAIM` (said in a WARN).
    Refused,
}

/// Claim, print and acknowledge, page by page, every entry of `group` left
/// unacknowledged for `idle` by any consumer ([`Facility::claim_idle_ledger`]).
fn claim_idle_entries(
    f: &mut Facility,
    group: &str,
    consumer: &str,
    idle: std::time::Duration,
    emit: &mut impl FnMut(&[Entry]) -> std::io::Result<()>,
) -> Result<Delivered, FacilityError> {
    let idle_ms = idle.as_millis() as u64;
    let mut cursor = "0-0".to_string();
    loop {
        let (next, page) = match f.claim_idle_ledger(group, consumer, idle_ms, &cursor, FOLLOW_PAGE)
        {
            Err(e) if refused_for_good(&e) => {
                // (An ACL user without +xautoclaim, or a Redis before 6.2:
                // following goes on without it.)
                crate::events::LedgerFollow::ClaimRefused {
                    group,
                    consumer,
                    error: &e,
                }
                .emit();
                return Ok(Delivered::Refused);
            }
            other => other?,
        };
        if !page.is_empty() {
            crate::events::LedgerFollow::Claimed {
                group,
                consumer,
                entries: page.len(),
                idle,
            }
            .emit();
        }
        if !deliver(f, group, page, emit)? {
            return Ok(Delivered::ReaderGone);
        }
        if next == "0-0" {
            return Ok(Delivered::All);
        }
        cursor = next;
    }
}

/// Hand `page` to `emit`, then acknowledge it for `group`: false (nothing
/// acknowledged) if `emit` failed, the reader gone. An empty page is
/// delivered without a word.
fn deliver(
    f: &mut Facility,
    group: &str,
    page: Vec<Entry>,
    emit: &mut impl FnMut(&[Entry]) -> std::io::Result<()>,
) -> Result<bool, FacilityError> {
    if page.is_empty() {
        return Ok(true);
    }
    if emit(&page).is_err() {
        return Ok(false);
    }
    let ids: Vec<String> = page.into_iter().map(|(id, _)| id).collect();
    f.ack_ledger(group, &ids)?;
    Ok(true)
}

/// Whether the server refuses the command itself (`NOPERM`, or a command
/// it does not know): trying again will not help.
fn refused_for_good(e: &FacilityError) -> bool {
    match e {
        FacilityError::NoPermission { .. } => true,
        FacilityError::Unavailable { source, .. } => {
            source.code() == Some("ERR")
                && source
                    .detail()
                    .is_some_and(|d| d.contains("unknown command"))
        }
        _ => false,
    }
}

/// [`follow`] on `first`, and when the facility store fails, again on a
/// new connection from `connect` (after a back-off of 0.1 s … 30 s, each
/// failure a WARN): a restart of Redis, a failover or a network blip do
/// not end the consumer. What it printed and had not acknowledged is
/// delivered again first. Returns when `emit` fails (the reader is gone).
pub fn follow_reconnecting(
    first: Facility,
    mut connect: impl FnMut() -> Result<Facility, FacilityError>,
    group: &str,
    consumer: &str,
    block_ms: u64,
    claim_idle: Option<std::time::Duration>,
    mut emit: impl FnMut(&[Entry]) -> std::io::Result<()>,
) {
    let mut pause = crate::backoff::Backoff::new(
        std::time::Duration::from_millis(100),
        std::time::Duration::from_secs(30),
    );
    let mut conn = Ok(first);
    loop {
        let failed = match conn {
            Ok(mut f) => {
                pause.reset();
                match follow(&mut f, group, consumer, block_ms, claim_idle, &mut emit) {
                    Ok(()) => return,
                    Err(e) => e,
                }
            }
            Err(e) => e,
        };
        let wait = pause.failed();
        crate::events::LedgerFollow::Failed {
            group,
            consumer,
            error: &failed,
            wait,
        }
        .emit();
        std::thread::sleep(wait);
        conn = connect();
    }
}
