//! `[redis]`: where the facility store is and how to reach it. Without this
//! section the gateway runs embedded (its own SQLite is the exact store).

use crate::invalid::Invalid;
use serde::Deserialize;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// The `[redis]` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisConfig {
    /// `redis://host:port/db` or, with TLS, `rediss://…`. With
    /// `sentinels`, optional and without a host (`rediss:///0`): only its
    /// scheme (TLS or not, to the sentinels too) and database are used, the
    /// primary's address comes from the sentinels. Empty = not set.
    #[serde(default)]
    pub url: String,
    /// Redis Sentinel addresses (`host:port`), asked in order for the
    /// current primary of `service_name` at every connect, so a failover is
    /// followed without a restart. Empty = no Sentinel (`url` names the
    /// server).
    #[serde(default)]
    pub sentinels: Vec<String>,
    /// The name the sentinels monitor the facility's primary by
    /// (`sentinel monitor <name> …`); set exactly when `sentinels` is.
    #[serde(default)]
    pub service_name: Option<String>,
    /// Redis Cluster seed nodes (`host:port`): at every connect the first
    /// that answers is asked for the slot map (`CLUSTER SLOTS`), and each
    /// lane connects to the primary that owns the facility's slot (its
    /// keys share one hash tag). Empty = not a cluster. Not with
    /// `sentinels`; `url` then gives only the scheme, as with sentinels.
    #[serde(default)]
    pub cluster: Vec<String>,
    /// ACL user name (Redis 6+); none = the default user.
    #[serde(default)]
    pub username: Option<String>,
    /// File holding the password. Without it, `$CREDENTIALS_DIRECTORY/redis-password`
    /// (systemd `LoadCredential=`) is used when present.
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// With `rediss://`: PEM file of the CA that signed the server's
    /// certificate. Default: the system's trust store.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Connecting gives up after this long (ms).
    #[serde(default = "default_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// A command's reply is awaited this long (ms); then the claim is
    /// retried later with the same scan UUIDs.
    #[serde(default = "default_timeout_ms")]
    pub command_timeout_ms: u64,
    /// Replicas that must acknowledge each claim batch (`WAIT`) before its
    /// scans count as decided: `"auto"` (default: every replica the primary
    /// reports connected), or a number (0 = off).
    #[serde(default)]
    pub min_replicas_ack: ReplicaAck,
    /// Claim a scan only once its capture maps to facility time within
    /// ± this many ms (the boot stamp through the facility clock's
    /// samples, see `claimer/facility_time.rs`); until then it waits
    /// unresolved. At most a quarter of `[dedup] window_ms`.
    #[serde(default = "default_max_clock_error_ms")]
    pub max_clock_error_ms: u64,
    /// Days the facility ledger stream keeps an entry even once every
    /// consumer group has acknowledged it (for `ledger export` without
    /// `--follow`, and a consumer group added later). Entries some group
    /// has not acknowledged are never trimmed; without any group nothing
    /// is (0..=3650, default 7).
    #[serde(default = "default_ledger_stream_keep_days")]
    pub ledger_stream_keep_days: u64,
}

/// How many replicas must confirm a claim round (`min_replicas_ack`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplicaAck {
    /// Every replica the primary reports connected (`INFO replication`
    /// `connected_slaves`, read at connect and every minute); none when
    /// none is.
    #[default]
    Auto,
    /// Exactly this many (0 = off).
    Exactly(u32),
}

impl ReplicaAck {
    /// The replicas to wait for when the primary reports `connected`.
    pub fn wanted(self, connected: u32) -> u32 {
        match self {
            ReplicaAck::Auto => connected,
            ReplicaAck::Exactly(n) => n,
        }
    }
}

impl<'de> Deserialize<'de> for ReplicaAck {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = ReplicaAck;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("\"auto\" or a number of replicas (0 = off)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ReplicaAck, E> {
                match v {
                    "auto" => Ok(ReplicaAck::Auto),
                    _ => Err(E::custom(format!(
                        "{} is neither \"auto\" nor a number of replicas (0 = off)",
                        crate::invalid::shown(v)
                    ))),
                }
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<ReplicaAck, E> {
                u32::try_from(v).map(ReplicaAck::Exactly).map_err(|_| {
                    E::custom(format!("{v} is not a number of replicas (0 = off, to 16)"))
                })
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ReplicaAck, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(-1))
            }
        }
        d.deserialize_any(Visitor)
    }
}

fn default_ledger_stream_keep_days() -> u64 {
    7
}

fn default_max_clock_error_ms() -> u64 {
    250
}

fn default_timeout_ms() -> u64 {
    1000
}

impl RedisConfig {
    /// Check the values (no network access, no file read); keys are named
    /// inside `[redis]` (`url`).
    pub fn validate(&self) -> Result<(), Invalid> {
        self.validate_sentinels()?;
        self.validate_cluster()?;
        if self.url.is_empty() && (self.uses_sentinel() || self.is_cluster()) {
            // Plain redis:// to the sentinels (or nodes) and the primary, database 0.
        } else if !(self.url.starts_with("redis://") || self.url.starts_with("rediss://")) {
            return Err(Invalid::new(
                "url",
                format!(
                    "{} is not a redis:// or rediss:// URL",
                    crate::invalid::shown(&redact(&self.url))
                ),
                "write e.g. url = \"redis://redis.pharmacy.lan:6379/0\" (rediss:// for TLS)",
            ));
        }
        let authority = self.url.split_once("://").map_or("", |(_, r)| r);
        let userinfo = authority.split('/').next().unwrap_or("").rsplit_once('@');
        if userinfo.is_some_and(|(info, _)| info.contains(':')) {
            return Err(Invalid::new(
                "url",
                "the URL carries a password",
                "put the password in password_file (or a systemd credential) and remove it from the URL",
            ));
        }
        if self.ca_file.is_some() && !self.url.starts_with("rediss://") {
            return Err(Invalid::new(
                "ca_file",
                "a CA file is set but the URL is not rediss:// (TLS)",
                "use a rediss:// URL, or remove ca_file",
            ));
        }
        for (key, v) in [
            ("connect_timeout_ms", self.connect_timeout_ms),
            ("command_timeout_ms", self.command_timeout_ms),
        ] {
            if !(10..=60_000).contains(&v) {
                return Err(Invalid::new(
                    key,
                    format!("{v} is out of range"),
                    "use 10..=60000 ms (default 1000)",
                ));
            }
        }
        if !(1..=60_000).contains(&self.max_clock_error_ms) {
            return Err(Invalid::new(
                "max_clock_error_ms",
                format!("{} is out of range", self.max_clock_error_ms),
                "use 1..=60000 ms, at most a quarter of [dedup] window_ms (default 250)",
            ));
        }
        if self.ledger_stream_keep_days > 3650 {
            return Err(Invalid::new(
                "ledger_stream_keep_days",
                format!("{} is out of range", self.ledger_stream_keep_days),
                "use 0..=3650 days (default 7)",
            ));
        }
        if let ReplicaAck::Exactly(n @ 17..) = self.min_replicas_ack {
            return Err(Invalid::new(
                "min_replicas_ack",
                format!("{n} is out of range"),
                "use \"auto\" (every connected replica, the default), or 0 (off) to 16",
            ));
        }
        Ok(())
    }

    /// `sentinels` and `service_name` come together; with them `url`
    /// names no host (the sentinels name the primary).
    fn validate_sentinels(&self) -> Result<(), Invalid> {
        let example = "e.g. sentinels = [\"redis-a.pharmacy.lan:26379\", \"redis-b.pharmacy.lan:26379\"] and service_name = \"scangate\"";
        match (self.sentinels.is_empty(), &self.service_name) {
            (true, None) => {
                if self.url.is_empty() && !self.is_cluster() {
                    return Err(Invalid::new(
                        "url",
                        "neither url nor sentinels nor cluster is set",
                        "write url = \"redis://redis.pharmacy.lan:6379/0\" (rediss:// for TLS), or name the Redis Sentinels (sentinels and service_name), or a Redis Cluster's nodes (cluster)",
                    ));
                }
                return Ok(());
            }
            (true, Some(_)) => {
                return Err(Invalid::new(
                    "service_name",
                    "service_name is set but sentinels is not",
                    format!("name the sentinels too, {example}; or remove service_name"),
                ));
            }
            (false, None) => {
                return Err(Invalid::new(
                    "service_name",
                    "sentinels is set but service_name is not",
                    "write the name the sentinels monitor the primary by (`sentinel monitor NAME …` in sentinel.conf), e.g. service_name = \"scangate\"",
                ));
            }
            (false, Some(name)) if name.is_empty() || name.contains(char::is_whitespace) => {
                return Err(Invalid::new(
                    "service_name",
                    format!(
                        "{} is not a Sentinel master name",
                        crate::invalid::shown(name)
                    ),
                    "write the name from `sentinel monitor NAME …` in sentinel.conf",
                ));
            }
            (false, Some(_)) => {}
        }
        host_ports(
            "sentinels",
            &self.sentinels,
            &format!("write each sentinel as host:port, {example}"),
        )?;
        self.url_names_no_server("with sentinels the primary's address comes from them")
    }

    /// `cluster` names seed nodes as `host:port`, not with `sentinels`;
    /// with it `url` names no host (the slot map names the primary) and no
    /// database but 0 (a cluster has no other).
    fn validate_cluster(&self) -> Result<(), Invalid> {
        if !self.is_cluster() {
            return Ok(());
        }
        if self.uses_sentinel() {
            return Err(Invalid::new(
                "cluster",
                "both cluster and sentinels are set",
                "a Redis Cluster fails over by itself: keep cluster (its nodes) and remove sentinels and service_name, or the other way round",
            ));
        }
        host_ports(
            "cluster",
            &self.cluster,
            "write each node as host:port, e.g. cluster = [\"redis-1.chain.lan:6379\", \"redis-2.chain.lan:6379\"] (a few are enough: the others are learnt from them)",
        )?;
        self.url_names_no_server(
            "with cluster the primary's address comes from the cluster's slot map",
        )?;
        let db = self.url.split_once("://").map_or("", |(_, r)| r);
        let db = db.split('?').next().unwrap_or("").trim_start_matches('/');
        if !db.is_empty() && db != "0" {
            return Err(Invalid::new(
                "url",
                format!(
                    "{} names database {db}, but a Redis Cluster has only database 0",
                    crate::invalid::shown(&redact(&self.url))
                ),
                "leave url out, or write only the scheme, e.g. url = \"rediss://\" for TLS",
            ));
        }
        Ok(())
    }

    /// `url`, with sentinels or a cluster, must name no server: `why`.
    fn url_names_no_server(&self, why: &str) -> Result<(), Invalid> {
        if let Some((_, rest)) = self.url.split_once("://")
            && !rest.starts_with('/')
            && !rest.is_empty()
        {
            return Err(Invalid::new(
                "url",
                format!(
                    "{} names a server, but {why}",
                    crate::invalid::shown(&redact(&self.url))
                ),
                "leave url out, or keep only the scheme and database, e.g. url = \"rediss:///0\" for TLS",
            ));
        }
        Ok(())
    }

    /// Whether the facility's primary is found in a Redis Cluster's slot map.
    pub fn is_cluster(&self) -> bool {
        !self.cluster.is_empty()
    }

    /// Whether the primary is found through Redis Sentinel.
    pub fn uses_sentinel(&self) -> bool {
        !self.sentinels.is_empty()
    }

    /// `redis` or `rediss` (TLS).
    pub fn scheme(&self) -> &str {
        match self.url.split_once("://") {
            Some(("rediss", _)) => "rediss",
            _ => "redis",
        }
    }

    /// How long the ledger stream keeps acknowledged entries, in ms.
    pub fn ledger_keep_ms(&self) -> i64 {
        self.ledger_stream_keep_days as i64 * 86_400_000
    }

    /// The connect timeout.
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }

    /// The command timeout.
    pub fn command_timeout(&self) -> Duration {
        Duration::from_millis(self.command_timeout_ms)
    }

    /// The file the password is read from: `password_file`, else the
    /// systemd credential (`$CREDENTIALS_DIRECTORY/redis-password`) when
    /// it is there; `None`: no password is sent.
    pub fn password_path(&self) -> Option<PathBuf> {
        match (
            &self.password_file,
            std::env::var_os("CREDENTIALS_DIRECTORY"),
        ) {
            (Some(p), _) => Some(p.clone()),
            (None, Some(dir)) => {
                Some(PathBuf::from(dir).join("redis-password")).filter(|p| p.exists())
            }
            (None, None) => None,
        }
    }

    /// Read the secrets: the password from `password_file` or the systemd
    /// credential ([`RedisConfig::password_path`]), and the CA from
    /// `ca_file`, each a regular file within its limit
    /// ([`crate::files::named`]). Once, at start-up; `run`, `check-config`
    /// and `ledger export` all go through here.
    pub fn resolve(&self) -> Result<RedisSettings, Invalid> {
        use crate::files::named::{CA_LIMIT, SECRET_LIMIT, read, read_to_string};
        let password_path = self.password_path();
        let password = match &password_path {
            None => None,
            Some(path) => Some(
                read_to_string(path, SECRET_LIMIT)
                    .map(|s| s.trim_end_matches(['\n', '\r']).to_string())
                    .map_err(|e| {
                        Invalid::new(
                            "password_file",
                            format!(
                                "cannot read the Redis password from {}: {e}",
                                path.display()
                            ),
                            e.fix(
                                "password file",
                                "check [redis] password_file and that the service user may read it",
                            ),
                        )
                    })?,
            ),
        };
        let ca_pem = match &self.ca_file {
            None => None,
            Some(path) => Some(read(path, CA_LIMIT).map_err(|e| {
                Invalid::new(
                    "ca_file",
                    format!("cannot read the Redis CA file {}: {e}", path.display()),
                    e.fix(
                        "CA file (PEM)",
                        "check [redis] ca_file and that the service user may read it",
                    ),
                )
            })?),
        };
        Ok(RedisSettings {
            config: self.clone(),
            password,
            password_source: match (&self.password_file, password_path) {
                (Some(p), _) => format!("[redis] password_file ({})", p.display()),
                (None, Some(p)) => format!("the systemd credential redis-password ({})", p.display()),
                (None, None) => "[redis] password_file (none is set and there is no systemd credential redis-password, so no password was sent)".into(),
            },
            ca_pem,
        })
    }

    /// The URL with the user name and password filled in.
    pub fn url_with_credentials(&self, password: Option<&str>) -> String {
        self.url_at(None, password)
    }

    /// [`RedisConfig::url_with_credentials`], the server at `addr`
    /// (`host:port`, e.g. the primary a sentinel named) instead of the
    /// URL's.
    pub fn url_at(&self, addr: Option<&str>, password: Option<&str>) -> String {
        let (scheme, rest) = self.url.split_once("://").unwrap_or(("redis", &self.url));
        let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
        let relocated;
        let rest = match addr {
            None => rest,
            Some(addr) => {
                relocated = format!("{addr}{}", rest.find('/').map_or("/", |i| &rest[i..]));
                &relocated
            }
        };
        let enc = |s: &str| -> String {
            s.bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                        (b as char).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect()
        };
        match (self.username.as_deref(), password) {
            (None, None) => format!("{scheme}://{rest}"),
            (user, pass) => format!(
                "{scheme}://{}:{}@{rest}",
                enc(user.unwrap_or("")),
                enc(pass.unwrap_or(""))
            ),
        }
    }
}

/// Each of `addrs` (the list `key`) is `host:port`, else `fix`.
fn host_ports(key: &str, addrs: &[String], fix: &str) -> Result<(), Invalid> {
    for (i, addr) in addrs.iter().enumerate() {
        let port = addr
            .rsplit_once(':')
            .map(|(host, port)| (host, port.parse::<u16>()));
        if !matches!(port, Some((host, Ok(1..))) if !host.is_empty() && !host.contains('/')) {
            return Err(Invalid::new(
                format!("{key}[{i}]"),
                format!("{} is not host:port", crate::invalid::shown(addr)),
                fix,
            ));
        }
    }
    Ok(())
}

/// `[redis]` with its secrets read ([`RedisConfig::resolve`]). Its `Debug`
/// shows no secret.
#[derive(Clone)]
pub struct RedisSettings {
    /// The section as written.
    pub config: RedisConfig,
    password: Option<String>,
    /// Where the password was read from, for messages.
    password_source: String,
    /// The CA certificate(s) from `ca_file`, if set.
    pub ca_pem: Option<Vec<u8>>,
}

impl RedisSettings {
    /// Where the password comes from, for a technician: `[redis]
    /// password_file (PATH)`, the systemd credential, or that none is set.
    pub fn password_source(&self) -> &str {
        &self.password_source
    }

    /// The URL with the user name and password filled in (a secret: never
    /// log it; [`redact`] the configured `url` instead).
    pub fn url(&self) -> String {
        self.config.url_with_credentials(self.password.as_deref())
    }

    /// The password, if one is set (a secret: never log it).
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }
}

impl fmt::Debug for RedisSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSettings")
            .field("url", &redact(&self.config.url))
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("ca_pem", &self.ca_pem.as_ref().map(Vec::len))
            .finish()
    }
}

/// `url` without a password, for messages and logs.
pub fn redact(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.rsplit_once('@') {
            Some((_, host)) => format!("{scheme}://***@{host}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}
