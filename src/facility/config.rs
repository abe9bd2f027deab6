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
    /// `redis://host:port/db` or, with TLS, `rediss://…`.
    pub url: String,
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
    /// Replicas that must acknowledge each claim batch (`WAIT`); 0 = off.
    #[serde(default)]
    pub min_replicas_ack: u32,
    /// Claim a scan only once its capture maps to facility time within
    /// ± this many ms (the boot stamp through the facility clock's
    /// samples, see `gate/facility_time.rs`); until then it waits
    /// unresolved. At most a quarter of `[dedup] window_ms`.
    #[serde(default = "default_max_clock_error_ms")]
    pub max_clock_error_ms: u64,
    /// Gone: replaced by facility time and `max_clock_error_ms` (refused
    /// with that message, see [`RedisConfig::validate`]).
    #[serde(default)]
    pub require_synced_clock: Option<toml::Value>,
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
        if !(self.url.starts_with("redis://") || self.url.starts_with("rediss://")) {
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
        if self.min_replicas_ack > 16 {
            return Err(Invalid::new(
                "min_replicas_ack",
                format!("{} is out of range", self.min_replicas_ack),
                "use 0 (off) to 16",
            ));
        }
        Ok(())
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
        let password = match password_path {
            None => None,
            Some(path) => Some(
                std::fs::read_to_string(&path)
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
            ca_pem,
        })
    }

    /// The URL with the user name and password filled in.
    pub fn url_with_credentials(&self, password: Option<&str>) -> String {
        let (scheme, rest) = self.url.split_once("://").unwrap_or(("redis", &self.url));
        let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
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
    /// The CA certificate(s) from `ca_file`, if set.
    pub ca_pem: Option<Vec<u8>>,
}

impl RedisSettings {
    /// The URL with the user name and password filled in (a secret: never
    /// log it; [`super::redact`] the configured `url` instead).
    pub fn url(&self) -> String {
        self.config.url_with_credentials(self.password.as_deref())
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
        assert_eq!(r.min_replicas_ack, 0);
        assert_eq!(r.max_clock_error_ms, 250);
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
        let e = Config::parse("[redis]\nurl = \"redis://u:secret@x\"\n", None).unwrap_err();
        assert!(!e.to_string().contains("secret"), "{e}");
    }
}
