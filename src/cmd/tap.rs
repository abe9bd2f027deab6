//! `scangate tap`: every read and its decision, live, from the running
//! daemon's tap socket ([`crate::daemon::tap`] says how it is served).
//!
//! The daemon sends every line to every reader; this command filters
//! (`--scanner`, `--decision`) and renders them. A read's line comes
//! before its decision, so with `--decision` a read waits here until its
//! decision says whether it is shown (its ACK line too, matched by scan
//! UUID; a signal line, which names only its scanner, follows the shown
//! or hidden fate of that scanner's last decision).

use super::{Failure, load};
use crate::cli::args::TapArgs;
use crate::daemon::tap::{Greeting, Hello, socket_path};
use crate::exit::Exit;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

/// Reads held for their decision, at most (the oldest is dropped).
const HELD: usize = 512;

/// `scangate tap`.
pub fn run(args: &TapArgs) -> Result<Exit, Failure> {
    let cfg = load(&args.config)?;
    let path = socket_path(&cfg.state_dir());
    let conn = match UnixStream::connect(&path) {
        Ok(c) => c,
        Err(e) => {
            let why = match e.kind() {
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                    "the daemon is not running: start it (`systemctl start scangate`), or name this gateway's config with --config".to_string()
                }
                std::io::ErrorKind::PermissionDenied => {
                    "permission denied: run it as root or as a member of group scangate".to_string()
                }
                _ => e.to_string(),
            };
            eprintln!("scangate tap: cannot attach to {}: {why}", path.display());
            return Ok(match e.kind() {
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                    Exit::CheckFailed
                }
                _ => Exit::Runtime,
            });
        }
    };
    let socket_err = |e: std::io::Error| {
        Failure::Runtime(format!(
            "reading the tap socket {} failed: {e}",
            path.display()
        ))
    };
    let mut greeting = serde_json::to_vec(&Greeting { raw: args.raw }).expect("serialises");
    greeting.push(b'\n');
    (&conn).write_all(&greeting).map_err(socket_err)?;
    let mut lines = BufReader::new(&conn).lines();
    let hello: Hello = match lines.next() {
        Some(Ok(line)) => serde_json::from_str(&line)
            .map_err(|e| Failure::Runtime(format!("the tap answered what it should not ({e})")))?,
        Some(Err(e)) => return Err(socket_err(e)),
        None => {
            eprintln!("scangate tap: the daemon closed the tap at once (it is stopping)");
            return Ok(Exit::CheckFailed);
        }
    };
    if hello.event != "hello" {
        eprintln!(
            "scangate tap: refused: {}",
            hello.why.as_deref().unwrap_or("no reason given")
        );
        return Ok(Exit::CheckFailed);
    }
    if !args.json {
        eprintln!(
            "scangate tap: attached to gateway {} (scangate {}); Ctrl-C leaves",
            hello.gateway, hello.version
        );
    }
    let mut view = View::new(args);
    let mut out = std::io::stdout().lock();
    for line in lines {
        let line = line.map_err(socket_err)?;
        let Ok(event) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let shown = view.take(&line, &event);
        for l in &shown {
            if writeln!(out, "{l}").and_then(|()| out.flush()).is_err() {
                return Ok(Exit::Ok); // the reader of our output left (`| head`)
            }
        }
        if args.count.is_some_and(|n| view.decisions >= n) {
            return Ok(Exit::Ok);
        }
    }
    if !args.json {
        eprintln!("scangate tap: the daemon closed the tap (it stopped)");
    }
    Ok(Exit::Ok)
}

/// What is shown, given the filters.
struct View<'a> {
    args: &'a TapArgs,
    /// Reads held until their decision (scan UUID → its lines: the read,
    /// and its ACK where that came first).
    held: HashMap<String, Vec<String>>,
    held_order: VecDeque<String>,
    /// Scan UUIDs whose decision was shown (for their ACK lines).
    shown: VecDeque<String>,
    /// Per scanner: whether its last decision was shown.
    last_shown: HashMap<String, bool>,
    /// Decisions shown.
    decisions: u64,
}

impl<'a> View<'a> {
    fn new(args: &'a TapArgs) -> View<'a> {
        View {
            args,
            held: HashMap::new(),
            held_order: VecDeque::new(),
            shown: VecDeque::new(),
            last_shown: HashMap::new(),
            decisions: 0,
        }
    }

    /// The lines to print for one line from the daemon (`line`, parsed
    /// as `event`).
    fn take(&mut self, line: &str, event: &Value) -> Vec<String> {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let kind = text(&event["event"]);
        let scanner = text(&event["scanner"]);
        let uuid = text(&event["scan_uuid"]);
        if kind == "lost" {
            return vec![self.render(line, event)];
        }
        if !self.args.scanner.is_empty() && !self.args.scanner.contains(&scanner) {
            return Vec::new();
        }
        let filtered = !self.args.decision.is_empty();
        match kind.as_str() {
            "read" if filtered => {
                self.hold(uuid, self.render(line, event));
                Vec::new()
            }
            "acked" if filtered && self.held.contains_key(&uuid) => {
                let rendered = self.render(line, event);
                self.held.entry(uuid).or_default().push(rendered);
                Vec::new()
            }
            "decided" => {
                let decision = text(&event["decision"]);
                let show = !filtered
                    || self.args.decision.contains(&decision)
                    || (decision == "ambiguous" && self.args.decision.iter().any(|d| d == "echo"));
                self.last_shown.insert(scanner, show);
                let read = self.held.remove(&uuid);
                if !show {
                    return Vec::new();
                }
                self.decisions += 1;
                self.shown.push_back(uuid);
                if self.shown.len() > HELD {
                    self.shown.pop_front();
                }
                read.into_iter()
                    .flatten()
                    .chain([self.render(line, event)])
                    .collect()
            }
            "acked" if filtered && !self.shown.contains(&uuid) => Vec::new(),
            "told" if filtered && !self.last_shown.get(&scanner).copied().unwrap_or(false) => {
                Vec::new()
            }
            _ => vec![self.render(line, event)],
        }
    }

    fn hold(&mut self, uuid: String, rendered: String) {
        if self.held_order.len() >= HELD
            && let Some(old) = self.held_order.pop_front()
        {
            self.held.remove(&old);
        }
        self.held_order.push_back(uuid.clone());
        self.held.insert(uuid, vec![rendered]);
    }

    /// One line as printed: as sent with `--json`, else as text.
    fn render(&self, line: &str, event: &Value) -> String {
        if self.args.json {
            line.to_string()
        } else {
            text(event)
        }
    }
}

/// A tap line as a technician reads it: the local time it came, the
/// scanner, what happened.
pub fn text(e: &Value) -> String {
    let s = |k: &str| e[k].as_str().unwrap_or_default();
    let ms = |k: &str| e[k].as_f64().map(|v| format!("{v:.1} ms"));
    let now = chrono::Local::now().format("%H:%M:%S%.3f");
    let what = match s("event") {
        "read" => {
            let mut parts = Vec::new();
            match (e["aim"].as_str(), e["symbology"].as_str()) {
                (Some(aim), Some(name)) => parts.push(format!("{aim} {name}")),
                _ => parts.push(format!("undecoded ({})", s("undecoded"))),
            }
            for (key, label) in [
                ("gtin", "GTIN"),
                ("ndc", "NDC"),
                ("lot", "lot"),
                ("expiry", "exp"),
                ("serial", "SN"),
                ("control", "control"),
            ] {
                if let Some(v) = e[key].as_str() {
                    parts.push(format!("{label} {v}"));
                }
            }
            parts.push(format!("({}, {} B)", s("scan_type"), e["bytes"]));
            if let Some(raw) = e["raw"].as_str() {
                parts.push(format!("raw {raw}"));
            }
            format!("read       {}", parts.join("  "))
        }
        "decided" => {
            let mut what = format!("{:<10}", s("decision"));
            if let Some(alert) = e["alert"].as_str() {
                what.push_str(&format!(" ALERT {alert}"));
            }
            if let Some(twin) = e["echoes"].as_str() {
                what.push_str(&format!(" echo of {twin}"));
            }
            if let Some(reason) = e["reason"].as_str() {
                what.push_str(&format!(" {reason}"));
            }
            if let Some(control) = e["control"].as_str() {
                what.push_str(&format!(" {control}"));
            }
            if let Some(took) = ms("decided_ms") {
                what.push_str(&format!("  (decided in {took})"));
            }
            what
        }
        "acked" => format!("  ACK      {}", ms("ack_ms").unwrap_or_default()),
        "told" => format!(
            "  told     {} via {}{}",
            s("told"),
            s("via"),
            ms("told_ms")
                .map(|t| format!(", {t} after the read"))
                .unwrap_or_default()
        ),
        "lost" => {
            return format!(
                "{now}  (this tap fell behind: {} line(s) lost; the gateway did not wait)",
                e["lines"]
            );
        }
        other => other.to_string(),
    };
    format!("{now}  {:<12} {what}", s("scanner"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(decision: &[&str], scanner: &[&str]) -> TapArgs {
        TapArgs {
            config: crate::cli::args::ConfigArg { config: None },
            scanner: scanner.iter().map(|s| s.to_string()).collect(),
            decision: decision.iter().map(|s| s.to_string()).collect(),
            json: true,
            raw: false,
            count: None,
        }
    }

    fn feed(view: &mut View<'_>, lines: &[&str]) -> Vec<String> {
        lines
            .iter()
            .flat_map(|l| view.take(l, &serde_json::from_str(l).unwrap()))
            .collect()
    }

    const READ: &str =
        r#"{"event":"read","scan_uuid":"u1","scanner":"a","scan_type":"dispense","bytes":3}"#;
    const ACK: &str = r#"{"event":"acked","scan_uuid":"u1","scanner":"a","ack_ms":1.0}"#;
    const ECHO: &str = r#"{"event":"decided","scan_uuid":"u1","scanner":"a","decision":"ambiguous","state":"suppressed"}"#;
    const TOLD: &str = r#"{"event":"told","scanner":"a","told":"ambiguous","via":"serial"}"#;

    #[test]
    fn a_read_waits_for_its_decision_and_its_ack_and_signal_follow_it() {
        let a = args(&["echo"], &[]);
        let mut view = View::new(&a);
        assert_eq!(
            feed(&mut view, &[READ, ACK, ECHO, TOLD]),
            [READ, ACK, ECHO, TOLD]
        );
        // (embedded: the ACK follows the decision)
        let mut view = View::new(&a);
        assert_eq!(
            feed(&mut view, &[READ, ECHO, ACK, TOLD]),
            [READ, ECHO, ACK, TOLD]
        );
        assert_eq!(view.decisions, 1);
        let a = args(&["committed"], &[]);
        let mut view = View::new(&a);
        assert!(feed(&mut view, &[READ, ACK, ECHO, TOLD]).is_empty());
    }

    #[test]
    fn without_filters_every_line_is_shown_at_once_and_other_scanners_are_left_out() {
        let a = args(&[], &[]);
        let mut view = View::new(&a);
        assert_eq!(feed(&mut view, &[READ, ACK, ECHO, TOLD]).len(), 4);
        let a = args(&[], &["b"]);
        let mut view = View::new(&a);
        assert!(feed(&mut view, &[READ, ACK, ECHO, TOLD]).is_empty());
    }

    #[test]
    fn the_clap_choices_are_the_words_the_daemon_sends() {
        use clap::CommandFactory as _;
        let cmd = crate::cli::args::Cli::command();
        let tap = cmd.find_subcommand("tap").unwrap();
        let arg = tap
            .get_arguments()
            .find(|a| a.get_id() == "decision")
            .unwrap();
        let choices: Vec<String> = arg
            .get_possible_values()
            .iter()
            .map(|v| v.get_name().to_string())
            .collect();
        assert_eq!(choices, crate::telemetry::tap::DECISION_WORDS);
    }
}
