//! One POST of a held batch and what its answer means: delivered (2xx),
//! worth retrying (no connection, a timeout, 5xx, 408, 409, 425, 429), or blocked (a
//! 3xx, another 4xx: the receiver will answer the same until someone
//! changes it or the config).
//!
//! The client is `ureq` (blocking, pure Rust) over rustls with the ring
//! provider, as the Redis TLS: no C library beyond what `cc` builds, so
//! the ARM cross builds stay as they are. The roots are the CA file's, or
//! the system's trust store (`rustls-native-certs`).

use super::batch::{Batch, content_type};
use super::config::SinkSettings;
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;
use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig, TlsProvider};

/// How much of a refusing answer's body is kept for the log and `status`.
pub const BODY_SHOWN: usize = 200;

/// What one POST met.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// A 2xx: the receiver has the batch.
    Delivered(u16),
    /// Worth retrying after the back-off (or the receiver's
    /// `Retry-After`).
    Retry {
        /// `connect`, `timeout`, `tls`, `status_5xx`, `status_408`,
        /// `status_409`, `status_425`, `status_429`, `io`.
        kind: &'static str,
        /// What happened, in words.
        error: String,
        /// The receiver's `Retry-After`, in seconds.
        retry_after: Option<Duration>,
    },
    /// Refused in a way a retry will not change.
    Blocked {
        /// `status_3xx` or `status_4xx`.
        kind: &'static str,
        /// The status and the first bytes of the answer.
        error: String,
    },
}

/// An HTTP client for sink `s`: its roots, its timeout, no redirects
/// followed (a 3xx is the receiver's to fix: a POST is not resent
/// elsewhere). Err: for an `https` URL, no usable root (the CA file's
/// certificates unparsable, or an empty system trust store).
pub fn agent(s: &SinkSettings) -> Result<ureq::Agent, String> {
    let roots: Vec<Certificate<'static>> = match &s.ca_pem {
        Some(pem) => {
            let certs: Vec<Certificate<'static>> = ureq::tls::parse_pem(pem)
                .filter_map(|item| match item {
                    Ok(PemItem::Certificate(c)) => Some(c),
                    _ => None,
                })
                .collect();
            if certs.is_empty() {
                return Err(format!(
                    "the CA file {} holds no PEM certificate: give the CA's certificate (-----BEGIN CERTIFICATE-----) in sink {:?}'s ca_file",
                    s.config
                        .ca_file
                        .as_deref()
                        .unwrap_or(std::path::Path::new("?"))
                        .display(),
                    s.config.name
                ));
            }
            certs
        }
        None => rustls_native_certs::load_native_certs()
            .certs
            .iter()
            .map(|der| Certificate::from_der(der.as_ref()).to_owned())
            .collect(),
    };
    // (rustls drops a root it cannot parse without a word: with none left,
    // every TLS handshake would fail as an unknown issuer, retried forever.)
    let usable = rustls::RootCertStore::empty()
        .add_parsable_certificates(
            roots
                .iter()
                .map(|c| rustls_pki_types::CertificateDer::from(c.der())),
        )
        .0;
    if usable == 0 && s.config.url.starts_with("https://") {
        return Err(match &s.config.ca_file {
            Some(path) => format!(
                "the CA file {} holds no certificate rustls can use as a root: give the receiver's CA certificate (PEM) in sink {:?}'s ca_file",
                path.display(),
                s.config.name
            ),
            None => format!(
                "the system trust store has no certificate (install the ca-certificates package), so sink {:?} cannot check its receiver: install it, or set its ca_file to the receiver's CA",
                s.config.name
            ),
        });
    }
    let tls = TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .root_certs(RootCerts::Specific(Arc::new(roots)))
        .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .build();
    Ok(ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(s.config.timeout()))
        .user_agent(concat!("scangate/", env!("CARGO_PKG_VERSION")))
        .tls_config(tls)
        .build()
        .new_agent())
}

/// POST `batch` to sink `s`'s URL with `agent`.
pub fn post(agent: &ureq::Agent, s: &SinkSettings, batch: &Batch) -> Delivery {
    let mut req = agent
        .post(&s.config.url)
        .header("Content-Type", content_type(batch.format))
        .header("Idempotency-Key", &batch.key)
        .header("X-Scangate-Entries", batch.entries.to_string())
        .header(
            "X-Scangate-Seq",
            format!("{}-{}", batch.first_seq, batch.last_seq),
        );
    if let Some(auth) = &s.authorization {
        req = req.header("Authorization", auth);
    }
    match req.send(&batch.body[..]) {
        Ok(mut resp) => {
            let status = resp.status().as_u16();
            let retry_after = resp
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            let mut shown = Vec::new();
            let _ = resp
                .body_mut()
                .as_reader()
                .take(BODY_SHOWN as u64)
                .read_to_end(&mut shown);
            judge(status, retry_after, &String::from_utf8_lossy(&shown))
        }
        Err(e) => failure(&e),
    }
}

/// What status `status` (with `Retry-After` and the first bytes of the
/// body) means.
pub fn judge(status: u16, retry_after: Option<Duration>, body: &str) -> Delivery {
    let error = format!("HTTP {status}: {:?}", body.trim());
    match status {
        200..=299 => Delivery::Delivered(status),
        // 409 and 425: a request with the same Idempotency-Key is still
        // being processed (the IETF httpapi idempotency-key draft), as
        // when an earlier attempt outlived `timeout_ms`.
        408 | 409 | 425 | 429 | 500..=599 => Delivery::Retry {
            kind: match status {
                408 => "status_408",
                409 => "status_409",
                425 => "status_425",
                429 => "status_429",
                _ => "status_5xx",
            },
            error,
            retry_after,
        },
        300..=399 => Delivery::Blocked {
            kind: "status_3xx",
            error,
        },
        _ => Delivery::Blocked {
            kind: "status_4xx",
            error,
        },
    }
}

/// A POST that got no answer.
fn failure(e: &ureq::Error) -> Delivery {
    use ureq::Error as E;
    let kind = match e {
        E::Timeout(_) => "timeout",
        E::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => "timeout",
        E::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => "connect",
        E::HostNotFound | E::ConnectionFailed => "connect",
        E::Tls(_) | E::Rustls(_) => "tls",
        // rustls's handshake failures come as I/O errors.
        e if e.to_string().contains("certificate") => "tls",
        _ => "io",
    };
    Delivery::Retry {
        kind,
        error: e.to_string(),
        retry_after: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_delivered_retried_or_blocked() {
        assert_eq!(judge(204, None, ""), Delivery::Delivered(204));
        for (s, kind) in [
            (500, "status_5xx"),
            (503, "status_5xx"),
            (408, "status_408"),
            (409, "status_409"),
            (425, "status_425"),
            (429, "status_429"),
        ] {
            assert!(
                matches!(judge(s, None, ""), Delivery::Retry { kind: k, .. } if k == kind),
                "{s}"
            );
        }
        for (s, kind) in [
            (400, "status_4xx"),
            (401, "status_4xx"),
            (404, "status_4xx"),
            (301, "status_3xx"),
        ] {
            assert!(
                matches!(judge(s, None, ""), Delivery::Blocked { kind: k, .. } if k == kind),
                "{s}"
            );
        }
        let Delivery::Blocked { error, .. } = judge(400, None, "bad gtin\n") else {
            unreachable!()
        };
        assert_eq!(error, "HTTP 400: \"bad gtin\"");
    }
}
