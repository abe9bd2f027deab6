//! The facility Redis: the exact store several gateways share (`[redis]`),
//! the adapter between the claimer and the server.
//!
//! One server-side script (`claim.lua`) decides a batch of scans in order:
//! idempotent by scan UUID, judged on event time against the content key's
//! committed capture times, each commit atomic with its ledger append.
//!
//! - this file: [`Facility`], a connection's state, its keys and the anchors;
//! - `claim.rs`: claim rounds, sent and received apart
//!   (`send_claims` / `recv_claims`) so the claimer overlaps them with its
//!   SQLite work;
//! - `server.rs`: what the server is and agrees to (role, persistence,
//!   replicas, the facility's window and retention, scanner names, clock);
//! - `conflicts.rs`: the conflicts stream; [`stream`]: the ledger stream's
//!   consumers and trimming;
//! - `error.rs`: [`FacilityError`] and the ACL grants; [`config`]: the
//!   `[redis]` section; [`connect`](mod@connect) (every way from a URL to a
//!   connection) and [`sentinel`]: reaching the primary.
//!
//! The claimer's two lanes (a connection each) drive it; the gate decides
//! what needs claiming.
//!
//! Keys (all of one facility share the hash tag, so one Redis Cluster slot):
//! - `scangate:{<facility>}:scan:<scan_uuid>` → the decision, expires after the retention horizon;
//! - `scangate:{<facility>}:seen:<content_key>` → sorted set of committed capture times (ms), member = scan UUID;
//! - `scangate:{<facility>}:settings` → hash of the facility's `window_ms` and `retention_ms`, set by the first
//!   gateway to claim and checked by every claim (one rule for every gateway), expires after the retention horizon;
//! - `scangate:{<facility>}:scanner:<name>` → `shared`, or `gateway=<id>` for a gateway's own scanner: which
//!   gateway uses that name (a second one is warned of: a cloned config), refreshed at every connect, expires
//!   after the retention horizon;
//! - `scangate:{<facility>}:ledger` → stream, one entry per committed scan; never expires, trimmed only
//!   past what every consumer group has acknowledged and older than `[redis] ledger_stream_keep_days`
//!   ([`stream`]);
//! - `scangate:{<facility>}:conflicts` → stream, one entry per pick two gateways committed twice while the store
//!   had lost data (found by a reconciliation: `scan_uuid`, `gateway`, `twin_uuid`), capped at
//!   [`CONFLICTS_KEPT`] entries, never expires;
//! - `scangate:{<facility>}:rcv:<gtin>:<serial>` → the first `receive` read of a serialised item,
//!   `<scan_uuid> <captured_ms> <gateway> <scanner>` (`received.rs`), expires `[checks] serial_retention_days`
//!   after it was set.

mod claim;
pub mod cluster;
pub mod config;
mod conflicts;
pub mod connect;
mod error;
mod received;
mod resend;
pub(crate) mod sentinel;
mod server;
pub mod stream;

pub use crate::model::{Claim, Outcome};
pub use claim::{CLAIM_LUA, Sent};
pub use conflicts::{CONFLICTS_KEPT, ConflictNotice};
use error::failed;
pub use error::{ACL_GRANTS, ACL_GRANTS_CLUSTER, ACL_GRANTS_WAITAOF, FacilityError, url_user};

pub use config::redact;
use connect::open;
pub use connect::{connect, name_credential, primary_url};

use crate::model::{ClockSample, ScannerClone};
use redis::Script;
use std::time::Duration;

/// A connection to the facility store.
pub struct Facility {
    conn: redis::Connection,
    url: String,
    /// The ACL user it is logged in as.
    user: String,
    facility: String,
    window_ms: i64,
    retention_ms: i64,
    script: Script,
    /// The last claim round's token: each round's calls answer it first,
    /// so a reply an earlier round left owed is never taken for a later's.
    round_token: u64,
    /// The last claim round as written to the connection (the buffer
    /// reused): sent again whole after a NOSCRIPT at its first call.
    packed: Vec<u8>,
    /// Where each call of that round ends in `packed` (to send it again
    /// with `ASKING` before each call).
    call_ends: Vec<usize>,
    min_replicas: u32,
    replica_timeout: Duration,
    /// Each round also waits for the primary's own AOF fsync (`WAITAOF 1 0`).
    on_disk: bool,
    /// See [`Facility::fresh`].
    fresh: Vec<bool>,
    /// See [`Facility::twin_times`].
    twin_times: Vec<Option<i64>>,
    /// The last [`Facility::check_server`] found a read-only replica.
    replica: bool,
    /// What [`Facility::register_scanners`] found at connect.
    clones: Vec<ScannerClone>,
    /// The clock sample taken at connect.
    clock: Option<ClockSample>,
    /// In a Redis Cluster: how to reach the node a redirect names.
    nodes: Option<cluster::Nodes>,
    /// The claim round in flight was sent, after an `ASK`, to that node
    /// (`ASKING` before each call): its replies are read there.
    asking: bool,
}

impl Facility {
    pub(crate) fn unavailable(&self, source: redis::RedisError) -> FacilityError {
        failed(&self.url, &self.user, source)
    }

    /// Require `n` replicas to acknowledge every claim batch (`WAIT`) within
    /// `timeout`; a batch they do not confirm is reported as unavailable and
    /// retried (the claims are idempotent). 0 = off.
    pub fn set_min_replicas(&mut self, n: u32, timeout: Duration) {
        self.min_replicas = n;
        self.replica_timeout = timeout;
    }

    /// The server, without credentials.
    pub fn server(&self) -> &str {
        &self.url
    }

    /// Whether every claim round also waits for the primary's AOF
    /// ([`Facility::set_on_disk`]).
    pub fn on_disk(&self) -> bool {
        self.on_disk
    }

    /// Whether the last [`Facility::check_server`] found a read-only
    /// replica (it refuses `WAIT` and `WAITAOF`: no round waits there).
    pub fn is_replica(&self) -> bool {
        self.replica
    }

    /// The replicas every claim round waits for ([`Facility::set_min_replicas`]).
    pub fn min_replicas(&self) -> u32 {
        self.min_replicas
    }

    /// Also require the primary to have written every claim round to its
    /// append-only file (`WAITAOF 1 0`, within the replica timeout; the
    /// server must have `WAITAOF` and `appendonly yes`), so a primary that
    /// restarts from its AOF still has it.
    pub fn set_on_disk(&mut self, on: bool) {
        self.on_disk = on;
    }

    fn key(&self, kind: &str, id: &str) -> String {
        cluster::facility_key(&self.facility, format_args!("{kind}:{id}"))
    }

    /// Anchor `gateway`'s audit chain head here (hash
    /// `scangate:{f}:anchor:<gateway>`: `state_id`, `seq`, `hash`), so a
    /// lost tail of its database is seen by `audit verify`.
    pub fn put_anchor(
        &mut self,
        gateway: &str,
        state_id: &str,
        seq: i64,
        hash: &str,
    ) -> Result<(), FacilityError> {
        let key = self.key("anchor", gateway);
        let mut cmd = redis::cmd("HSET");
        cmd.arg(&key)
            .arg("state_id")
            .arg(state_id)
            .arg("seq")
            .arg(seq)
            .arg("hash")
            .arg(hash);
        self.run::<()>(&cmd).map_err(|e| self.unavailable(e))
    }

    /// `gateway`'s anchored chain head (`state_id`, `seq`, `hash`), if any.
    pub fn anchor(
        &mut self,
        gateway: &str,
    ) -> Result<Option<(String, i64, String)>, FacilityError> {
        let key = self.key("anchor", gateway);
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(&key).arg("state_id").arg("seq").arg("hash");
        let (id, seq, hash): (Option<String>, Option<i64>, Option<String>) =
            self.run(&cmd).map_err(|e| self.unavailable(e))?;
        Ok(match (id, seq, hash) {
            (Some(id), Some(seq), Some(hash)) => Some((id, seq, hash)),
            _ => None,
        })
    }

    /// The ledger stream's key.
    pub fn ledger_key(&self) -> String {
        cluster::facility_key(&self.facility, "ledger")
    }

    /// The scanner names another gateway uses too, as found when this
    /// connection was made.
    pub fn clones(&self) -> &[ScannerClone] {
        &self.clones
    }

    /// Keep what [`Facility::register_scanners`] found, for [`Facility::clones`].
    pub fn set_clones(&mut self, clones: Vec<ScannerClone>) {
        self.clones = clones;
    }

    /// The clock sample taken when this connection was made, if one was.
    pub fn clock(&self) -> Option<&ClockSample> {
        self.clock.as_ref()
    }

    /// Keep the sample taken at connect, for [`Facility::clock`].
    pub fn set_clock(&mut self, clock: ClockSample) {
        self.clock = Some(clock);
    }
}

impl Facility {
    /// Stream the facility ledger in pages (`XRANGE … COUNT 1000`), entries
    /// captured at or after `since_ms`, as JSON objects with the field names
    /// of [`crate::ledger::LedgerEntry`] plus `stream_id` (quantity a number, clock_synced a boolean,
    /// absent values `null`). Stops quietly when `f` fails (reader gone).
    pub fn for_each_ledger_entry(
        &mut self,
        since_ms: Option<i64>,
        mut f: impl FnMut(serde_json::Value) -> std::io::Result<()>,
    ) -> Result<(), FacilityError> {
        let mut start = "-".to_string();
        loop {
            let mut cmd = redis::cmd("XRANGE");
            cmd.arg(self.ledger_key())
                .arg(&start)
                .arg("+")
                .arg("COUNT")
                .arg(1000);
            let page: Vec<(String, Vec<(String, String)>)> =
                self.run(&cmd).map_err(|source| self.unavailable(source))?;
            let Some(last) = page.last().map(|(id, _)| id.clone()) else {
                return Ok(());
            };
            for (id, fields) in page {
                let (obj, captured_ms) = stream::entry_json(&id, fields);
                if since_ms.is_some_and(|s| captured_ms.is_some_and(|c| c < s)) {
                    continue;
                }
                if f(obj).is_err() {
                    return Ok(());
                }
            }
            start = format!("({last}");
        }
    }
}

/// The value of field `name` of a stream entry's `fields` (`""` if absent).
pub fn stream_field(fields: &[(String, String)], name: &str) -> String {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}
