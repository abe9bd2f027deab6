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
    /// samples, see `gate/facility_time.rs`); until then it waits
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
    /// Gone: replaced by facility time and `max_clock_error_ms` (refused
    /// with that message, see [`RedisConfig::validate`]).
    #[serde(default)]
    pub require_synced_clock: Option<toml::Value>,
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
                        "{v:?} is neither \"auto\" nor a number of replicas (0 = off)"
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
        if self.url.is_empty() && !self.sentinels.is_empty() {
            // Plain redis:// to the sentinels and the primary, database 0.
        } else if !(self.url.starts_with("redis://") || self.url.starts_with("rediss://")) {
            return Err(Invalid::new(
                "url",
                format!(
                    "{:?} is not a redis:// or rediss:// URL",
                    super::redact(&self.url)
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
        if self.require_synced_clock.is_some() {
            return Err(Invalid::new(
                "require_synced_clock",
                "this key is gone: a gateway now claims on the facility Redis's clock (each capture's boot-clock stamp mapped through measurements of it), whether or not its own wall clock is NTP-synchronised",
                "remove require_synced_clock; max_clock_error_ms (default 250) bounds how far a capture's facility time may be off before its scan waits",
            ));
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
                if self.url.is_empty() {
                    return Err(Invalid::new(
                        "url",
                        "neither url nor sentinels is set",
                        "write url = \"redis://redis.pharmacy.lan:6379/0\" (rediss:// for TLS), or name the Redis Sentinels (sentinels and service_name)",
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
                    format!("{name:?} is not a Sentinel master name"),
                    "write the name from `sentinel monitor NAME …` in sentinel.conf",
                ));
            }
            (false, Some(_)) => {}
        }
        for (i, addr) in self.sentinels.iter().enumerate() {
            let port = addr
                .rsplit_once(':')
                .map(|(host, port)| (host, port.parse::<u16>()));
            if !matches!(port, Some((host, Ok(1..))) if !host.is_empty() && !host.contains('/')) {
                return Err(Invalid::new(
                    format!("sentinels[{i}]"),
                    format!("{addr:?} is not host:port"),
                    format!("write each sentinel as host:port, {example}"),
                ));
            }
        }
        if let Some((_, rest)) = self.url.split_once("://")
            && !rest.starts_with('/')
            && !rest.is_empty()
        {
            return Err(Invalid::new(
                "url",
                format!(
                    "{:?} names a server, but with sentinels the primary's address comes from them",
                    super::redact(&self.url)
                ),
                "leave url out, or keep only the scheme and database, e.g. url = \"rediss:///0\" for TLS",
            ));
        }
        Ok(())
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

    /// Read the secrets: the password from `password_file` or the systemd
    /// credential (`$CREDENTIALS_DIRECTORY/redis-password`, when present),
    /// and the CA from `ca_file`. Once, at start-up; `run`, `check-config`
    /// and `ledger export` all go through here.
    pub fn resolve(&self) -> Result<RedisSettings, Invalid> {
        let password_path = match (
            &self.password_file,
            std::env::var_os("CREDENTIALS_DIRECTORY"),
        ) {
            (Some(p), _) => Some(p.clone()),
            (None, Some(dir)) => {
                Some(PathBuf::from(dir).join("redis-password")).filter(|p| p.exists())
            }
            (None, None) => None,
        };
        let password = match &password_path {
            None => None,
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .map(|s| s.trim_end_matches(['\n', '\r']).to_string())
                    .map_err(|e| {
                        Invalid::new(
                            "password_file",
                            format!(
                                "cannot read the Redis password from {}: {e}",
                                path.display()
                            ),
                            "check [redis] password_file and that the service user may read it",
                        )
                    })?,
            ),
        };
        let ca_pem = match &self.ca_file {
            None => None,
            Some(path) => Some(std::fs::read(path).map_err(|e| {
                Invalid::new(
                    "ca_file",
                    format!("cannot read the Redis CA file {}: {e}", path.display()),
                    "check [redis] ca_file and that the service user may read it",
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

    /// Connect to the primary ([`RedisSettings::primary_url`]) for `cfg`'s
    /// facility, window and retention, with this section's CA and
    /// timeouts; refused credentials name where the password came from.
    /// For the commands (`check-config --online`, `ledger export`, `audit
    /// verify`); the claimer connects through its own link.
    pub fn connect(
        &self,
        cfg: &crate::config::Config,
    ) -> Result<super::Facility, super::FacilityError> {
        let url = self.primary_url()?;
        super::Facility::connect_with_ca(
            &url,
            self.ca_pem.clone(),
            &cfg.gateway.facility,
            cfg.window_ms(),
            Duration::from_secs(cfg.dedup.retention_hours * 3600),
            self.config.connect_timeout(),
            self.config.command_timeout(),
        )
        .map_err(|e| self.name_credential(e))
    }

    /// `e`, if the server refused the credentials
    /// ([`super::FacilityError::AuthRefused`]), naming where the password
    /// came from.
    pub fn name_credential(&self, e: super::FacilityError) -> super::FacilityError {
        match e {
            super::FacilityError::AuthRefused {
                url, user, detail, ..
            } => super::FacilityError::AuthRefused {
                url,
                user,
                detail,
                credential: self.password_source.clone(),
            },
            e => e,
        }
    }

    /// The URL with the user name and password filled in (a secret: never
    /// log it; [`super::redact`] the configured `url` instead).
    pub fn url(&self) -> String {
        self.config.url_with_credentials(self.password.as_deref())
    }

    /// The URL of the primary (a secret, as [`RedisSettings::url`]): with
    /// `sentinels`, the server they name now
    /// ([`super::sentinel::primary_of`]), else `url`.
    pub fn primary_url(&self) -> Result<String, super::FacilityError> {
        let c = &self.config;
        match &c.service_name {
            Some(service) if c.uses_sentinel() => {
                let addr = super::sentinel::primary_of(
                    &c.sentinels,
                    service,
                    c.scheme(),
                    self.ca_pem.as_deref(),
                    c.connect_timeout(),
                    c.command_timeout(),
                )?;
                Ok(c.url_at(Some(&addr), self.password.as_deref()))
            }
            _ => Ok(self.url()),
        }
    }
}

impl fmt::Debug for RedisSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSettings")
            .field("url", &super::redact(&self.config.url))
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("ca_pem", &self.ca_pem.as_ref().map(Vec::len))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::path::Path;

    /// The commented `[redis]` block of the shipped example, uncommented.
    fn example_redis_block() -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/scangate.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let start = text
            .find("# [redis]\n")
            .expect("the example documents [redis]");
        text[start..]
            .lines()
            .filter_map(|l| l.strip_prefix("# "))
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_documented_redis_section_parses_with_its_defaults() {
        let c = Config::parse(&example_redis_block(), None).unwrap();
        let r = c.redis.unwrap();
        assert_eq!(r.url, "rediss://redis.pharmacy.lan:6379/0");
        assert!(r.ca_file.is_some());
        assert_eq!((r.connect_timeout_ms, r.command_timeout_ms), (1000, 1000));
        assert_eq!(r.min_replicas_ack, super::ReplicaAck::Auto);
        assert_eq!(r.max_clock_error_ms, 250);
        assert_eq!(r.ledger_stream_keep_days, 7);
        assert_eq!(
            r.url_with_credentials(Some("p@ss word")),
            "rediss://scangate:p%40ss%20word@redis.pharmacy.lan:6379/0"
        );
    }

    /// The example tells a technician the same ACL grants as the refusal
    /// message (`facility::ACL_GRANTS`, which a test runs a gateway with).
    #[test]
    fn the_documented_acl_grants_are_the_ones_scangate_needs() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/scangate.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let documented: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# #"))
            .skip_while(|l| !l.contains("ACL SETUSER"))
            .take_while(|l| !l.contains("(the claim script"))
            .flat_map(str::split_whitespace)
            .filter(|w| w.starts_with(['+', '-', '~']) || w.starts_with("reset"))
            .collect();
        let needed: Vec<&str> = crate::facility::ACL_GRANTS.split_whitespace().collect();
        assert_eq!(documented, needed);
    }

    #[test]
    fn sentinels_name_the_primary_and_url_keeps_scheme_and_database() {
        use super::ReplicaAck;
        let text = "[redis]\nurl = \"rediss:///2\"\nusername = \"u\"\n\
                    sentinels = [\"s1:26379\", \"[::1]:26380\"]\nservice_name = \"scangate\"\n\
                    min_replicas_ack = 0\n";
        let r = Config::parse(text, None).unwrap().redis.unwrap();
        assert!(r.uses_sentinel());
        assert_eq!(r.scheme(), "rediss");
        assert_eq!(r.min_replicas_ack, ReplicaAck::Exactly(0));
        assert_eq!(
            r.url_at(Some("10.0.0.7:6379"), Some("pw")),
            "rediss://u:pw@10.0.0.7:6379/2"
        );
        let text = "[redis]\nsentinels = [\"s1:26379\"]\nservice_name = \"m\"\nmin_replicas_ack = \"auto\"\n";
        let r = Config::parse(text, None).unwrap().redis.unwrap();
        assert_eq!(
            (r.scheme(), r.min_replicas_ack),
            ("redis", ReplicaAck::Auto)
        );
        assert_eq!(r.url_at(Some("h:1"), None), "redis://h:1/");
        assert_eq!(ReplicaAck::Auto.wanted(2), 2);
        assert_eq!(ReplicaAck::Exactly(1).wanted(2), 1);
    }

    #[test]
    fn bad_redis_values_name_the_key() {
        let bad = |text: &str| Config::parse(text, None).unwrap_err().key;
        assert_eq!(bad("[redis]\nurl = \"http://x\"\n"), "redis.url");
        assert_eq!(bad("[redis]\nurl = \"redis://u:secret@x\"\n"), "redis.url");
        assert_eq!(
            bad("[redis]\nurl = \"redis://x\"\ncommand_timeout_ms = 0\n"),
            "redis.command_timeout_ms"
        );
        assert_eq!(
            bad("[redis]\nurl = \"redis://x\"\nmax_retries = 3\n"),
            "redis.max_retries"
        );
        assert_eq!(bad("[redis]\ncommand_timeout_ms = 100\n"), "redis.url");
        assert_eq!(
            bad("[redis]\nurl = \"redis://x\"\nmin_replicas_ack = \"all\"\n"),
            "redis.min_replicas_ack"
        );
        assert_eq!(
            bad("[redis]\nurl = \"redis://x\"\nmin_replicas_ack = 17\n"),
            "redis.min_replicas_ack"
        );
        assert_eq!(
            bad("[redis]\nsentinels = [\"s1:26379\"]\n"),
            "redis.service_name"
        );
        assert_eq!(
            bad("[redis]\nurl = \"redis://x\"\nservice_name = \"m\"\n"),
            "redis.service_name"
        );
        assert_eq!(
            bad("[redis]\nsentinels = [\"s1\"]\nservice_name = \"m\"\n"),
            "redis.sentinels[0]"
        );
        assert_eq!(
            bad(
                "[redis]\nurl = \"redis://x:6379/0\"\nsentinels = [\"s1:26379\"]\nservice_name = \"m\"\n"
            ),
            "redis.url"
        );
        let e = Config::parse("[redis]\nurl = \"redis://u:secret@x\"\n", None).unwrap_err();
        assert!(!e.to_string().contains("secret"), "{e}");
    }
}
