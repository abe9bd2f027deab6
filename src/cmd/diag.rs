//! `scangate diag --out FILE`: one zip archive support can read — what
//! this gateway runs, on what, set up how, and how it is doing — without a
//! secret or a scanned payload in it.
//!
//! What goes in (`README.txt` in the archive says the same):
//! the version and build, the OS and kernel, the config with its secrets
//! redacted, `status --json`, `check-config`, `devices`, the udev rules
//! that name scangate, the unit's last journal lines (where `journalctl`
//! is), the state directory's files and sizes with the database's
//! integrity check and row counts, and a metrics snapshot. Never a ledger
//! entry, an audit record or a scan's data: the database is read for
//! counts only.
//!
//! Secrets: the config is re-written with every value of a key that names
//! a password, token, secret or credential replaced, and every URL's user
//! part and query replaced (a config that does not parse goes in as its
//! parse error alone). Every value so replaced, and the contents of the
//! secret files the config names, are then scrubbed from every file of
//! the archive as a second line (a command's error message may quote a
//! URL). The other commands run as child processes of this binary with
//! the same `--config`, each given [`CHILD_TIMEOUT`].

use super::Failure;
use crate::cli::args::ConfigArg;
use crate::exit::Exit;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one of the commands diag runs may take.
const CHILD_TIMEOUT: Duration = Duration::from_secs(30);
/// What replaces a secret.
const REDACTED: &str = "<redacted>";
/// The most of any one file or command output put in the archive.
const PART_LIMIT: usize = 4 << 20;

/// `scangate diag --out FILE`: write the archive; refuse a file that
/// exists.
pub fn run(config: &ConfigArg, out: &Path) -> Result<Exit, Failure> {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(out)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => Failure::Usage(format!(
                "{} exists: diag never overwrites a file; name a new one (e.g. --out scangate-diag-$(date +%Y%m%d-%H%M).zip)",
                out.display()
            )),
            _ => Failure::Runtime(format!(
                "cannot create {}: {e}; name a file in a directory you may write to",
                out.display()
            )),
        })?;
    let config_path = config.path();
    let mut parts = Vec::new();
    let mut secrets = Vec::new();
    let cfg = config_part(config_path.as_deref(), &mut secrets);
    parts.push(("README.txt", README.to_string()));
    parts.push(("version.txt", version_part()));
    parts.push(("system.txt", system_part()));
    parts.push(("config.toml", cfg));
    let cfg_args: Vec<String> = config_path
        .iter()
        .flat_map(|p| ["--config".to_string(), p.display().to_string()])
        .collect();
    let mut commands = String::new();
    for (name, args, with_config) in [
        ("status.json", &["status", "--json"][..], true),
        ("check-config.txt", &["check-config"][..], true),
        ("devices.txt", &["devices"][..], false),
    ] {
        let config = if with_config { &cfg_args[..] } else { &[] };
        let (stdout, summary) = child_part(args, config);
        commands += &summary;
        parts.push((name, stdout));
    }
    parts.push(("commands.txt", commands));
    parts.push(("udev-rules.txt", udev_part()));
    parts.push(("journal.txt", journal_part()));
    let loaded = crate::config::Config::load(config_path.as_deref()).ok();
    parts.push(("database.txt", database_part(loaded.as_ref())));
    parts.push(("metrics.txt", metrics_part(loaded.as_ref())));

    let mut zip = zip::ZipWriter::new(file);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o600);
    let write_err = |e: &dyn std::fmt::Display| {
        Failure::Runtime(format!(
            "cannot write {}: {e}; check the free space and try again",
            out.display()
        ))
    };
    for (name, text) in &parts {
        let text = scrub(text, &secrets);
        zip.start_file(*name, options).map_err(|e| write_err(&e))?;
        zip.write_all(text.as_bytes()).map_err(|e| write_err(&e))?;
    }
    zip.finish().map_err(|e| write_err(&e))?;
    println!("wrote {}:", out.display());
    for (name, text) in &parts {
        println!("  {name} ({} bytes)", text.len());
    }
    Ok(Exit::Ok)
}

const README: &str = "\
scangate diag: what this gateway runs, on what, set up how, and how it is doing.

version.txt       version, database schema, commit, target
system.txt        OS release, kernel, architecture, uptime
config.toml       the config file, every secret replaced by <redacted>
status.json       `scangate status --json`
check-config.txt  `scangate check-config`
devices.txt       `scangate devices`
commands.txt      each of these three: its exit code and what it printed
                  on stderr
udev-rules.txt    the udev rules files that name scangate
journal.txt       the unit's last journal lines (where journalctl is)
database.txt      the state directory's files and sizes; the database's
                  integrity check, page figures and row counts
metrics.txt       one scrape of /metrics, or the textfile

Never in it: a password, token or other secret; a scan's data; a ledger
entry or an audit record (the database is read for counts only).
";

/// `scangate --version`'s figures.
fn version_part() -> String {
    use crate::build::{COMMIT, SCHEMA_VERSION, TARGET, VERSION};
    format!("scangate {VERSION}\nschema {SCHEMA_VERSION}\ncommit {COMMIT}\ntarget {TARGET}\n")
}

/// The OS and kernel, from `/etc/os-release` and `/proc`.
fn system_part() -> String {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim_end().to_string())
            .unwrap_or_else(|e| format!("({p}: {e})"))
    };
    format!(
        "# /etc/os-release\n{}\n\n# kernel\n{} {} {}\narchitecture {}\n\n# uptime (s), idle (s)\n{}\n",
        read("/etc/os-release"),
        read("/proc/sys/kernel/ostype"),
        read("/proc/sys/kernel/osrelease"),
        read("/proc/sys/kernel/version"),
        std::env::consts::ARCH,
        read("/proc/uptime"),
    )
}

/// The config file, its secrets redacted; each redacted value and the
/// contents of the secret files it names go to `secrets`.
fn config_part(path: Option<&Path>, secrets: &mut Vec<String>) -> String {
    let Some(path) = path else {
        return "# no config file was found: scangate runs on its defaults\n".into();
    };
    let text = match read_limited(path) {
        Ok(t) => t,
        Err(e) => return format!("# {}: cannot be read: {e}\n", path.display()),
    };
    let mut table: toml::Table = match text.parse() {
        Ok(t) => t,
        Err(e) => {
            // Not shown: a line of it may hold a secret.
            let at = e
                .span()
                .map(|s| format!(" at line {}", text[..s.start].lines().count().max(1)))
                .unwrap_or_default();
            return format!(
                "# {} does not parse as TOML{at}; its text is left out (it may hold a secret)\n",
                path.display()
            );
        }
    };
    redact_table(&mut table, secrets);
    // The secret files it names: their contents are scrubbed too.
    for file in secret_files(&table) {
        if let Ok(content) = read_limited(&file) {
            for line in content.lines().map(str::trim).filter(|l| l.len() >= 4) {
                secrets.push(line.to_string());
                if let Some((_, pw)) = line.split_once(':') {
                    secrets.push(pw.to_string());
                }
            }
        }
    }
    if let Ok(dir) = std::env::var("CREDENTIALS_DIRECTORY")
        && let Ok(pw) = read_limited(&Path::new(&dir).join("redis-password"))
    {
        secrets.push(pw.trim().to_string());
    }
    secrets.retain(|s| s.len() >= 4);
    format!(
        "# {} (secrets replaced by {REDACTED})\n{}",
        path.display(),
        toml::to_string(&table).unwrap_or_default()
    )
}

/// Is `key` one whose value is a secret itself (not a file naming one)?
fn secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    let names = [
        "password",
        "passwd",
        "secret",
        "token",
        "credential",
        "auth",
    ];
    names.iter().any(|n| k.contains(n)) && !k.ends_with("_file") && !k.ends_with("_dir")
}

/// Redact `table` in place (see the module's doc).
fn redact_table(table: &mut toml::Table, secrets: &mut Vec<String>) {
    for (key, value) in table.iter_mut() {
        redact_value(secret_key(key), value, secrets);
    }
}

fn redact_value(secret: bool, value: &mut toml::Value, secrets: &mut Vec<String>) {
    match value {
        toml::Value::String(s) if secret => {
            secrets.push(std::mem::replace(s, REDACTED.into()));
        }
        toml::Value::String(s) => {
            if let Some(shown) = redact_url(s, secrets) {
                *s = shown;
            }
        }
        toml::Value::Array(items) => {
            for v in items {
                redact_value(secret, v, secrets);
            }
        }
        toml::Value::Table(t) => redact_table(t, secrets),
        _ if secret => *value = toml::Value::String(REDACTED.into()),
        _ => {}
    }
}

/// `url` with its user part and query replaced, if it is a URL that has
/// either; what was replaced goes to `secrets`.
fn redact_url(url: &str, secrets: &mut Vec<String>) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let (userinfo, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if userinfo.is_none() && query.is_none() {
        return None;
    }
    let mut shown = format!("{scheme}://");
    if let Some(u) = userinfo {
        secrets.push(u.to_string());
        if let Some((user, pw)) = u.split_once(':') {
            secrets.push(pw.to_string());
            if !user.is_empty() {
                secrets.push(user.to_string());
            }
        }
        shown += REDACTED;
        shown += "@";
    }
    shown += host;
    shown += path;
    if let Some(q) = query {
        secrets.push(q.to_string());
        shown += "?";
        shown += REDACTED;
    }
    Some(shown)
}

/// The files the config names that hold secrets (`*password_file`,
/// `*token_file`, `*auth_file`), wherever they are in it.
fn secret_files(table: &toml::Table) -> Vec<PathBuf> {
    let mut files = Vec::new();
    fn walk(t: &toml::Table, files: &mut Vec<PathBuf>) {
        for (k, v) in t {
            match v {
                toml::Value::String(s) if k.ends_with("_file") && secret_key(&k[..k.len() - 5]) => {
                    files.push(PathBuf::from(s));
                }
                toml::Value::Table(t) => walk(t, files),
                toml::Value::Array(items) => {
                    for i in items {
                        if let toml::Value::Table(t) = i {
                            walk(t, files);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    walk(table, &mut files);
    files
}

/// Every occurrence of a secret in `text` replaced.
fn scrub(text: &str, secrets: &[String]) -> String {
    let mut text = text.to_string();
    let mut sorted: Vec<&String> = secrets.iter().collect();
    // Longer first: a secret that contains another goes whole.
    sorted.sort_by_key(|s| std::cmp::Reverse(s.len()));
    for s in sorted {
        if text.contains(s.as_str()) {
            text = text.replace(s.as_str(), REDACTED);
        }
    }
    text
}

/// A regular file of at most [`PART_LIMIT`] bytes, lossily as text
/// ([`crate::files::named::read`]: a FIFO or a device a config names is
/// refused, never read, so diag cannot hang on one).
fn read_limited(path: &Path) -> Result<String, crate::files::named::ReadError> {
    let bytes = crate::files::named::read(path, PART_LIMIT as u64)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// This binary run with `args` (and `config`): its stdout, and a summary
/// (the command line, its exit code and its stderr, or why it did not run
/// or finish).
fn child_part(args: &[&str], config: &[String]) -> (String, String) {
    let command_line = std::iter::once("scangate")
        .chain(args.iter().copied())
        .chain(config.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            return (
                String::new(),
                format!("# {command_line}: cannot find this binary: {e}\n"),
            );
        }
    };
    match run_child(Command::new(exe).args(args).args(config), CHILD_TIMEOUT) {
        Ok((code, stdout, stderr)) => {
            let code = code.map_or("(killed by a signal)".into(), |c| c.to_string());
            (stdout, format!("# {command_line}: exit {code}\n{stderr}\n"))
        }
        Err(e) => (String::new(), format!("# {command_line}: {e}\n\n")),
    }
}

/// Run `cmd` with `timeout`: (exit code, stdout, stderr), each output cut
/// at [`PART_LIMIT`].
fn run_child(
    cmd: &mut Command,
    timeout: Duration,
) -> Result<(Option<i32>, String, String), String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("did not start: {e}"))?;
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(p) = pipe {
                let _ = p.take(PART_LIMIT as u64).read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = reader(child.stdout.take().map(|p| Box::new(p) as _));
    let err = reader(child.stderr.take().map(|p| Box::new(p) as _));
    let end = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "did not finish within {} s: killed",
                    timeout.as_secs()
                ));
            }
            Err(e) => return Err(format!("cannot be waited for: {e}")),
        }
    };
    Ok((
        status.code(),
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    ))
}

/// The udev rules files that name scangate, in the directories udev
/// reads.
fn udev_part() -> String {
    let mut text = String::new();
    for dir in [
        "/etc/udev/rules.d",
        "/run/udev/rules.d",
        "/usr/lib/udev/rules.d",
        "/lib/udev/rules.d",
    ] {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut names: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        names.sort();
        for path in names {
            let Ok(content) = read_limited(&path) else {
                continue;
            };
            if path.to_string_lossy().contains("scangate") || content.contains("scangate") {
                text += &format!("# {}\n{content}\n", path.display());
            }
        }
    }
    if text.is_empty() {
        text = "# no udev rules file names scangate\n".into();
    }
    text
}

/// The unit's last 300 journal lines, where there is a journal.
fn journal_part() -> String {
    let mut cmd = Command::new("journalctl");
    cmd.args([
        "-u",
        "scangate",
        "-n",
        "300",
        "--no-pager",
        "-o",
        "short-iso",
    ]);
    match run_child(&mut cmd, CHILD_TIMEOUT) {
        Ok((code, out, err)) => format!(
            "# journalctl -u scangate -n 300: exit {}\n{out}{err}",
            code.map_or("(signal)".into(), |c| c.to_string())
        ),
        Err(e) => format!("# journalctl: {e} (no journal on this machine?)\n"),
    }
}

/// The state directory's files and sizes, and the database's integrity
/// check, page figures and row counts (never a row).
fn database_part(cfg: Option<&crate::config::Config>) -> String {
    let Some(cfg) = cfg else {
        return "# the config does not load (see check-config.txt): the state directory is unknown\n"
            .into();
    };
    let dir = cfg.state_dir();
    let mut text = format!("# state directory {}\n", dir.display());
    match std::fs::read_dir(&dir) {
        Ok(entries) => {
            let mut rows: Vec<(String, String)> = entries
                .flatten()
                .map(|e| {
                    let size = e
                        .metadata()
                        .map(|m| format!("{} bytes", m.len()))
                        .unwrap_or_else(|err| format!("({err})"));
                    (e.file_name().to_string_lossy().into_owned(), size)
                })
                .collect();
            rows.sort();
            for (name, size) in rows {
                text += &format!("{name}\t{size}\n");
            }
        }
        Err(e) => text += &format!("(cannot list it: {e})\n"),
    }
    let db = dir.join("scangate.db");
    text += &format!("\n# {}\n", db.display());
    match database_figures(&db) {
        Ok(figures) => text += &figures,
        Err(e) => text += &format!("(cannot be read: {e})\n"),
    }
    text
}

fn database_figures(db: &Path) -> rusqlite::Result<String> {
    use rusqlite::OpenFlags;
    if !db.exists() {
        return Ok("(none yet)\n".into());
    }
    let c = rusqlite::Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    c.busy_timeout(Duration::from_secs(5))?;
    let mut text = String::new();
    let check: Vec<String> = c
        .prepare("PRAGMA quick_check")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    text += &format!("quick_check: {}\n", check.join("; "));
    for pragma in [
        "user_version",
        "page_size",
        "page_count",
        "freelist_count",
        "journal_mode",
    ] {
        let v: rusqlite::types::Value =
            c.query_row(&format!("PRAGMA {pragma}"), [], |r| r.get(0))?;
        text += &format!("{pragma}: {v:?}\n");
    }
    let tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    text += "rows:\n";
    for t in tables {
        let n: i64 = c.query_row(
            &format!("SELECT count(*) FROM \"{}\"", t.replace('"', "\"\"")),
            [],
            |r| r.get(0),
        )?;
        text += &format!("  {t}\t{n}\n");
    }
    Ok(text)
}

/// One scrape of the daemon's `/metrics` (`[metrics] listen`), else its
/// textfile (`[metrics] textfile`).
fn metrics_part(cfg: Option<&crate::config::Config>) -> String {
    let Some(m) = cfg.map(|c| &c.metrics) else {
        return "# the config does not load: where the metrics are is unknown\n".into();
    };
    if let Some(addr) = m.listen {
        return match scrape(addr) {
            Ok(body) => format!("# GET http://{addr}/metrics\n{body}"),
            Err(e) => format!("# GET http://{addr}/metrics: {e} (is the daemon running?)\n"),
        };
    }
    if let Some(file) = &m.textfile {
        return match read_limited(file) {
            Ok(t) => format!("# {}\n{t}", file.display()),
            Err(e) => format!("# {}: {e}\n", file.display()),
        };
    }
    "# no [metrics] listen or textfile is set\n".into()
}

/// `GET /metrics` over HTTP/1.0 (the daemon's own endpoint), its body.
fn scrape(addr: std::net::SocketAddr) -> std::io::Result<String> {
    let timeout = Duration::from_secs(5);
    let mut s = std::net::TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    s.write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())?;
    let mut buf = Vec::new();
    s.take(PART_LIMIT as u64).read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    Ok(match text.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.") && head.contains(" 200 ") => body.into(),
        Some((head, _)) => format!("(answered {})\n", head.lines().next().unwrap_or("")),
        None => "(no HTTP answer)\n".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_and_url_credentials_are_redacted_and_remembered() {
        let mut t: toml::Table = r#"
            [redis]
            url = "redis://admin:Pw0rdX@10.0.0.5:6379/0"
            password_file = "/etc/scangate/redis-password"
            sentinels = ["redis://:SentPw9@10.0.0.6:26379"]
            [[sink]]
            url = "https://inv.example/ledger?access_token=Tok123&x=1"
            bearer_token_file = "/etc/scangate/token"
            [other]
            api_token = "Abc987"
            port = 6379
        "#
        .parse()
        .unwrap();
        let mut secrets = Vec::new();
        redact_table(&mut t, &mut secrets);
        let text = toml::to_string(&t).unwrap();
        for s in ["Pw0rdX", "admin", "SentPw9", "Tok123", "Abc987"] {
            assert!(!text.contains(s), "{s} in {text}");
            assert!(secrets.iter().any(|x| x.contains(s)), "{s} not remembered");
        }
        assert!(
            text.contains("redis://<redacted>@10.0.0.5:6379/0"),
            "{text}"
        );
        assert!(
            text.contains("https://inv.example/ledger?<redacted>"),
            "{text}"
        );
        assert!(
            text.contains("/etc/scangate/redis-password"),
            "paths stay: {text}"
        );
        assert_eq!(
            secret_files(&t),
            [
                PathBuf::from("/etc/scangate/redis-password"),
                PathBuf::from("/etc/scangate/token")
            ]
        );
        assert_eq!(scrub("a Pw0rdX b", &secrets), "a <redacted> b");
    }

    #[test]
    fn a_secret_file_that_is_a_fifo_is_not_read() {
        // (Opened for reading, a FIFO with no writer blocks: the test
        // would hang where diag did.)
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pw");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let cfg = dir.path().join("c.toml");
        std::fs::write(&cfg, format!("[redis]\npassword_file = {fifo:?}\n")).unwrap();
        let mut secrets = Vec::new();
        let text = config_part(Some(&cfg), &mut secrets);
        assert!(text.contains("password_file"), "{text}");
        assert!(secrets.is_empty(), "{secrets:?}");
    }

    #[test]
    fn a_url_without_credentials_or_query_is_left_alone() {
        let mut s = Vec::new();
        assert_eq!(redact_url("redis://10.0.0.5:6379/", &mut s), None);
        assert_eq!(redact_url("/dev/ttyUSB0", &mut s), None);
        assert!(s.is_empty());
    }
}
