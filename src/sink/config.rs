//! `[[sink]]`: an inventory system's URL the daemon POSTs the ledger to
//! ([`SinkConfig`]), checked ([`SinkConfig::validate`]) and with the files
//! it names read ([`SinkConfig::resolve`]: the CA, the bearer token or the
//! basic-auth credentials; never a secret in the config itself).

use crate::invalid::Invalid;
use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a sink sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SinkFormat {
    /// scangate's JSON lines (`ledger export`), one entry a line
    /// (`application/x-ndjson`).
    Json,
    /// One EPCIS 2.0 `EPCISDocument` per batch (`application/ld+json`).
    Epcis,
}

impl SinkFormat {
    /// `json` or `epcis`, as configured.
    pub fn as_str(self) -> &'static str {
        match self {
            SinkFormat::Json => "json",
            SinkFormat::Epcis => "epcis",
        }
    }
}

/// One `[[sink]]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkConfig {
    /// Its name (1-64 letters, digits, `-`, `_`, `.`): the ledger consumer
    /// `sink.<name>`, the metrics' `sink` label.
    pub name: String,
    /// `http://…` or `https://…`: where each batch is POSTed.
    pub url: String,
    /// `json` (default) or `epcis`.
    #[serde(default = "default_format")]
    pub format: SinkFormat,
    /// Entries per POST (1..=1000, default 100).
    #[serde(default = "default_batch")]
    pub batch: usize,
    /// A POST (connect, send, answer) gives up after this long (ms;
    /// 100..=300000, default 10000) and is retried.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// PEM file of the CA(s) that signed the receiver's certificate.
    /// Default: the system's trust store.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// File holding a bearer token (`Authorization: Bearer …`).
    #[serde(default)]
    pub bearer_token_file: Option<PathBuf>,
    /// File holding `user:password` (`Authorization: Basic …`).
    #[serde(default)]
    pub basic_auth_file: Option<PathBuf>,
}

fn default_format() -> SinkFormat {
    SinkFormat::Json
}
fn default_batch() -> usize {
    100
}
fn default_timeout_ms() -> u64 {
    10_000
}

/// The ledger consumer name of sink `name`.
pub fn consumer_name(name: &str) -> String {
    format!("sink.{name}")
}

impl SinkConfig {
    /// The URL as logs, `status` and `check-config` show it: without its
    /// query, which may carry a key (`?code=…`).
    pub fn shown_url(&self) -> String {
        match self.url.split_once('?') {
            Some((base, _)) => format!("{base}?…"),
            None => self.url.clone(),
        }
    }

    /// Check the values; keys are named relative to the table (the caller
    /// adds `sink[i]`).
    pub fn validate(&self) -> Result<(), Invalid> {
        let ident = !self.name.is_empty()
            && self.name.len() <= 59
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
        if !ident {
            return Err(Invalid::new(
                "name",
                format!("{:?} is not a sink name", self.name),
                "use 1-59 letters, digits, '-', '_' or '.' (it names the ledger consumer sink.<name>)",
            ));
        }
        let (scheme, rest) = self.url.split_once("://").unwrap_or(("", ""));
        let host = rest.split(['/', '?', '#']).next().unwrap_or("");
        if !matches!(scheme, "http" | "https") || host.is_empty() {
            return Err(Invalid::new(
                "url",
                format!("{:?} is not an http:// or https:// URL", self.shown_url()),
                "write e.g. url = \"https://inventory.pharmacy.lan/scangate/ledger\"",
            ));
        }
        if host.contains('@') {
            return Err(Invalid::new(
                "url",
                "the URL carries credentials",
                "put them in bearer_token_file or basic_auth_file and remove them from the URL",
            ));
        }
        if self.ca_file.is_some() && scheme != "https" {
            return Err(Invalid::new(
                "ca_file",
                "a CA file is set but the URL is not https://",
                "use an https:// URL, or remove ca_file",
            ));
        }
        if !(1..=1000).contains(&self.batch) {
            return Err(Invalid::new(
                "batch",
                format!("{} is out of range", self.batch),
                "use 1..=1000 entries per POST (default 100)",
            ));
        }
        if !(100..=300_000).contains(&self.timeout_ms) {
            return Err(Invalid::new(
                "timeout_ms",
                format!("{} is out of range", self.timeout_ms),
                "use 100..=300000 ms (default 10000)",
            ));
        }
        if self.bearer_token_file.is_some() && self.basic_auth_file.is_some() {
            return Err(Invalid::new(
                "basic_auth_file",
                "both bearer_token_file and basic_auth_file are set",
                "keep the one the receiver expects",
            ));
        }
        Ok(())
    }

    /// The timeout of one POST.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// Read the files the table names (at start and at each reload).
    pub fn resolve(&self) -> Result<SinkSettings, Invalid> {
        let read = |key: &str, path: &Path, what: &str| {
            std::fs::read(path).map_err(|e| {
                Invalid::new(
                    key,
                    format!("cannot read the sink's {what} {}: {e}", path.display()),
                    format!("check {key} and that the service user may read it"),
                )
            })
        };
        let secret = |key: &str, path: &Path, what: &str| -> Result<String, Invalid> {
            let bytes = read(key, path, what)?;
            let text = String::from_utf8(bytes)
                .map(|s| s.trim_end_matches(['\n', '\r']).to_string())
                .ok()
                .filter(|s| !s.is_empty() && !s.contains(['\n', '\r']));
            text.ok_or_else(|| {
                Invalid::new(
                    key,
                    format!("{} does not hold one line of text", path.display()),
                    format!("write the {what} alone on one line in it"),
                )
            })
        };
        let authorization = match (&self.bearer_token_file, &self.basic_auth_file) {
            (Some(p), _) => Some(format!(
                "Bearer {}",
                secret("bearer_token_file", p, "bearer token")?
            )),
            (None, Some(p)) => {
                let pair = secret("basic_auth_file", p, "user:password")?;
                if !pair.contains(':') {
                    return Err(Invalid::new(
                        "basic_auth_file",
                        format!("{} holds no ':'", p.display()),
                        "write user:password on one line in it",
                    ));
                }
                Some(format!("Basic {}", base64(pair.as_bytes())))
            }
            (None, None) => None,
        };
        let ca_pem = match &self.ca_file {
            None => None,
            Some(p) => Some(read("ca_file", p, "CA file")?),
        };
        Ok(SinkSettings {
            config: self.clone(),
            authorization,
            ca_pem,
        })
    }
}

/// Standard base64 (RFC 4648, padded), for basic auth.
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A `[[sink]]` with its files read. Its `Debug` shows no secret.
#[derive(Clone, PartialEq, Eq)]
pub struct SinkSettings {
    /// The table as written.
    pub config: SinkConfig,
    /// The `Authorization` header's value (a secret: never log it).
    pub authorization: Option<String>,
    /// The CA certificate(s) from `ca_file`, if set.
    pub ca_pem: Option<Vec<u8>>,
}

impl fmt::Debug for SinkSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SinkSettings")
            .field("config", &self.config)
            .field(
                "authorization",
                &self.authorization.as_ref().map(|_| "<redacted>"),
            )
            .field("ca_pem", &self.ca_pem.as_ref().map(Vec::len))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_pads_as_rfc_4648_says() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"user:pass word"), "dXNlcjpwYXNzIHdvcmQ=");
    }

    #[test]
    fn a_urls_query_is_never_shown() {
        let c: SinkConfig =
            toml::from_str("name = \"a\"\nurl = \"https://h/api/ledger?code=SECRET\"\n").unwrap();
        assert_eq!(c.shown_url(), "https://h/api/ledger?…");
        let c: SinkConfig = toml::from_str("name = \"a\"\nurl = \"http://h/x\"\n").unwrap();
        assert_eq!(c.shown_url(), "http://h/x");
    }
}
