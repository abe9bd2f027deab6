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
                format!("{} is not a sink name", crate::invalid::shown(&self.name)),
                "use 1-59 letters, digits, '-', '_' or '.' (it names the ledger consumer sink.<name>)",
            ));
        }
        let (scheme, rest) = self.url.split_once("://").unwrap_or(("", ""));
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if authority.contains('@') {
            return Err(Invalid::new(
                "url",
                "the URL carries credentials",
                "put them in bearer_token_file or basic_auth_file and remove them from the URL",
            ));
        }
        if let Some(problem) = url_problem(&self.url) {
            return Err(Invalid::new(
                "url",
                format!(
                    "{} is not a URL a POST can ever reach: {problem}",
                    crate::invalid::shown(&self.shown_url())
                ),
                "write e.g. url = \"https://inventory.pharmacy.lan/scangate/ledger\" (host, optional :port 1-65535, path; a space in the path as %20)",
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

    /// Read the files the table names (at start and at each reload), each
    /// a regular file within its limit ([`crate::files::named`]: a CA
    /// bundle [`CA_LIMIT`](crate::files::named::CA_LIMIT), a token or
    /// credentials [`SECRET_LIMIT`](crate::files::named::SECRET_LIMIT)).
    pub fn resolve(&self) -> Result<SinkSettings, Invalid> {
        use crate::files::named::{CA_LIMIT, SECRET_LIMIT};
        let read = |key: &str, path: &Path, what: &str, limit: u64| {
            crate::files::named::read(path, limit).map_err(|e| {
                Invalid::new(
                    key,
                    format!("cannot read the sink's {what} {}: {e}", path.display()),
                    e.fix(
                        &match what.ends_with("file") {
                            true => what.to_string(),
                            false => format!("{what} file"),
                        },
                        &format!("check {key} and that the service user may read it"),
                    ),
                )
            })
        };
        let secret = |key: &str, path: &Path, what: &str| -> Result<String, Invalid> {
            let bytes = read(key, path, what, SECRET_LIMIT)?;
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
            Some(p) => Some(read("ca_file", p, "CA file", CA_LIMIT)?),
        };
        Ok(SinkSettings {
            config: self.clone(),
            authorization,
            ca_pem,
        })
    }
}

/// The longest sink URL accepted, in characters.
pub const MAX_URL_CHARS: usize = 2048;

/// Why `url` can never be POSTed to, if it cannot (checked strictly, at
/// validation, so `check-config` refuses what every POST would fail on):
/// `http://` or `https://`, then a host (a name of letters, digits, `-`,
/// `.`, `_`, or an address, IPv6 in brackets), an optional port
/// 1..=65535, and the rest; printable ASCII only (a space or a non-ASCII
/// character is percent-encoded in a URL), at most [`MAX_URL_CHARS`].
pub fn url_problem(url: &str) -> Option<String> {
    let chars = url.chars().count();
    if chars > MAX_URL_CHARS {
        return Some(format!(
            "it is {chars} characters long, more than the {MAX_URL_CHARS} accepted"
        ));
    }
    if let Some((at, c)) = url.chars().enumerate().find(|(_, c)| !c.is_ascii_graphic()) {
        let what = match c {
            ' ' => "a space".to_string(),
            c if c.is_control() || c.is_whitespace() => format!("the control character {c:?}"),
            c => format!(
                "{c:?}, which is not ASCII (percent-encode it; a host name in its xn-- form)"
            ),
        };
        return Some(format!("it holds {what} at character {}", at + 1));
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Some("it does not start with http:// or https://".into());
    };
    if !matches!(scheme, "http" | "https") {
        return Some(format!(
            "its scheme is {}, not http or https",
            crate::invalid::shown(scheme)
        ));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let (host, port) = match authority.strip_prefix('[') {
        Some(bracketed) => {
            let Some((v6, after)) = bracketed.split_once(']') else {
                return Some("its IPv6 address has no closing ]".into());
            };
            if v6.parse::<std::net::Ipv6Addr>().is_err() {
                return Some(format!("[{v6}] is not an IPv6 address"));
            }
            match after {
                "" => (v6, None),
                _ => match after.strip_prefix(':') {
                    Some(port) => (v6, Some(port)),
                    None => {
                        return Some(format!(
                            "{} follows its IPv6 address",
                            crate::invalid::shown(after)
                        ));
                    }
                },
            }
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    if host.is_empty() {
        return Some("it names no host".into());
    }
    if !authority.starts_with('[')
        && let Some(c) = host
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')))
    {
        return Some(format!(
            "its host {} holds {c:?}, which no host name has",
            crate::invalid::shown(host)
        ));
    }
    match port {
        None => {}
        Some("") => return Some("it has a ':' after the host but no port".into()),
        Some(p) if !p.bytes().all(|b| b.is_ascii_digit()) => {
            return Some(format!(
                "its port {} is not a number",
                crate::invalid::shown(p)
            ));
        }
        Some(p) if p.len() > 5 || !(1..=65535).contains(&p.parse::<u32>().unwrap_or(0)) => {
            return Some(format!("its port {p} is outside 1-65535"));
        }
        Some(_) => {}
    }
    // What the HTTP client parses it as, for anything the checks above
    // let through.
    ureq::http::Uri::try_from(url)
        .err()
        .map(|e| format!("the HTTP client cannot parse it ({e})"))
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
    fn urls_that_can_never_be_posted_to_are_refused_saying_why() {
        for (url, why) in [
            ("http://127.0.0.1:99999/", "port 99999 is outside 1-65535"),
            ("http://127.0.0.1:0/", "port 0 is outside 1-65535"),
            ("http://h:8o/", "port \"8o\" is not a number"),
            ("http://h:/x", "no port"),
            ("http://h st/", "a space at character 9"),
            ("http://h/a b", "a space at character 11"),
            ("http://h/\tx", "control character '\\t'"),
            ("http://:80/", "names no host"),
            ("http:///x", "names no host"),
            ("http://", "names no host"),
            ("ftp://h/", "scheme is \"ftp\""),
            ("h/x", "does not start with http://"),
            ("http://bücher.example/", "not ASCII"),
            ("http://h_st%/", "holds '%'"),
            ("http://[::1/", "no closing ]"),
            ("http://[zz::1]/", "not an IPv6 address"),
            ("http://[::1]x/", "follows its IPv6 address"),
        ] {
            let problem = url_problem(url).unwrap_or_else(|| panic!("{url} accepted"));
            assert!(problem.contains(why), "{url}: {problem}");
        }
        let long = format!("https://h/{}", "x".repeat(MAX_URL_CHARS));
        assert!(url_problem(&long).unwrap().contains("characters long"));
    }

    #[test]
    fn urls_a_receiver_can_have_are_accepted() {
        for url in [
            "http://127.0.0.1:8080/ledger",
            "https://inventory.pharmacy.lan/scangate/ledger?code=abc%20def",
            "https://inventory.pharmacy.lan",
            "http://[::1]:65535/x",
            "http://[fe80::1]/",
            "http://my_host.lan:1/",
            "https://h/p#frag",
        ] {
            assert_eq!(url_problem(url), None, "{url}");
        }
    }

    #[test]
    fn a_refused_url_is_named_with_the_key_and_cut_when_long() {
        let long = format!("http://h st/{}", "x".repeat(2000));
        let c: SinkConfig = toml::from_str(&format!("name = \"a\"\nurl = {long:?}\n")).unwrap();
        let e = c.validate().unwrap_err();
        assert_eq!(e.key, "url");
        assert!(e.problem.contains("a space at character 9"), "{e}");
        assert!(e.to_string().len() < 400, "{e}");
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
