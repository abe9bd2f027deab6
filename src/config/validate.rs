//! The checks of a parsed [`Config`]'s values, in a fixed order (the
//! first value refused is the one named): the gateway and metrics, the
//! windows and retention, `[redis]`, `[controls]`, then each `[[scanner]]`.

use super::sections::{MIN_KEEP_DAYS, ScannerKind, valid_ident};
use super::{Config, ConfigError};
use crate::invalid::shown;
use std::collections::HashSet;
use std::path::Path;

impl Config {
    /// Check every value; the first one out of place is refused, with its
    /// key and what to do.
    pub(super) fn validate(&self, file: Option<&Path>) -> Result<(), ConfigError> {
        self.validate_gateway_and_metrics(file)?;
        self.validate_windows_and_retention(file)?;
        self.validate_redis(file)?;
        self.controls
            .validate()
            .map_err(|e| ConfigError::new(file, e.within("controls")))?;
        self.validate_scanners(file)?;
        self.validate_sinks(file)?;
        self.validate_checks(file)
    }

    /// `[checks]`.
    fn validate_checks(&self, file: Option<&Path>) -> Result<(), ConfigError> {
        let days = self.checks.max_data_age_days;
        if !(1..=3650).contains(&days) {
            return Err(refusal(
                file,
                "checks.max_data_age_days".into(),
                format!("{days} is out of range"),
                "use 1..=3650 days (default 45): product and recall data older than this is a status reason",
            ));
        }
        let warn = self.checks.expiry_warn_days;
        if warn > 3650 {
            return Err(refusal(
                file,
                "checks.expiry_warn_days".into(),
                format!("{warn} is out of range"),
                "use 0..=3650 days (default 30; 0 never tells `expiring`)",
            ));
        }
        let serials = self.checks.serial_retention_days;
        if !(1..=3650).contains(&serials) {
            return Err(refusal(
                file,
                "checks.serial_retention_days".into(),
                format!("{serials} is out of range"),
                "use 1..=3650 days (default 365): how long a received serial number is kept to tell a second receipt",
            ));
        }
        Ok(())
    }

    /// Each `[[sink]]`: its own checks, and a name no other sink has.
    fn validate_sinks(&self, file: Option<&Path>) -> Result<(), ConfigError> {
        let mut names = HashSet::new();
        for (i, sink) in self.sinks.iter().enumerate() {
            sink.validate()
                .map_err(|e| ConfigError::new(file, e.within(&format!("sink[{i}]"))))?;
            if !names.insert(sink.name.as_str()) {
                return Err(refusal(
                    file,
                    format!("sink[{i}].name"),
                    format!("{} names another sink too", shown(&sink.name)),
                    "give each [[sink]] a name of its own (it names its ledger consumer sink.<name>)",
                ));
            }
        }
        Ok(())
    }

    /// `[gateway]` identifiers and `[metrics]`.
    fn validate_gateway_and_metrics(&self, file: Option<&Path>) -> Result<(), ConfigError> {
        let err = |key: String, problem: String, fix: &str| refusal(file, key, problem, fix);
        if !valid_ident(&self.gateway.facility) {
            return Err(err(
                "gateway.facility".into(),
                format!(
                    "{} is not a valid identifier",
                    shown(&self.gateway.facility)
                ),
                "use 1-64 letters, digits, '-', '_' or '.'",
            ));
        }
        if !(1..=3600).contains(&self.metrics.interval_s) {
            return Err(err(
                "metrics.interval_s".into(),
                format!("{} is out of range", self.metrics.interval_s),
                "use 1..=3600 seconds (default 15)",
            ));
        }
        if let Some(path) = &self.metrics.textfile
            && (path.extension().is_none_or(|e| e != "prom") || path.file_name().is_none())
        {
            return Err(err(
                "metrics.textfile".into(),
                format!("{} does not end in .prom", path.display()),
                "name a file ending in .prom (node_exporter's textfile collector reads only those), e.g. /var/lib/prometheus/node-exporter/scangate.prom",
            ));
        }
        if let Some(dir) = &self.gateway.state_dir
            && let Some(problem) = state_dir_problem(dir)
        {
            return Err(err(
                "gateway.state_dir".into(),
                problem,
                "name a directory whose path is at most 4000 bytes, each name in it at most 255 (e.g. /var/lib/scangate, where the systemd unit keeps it)",
            ));
        }
        if !valid_ident(&self.gateway.id) {
            return Err(err(
                "gateway.id".into(),
                format!("{} is not a valid identifier", shown(&self.gateway.id)),
                "use 1-64 letters, digits, '-', '_' or '.'",
            ));
        }
        if let Some(gln) = &self.gateway.gln {
            use crate::capture::barcode::gtin::check_digit;
            let problem = if gln.len() != 13 || !gln.bytes().all(|b| b.is_ascii_digit()) {
                Some(format!("{} is not 13 digits", shown(gln)))
            } else {
                let (payload, last) = gln.as_bytes().split_at(12);
                check_digit(payload)
                    .filter(|&d| d != last[0] - b'0')
                    .map(|d| format!("{gln:?} ends in {}, and its GS1 check digit is {d}: a digit is mistyped", last[0] as char))
            };
            if let Some(problem) = problem {
                return Err(err(
                    "gateway.gln".into(),
                    problem,
                    "give the facility's GLN as GS1 issued it (13 digits, the last a check digit; it names the facility in EPCIS events), or remove the key",
                ));
            }
        }
        Ok(())
    }

    /// `[dedup]`, `[outbox]` and `[records]`: each in range, and the echo
    /// window inside the retention horizon.
    fn validate_windows_and_retention(&self, file: Option<&Path>) -> Result<(), ConfigError> {
        let err = |key: String, problem: String, fix: &str| refusal(file, key, problem, fix);
        if self.dedup.window_ms == 0 || self.dedup.window_ms > 3_600_000 {
            return Err(err(
                "dedup.window_ms".into(),
                format!("{} is out of range", self.dedup.window_ms),
                "use 1..=3600000 milliseconds (default 3000)",
            ));
        }
        if self.dedup.retention_hours == 0 || self.dedup.retention_hours > 24 * 366 {
            return Err(err(
                "dedup.retention_hours".into(),
                format!("{} is out of range", self.dedup.retention_hours),
                "use 1..=8784 hours (default 72)",
            ));
        }
        if self.outbox.keep_raw_hours == 0 || self.outbox.keep_raw_hours > 24 * 366 {
            return Err(err(
                "outbox.keep_raw_hours".into(),
                format!("{} is out of range", self.outbox.keep_raw_hours),
                "use 1..=8784 hours (default 72)",
            ));
        }
        if self.outbox.min_free_mb > 1_048_576 {
            return Err(err(
                "outbox.min_free_mb".into(),
                format!("{} is out of range", self.outbox.min_free_mb),
                "use 0 (off) ..=1048576 MiB (default 50)",
            ));
        }
        if self.outbox.warn_days_left > 3660 {
            return Err(err(
                "outbox.warn_days_left".into(),
                format!("{} is out of range", self.outbox.warn_days_left),
                "use 0 (off) ..=3660 days (default 14)",
            ));
        }
        if self.records.keep_days < MIN_KEEP_DAYS || self.records.keep_days > 36_600 {
            return Err(err(
                "records.keep_days".into(),
                format!("{} is out of range", self.records.keep_days),
                "use 730..=36600 days (default 730): records of controlled substances are kept at least two years (21 CFR 1304.04)",
            ));
        }
        if self.records.consumer_hold_days > 36_600 {
            return Err(err(
                "records.consumer_hold_days".into(),
                format!("{} is out of range", self.records.consumer_hold_days),
                "use 0 ..=36600 days (default 90)",
            ));
        }
        if self.dedup.window_ms > self.dedup.retention_hours * 3_600_000 {
            return Err(err(
                "dedup.window_ms".into(),
                "the echo window is longer than the retention horizon".into(),
                "make dedup.retention_hours cover dedup.window_ms",
            ));
        }
        Ok(())
    }

    /// `[redis]`: its own checks, and its clock error bound against the
    /// echo window.
    fn validate_redis(&self, file: Option<&Path>) -> Result<(), ConfigError> {
        let err = |key: String, problem: String, fix: &str| refusal(file, key, problem, fix);
        if let Some(redis) = &self.redis {
            redis
                .validate()
                .map_err(|e| ConfigError::new(file, e.within("redis")))?;
            // Two gateways' facility times of one pick may each be off by
            // the bound: together well inside the window.
            if redis.max_clock_error_ms * 4 > self.dedup.window_ms {
                return Err(err(
                    "redis.max_clock_error_ms".into(),
                    format!(
                        "{} ms is more than a quarter of dedup.window_ms ({} ms)",
                        redis.max_clock_error_ms, self.dedup.window_ms
                    ),
                    "lower max_clock_error_ms (default 250), or widen dedup.window_ms",
                ));
            }
        }
        Ok(())
    }

    /// Each `[[scanner]]`: a unique valid name, its kind's own checks, its
    /// quantity and frame size.
    fn validate_scanners(&self, file: Option<&Path>) -> Result<(), ConfigError> {
        let err = |key: String, problem: String, fix: &str| refusal(file, key, problem, fix);
        let mut names = HashSet::new();
        for (i, s) in self.scanners.iter().enumerate() {
            let key = |field: &str| format!("scanner[{i}].{field}");
            if !valid_ident(&s.name) {
                return Err(err(
                    key("name"),
                    format!("{} is not a valid scanner name", shown(&s.name)),
                    "use 1-64 letters, digits, '-', '_' or '.'",
                ));
            }
            if !names.insert(s.name.as_str()) {
                return Err(err(
                    key("name"),
                    format!("scanner name {} is used twice", shown(&s.name)),
                    "give every [[scanner]] its own name",
                ));
            }
            match &s.kind {
                ScannerKind::Serial(serial) => serial.validate(),
                ScannerKind::Hid(hid) => hid.validate(),
            }
            .map_err(|e| ConfigError::new(file, e.within(&format!("scanner[{i}]"))))?;
            if let Some(fb) = &s.feedback {
                let transport = match &s.kind {
                    ScannerKind::Serial(_) => crate::feedback::Transport::Serial,
                    ScannerKind::Hid(hid)
                        if hid.mode() == crate::source::hid::config::HidMode::Pos =>
                    {
                        crate::feedback::Transport::HidPos
                    }
                    ScannerKind::Hid(_) => crate::feedback::Transport::Keyboard,
                };
                fb.validate_for(transport).map_err(|e| {
                    ConfigError::new(file, e.within(&format!("scanner[{i}].feedback")))
                })?;
                // An ACK or NAK byte in a raw signal would be taken for the
                // next frame's ACK before that frame is stored.
                let acked = matches!(&s.kind, ScannerKind::Serial(serial) if serial.ack);
                if acked
                    && crate::feedback::Told::ALL.iter().any(|&t| {
                        fb.raw(t)
                            .is_some_and(|b| b.0.iter().any(|&x| x == 0x06 || x == 0x15))
                    })
                {
                    return Err(err(
                        key("feedback"),
                        "a raw feedback string holds an ACK (0x06) or NAK (0x15) byte, and this scanner has ack = true: the scanner would take it for the ACK of its next frame, before that frame is stored".into(),
                        "use other bytes for the signal (the scanner's own beep command), or set ack = false",
                    ));
                }
            }
            if s.quantity == 0 || s.quantity > 100_000 {
                return Err(err(
                    key("quantity"),
                    format!("{} is out of range", s.quantity),
                    "use 1..=100000 units per read (default 1)",
                ));
            }
            if !(16..=1 << 20).contains(&s.max_frame_bytes) {
                return Err(err(
                    key("max_frame_bytes"),
                    format!("{} is out of range", s.max_frame_bytes),
                    "use 16..=1048576 bytes (default 4096)",
                ));
            }
            if !(50..=self.dedup.window_ms).contains(&u64::from(s.double_fire_ms)) {
                return Err(err(
                    key("double_fire_ms"),
                    format!(
                        "{} ms is outside 50 ms ..= the echo window ([dedup] window_ms = {})",
                        s.double_fire_ms, self.dedup.window_ms
                    ),
                    "use e.g. 300 (a trigger's double-fire comes within ~250 ms); it cannot be wider than the window it narrows",
                ));
            }
        }
        Ok(())
    }
}

/// The longest `[gateway] state_dir` accepted, in bytes: Linux refuses a
/// path over 4095 bytes (`PATH_MAX`, 4096 with its NUL), and this leaves
/// room for the names of the files scangate keeps in the directory.
pub const STATE_DIR_MAX_BYTES: usize = 4000;

/// The longest name of one directory in a path (`NAME_MAX`).
pub const NAME_MAX_BYTES: usize = 255;

/// Why `dir` can never be a state directory, judged from the path alone:
/// too long for the kernel (`ENAMETOOLONG`), or holding a NUL byte. What
/// is on disk there (a link loop, a file) is `check-config`'s and `run`'s
/// to find.
pub fn state_dir_problem(dir: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = dir.as_os_str().as_bytes();
    if bytes.contains(&0) {
        return Some("the path holds a NUL byte, which no path can".into());
    }
    if bytes.len() > STATE_DIR_MAX_BYTES {
        return Some(format!(
            "the path is {} bytes long: Linux takes at most 4095 (PATH_MAX), and scangate at most {STATE_DIR_MAX_BYTES} to leave room for its files' names",
            bytes.len()
        ));
    }
    dir.components()
        .map(|c| c.as_os_str().as_bytes())
        .find(|name| name.len() > NAME_MAX_BYTES)
        .map(|name| {
            format!(
                "the name {} in the path is {} bytes long: Linux takes at most {NAME_MAX_BYTES} for one name (NAME_MAX)",
                crate::invalid::shown(&String::from_utf8_lossy(name)),
                name.len()
            )
        })
}

/// A refusal of the value at `key` in `file`.
fn refusal(file: Option<&Path>, key: String, problem: String, fix: &str) -> ConfigError {
    ConfigError {
        file: file.map(Path::to_owned),
        key,
        problem,
        fix: fix.into(),
    }
}
