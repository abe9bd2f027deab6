//! Reading the TOML text into a [`Config`]: the sections serde reads as
//! they are, each `[[scanner]]` table by its `kind` (and `mode`) first,
//! then validation ([`Config::parse`]); and naming the key and place of
//! what the parser refused.

use super::sections::{
    ChecksConfig, DedupConfig, GatewayConfig, MetricsConfig, OutboxConfig, RecordsConfig,
    ScannerConfig, ScannerKind,
};
use super::{Config, ConfigError};
use crate::facility::config::RedisConfig;
use crate::invalid::Invalid;
use crate::source::config::Scanner;
use crate::source::hid::config::{HidConfig, HidMode, KeyboardConfig, ModeConfig, PosConfig};
use crate::source::serial::config::SerialConfig;
use serde::Deserialize;
use std::fmt;
use std::ops::Range;
use std::path::Path;
use toml::Spanned;
use toml::de::{DeTable, DeValue, ValueDeserializer};

impl Config {
    /// Read and validate a config file; `None` means "no file": all defaults.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let Some(path) = path else {
            let cfg = Config::default();
            cfg.validate(None)?;
            return Ok(cfg);
        };
        let text = read_file(path)?;
        Config::parse(&text, Some(path))
    }

    /// The text of the config file at `path`, read as [`Config::load`]
    /// reads it: a regular file of at most
    /// [`CONFIG_LIMIT`](crate::files::named::CONFIG_LIMIT) bytes, UTF-8.
    /// `Ok(None)` when there is no file there (a command that creates it,
    /// `pair`, starts from none).
    pub fn read_text(path: &Path) -> Result<Option<String>, ConfigError> {
        use crate::files::named::{CONFIG_LIMIT, read_to_string};
        match read_to_string(path, CONFIG_LIMIT) {
            Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => Ok(None),
            read => read.map(Some).map_err(|e| unreadable(path, e)),
        }
    }

    /// Parse and validate config text (`file` is only used in messages).
    pub fn parse(text: &str, file: Option<&Path>) -> Result<Config, ConfigError> {
        let toml_error = |e| ConfigError::from_toml(text, file, e);
        let doc = DeTable::parse(text).map_err(toml_error)?;
        let span = doc.span();
        let mut root = doc.into_inner();
        let carried = super::carried::carry_over(&mut root, super::carried::OLD_KEYS, text, file)?;
        let tables = root.get("scanner").cloned();
        let sections =
            Sections::deserialize(toml::de::Deserializer::from(Spanned::new(span, root)))
                .map_err(toml_error)?;
        let mut scanners = Vec::new();
        // `Sections` checked that `scanner` is an array.
        if let Some(DeValue::Array(tables)) = tables.map(Spanned::into_inner) {
            for (i, table) in tables.into_iter().enumerate() {
                scanners.push(scanner(table).map_err(|refused| match refused {
                    Refused::Toml(e) => toml_error(e),
                    Refused::Invalid(e) => {
                        ConfigError::new(file, e.within(&format!("scanner[{i}]")))
                    }
                })?);
            }
        }
        let cfg = Config {
            gateway: sections.gateway,
            dedup: sections.dedup,
            outbox: sections.outbox,
            scanners,
            redis: sections.redis,
            metrics: sections.metrics,
            records: sections.records,
            controls: sections.controls,
            sinks: sections.sinks,
            checks: sections.checks,
            carried,
        };
        cfg.validate(file)?;
        Ok(cfg)
    }
}

/// The config file's text ([`Config::read_text`]); no file is an error.
fn read_file(path: &Path) -> Result<String, ConfigError> {
    use crate::files::named::{CONFIG_LIMIT, read_to_string};
    read_to_string(path, CONFIG_LIMIT).map_err(|e| unreadable(path, e))
}

/// Why the config file at `path` was not read, naming the file, the limit
/// and what to do.
fn unreadable(path: &Path, e: crate::files::named::ReadError) -> ConfigError {
    ConfigError {
        file: Some(path.to_owned()),
        key: "(file)".into(),
        problem: format!("cannot read the config file: {e}"),
        fix: e.fix(
            "config file",
            "check the path (given with --config or SCANGATE_CONFIG, else the default /etc/scangate/scangate.toml) and that the service user may read it",
        ),
    }
}

/// The sections serde reads as they are; `[[scanner]]` is only checked to
/// be an array here, its tables are read by [`scanner`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Sections {
    #[serde(default)]
    gateway: GatewayConfig,
    #[serde(default)]
    dedup: DedupConfig,
    #[serde(default)]
    outbox: OutboxConfig,
    #[serde(default, rename = "scanner")]
    _scanner: Vec<serde::de::IgnoredAny>,
    #[serde(default)]
    redis: Option<RedisConfig>,
    #[serde(default)]
    metrics: MetricsConfig,
    #[serde(default)]
    records: RecordsConfig,
    #[serde(default)]
    controls: crate::controls::ControlsConfig,
    #[serde(default, rename = "sink")]
    sinks: Vec<crate::sink::config::SinkConfig>,
    #[serde(default)]
    checks: ChecksConfig,
}

impl ConfigError {
    /// What the TOML parser or serde refused; the key comes from the
    /// error's place in `text`.
    fn from_toml(text: &str, file: Option<&Path>, e: toml::de::Error) -> ConfigError {
        let (key, at) = match e.span() {
            Some(span) => {
                let (line, column) = line_column(text, span.start);
                (
                    locate_key(text, span.start),
                    format!(" (line {line}, column {column})"),
                )
            }
            None => ("(file)".into(), String::new()),
        };
        ConfigError {
            file: file.map(Path::to_owned),
            key,
            problem: format!("{}{at}", e.message().trim_end()),
            fix: "compare with the reference of every key (/usr/share/scangate/scangate.toml.example on a gateway, config/scangate.toml in the source)".into(),
        }
    }
}

/// Why a `[[scanner]]` table was refused: by serde (the error's span names
/// the key) or by a check here (the key relative to the scanner).
enum Refused {
    Toml(toml::de::Error),
    Invalid(Invalid),
}

impl From<toml::de::Error> for Refused {
    fn from(e: toml::de::Error) -> Self {
        Refused::Toml(e)
    }
}

impl From<Invalid> for Refused {
    fn from(e: Invalid) -> Self {
        Refused::Invalid(e)
    }
}

/// `kind`, read before the rest of a `[[scanner]]` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KindTag {
    kind: Kind,
}

/// The values of `kind`.
#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Serial,
    Hid,
}

/// `mode`, read before the rest of a `kind = "hid"` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModeTag {
    #[serde(default)]
    mode: Option<HidMode>,
}

/// One `[[scanner]]` table: the common keys, `kind`, then the kind's (and
/// for HID the mode's) types, each deserialized from its own keys.
fn scanner(table: Spanned<DeValue<'_>>) -> Result<ScannerConfig, Refused> {
    let span = table.span();
    let DeValue::Table(mut t) = table.into_inner() else {
        return Err(Invalid::new(
            "",
            "a scanner entry must be a table",
            "write each scanner as a [[scanner]] table, as in config/scangate.toml",
        )
        .into());
    };
    let common: Scanner<()> = take(&mut t, &span, fields_of::<Scanner<()>>())?;
    let KindTag { kind } = take(&mut t, &span, &["kind"])?;
    let kind = match kind {
        Kind::Serial => {
            let serial = fields_of::<SerialConfig>();
            let hid_only = [
                &["mode"][..],
                fields_of::<HidConfig>(),
                fields_of::<PosConfig>(),
                fields_of::<KeyboardConfig>(),
            ]
            .concat();
            if let Some(field) = first_key_of(&t, &hid_only, serial) {
                return Err(Invalid::new(
                    field.as_str(),
                    format!("`{field}` applies only to HID scanners"),
                    "remove it, or set kind = \"hid\" if this is a USB HID scanner",
                )
                .into());
            }
            ScannerKind::Serial(rest(t, span)?)
        }
        Kind::Hid => ScannerKind::Hid(hid(t, span)?),
    };
    Ok(common.with_kind(kind))
}

/// The keys of a `kind = "hid"` table (the common keys and `kind` taken).
fn hid(mut t: DeTable<'_>, span: Range<usize>) -> Result<HidConfig, Refused> {
    let ModeTag { mode } = take(&mut t, &span, &["mode"])?;
    let Some(mode) = mode else {
        return Err(Invalid::new(
            "mode",
            "a HID scanner needs a mode",
            "set mode = \"pos\" (HID POS, preferred) or mode = \"keyboard\" (keyboard wedge); `scangate devices` shows which",
        )
        .into());
    };
    // Serial keys on a HID scanner: those that would change the framing or
    // answer the scanner are refused; the line settings (a copied serial
    // entry's `baud = 9600`, `parity = "none"`) were always accepted and
    // ignored, and still are, their types and `baud`'s range checked.
    let hid_keys = fields_of::<HidConfig>();
    let serial_only: Vec<&str> = fields_of::<SerialConfig>()
        .iter()
        .copied()
        .filter(|k| !hid_keys.contains(k))
        .collect();
    let serial: SerialConfig = take(&mut t, &span, &serial_only)?;
    if let Some(field) = serial.framing_key_set() {
        return Err(Invalid::new(
            field,
            format!("`{field}` applies only to serial scanners"),
            "remove it: HID reports carry their own framing",
        )
        .into());
    }
    serial.validate_baud()?;
    let (own, other) = match mode {
        HidMode::Pos => (fields_of::<PosConfig>(), fields_of::<KeyboardConfig>()),
        HidMode::Keyboard => (fields_of::<KeyboardConfig>(), fields_of::<PosConfig>()),
    };
    if let Some(field) = first_key_of(&t, other, own) {
        return Err(Invalid::new(
            field.as_str(),
            format!("`{field}` does not apply to mode = \"{}\"", mode.as_str()),
            "remove it, or change `mode`",
        )
        .into());
    }
    let mode = match mode {
        HidMode::Pos => ModeConfig::Pos(take(&mut t, &span, own)?),
        HidMode::Keyboard => ModeConfig::Keyboard(take(&mut t, &span, own)?),
    };
    let mut hid: HidConfig = rest(t, span)?;
    hid.mode = mode;
    Ok(hid)
}

/// The first key of `t` (in the parser's order) that is in `foreign` but not
/// in `own`: a key of another kind or mode.
fn first_key_of(t: &DeTable<'_>, foreign: &[&str], own: &[&str]) -> Option<String> {
    t.keys()
        .map(|k| k.get_ref().as_ref())
        .find(|k| foreign.contains(k) && !own.contains(k))
        .map(str::to_string)
}

/// Move `keys` out of `t` and deserialize `T` from them (a table with `t`'s
/// span, so a missing key is reported as serde reports it for `t`).
fn take<'i, T: Deserialize<'i>>(
    t: &mut DeTable<'i>,
    span: &Range<usize>,
    keys: &[&str],
) -> Result<T, toml::de::Error> {
    let (part, left): (DeTable<'i>, DeTable<'i>) = std::mem::take(t)
        .into_iter()
        .partition(|(k, _)| keys.contains(&k.get_ref().as_ref()));
    *t = left;
    rest(part, span.clone())
}

/// Deserialize `T` from all of `t`: `deny_unknown_fields` names a stray key
/// at its place in the text.
fn rest<'i, T: Deserialize<'i>>(t: DeTable<'i>, span: Range<usize>) -> Result<T, toml::de::Error> {
    T::deserialize(ValueDeserializer::from(Spanned::new(
        span,
        DeValue::Table(t),
    )))
}

/// The keys a derived `Deserialize` struct reads (the `fields` serde's
/// derive passes to `deserialize_struct`; skipped fields are not in it).
fn fields_of<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
    struct Probe<'a>(&'a mut &'static [&'static str]);
    #[derive(Debug)]
    struct Stop;
    impl fmt::Display for Stop {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("field probe")
        }
    }
    impl std::error::Error for Stop {}
    impl serde::de::Error for Stop {
        fn custom<M: fmt::Display>(_: M) -> Self {
            Stop
        }
    }
    impl<'de> serde::Deserializer<'de> for Probe<'_> {
        type Error = Stop;
        fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }
        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            *self.0 = fields;
            Err(Stop)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Probe(&mut fields));
    fields
}

/// The 1-based line and column (in characters) of byte `offset` in `text`.
pub(super) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..text.floor_char_boundary(offset.min(text.len()))];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (
        before.matches('\n').count() + 1,
        before[line_start..].chars().count() + 1,
    )
}

/// Best-effort `section.key` name for a byte offset in the TOML text.
fn locate_key(text: &str, offset: usize) -> String {
    let mut section = String::new();
    let mut counts: std::collections::HashMap<String, usize> = Default::default();
    let mut key = String::new();
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        let t = line.trim();
        if let Some(arr) = t.strip_prefix("[[").and_then(|s| s.strip_suffix("]]")) {
            let n = counts.entry(arr.trim().to_string()).or_insert(0);
            section = format!("{}[{}]", arr.trim(), *n);
            *n += 1;
            key.clear();
        } else if let Some(sec) = t.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            section = sec.trim().to_string();
            key.clear();
        } else if let Some((k, _)) = t.split_once('=')
            && !t.starts_with('#')
        {
            key = k.trim().to_string();
        }
        if pos + line.len() > offset {
            break;
        }
        pos += line.len();
    }
    match (section.is_empty(), key.is_empty()) {
        (true, _) => key,
        (false, true) => section,
        (false, false) => format!("{section}.{key}"),
    }
}
