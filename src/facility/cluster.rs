//! Redis Cluster (`[redis] cluster`): which primary owns a facility's slot,
//! and following the cluster's redirects on the one connection a lane has.
//!
//! Every key of a facility carries the facility as its hash tag
//! ([`facility_key`]), so all of them are in one slot ([`facility_slot`]),
//! and one connection to the primary that owns it serves every command,
//! pipelined claim rounds included. The slot map is learnt at every connect
//! ([`owner_of`]). A command the node refuses with `MOVED` (the slot moved
//! for good), `ASK` (the slot is migrating and the keys are on the node it
//! names) or `TRYAGAIN` (migrating, the keys split between the two) did not
//! run, so it is sent again where the refusal says (`Facility::run`); a
//! claim round is resent only when its first call was refused so and none
//! of its later calls ran (`claim.rs`).

use super::config::RedisSettings;
use super::error::failed;
use super::{CLAIM_LUA, Facility, FacilityError, open, redact};
use crate::events::Event as _;
use redis::{FromRedisValue, RedisError, Value};
use std::time::Duration;

/// Slots in a Redis Cluster.
const SLOTS: u16 = 16384;

/// Redirects a single command follows before it fails; a claim round
/// likewise resends at most this often.
pub(super) const MAX_REDIRECTS: u32 = 6;

/// The key `scangate:{<facility>}:<rest>`: the only way a facility key is
/// built, so every key of a facility carries its hash tag (one slot;
/// `tests/facility_keys.rs` fails if another key builder appears).
pub fn facility_key(facility: &str, rest: impl std::fmt::Display) -> String {
    format!("scangate:{{{facility}}}:{rest}")
}

/// CRC16 (XMODEM: polynomial 0x1021, initial 0), as Redis Cluster hashes
/// keys.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The slot of `key`: of its hash tag (the text between the first `{` and
/// the next `}`, when not empty), else of the whole key.
pub fn key_slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let tag = bytes.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &bytes[open + 1..];
        rest.iter()
            .position(|&b| b == b'}')
            .filter(|&close| close > 0)
            .map(|close| &rest[..close])
    });
    crc16(tag.unwrap_or(bytes)) % SLOTS
}

/// The slot every key of `facility` is in.
pub fn facility_slot(facility: &str) -> u16 {
    key_slot(&facility_key(facility, ""))
}

/// The `host:port` of the primary that owns `slot`, as the first of
/// `settings`' `cluster` nodes that answers says (`CLUSTER SLOTS`), each
/// asked within the connect and command timeouts, with the section's
/// credentials and TLS. A node the map names by an empty address is the
/// node asked. A map that is stale (a failover or resharding it has not
/// seen yet) is corrected by the owner's `MOVED`.
pub fn owner_of(settings: &RedisSettings, slot: u16) -> Result<String, FacilityError> {
    let c = &settings.config;
    let mut said = Vec::new();
    for seed in &c.cluster {
        let url = c.url_at(Some(seed), settings.password());
        let answer = open(
            &url,
            settings.ca_pem.clone(),
            c.connect_timeout(),
            c.command_timeout(),
        )
        .and_then(|mut conn| redis::cmd("CLUSTER").arg("SLOTS").query::<Value>(&mut conn));
        let map = match answer {
            Ok(map) => map,
            Err(e) => {
                let e = failed(&redact(&url), &super::url_user(&url), e);
                if e.needs_technician() {
                    return Err(e);
                }
                said.push(format!("{seed}: {e}"));
                continue;
            }
        };
        let seed_host = seed.rsplit_once(':').map_or(seed.as_str(), |(h, _)| h);
        match owner_in(&map, slot, seed_host) {
            Some(owner) => return Ok(owner),
            None => said.push(format!("{seed}'s slot map names no reachable owner")),
        }
    }
    Err(FacilityError::NoSlotOwner {
        nodes: c.cluster.join(", "),
        slot,
        detail: said.join("; "),
    })
}

/// The primary's `host:port` for `slot` in a `CLUSTER SLOTS` reply
/// (`[[start, end, [host, port, id, …], replicas…], …]`); an empty host is
/// `seed_host`, `?` (no known address) none.
fn owner_in(map: &Value, slot: u16, seed_host: &str) -> Option<String> {
    let Value::Array(ranges) = map else {
        return None;
    };
    ranges.iter().find_map(|range| {
        let Value::Array(parts) = range else {
            return None;
        };
        let start = i64::from_redis_value_ref(parts.first()?).ok()?;
        let end = i64::from_redis_value_ref(parts.get(1)?).ok()?;
        if !(start..=end).contains(&i64::from(slot)) {
            return None;
        }
        let Value::Array(node) = parts.get(2)? else {
            return None;
        };
        let host = String::from_redis_value_ref(node.first()?).ok()?;
        let port = i64::from_redis_value_ref(node.get(1)?).ok()?;
        match host.as_str() {
            "?" => None,
            "" => Some(join(seed_host, port)),
            host => Some(join(host, port)),
        }
    })
}

/// `host:port`, an IPv6 host in brackets.
fn join(host: &str, port: i64) -> String {
    match host.contains(':') && !host.starts_with('[') {
        true => format!("[{host}]:{port}"),
        false => format!("{host}:{port}"),
    }
}

/// How a cluster node refused a command that did not run.
pub(super) enum Redirect {
    /// `MOVED`: the slot is this node's now.
    Moved(String),
    /// `ASK`: the slot is migrating, the keys are on this node: `ASKING`,
    /// then the command, there (once).
    Ask(String),
    /// `TRYAGAIN`: migrating, the command's keys split between the two
    /// nodes; sent again after a moment.
    TryAgain,
}

/// The redirect `e` is, if it is one.
pub(super) fn redirect(e: &RedisError) -> Option<Redirect> {
    match e.code()? {
        "MOVED" => Some(Redirect::Moved(e.redirect_node()?.0.to_string())),
        "ASK" => Some(Redirect::Ask(e.redirect_node()?.0.to_string())),
        "TRYAGAIN" => Some(Redirect::TryAgain),
        _ => None,
    }
}

/// The pause before the `attempt`th resend after a `TRYAGAIN` (the
/// migration of the slot's keys is under way): 10 ms, doubling.
pub(super) fn try_again_pause(attempt: u32) -> Duration {
    Duration::from_millis(10 << attempt.min(6))
}

/// What a [`Facility`] in a cluster needs to reach other nodes: the
/// section (credentials, TLS, timeouts), and the node an `ASK` named, kept
/// while the slot migrates.
pub(super) struct Nodes {
    settings: RedisSettings,
    /// The node of the last `ASK` and a connection to it, the claim script
    /// loaded.
    asked: Option<(String, redis::Connection)>,
}

impl Nodes {
    /// For a facility connected through `settings` (`cluster` set).
    pub(super) fn new(settings: &RedisSettings) -> Nodes {
        Nodes {
            settings: settings.clone(),
            asked: None,
        }
    }

    /// The connection to the node of the last `ASK`, if one is open.
    pub(super) fn asked_conn(&mut self) -> Option<&mut redis::Connection> {
        self.asked.as_mut().map(|(_, conn)| conn)
    }

    /// A connection to node `addr` (the section's credentials, TLS and
    /// timeouts), the claim script loaded; and its URL without credentials.
    fn open(&self, addr: &str) -> Result<(redis::Connection, String), RedisError> {
        let c = &self.settings.config;
        let url = c.url_at(Some(addr), self.settings.password());
        let mut conn = open(
            &url,
            self.settings.ca_pem.clone(),
            c.connect_timeout(),
            c.command_timeout(),
        )?;
        redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(CLAIM_LUA)
            .query::<String>(&mut conn)?;
        Ok((conn, redact(&url)))
    }
}

impl Facility {
    /// Whether this connection is to a Redis Cluster node.
    pub fn in_cluster(&self) -> bool {
        self.nodes.is_some()
    }

    /// Follow redirects from here on: this connection is to the node of
    /// `settings`' cluster that owned the facility's slot at connect.
    pub(super) fn set_cluster(&mut self, settings: &RedisSettings) {
        self.nodes = Some(Nodes::new(settings));
    }

    /// The slot moved to `addr` for good (`MOVED`): connect there (the
    /// script loaded) and make it this facility's connection. Not in a
    /// cluster: the refusal stands.
    pub(super) fn follow_moved(
        &mut self,
        addr: &str,
        refused: RedisError,
    ) -> Result<(), RedisError> {
        let Some(nodes) = &mut self.nodes else {
            return Err(refused);
        };
        let (conn, url) = nodes.open(addr)?;
        nodes.asked = None;
        crate::events::SlotMoved {
            from: &self.url,
            to: &url,
        }
        .emit();
        self.conn = conn;
        self.url = url;
        Ok(())
    }

    /// Drop the connection to the node of the last `ASK`.
    fn forget_asked(&mut self) {
        if let Some(nodes) = &mut self.nodes {
            nodes.asked = None;
        }
    }

    /// The connection to `addr`, the node an `ASK` named (opened once per
    /// node, the script loaded). Not in a cluster: the refusal stands.
    pub(super) fn asked(
        &mut self,
        addr: &str,
        refused: RedisError,
    ) -> Result<&mut redis::Connection, RedisError> {
        let Some(nodes) = &mut self.nodes else {
            return Err(refused);
        };
        if nodes.asked.as_ref().is_none_or(|(a, _)| a != addr) {
            let (conn, _) = nodes.open(addr)?;
            nodes.asked = Some((addr.to_string(), conn));
        }
        Ok(&mut nodes.asked.as_mut().expect("opened above").1)
    }

    /// Run `cmd` on the facility's node, following the cluster's
    /// redirects (each proves the command did not run): `MOVED` makes the
    /// node named the facility's connection, `ASK` sends `ASKING` and the
    /// command to the node named, `TRYAGAIN` sends it again after a pause;
    /// at most [`MAX_REDIRECTS`] times. Outside a cluster, `cmd` once.
    pub(super) fn run<T: FromRedisValue>(&mut self, cmd: &redis::Cmd) -> Result<T, RedisError> {
        let mut attempt = 0;
        let mut ask: Option<String> = None;
        loop {
            let result = match ask.take() {
                None => cmd.query::<T>(&mut self.conn),
                Some(addr) => {
                    let refused =
                        RedisError::from((redis::ErrorKind::Client, "ASK outside a Redis Cluster"));
                    let conn = self.asked(&addr, refused)?;
                    let answer = redis::pipe()
                        .cmd("ASKING")
                        .ignore()
                        .add_command(cmd.clone())
                        .query::<(T,)>(conn)
                        .map(|(v,)| v);
                    if answer.as_ref().is_err_and(|e| e.code().is_none()) {
                        // Not the node's answer: the connection failed.
                        self.forget_asked();
                    }
                    answer
                }
            };
            let e = match result {
                Err(e) if self.nodes.is_some() && attempt < MAX_REDIRECTS => e,
                done => return done,
            };
            attempt += 1;
            match redirect(&e) {
                Some(Redirect::Moved(addr)) => self.follow_moved(&addr, e)?,
                Some(Redirect::Ask(addr)) => ask = Some(addr),
                Some(Redirect::TryAgain) => std::thread::sleep(try_again_pause(attempt)),
                None => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_clusters() {
        // The CRC16 check value, and slots Redis's CLUSTER KEYSLOT gives.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot("scangate:{f1}:x"), 2046);
        assert_eq!(key_slot("f1"), 2046);
        assert_eq!(key_slot("foo{}{bar}"), key_slot("foo{}{bar}"));
        assert_eq!(key_slot("{}x"), crc16(b"{}x") % SLOTS);
        assert_eq!(facility_slot("f1"), 2046);
        assert_eq!(
            key_slot(&facility_key("a pharmacy", "scan:u")),
            key_slot("a pharmacy")
        );
    }

    #[test]
    fn the_owner_is_read_from_the_slot_map() {
        let node = |host: &str, port: i64| {
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let range = |a: i64, b: i64, host: &str, port: i64| {
            Value::Array(vec![
                Value::Int(a),
                Value::Int(b),
                node(host, port),
                node("10.0.0.9", 7000),
            ])
        };
        let map = Value::Array(vec![
            range(0, 5460, "10.0.0.1", 6379),
            range(5461, 10922, "", 6380),
            range(10923, 16383, "?", 6381),
        ]);
        assert_eq!(owner_in(&map, 0, "seed").as_deref(), Some("10.0.0.1:6379"));
        assert_eq!(owner_in(&map, 5461, "seed").as_deref(), Some("seed:6380"));
        assert_eq!(owner_in(&map, 16383, "seed"), None);
        let v6 = Value::Array(vec![range(0, 16383, "::1", 6379)]);
        assert_eq!(owner_in(&v6, 7, "seed").as_deref(), Some("[::1]:6379"));
    }
}
