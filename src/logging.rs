//! Where the log goes, and in what form (`--log-format`).
//!
//! - **journald** (the native protocol, a datagram per event to
//!   `/run/systemd/journal/socket`): each tracing field becomes a journal
//!   field of its name upper-cased, without a prefix (`scanner` →
//!   `SCANNER=`, `scan_uuid` → `SCAN_UUID=`, `decision` → `DECISION=`), so
//!   `journalctl SCANNER=front-counter` finds a scanner's lines. Audit
//!   records (target [`AUDIT_TARGET`]) go under their own
//!   `SYSLOG_IDENTIFIER` ([`AUDIT_IDENTIFIER`]): `journalctl -t scangate`
//!   shows operations, `journalctl -t scangate-audit` the trail.
//! - **text** on stderr: without ANSI colour unless stderr is a terminal
//!   (and `NO_COLOR` is unset).
//! - **json** on stderr, one object per line, the fields at the top level,
//!   for other collectors.
//! - **auto** (the default): journald when stderr is the journal stream
//!   systemd connected, i.e. its device and inode are `$JOURNAL_STREAM`
//!   (merely having the variable set is not enough: a child whose stderr
//!   was redirected inherits it too), else text.
//!
//! `RUST_LOG` filters every form alike.

use std::io::IsTerminal;
use tracing_subscriber::Layer;
use tracing_subscriber::prelude::*;

pub use crate::audit::AUDIT_TARGET;
/// The journal's `SYSLOG_IDENTIFIER` of everything but the audit records.
pub const IDENTIFIER: &str = "scangate";
/// The journal's `SYSLOG_IDENTIFIER` of the audit records.
pub const AUDIT_IDENTIFIER: &str = "scangate-audit";

pub use crate::cli::args::LogFormat;

/// `$JOURNAL_STREAM` ("DEVICE:INODE", decimal) as numbers.
fn parse_journal_stream(value: &str) -> Option<(u64, u64)> {
    let (dev, ino) = value.split_once(':')?;
    Some((dev.parse().ok()?, ino.parse().ok()?))
}

/// Whether stderr is the stream `$JOURNAL_STREAM` names: systemd sets it
/// to the device and inode of the journal stream it connected stdout or
/// stderr to.
pub fn stderr_is_journal_stream() -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let Some(want) = std::env::var("JOURNAL_STREAM")
        .ok()
        .as_deref()
        .and_then(parse_journal_stream)
    else {
        return false;
    };
    let Ok(fd) = std::io::stderr().as_fd().try_clone_to_owned() else {
        return false;
    };
    std::fs::File::from(fd)
        .metadata()
        .is_ok_and(|m| (m.dev(), m.ino()) == want)
}

impl LogFormat {
    /// What `Auto` means here and now.
    fn resolve(self) -> LogFormat {
        match self {
            LogFormat::Auto if stderr_is_journal_stream() => LogFormat::Journald,
            LogFormat::Auto => LogFormat::Text,
            other => other,
        }
    }
}

/// The two journald layers: operations under [`IDENTIFIER`], audit
/// records under [`AUDIT_IDENTIFIER`]; fields without a prefix.
fn journald<S>() -> std::io::Result<impl Layer<S>>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let layer = |identifier: &str| {
        tracing_journald::layer().map(|l| {
            l.with_field_prefix(None)
                .with_syslog_identifier(identifier.to_string())
        })
    };
    let is_audit = |m: &tracing::Metadata<'_>| m.target() == AUDIT_TARGET;
    let operations = layer(IDENTIFIER)?
        .with_filter(tracing_subscriber::filter::filter_fn(move |m| !is_audit(m)));
    let audit =
        layer(AUDIT_IDENTIFIER)?.with_filter(tracing_subscriber::filter::filter_fn(is_audit));
    Ok(operations.and_then(audit))
}

/// Install the global subscriber: `format`, filtered by `RUST_LOG`
/// (default `default_level`). When journald was asked for but cannot be
/// reached, logs text on stderr and says so.
pub fn init(format: LogFormat, default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let (journal, unreachable) = match format.resolve() {
        LogFormat::Journald => match journald() {
            Ok(layers) => (Some(layers), None),
            Err(e) => (None, Some(e)),
        },
        _ => (None, None),
    };
    let json = (format.resolve() == LogFormat::Json).then(|| {
        tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .with_writer(std::io::stderr)
    });
    let text = (journal.is_none() && json.is_none()).then(|| {
        let colour = std::io::stderr().is_terminal()
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        tracing_subscriber::fmt::layer()
            .with_ansi(colour)
            .with_writer(std::io::stderr)
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(journal)
        .with(json)
        .with(text)
        .init();
    if let Some(e) = unreachable {
        tracing::warn!(
            "cannot log to journald ({e}): logging as text to stderr instead. Check that systemd-journald runs (/run/systemd/journal/socket)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_stream_is_device_colon_inode() {
        assert_eq!(parse_journal_stream("8:1234"), Some((8, 1234)));
        assert_eq!(parse_journal_stream("8:"), None);
        assert_eq!(parse_journal_stream("1"), None);
        assert_eq!(parse_journal_stream("a:b"), None);
    }
}
