//! The facility Redis: the exact store several gateways share (`[redis]`).
//!
//! One server-side script (`claim.lua`) decides a batch of scans in order:
//! idempotent by scan UUID, judged on event time against the content key's
//! committed capture times, each commit atomic with its ledger append. This
//! module connects and checks the server, sends and receives claim rounds
//! (`send_claims` / `recv_claims`, so the claimer can overlap them with its
//! SQLite work) and reads the ledger stream. The claimer's two lanes
//! (`daemon/claimer.rs`, a connection each) drive it; the gate (`gate/facility.rs`) decides
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
//!   [`CONFLICTS_KEPT`] entries, never expires.

pub mod config;
pub mod connect;
pub mod sentinel;
pub mod stream;

pub use config::redact;
pub use connect::{connect, name_credential, primary_url};

use crate::model::{ClockSample, ScannerClone, ServerInfo};
use redis::{Script, Value};
use std::time::Duration;

/// Scans decided by one script call. Redis runs nothing else while a script
/// runs, so this bounds how long one gateway's batch can hold up others
/// (~2 ms at ~15 µs a scan); larger batches are pipelined calls.
const CLAIMS_PER_CALL: usize = 128;

/// The claim script (`claim.lua`; loaded at the start of every round, called
/// with EVALSHA).
pub const CLAIM_LUA: &str = include_str!("claim.lua");

/// One scan to claim.
#[derive(Debug, Clone)]
pub struct Claim {
    /// The scan's UUID (idempotency key).
    pub scan_uuid: String,
    /// Its content key (hex).
    pub content_key: String,
    /// Capture time, Unix ms (UTC).
    pub captured_ms: i64,
    /// Ledger entry fields, in order (the names of [`crate::ledger::LedgerEntry`]).
    pub fields: Vec<(&'static str, String)>,
}

/// Entries the conflicts stream keeps (`XADD … MAXLEN ~`): each gateway
/// reads it every minute, so only a gateway down for longer than it takes
/// this many conflicts could miss one.
pub const CONFLICTS_KEPT: usize = 10_000;

/// A conflict found by another gateway's reconciliation, as the conflicts
/// stream holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConflictNotice {
    /// The stream entry's id (the reader's cursor).
    pub id: String,
    /// The re-published scan the facility suppressed.
    pub scan_uuid: String,
    /// The gateway that re-published it.
    pub gateway: String,
    /// The scan the facility holds as the pick instead (committed while
    /// the store had lost data).
    pub twin_uuid: String,
}

/// The facility's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// This scan is the pick; its ledger entry is in the stream.
    Committed,
    /// An echo of the committed scan `twin`.
    Suppressed {
        /// The committed scan.
        twin: String,
    },
}

/// What went wrong talking to the facility store.
#[derive(Debug, thiserror::Error)]
pub enum FacilityError {
    /// Could not connect or the command failed or timed out. Retry later.
    #[error("facility Redis {url}: {source}")]
    Unavailable {
        /// The server, without credentials.
        url: String,
        /// What redis-rs said.
        source: redis::RedisError,
    },
    /// The server is out of memory (`maxmemory` reached; with `noeviction`
    /// it refuses every write), so no claim can be recorded. Retry later.
    #[error(
        "facility Redis {url} is full: it refuses new claims ({detail}). Fix: raise `maxmemory` on the server, or shorten `[dedup] retention_hours` (claims expire after it)"
    )]
    Full {
        /// The server, without credentials.
        url: String,
        /// What the server said.
        detail: String,
    },
    /// The server is a read-only replica: it refuses every claim. Retry
    /// later (it may be promoted), but the configuration likely needs the
    /// primary's address.
    #[error(
        "facility Redis {url} is a read-only replica: it refuses claims. Fix: point `[redis] url` at the primary (after a failover: the new primary)"
    )]
    ReadOnly {
        /// The server, without credentials.
        url: String,
    },
    /// The ACL user may not run a command scangate needs (`NOPERM`, or a
    /// command inside the claim script refused): nothing was claimed.
    #[error(
        "facility Redis {url}: the ACL user {user:?} may not run what scangate needs ({detail}). Fix: on the server, `ACL SETUSER {user} {ACL_GRANTS}`, on Redis 7.2 or later and Valkey with `{ACL_GRANTS_WAITAOF}` too (see [redis] username in config/scangate.toml), or configure a user that has these"
    )]
    NoPermission {
        /// The server, without credentials.
        url: String,
        /// The ACL user (`default` without `[redis] username`).
        user: String,
        /// What the server said.
        detail: String,
    },
    /// The server refused this gateway's credentials (`WRONGPASS`, or
    /// `NOAUTH`: it wants a password and none was sent). Nothing was
    /// claimed. At start a configuration error; later (the ACL changed
    /// under a running gateway) scans wait unresolved, logged as an ERROR.
    #[error(
        "facility Redis {url} refused the credentials of ACL user {user:?} ({detail}). Fix: put that user's password in {credential}, or correct [redis] username; on the server, `ACL SETUSER {user} on >PASSWORD` (for the user \"default\": requirepass) sets it"
    )]
    AuthRefused {
        /// The server, without credentials.
        url: String,
        /// The ACL user (`default` without `[redis] username`).
        user: String,
        /// What was refused.
        detail: String,
        /// Where the password comes from
        /// ([`config::RedisSettings::password_source`]).
        credential: String,
    },
    /// The server is configured so that a claim could be lost.
    #[error("facility Redis {url}: {problem}. Fix: {fix}")]
    Misconfigured {
        /// The server, without credentials.
        url: String,
        /// What is wrong.
        problem: String,
        /// What to do.
        fix: String,
    },
    /// The facility runs with another window or retention than this
    /// gateway (the first gateway to claim set them): nothing was claimed.
    #[error("facility Redis {url}: {problem}. Fix: {fix}")]
    SettingsDiffer {
        /// The server, without credentials.
        url: String,
        /// Both settings.
        problem: String,
        /// What to do.
        fix: String,
    },
    /// A scanner this gateway declares `shared` is another gateway's own
    /// there, or the other way round: their reads would be judged by
    /// different rules. Nothing was claimed.
    #[error("facility Redis {url}: {problem}. Fix: {fix}")]
    ScannerDiffers {
        /// The server, without credentials.
        url: String,
        /// Which scanner, and how each gateway declares it.
        problem: String,
        /// What to do.
        fix: String,
    },
    /// Fewer replicas than `min_replicas_ack` confirmed a claim batch.
    #[error(
        "facility Redis {url}: {acked} of {wanted} replicas confirmed the claims in time (min_replicas_ack)"
    )]
    Unconfirmed {
        /// The server.
        url: String,
        /// Replicas that acknowledged.
        acked: i64,
        /// Replicas required.
        wanted: u32,
    },
    /// The primary did not confirm, in time, that it wrote a claim round to
    /// its append-only file (`WAITAOF`).
    #[error(
        "facility Redis {url}: the primary did not confirm in time that the claims are in its append-only file (WAITAOF); they are claimed again"
    )]
    NotOnDisk {
        /// The server.
        url: String,
    },
    /// No sentinel named a primary for the service.
    #[error(
        "no Redis Sentinel of {sentinels} named the primary of {service:?}: {detail}. Fix: check that a sentinel answers, and [redis] sentinels and service_name (the name in `sentinel monitor NAME …` in sentinel.conf)"
    )]
    NoPrimary {
        /// The sentinels asked.
        sentinels: String,
        /// `service_name`.
        service: String,
        /// What each sentinel said.
        detail: String,
    },
    /// The store lacks this gateway's latest recorded commit: it lost data
    /// (emptied, replaced, a lagging replica promoted, an old backup
    /// restored). Nothing was claimed; the claimer re-publishes this
    /// gateway's commits ([`Facility::claim_batch`] without a marker), then
    /// claims again.
    #[error(
        "facility Redis {url} has lost data: this gateway's commit {marker} is recorded here but not there (the server was emptied or replaced, a lagging replica promoted, or an older backup restored). Nothing was claimed; this gateway re-publishes its commits of the retention horizon, then claims again"
    )]
    Lost {
        /// The server, without credentials.
        url: String,
        /// The commit the server should have had.
        marker: String,
    },
    /// The script answered something it never returns.
    #[error("facility Redis {url}: unexpected reply {reply:?} from the claim script")]
    Protocol {
        /// The server.
        url: String,
        /// The reply.
        reply: String,
    },
}

impl FacilityError {
    /// The server is set up so that claims could be lost, or refuses this
    /// gateway (its credentials, a grant, its settings or a scanner's
    /// declaration): a technician's fix, not an outage to wait out. `run`
    /// stops on it at start (exit 2), `check-config --online` refuses.
    pub fn needs_technician(&self) -> bool {
        matches!(
            self,
            FacilityError::Misconfigured { .. }
                | FacilityError::SettingsDiffer { .. }
                | FacilityError::NoPermission { .. }
                | FacilityError::AuthRefused { .. }
                | FacilityError::ScannerDiffers { .. }
        )
    }
}

/// Round trips of `TIME` per clock sample; the one with the shortest round
/// trip is kept (Cristian's method).
const CLOCK_ROUND_TRIPS: usize = 5;

/// What an ACL user needs (`ACL SETUSER <user> on ><password>` and these):
/// its keys, the commands scangate sends, and those the claim script runs.
/// `tests/facility_e2e.rs` runs a gateway as a user with exactly these. A
/// server with `WAITAOF` needs [`ACL_GRANTS_WAITAOF`] as well.
pub const ACL_GRANTS: &str = "resetkeys ~scangate:* resetchannels -@all +evalsha +script|load +config|get +info +wait +xrange +hmget +hset +get +set +zscore +zrange +zrangebyscore +zadd +zremrangebyscore +xadd +pexpire +time +exists +xinfo|groups +xpending +xtrim +xlen";

/// What an ACL user needs besides [`ACL_GRANTS`] on a server with
/// `WAITAOF` (Redis 7.2 and later, Valkey), which confirms every round on
/// disk when `appendonly` is on. Not in `ACL_GRANTS`: Redis 7.0 refuses a
/// command it does not know in `ACL SETUSER`.
pub const ACL_GRANTS_WAITAOF: &str = "+waitaof";

/// The ACL user a `redis://user:password@host` URL logs in as
/// (percent-decoded); `default` when it names none.
pub fn url_user(url: &str) -> String {
    let authority = url.split_once("://").map_or("", |(_, r)| r);
    let authority = authority.split('/').next().unwrap_or("");
    let user = authority
        .rsplit_once('@')
        .map_or("", |(info, _)| info.split(':').next().unwrap_or(""));
    let bytes = user.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    match String::from_utf8_lossy(&out) {
        u if u.is_empty() => "default".into(),
        u => u.into_owned(),
    }
}

/// Where the password comes from when nothing more is known (a connection
/// made without [`config::RedisSettings`] at hand).
const SOME_CREDENTIAL: &str =
    "the file [redis] password_file names (or the systemd credential redis-password)";

/// A failed command as the error it is: credentials refused or the ACL
/// user lacking a permission are a technician's fix, anything else a store
/// that is not available. `user` is the ACL user ([`url_user`]).
fn failed(url: &str, user: &str, source: redis::RedisError) -> FacilityError {
    if source.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(source.code(), Some("NOAUTH" | "WRONGPASS"))
    {
        return FacilityError::AuthRefused {
            url: url.to_string(),
            user: user.to_string(),
            detail: match source.code() {
                Some("NOAUTH") => "NOAUTH: the server requires a password and none was sent".into(),
                _ => "WRONGPASS: wrong password, or the user does not exist or is disabled".into(),
            },
            credential: SOME_CREDENTIAL.into(),
        };
    }
    // Redis 7 refuses a command inside a script with a plain ERR.
    let in_script = source
        .detail()
        .is_some_and(|d| d.contains("user executing the script can't"));
    if source.code() == Some("NOPERM") || in_script {
        return FacilityError::NoPermission {
            url: url.to_string(),
            user: user.to_string(),
            detail: format!(
                "{} {}",
                source.code().unwrap_or_default(),
                source.detail().unwrap_or_default().trim()
            )
            .trim()
            .to_string(),
        };
    }
    FacilityError::Unavailable {
        url: url.to_string(),
        source,
    }
}

/// A connection to `url` (TLS verified against `ca_pem`, else the system's
/// trust store) with these timeouts.
fn open(
    url: &str,
    ca_pem: Option<Vec<u8>>,
    connect_timeout: Duration,
    command_timeout: Duration,
) -> Result<redis::Connection, redis::RedisError> {
    let client = match ca_pem {
        Some(root_cert) => redis::Client::build_with_tls(
            url,
            redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(root_cert),
            },
        ),
        None => redis::Client::open(url),
    }?;
    let conn = client.get_connection_with_timeout(connect_timeout)?;
    conn.set_read_timeout(Some(command_timeout))?;
    conn.set_write_timeout(Some(command_timeout))?;
    Ok(conn)
}

/// The value of `name` in an `INFO` reply (`name:value` lines).
fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// Whether a server of `INFO` `redis_version` `version` has `WAITAOF`
/// (7.2 and later; Valkey reports 7.2.4).
fn has_waitaof(version: &str) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (7, 2)
}

/// Claims written to the connection whose answers are still to be read
/// ([`Facility::send_claims`], [`Facility::recv_claims`]).
#[must_use = "the answers must be read before the connection is used again"]
pub struct Sent {
    calls: usize,
    claims: usize,
}

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
    min_replicas: u32,
    replica_timeout: Duration,
    /// Each round also waits for the primary's own AOF fsync (`WAITAOF 1 0`).
    on_disk: bool,
    /// See [`Facility::fresh`].
    fresh: Vec<bool>,
    /// The last [`Facility::check_server`] found a read-only replica.
    replica: bool,
    /// What [`Facility::register_scanners`] found at connect.
    clones: Vec<ScannerClone>,
    /// The clock sample taken at connect.
    clock: Option<ClockSample>,
}

impl Facility {
    /// Connect with the given timeouts. `url` is `redis://` or `rediss://`
    /// (TLS, verified against the system's trust store).
    pub fn connect(
        url: &str,
        facility: &str,
        window_ms: i64,
        retention: Duration,
        connect_timeout: Duration,
        command_timeout: Duration,
    ) -> Result<Facility, FacilityError> {
        Facility::connect_with_ca(
            url,
            None,
            facility,
            window_ms,
            retention,
            connect_timeout,
            command_timeout,
        )
    }

    /// [`Facility::connect`], verifying a `rediss://` server against
    /// `ca_pem` (PEM) instead of the system's trust store.
    pub fn connect_with_ca(
        url: &str,
        ca_pem: Option<Vec<u8>>,
        facility: &str,
        window_ms: i64,
        retention: Duration,
        connect_timeout: Duration,
        command_timeout: Duration,
    ) -> Result<Facility, FacilityError> {
        let shown = redact(url);
        let user = url_user(url);
        let unavailable = |source| failed(&shown, &user, source);
        let mut conn = open(url, ca_pem, connect_timeout, command_timeout).map_err(unavailable)?;
        // Load the script now, so a claim is one EVALSHA that runs at once.
        redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(CLAIM_LUA)
            .query::<String>(&mut conn)
            .map_err(unavailable)?;
        Ok(Facility {
            conn,
            url: shown,
            user,
            facility: facility.to_string(),
            window_ms,
            retention_ms: retention.as_millis() as i64,
            script: Script::new(CLAIM_LUA),
            min_replicas: 0,
            replica_timeout: command_timeout,
            on_disk: false,
            fresh: Vec::new(),
            replica: false,
            clones: Vec::new(),
            clock: None,
        })
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

    /// The replicas the primary reports connected now (`INFO replication`
    /// `connected_slaves`).
    pub fn connected_replicas(&mut self) -> Result<u32, FacilityError> {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut self.conn)
            .map_err(|source| self.unavailable(source))?;
        Ok(info_field(&info, "connected_slaves")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0))
    }

    /// Check the server: `maxmemory-policy` must be `noeviction` (an evicted
    /// claim is a double count), and the facility's window and retention,
    /// if a gateway has set them, must be this gateway's. Returns what to log.
    pub fn check_server(&mut self) -> Result<ServerInfo, FacilityError> {
        let get = |conn: &mut redis::Connection, name: &str| -> Result<String, redis::RedisError> {
            let pair: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query(conn)?;
            Ok(pair.get(1).cloned().unwrap_or_default())
        };
        let unavailable = |source| failed(&self.url, &self.user, source);
        let policy = get(&mut self.conn, "maxmemory-policy").map_err(unavailable)?;
        let appendonly = get(&mut self.conn, "appendonly").map_err(unavailable)?;
        let save = get(&mut self.conn, "save").map_err(unavailable)?;
        let info: String = redis::cmd("INFO")
            .arg("server")
            .arg("replication")
            .query(&mut self.conn)
            .map_err(unavailable)?;
        let field = |name| info_field(&info, name).unwrap_or("unknown").to_string();
        let (version, role) = (field("redis_version"), field("role"));
        let connected_replicas = info_field(&info, "connected_slaves")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if policy != "noeviction" {
            return Err(FacilityError::Misconfigured {
                url: self.url.clone(),
                problem: format!(
                    "maxmemory-policy is {policy:?}: Redis may evict a claim under memory pressure, and an evicted claim lets an echo commit a second ledger entry"
                ),
                fix: "set `maxmemory-policy noeviction` in redis.conf (or CONFIG SET maxmemory-policy noeviction) and size maxmemory for the retention horizon".into(),
            });
        }
        self.check_settings()?;
        if has_waitaof(&version) && appendonly == "yes" && role == "master" {
            // Every round will end with WAITAOF (Facility::set_on_disk): an
            // ACL user that may not run it would have every claim refused.
            // With nothing to wait for, it answers at once. (A replica
            // refuses WAITAOF itself; it refuses claims anyway, and the
            // caller tells it by its role.)
            let _: (i64, i64) = redis::cmd("WAITAOF")
                .arg(0)
                .arg(0)
                .arg(0)
                .query(&mut self.conn)
                .map_err(|source| failed(&self.url, &self.user, source))?;
        }
        self.replica = role == "slave";
        Ok(ServerInfo {
            has_waitaof: has_waitaof(&version),
            version,
            maxmemory_policy: policy,
            appendonly,
            save,
            role,
            connected_replicas,
        })
    }

    /// CPU seconds the server has used so far (`INFO cpu`): its own process
    /// (all threads), and its children (AOF rewrites, RDB saves). For the
    /// benchmark, which shares the machine's cores with the server.
    pub fn server_cpu(&mut self) -> Result<(f64, f64), FacilityError> {
        let info: String = redis::cmd("INFO")
            .arg("cpu")
            .query(&mut self.conn)
            .map_err(|source| self.unavailable(source))?;
        let field = |name| -> f64 {
            info_field(&info, name)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0)
        };
        Ok((
            field("used_cpu_sys") + field("used_cpu_user"),
            field("used_cpu_sys_children") + field("used_cpu_user_children"),
        ))
    }

    fn key(&self, kind: &str, id: &str) -> String {
        format!("scangate:{{{}}}:{kind}:{id}", self.facility)
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
        redis::cmd("HSET")
            .arg(&key)
            .arg("state_id")
            .arg(state_id)
            .arg("seq")
            .arg(seq)
            .arg("hash")
            .arg(hash)
            .query::<()>(&mut self.conn)
            .map_err(|e| self.unavailable(e))
    }

    /// `gateway`'s anchored chain head (`state_id`, `seq`, `hash`), if any.
    pub fn anchor(
        &mut self,
        gateway: &str,
    ) -> Result<Option<(String, i64, String)>, FacilityError> {
        let key = self.key("anchor", gateway);
        let (id, seq, hash): (Option<String>, Option<i64>, Option<String>) = redis::cmd("HMGET")
            .arg(&key)
            .arg("state_id")
            .arg("seq")
            .arg("hash")
            .query(&mut self.conn)
            .map_err(|e| self.unavailable(e))?;
        Ok(match (id, seq, hash) {
            (Some(id), Some(seq), Some(hash)) => Some((id, seq, hash)),
            _ => None,
        })
    }

    /// The ledger stream's key.
    pub fn ledger_key(&self) -> String {
        format!("scangate:{{{}}}:ledger", self.facility)
    }

    /// The key of the facility's settings (window and retention).
    pub fn settings_key(&self) -> String {
        format!("scangate:{{{}}}:settings", self.facility)
    }

    /// The refusal when the facility runs with `window_ms` / `retention_ms`
    /// (as the settings hash holds them; `-` unset) and this gateway with
    /// others.
    fn settings_differ(&self, window_ms: &str, retention_ms: &str) -> FacilityError {
        // `-`: a field the hash lacks (someone edited it by hand).
        let hours = |ms: &str| {
            ms.parse::<i64>().map_or_else(
                |_| "(unset)".to_string(),
                |ms| format!("{} h", ms as f64 / 3.6e6),
            )
        };
        FacilityError::SettingsDiffer {
            url: self.url.clone(),
            problem: format!(
                "facility {:?} runs with [dedup] window_ms = {} and retention {} (set by the first gateway that claimed), this gateway with window_ms = {} and retention {}: a scan would be judged by a different rule on each gateway, and one pick could be committed twice. No claim was made; scans wait in the outbox",
                self.facility,
                if window_ms.parse::<i64>().is_ok() {
                    window_ms
                } else {
                    "(unset)"
                },
                hours(retention_ms),
                self.window_ms,
                hours(&self.retention_ms.to_string()),
            ),
            fix: format!(
                "give every gateway of the facility the same [dedup] window_ms and [dedup] retention_hours. To change them for the whole facility: stop every gateway, run `redis-cli -u URL DEL '{}'`, then start them with the new values",
                self.settings_key()
            ),
        }
    }

    /// Measure the facility's clock against this gateway's
    /// ([`ClockSample`]): [`CLOCK_ROUND_TRIPS`] `TIME` round trips, the
    /// shortest kept.
    pub fn sample_clock(&mut self) -> Result<ClockSample, FacilityError> {
        use crate::capture::clock::{boot_id, boot_ns};
        let wall_us = || chrono::Utc::now().timestamp_micros() as f64;
        // (round trip ns, facility µs, wall µs mid-way, boot ns mid-way)
        let mut best: Option<(i64, f64, f64, f64)> = None;
        for _ in 0..CLOCK_ROUND_TRIPS {
            let (b0, w0) = (boot_ns(), wall_us());
            let (secs, micros): (i64, i64) = redis::cmd("TIME")
                .query(&mut self.conn)
                .map_err(|e| self.unavailable(e))?;
            let (b1, w1) = (boot_ns(), wall_us());
            let rtt = b1 - b0;
            if best.is_none_or(|b| rtt < b.0) {
                let facility_us = secs as f64 * 1e6 + micros as f64;
                best = Some((rtt, facility_us, (w0 + w1) / 2.0, (b0 + b1) as f64 / 2.0));
            }
        }
        let (rtt, facility_us, wall_mid, boot_mid) = best.expect("at least one round trip");
        Ok(ClockSample {
            offset_ms: (facility_us - wall_mid) / 1e3,
            bound_ms: rtt as f64 / 2e6,
            boot_offset_ms: facility_us / 1e3 - boot_mid / 1e6,
            boot_id: boot_id().to_string(),
            at_ms: chrono::Utc::now().timestamp_millis(),
            boot_ms: (boot_mid / 1e6).round() as i64,
        })
    }

    /// Refuse a server whose facility settings differ from this gateway's
    /// (read only: the first claim sets them if none are set).
    pub fn check_settings(&mut self) -> Result<(), FacilityError> {
        let key = self.settings_key();
        let agreed: (Option<String>, Option<String>) = redis::cmd("HMGET")
            .arg(&key)
            .arg("window_ms")
            .arg("retention_ms")
            .query(&mut self.conn)
            .map_err(|source| self.unavailable(source))?;
        match agreed {
            (None, None) => Ok(()),
            (w, r)
                if w.as_deref() == Some(self.window_ms.to_string().as_str())
                    && r.as_deref() == Some(self.retention_ms.to_string().as_str()) =>
            {
                Ok(())
            }
            (w, r) => {
                Err(self.settings_differ(w.as_deref().unwrap_or("-"), r.as_deref().unwrap_or("-")))
            }
        }
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

    /// Record which gateway uses each of this gateway's `scanners` (name,
    /// declared `shared`), for the retention horizon (refreshed at every
    /// connect): `scangate:{f}:scanner:<name>` holds `shared`, or
    /// `gateway=<id>` for a gateway's own. Returns the names another gateway
    /// uses as its own too (a cloned config: warned of, the reads still
    /// count on each); refuses a scanner one gateway declares `shared` and
    /// another not.
    pub fn register_scanners(
        &mut self,
        gateway: &str,
        scanners: &[(String, bool)],
    ) -> Result<Vec<ScannerClone>, FacilityError> {
        let mut clones = Vec::new();
        for (name, shared) in scanners {
            let key = self.key("scanner", name);
            let mine = match shared {
                true => "shared".to_string(),
                false => format!("gateway={gateway}"),
            };
            let set: Option<String> = redis::cmd("SET")
                .arg(&key)
                .arg(&mine)
                .arg("NX")
                .arg("PX")
                .arg(self.retention_ms)
                .query(&mut self.conn)
                .map_err(|e| self.unavailable(e))?;
            if set.is_some() {
                continue;
            }
            let theirs: Option<String> = redis::cmd("GET")
                .arg(&key)
                .query(&mut self.conn)
                .map_err(|e| self.unavailable(e))?;
            let Some(theirs) = theirs else { continue }; // expired meanwhile
            if theirs == mine {
                redis::cmd("PEXPIRE")
                    .arg(&key)
                    .arg(self.retention_ms)
                    .query::<i64>(&mut self.conn)
                    .map_err(|e| self.unavailable(e))?;
                continue;
            }
            match (theirs.strip_prefix("gateway="), shared) {
                (Some(other), false) => clones.push(ScannerClone {
                    scanner: name.clone(),
                    other_gateway: other.to_string(),
                }),
                (Some(other), true) => {
                    return Err(FacilityError::ScannerDiffers {
                        url: self.url.clone(),
                        problem: format!(
                            "scanner {name:?} is `shared` here, but gateway {other:?} uses it as its own (not shared)"
                        ),
                        fix: format!(
                            "if one scanner is heard by both gateways, set shared = true in its [[scanner]] on {other} too; if they are two scanners, rename one (the record expires {} h after {other} last connected)",
                            self.retention_ms / 3_600_000
                        ),
                    });
                }
                (None, _) => {
                    return Err(FacilityError::ScannerDiffers {
                        url: self.url.clone(),
                        problem: format!(
                            "scanner {name:?} is this gateway's own here (not shared), but other gateways of the facility declare it `shared`"
                        ),
                        fix: "if this is the scanner they share, set shared = true in its [[scanner]] here; if it is another scanner, rename it".into(),
                    });
                }
            }
        }
        Ok(clones)
    }

    /// Claim scans in one round trip (script calls of up to
    /// 128 scans each, pipelined), in the given order — the
    /// caller passes them in capture order. Retrying a batch after a lost
    /// reply is safe: each scan's first decision is returned again.
    pub fn claim_batch(&mut self, claims: &[Claim]) -> Result<Vec<Outcome>, FacilityError> {
        self.claim_batch_checked(claims, &[])
    }

    /// [`Facility::claim_batch`] checked against `markers` (see
    /// [`Facility::send_claims_checked`]).
    pub fn claim_batch_checked(
        &mut self,
        claims: &[Claim],
        markers: &[String],
    ) -> Result<Vec<Outcome>, FacilityError> {
        let sent = self.send_claims_checked(claims, markers)?;
        self.recv_claims(sent)
    }

    /// Whether the server holds the decision of `scan_uuid` (a probe of the
    /// marker between claims: an idle gateway notices a loss too).
    pub fn has_decision(&mut self, scan_uuid: &str) -> Result<bool, FacilityError> {
        let key = self.key("scan", scan_uuid);
        let found: Option<String> = redis::cmd("GET")
            .arg(&key)
            .query(&mut self.conn)
            .map_err(|e| self.unavailable(e))?;
        Ok(found.is_some())
    }

    /// The conflicts stream's key.
    fn conflicts_key(&self) -> String {
        format!("scangate:{{{}}}:conflicts", self.facility)
    }

    /// Tell the facility's gateways that this gateway's re-published
    /// `scan_uuid` was suppressed as an echo of `twin_uuid`, which another
    /// gateway committed while the store had lost data (one entry of the
    /// conflicts stream).
    pub fn publish_conflict(
        &mut self,
        gateway: &str,
        scan_uuid: &str,
        twin_uuid: &str,
    ) -> Result<(), FacilityError> {
        let key = self.conflicts_key();
        redis::cmd("XADD")
            .arg(&key)
            .arg("MAXLEN")
            .arg("~")
            .arg(CONFLICTS_KEPT)
            .arg("*")
            .arg("scan_uuid")
            .arg(scan_uuid)
            .arg("gateway")
            .arg(gateway)
            .arg("twin_uuid")
            .arg(twin_uuid)
            .query::<String>(&mut self.conn)
            .map_err(|e| self.unavailable(e))?;
        Ok(())
    }

    /// Up to `count` entries of the conflicts stream after `cursor` (an
    /// entry id; `None`: from the start), oldest first.
    pub fn conflicts_after(
        &mut self,
        cursor: Option<&str>,
        count: usize,
    ) -> Result<Vec<ConflictNotice>, FacilityError> {
        let start = cursor.map_or_else(|| "-".to_string(), |c| format!("({c}"));
        let page: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
            .arg(self.conflicts_key())
            .arg(&start)
            .arg("+")
            .arg("COUNT")
            .arg(count)
            .query(&mut self.conn)
            .map_err(|e| self.unavailable(e))?;
        Ok(page
            .into_iter()
            .map(|(id, fields)| {
                let get = |name| stream_field(&fields, name);
                ConflictNotice {
                    scan_uuid: get("scan_uuid"),
                    gateway: get("gateway"),
                    twin_uuid: get("twin_uuid"),
                    id,
                }
            })
            .collect())
    }

    /// The first half of [`Facility::claim_batch`]: write the claims to the
    /// connection without waiting for the answer, so the caller can do other
    /// work (write the previous round's verdicts) while Redis runs them.
    /// Redis runs a connection's commands in the order sent, so a later
    /// batch is claimed after this one.
    pub fn send_claims(&mut self, claims: &[Claim]) -> Result<Sent, FacilityError> {
        self.send_claims_checked(claims, &[])
    }

    /// [`Facility::send_claims`], each call first checking that the
    /// server has the decision of every one of `markers` (this gateway's
    /// latest recorded commits, `claimer::markers`): if one is missing,
    /// it refuses with [`FacilityError::Lost`] naming it, nothing changed.
    pub fn send_claims_checked(
        &mut self,
        claims: &[Claim],
        markers: &[String],
    ) -> Result<Sent, FacilityError> {
        let mut packed = Vec::with_capacity(claims.len() * 512);
        if !claims.is_empty() {
            // The script first, in the same write: a server whose script
            // cache was flushed cannot run a later call of this round before
            // an earlier one (no NOSCRIPT in the middle of a round).
            redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(CLAIM_LUA)
                .write_packed_command(&mut packed);
        }
        let mut calls = 0;
        let mut rest = claims;
        while let Some(head) = rest.first() {
            // One call: up to CLAIMS_PER_CALL claims with the same field names
            // (the script takes the names once).
            let same = rest
                .iter()
                .take(CLAIMS_PER_CALL)
                .take_while(|c| {
                    c.fields
                        .iter()
                        .map(|f| f.0)
                        .eq(head.fields.iter().map(|f| f.0))
                })
                .count();
            let (chunk, after) = rest.split_at(same);
            rest = after;
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(self.script.get_hash())
                .arg(2 * chunk.len() + 2 + markers.len());
            for c in chunk {
                cmd.arg(self.key("scan", &c.scan_uuid))
                    .arg(self.key("seen", &c.content_key));
            }
            for m in markers {
                cmd.arg(self.key("scan", m));
            }
            cmd.arg(self.settings_key())
                .arg(self.ledger_key())
                .arg(self.window_ms)
                .arg(self.retention_ms)
                .arg(head.fields.len())
                .arg(markers.join(" "));
            for (name, _) in &head.fields {
                cmd.arg(*name);
            }
            for c in chunk {
                cmd.arg(&c.scan_uuid).arg(c.captured_ms);
                for (_, value) in &c.fields {
                    cmd.arg(value);
                }
            }
            cmd.write_packed_command(&mut packed);
            calls += 1;
        }
        if calls > 0 && self.min_replicas > 0 {
            redis::cmd("WAIT")
                .arg(self.min_replicas)
                .arg(self.replica_timeout.as_millis() as u64)
                .write_packed_command(&mut packed);
        }
        if calls > 0 && self.on_disk {
            // After WAIT, so the two waits overlap: the fsync runs while
            // the replicas confirm.
            redis::cmd("WAITAOF")
                .arg(1)
                .arg(0)
                .arg(self.replica_timeout.as_millis() as u64)
                .write_packed_command(&mut packed);
        }
        if calls > 0 {
            self.conn
                .send_packed_command(&packed)
                .map_err(|source| self.unavailable(source))?;
        }
        Ok(Sent {
            calls,
            claims: claims.len(),
        })
    }

    /// The second half of [`Facility::claim_batch`]: read the answers to
    /// `sent`, one decision per claim in the order sent. Any error (a broken
    /// connection, a timeout, a server error — even `NOSCRIPT`, should
    /// another client flush the script cache between this round's
    /// `SCRIPT LOAD` and its calls) fails the whole round; the connection may
    /// still owe replies, so drop it and connect again (the claimer does),
    /// and the claims are retried by UUID.
    pub fn recv_claims(&mut self, sent: Sent) -> Result<Vec<Outcome>, FacilityError> {
        self.fresh.clear();
        if sent.calls == 0 {
            return Ok(Vec::new());
        }
        // SCRIPT LOAD answers the script's SHA: anything else is a reply
        // owed to an earlier command that failed (a connection out of
        // step), whose decisions must never be taken for this round's.
        let loaded = self.reply()?;
        if redis::from_redis_value::<String>(loaded.clone())
            .ok()
            .as_deref()
            != Some(self.script.get_hash())
        {
            return Err(FacilityError::Protocol {
                url: self.url.clone(),
                reply: format!("{loaded:?} where SCRIPT LOAD's answer was due"),
            });
        }
        let mut outcomes = Vec::with_capacity(sent.claims);
        let mut fresh = Vec::with_capacity(sent.claims);
        for call in 0..sent.calls {
            let reply = match self.reply() {
                Err(lost @ FacilityError::Lost { .. }) => {
                    // Every later call of the round refuses too; read their
                    // replies (and WAIT's and WAITAOF's), so the connection
                    // can go on — unless it failed meanwhile: then that
                    // failure, and the claimer drops the connection.
                    let owed = sent.calls - call - 1
                        + usize::from(self.min_replicas > 0)
                        + usize::from(self.on_disk);
                    for _ in 0..owed {
                        match self.reply() {
                            Ok(_) | Err(FacilityError::Lost { .. }) => {}
                            Err(e) => return Err(e),
                        }
                    }
                    return Err(lost);
                }
                other => other?,
            };
            let items = match reply {
                Value::Array(items) => items,
                other => vec![other],
            };
            for v in items {
                let (outcome, made) = self.outcome(v)?;
                outcomes.push(outcome);
                fresh.push(made);
            }
        }
        let acked = if self.min_replicas > 0 {
            let reply = self.reply()?;
            Some(redis::from_redis_value::<i64>(reply).map_err(|e| self.unavailable(e.into()))?)
        } else {
            None
        };
        let on_disk = if self.on_disk {
            let reply = self.reply()?;
            let (local, _replicas) = redis::from_redis_value::<(i64, i64)>(reply)
                .map_err(|e| self.unavailable(e.into()))?;
            local >= 1
        } else {
            true
        };
        if outcomes.len() != sent.claims {
            return Err(FacilityError::Protocol {
                url: self.url.clone(),
                reply: format!("{} decisions for {} claims", outcomes.len(), sent.claims),
            });
        }
        if let Some(acked) = acked
            && acked < i64::from(self.min_replicas)
        {
            return Err(FacilityError::Unconfirmed {
                url: self.url.clone(),
                acked,
                wanted: self.min_replicas,
            });
        }
        if !on_disk {
            return Err(FacilityError::NotOnDisk {
                url: self.url.clone(),
            });
        }
        self.fresh = fresh;
        Ok(outcomes)
    }

    /// The next reply on the connection, a server error as an error.
    fn reply(&mut self) -> Result<Value, FacilityError> {
        self.conn
            .recv_response()
            .and_then(|v| v.extract_error())
            .map_err(|source| match source.code() {
                // The script fails at its first write, before it changed
                // anything (Redis checks memory there, not later).
                Some("OOM") => FacilityError::Full {
                    url: self.url.clone(),
                    detail: source.detail().unwrap_or("OOM").trim().to_string(),
                },
                Some("READONLY") => FacilityError::ReadOnly {
                    url: self.url.clone(),
                },
                Some("SCANGATE_LOST") => FacilityError::Lost {
                    url: self.url.clone(),
                    marker: source.detail().unwrap_or_default().trim().to_string(),
                },
                Some("SCANGATE_SETTINGS") => {
                    let detail = source.detail().unwrap_or_default();
                    let mut agreed = detail.split_whitespace();
                    self.settings_differ(agreed.next().unwrap_or("-"), agreed.next().unwrap_or("-"))
                }
                _ => self.unavailable(source),
            })
    }

    fn unavailable(&self, source: redis::RedisError) -> FacilityError {
        failed(&self.url, &self.user, source)
    }

    /// A claim's answer, and whether this call made the decision (`false`:
    /// answered again from an earlier call's, "=" in front).
    fn outcome(&self, v: Value) -> Result<(Outcome, bool), FacilityError> {
        let text = match &v {
            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            Value::SimpleString(s) => s.clone(),
            other => format!("{other:?}"),
        };
        let (decided, fresh) = match text.strip_prefix('=') {
            Some(earlier) => (earlier, false),
            None => (text.as_str(), true),
        };
        if decided == "committed" {
            return Ok((Outcome::Committed, fresh));
        }
        if let Some(twin) = decided.strip_prefix("suppressed ") {
            return Ok((
                Outcome::Suppressed {
                    twin: twin.to_string(),
                },
                fresh,
            ));
        }
        Err(FacilityError::Protocol {
            url: self.url.clone(),
            reply: text,
        })
    }

    /// For each claim the last round [`Facility::recv_claims`] answered,
    /// in order: whether that round made its decision (`false`: answered
    /// again from an earlier round's — a retry after a lost reply — which
    /// has that round's place in the store's history, and whose key
    /// expires as that round set it). Empty after a round that failed.
    pub fn fresh(&self) -> &[bool] {
        &self.fresh
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
            let page: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
                .arg(self.ledger_key())
                .arg(&start)
                .arg("+")
                .arg("COUNT")
                .arg(1000)
                .query(&mut self.conn)
                .map_err(|source| self.unavailable(source))?;
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

#[cfg(test)]
mod tests {
    use super::info_field;

    #[test]
    fn the_acl_user_is_read_from_the_url() {
        use super::url_user;
        assert_eq!(url_user("redis://scan%40gate:p%3Aw@h:1/0"), "scan@gate");
        assert_eq!(url_user("rediss://:pw@h:1/0"), "default");
        assert_eq!(url_user("redis://h:1/0"), "default");
        assert_eq!(url_user("redis://u:pw@h:1/0?x=a@b"), "u");
    }

    #[test]
    fn info_fields_are_read_by_exact_name() {
        let info = "# Server\r\nredis_version:7.0.15\r\nredis_version_extra:x\r\n\
                    # Replication\r\nrole:slave\r\n# CPU\r\nused_cpu_sys:1.5\r\n\
                    used_cpu_sys_children:0.25\r\n";
        assert_eq!(info_field(info, "redis_version"), Some("7.0.15"));
        assert_eq!(info_field(info, "role"), Some("slave"));
        // A name that is a prefix of another is not confused with it.
        assert_eq!(info_field(info, "used_cpu_sys"), Some("1.5"));
        assert_eq!(info_field(info, "used_cpu_sys_children"), Some("0.25"));
        assert_eq!(info_field(info, "maxmemory"), None);
    }
}
