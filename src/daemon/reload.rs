//! `systemctl reload` (SIGHUP): the configuration read again and compared
//! with the running one ([`plan`]). Scanners added, removed or changed
//! (by name) start and stop on their own, the others untouched
//! (`Scanners`); a change of any key a running stage holds (state
//! directory, identity, `[dedup]`, `[outbox]`, `[metrics]`, `[controls]`,
//! `[redis]`) is
//! refused as a whole, naming the keys, and the running configuration is
//! kept. The daemon wires it (`daemon::run_with`).

use super::supervisor::{Stage, Supervisor};
use crate::config::{ScannerConfig, ScannerKind, Settings};
use crate::shutdown::Stopper;
use crate::source::{self, Inbound};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::path::Path;
use tokio::sync::mpsc;

/// What a reload changes: scanners, by name.
#[derive(Debug, Default)]
pub struct Plan {
    /// New scanners, started.
    pub added: Vec<ScannerConfig>,
    /// Scanners no longer configured, stopped.
    pub removed: Vec<String>,
    /// Scanners whose keys changed, restarted with the new ones.
    pub changed: Vec<ScannerConfig>,
}

impl Plan {
    /// Nothing changes.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }

    /// "added a, b; removed c; changed d" (for the log).
    pub fn describe(&self) -> String {
        let names = |v: &mut dyn Iterator<Item = &str>| v.collect::<Vec<_>>().join(", ");
        let mut parts = Vec::new();
        if !self.added.is_empty() {
            parts.push(format!(
                "added {}",
                names(&mut self.added.iter().map(|s| s.name.as_str()))
            ));
        }
        if !self.removed.is_empty() {
            parts.push(format!(
                "removed {}",
                names(&mut self.removed.iter().map(String::as_str))
            ));
        }
        if !self.changed.is_empty() {
            parts.push(format!(
                "changed {}",
                names(&mut self.changed.iter().map(|s| s.name.as_str()))
            ));
        }
        if parts.is_empty() {
            "nothing changed".into()
        } else {
            parts.join("; ")
        }
    }
}

/// Two values of one key are the same (the config types compare by what
/// they print: every one derives `Debug`, not all `PartialEq`).
fn same<T: Debug>(a: &T, b: &T) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

/// What changes from `old` (running) to `new` (just read and resolved):
/// the scanners to start and stop, or the keys whose change needs a
/// restart (then nothing is applied).
pub fn plan(old: &Settings, new: &Settings) -> Result<Plan, Vec<String>> {
    let (o, n) = (&old.config, &new.config);
    let mut restart = Vec::new();
    let mut key = |name: &str, same: bool| {
        if !same {
            restart.push(name.to_string());
        }
    };
    key("gateway.facility", o.gateway.facility == n.gateway.facility);
    key("gateway.id", o.gateway.id == n.gateway.id);
    key("gateway.state_dir", o.state_dir() == n.state_dir());
    key("dedup.window_ms", o.dedup.window_ms == n.dedup.window_ms);
    key(
        "dedup.retention_hours",
        o.dedup.retention_hours == n.dedup.retention_hours,
    );
    key(
        "outbox.keep_raw_hours",
        o.outbox.keep_raw_hours == n.outbox.keep_raw_hours,
    );
    key(
        "outbox.min_free_mb",
        o.outbox.min_free_mb == n.outbox.min_free_mb,
    );
    key(
        "outbox.warn_days_left",
        o.outbox.warn_days_left == n.outbox.warn_days_left,
    );
    key("metrics.textfile", o.metrics.textfile == n.metrics.textfile);
    key("metrics.listen", o.metrics.listen == n.metrics.listen);
    key(
        "metrics.interval_s",
        o.metrics.interval_s == n.metrics.interval_s,
    );
    // The checks' settings are read at start (each scanner's own `checks`
    // are set again at a reload).
    key("checks", o.checks == n.checks);
    // Every source recognises the control labels it started with.
    key("controls", o.controls == n.controls);
    let redis_same = same(&o.redis, &n.redis);
    key("redis", redis_same);
    if redis_same {
        // The same keys, other contents of the files they name.
        key("redis.password_file", same(&old.redis, &new.redis));
    }
    // A sink's thread starts with the daemon; its keys and files change
    // at a reload (`daemon/sinks.rs`), its being there does not.
    let sink_names =
        |s: &Settings| -> Vec<String> { s.config.sinks.iter().map(|s| s.name.clone()).collect() };
    key("sink", sink_names(old) == sink_names(new));
    let was: BTreeMap<&str, &ScannerConfig> =
        o.scanners.iter().map(|s| (s.name.as_str(), s)).collect();
    let mut plan = Plan::default();
    for (i, sc) in n.scanners.iter().enumerate() {
        // The facility store checks each scanner's `shared` against the
        // other gateways' when the claimer connects: only at start.
        let shared_differs = match was.get(sc.name.as_str()) {
            Some(before) => before.shared != sc.shared,
            None => sc.shared,
        };
        if n.redis.is_some() && shared_differs {
            restart.push(format!("scanner[{i}].shared"));
        }
        match was.get(sc.name.as_str()) {
            None => plan.added.push(sc.clone()),
            Some(before) if !same(*before, sc) => plan.changed.push(sc.clone()),
            Some(_) => {}
        }
    }
    let now: BTreeSet<&str> = n.scanners.iter().map(|s| s.name.as_str()).collect();
    plan.removed = o
        .scanners
        .iter()
        .filter(|s| !now.contains(s.name.as_str()))
        .map(|s| s.name.clone())
        .collect();
    if restart.is_empty() {
        Ok(plan)
    } else {
        Err(restart)
    }
}

/// The line of `path` where its TOML stops parsing (`None`: it parses,
/// or cannot be read as the config is, [`crate::config::Config::read_text`]):
/// a broken file's error names its line too.
pub fn syntax_error_line(path: &Path) -> Option<usize> {
    let text = crate::config::Config::read_text(path).ok()??;
    let start = text.parse::<toml::Table>().err()?.span()?.start;
    Some(text[..start.min(text.len())].matches('\n').count() + 1)
}

/// A scanner's task as the daemon runs it.
struct Running {
    /// Stops this task alone.
    stopper: Stopper,
}

/// The scanners' source tasks, each under the supervisor with a stop
/// signal of its own (a child of the daemon's): started at start, and
/// started, stopped or restarted one by one at a reload.
pub(crate) struct Scanners {
    running: BTreeMap<String, Running>,
    /// Told to stop, their end not heard yet.
    retiring: BTreeSet<String>,
    /// To start once the task of the same name has ended (changed at a
    /// reload: its device is closed first).
    next: BTreeMap<String, ScannerConfig>,
    /// Each source's way into the outbox is made from this one.
    out: source::ToOutbox,
    gateway: String,
    /// Each scanner's checks at the counter, set as it starts.
    checks: std::sync::Arc<crate::checks::Checks>,
}

impl Scanners {
    /// No scanner yet; each will send through a copy of `out`
    /// ([`source::ToOutbox::for_source`]).
    pub(crate) fn new(
        out: source::ToOutbox,
        gateway: &str,
        checks: std::sync::Arc<crate::checks::Checks>,
    ) -> Scanners {
        Scanners {
            running: BTreeMap::new(),
            retiring: BTreeSet::new(),
            next: BTreeMap::new(),
            out,
            gateway: gateway.to_string(),
            checks,
        }
    }

    /// Start `sc`'s source task (after the one of its name, if that is
    /// still ending).
    pub(crate) fn start(&mut self, stages: &mut Supervisor, stop: &Stopper, sc: ScannerConfig) {
        if self.retiring.contains(&sc.name) {
            self.next.insert(sc.name.clone(), sc);
            return;
        }
        self.checks.set_scanner(&sc.name, sc.checks.as_deref());
        let (stopper, token) = stop.child();
        let out = self.out.for_source();
        let stage = Stage::Scanner(sc.name.clone());
        self.running.insert(sc.name.clone(), Running { stopper });
        // The gateway LED shows its decisions beside the source, for as
        // long as the source runs.
        let led = sc.feedback.clone().filter(|f| f.led.is_some()).map(|fb| {
            let signals = out.listen(&sc.name);
            let policy = sc.profile().unserialised;
            let telemetry = out.telemetry().clone();
            tokio::spawn(source::tell::led(
                fb,
                sc.name.clone(),
                policy,
                signals,
                telemetry,
            ))
        });
        let with_led = |source: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>| async move {
            source.await;
            if let Some(led) = led {
                led.abort();
            }
        };
        match &sc.kind {
            ScannerKind::Serial(serial) => {
                let sc = sc.with_kind(serial.clone()).owned_by(&self.gateway);
                stages.task(
                    stage,
                    with_led(Box::pin(source::serial::run(sc, out, token))),
                )
            }
            ScannerKind::Hid(hid) => {
                let sc = sc.with_kind(hid.clone()).owned_by(&self.gateway);
                stages.task(stage, with_led(Box::pin(source::hid::run(sc, out, token))))
            }
        }
    }

    /// Stop scanner `name`'s task (its end is heard in [`Scanners::ended`]).
    pub(crate) fn stop(&mut self, name: &str) {
        self.next.remove(name);
        if let Some(r) = self.running.remove(name) {
            r.stopper.stop();
            self.retiring.insert(name.to_string());
        }
    }

    /// Stop `sc`'s task and start it again with its new keys.
    pub(crate) fn restart(&mut self, stages: &mut Supervisor, stop: &Stopper, sc: ScannerConfig) {
        self.stop(&sc.name);
        self.start(stages, stop, sc);
    }

    /// Apply a reload's `plan`.
    pub(crate) fn apply(&mut self, stages: &mut Supervisor, stop: &Stopper, plan: Plan) {
        for name in &plan.removed {
            self.stop(name);
        }
        for sc in plan.changed {
            self.restart(stages, stop, sc);
        }
        for sc in plan.added {
            self.start(stages, stop, sc);
        }
    }

    /// Scanner `name`'s task ended: true if it was told to (a reload
    /// stopped it; its replacement, if any, starts now), false if it ended
    /// by itself (a failure).
    pub(crate) fn ended(&mut self, stages: &mut Supervisor, stop: &Stopper, name: &str) -> bool {
        if !self.retiring.remove(name) {
            return false;
        }
        if let Some(sc) = self.next.remove(name) {
            self.start(stages, stop, sc);
        }
        true
    }

    /// The sender the tasks were given (the stop drops it so the writer
    /// ends once the tasks are gone).
    pub(crate) fn into_sender(self) -> mpsc::Sender<Inbound> {
        self.out.queue().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn settings(text: &str) -> Settings {
        Settings::resolve(&Config::parse(text, None).expect("valid")).expect("resolved")
    }

    const BASE: &str = "[gateway]\nid = \"gw\"\nstate_dir = \"/tmp/x\"\n";

    fn serial(name: &str, path: &str) -> String {
        format!(
            "[[scanner]]\nname = \"{name}\"\nkind = \"serial\"\npath = \"{path}\"\nscan_type = \"dispense\"\n"
        )
    }

    #[test]
    fn scanners_are_diffed_by_name() {
        let old = settings(&format!(
            "{BASE}{}{}",
            serial("a", "/dev/ttyUSB0"),
            serial("b", "/dev/ttyUSB1")
        ));
        let new = settings(&format!(
            "{BASE}{}{}",
            serial("b", "/dev/ttyUSB9"),
            serial("c", "/dev/ttyUSB2")
        ));
        let changes = plan(&old, &new).expect("no restart needed");
        assert_eq!(changes.describe(), "added c; removed a; changed b");
        let same = plan(&new, &new).unwrap();
        assert!(same.is_empty());
    }

    #[test]
    fn a_key_a_running_stage_holds_refuses_the_reload() {
        let old = settings(BASE);
        let new = settings(&format!(
            "{}\n[dedup]\nwindow_ms = 5000\n{}",
            BASE.replace("/tmp/x", "/tmp/y"),
            serial("a", "/dev/ttyUSB0")
        ));
        assert_eq!(
            plan(&old, &new).unwrap_err(),
            ["gateway.state_dir", "dedup.window_ms"]
        );
    }

    /// Every source recognises the control labels it started with: new
    /// contents need a restart (and new labels printed); a scanner's
    /// `unserialised` or `feedback` restarts that scanner alone.
    #[test]
    fn control_label_contents_need_a_restart_a_scanners_policy_restarts_it() {
        let old = settings(&format!("{BASE}{}", serial("a", "/dev/ttyUSB0")));
        let new = settings(&format!(
            "{BASE}[controls]\nrepeat = \"AGAIN\"\n{}",
            serial("a", "/dev/ttyUSB0")
        ));
        assert_eq!(plan(&old, &new).unwrap_err(), ["controls"]);
        let policy = settings(&format!(
            "{BASE}{}unserialised = \"ask\"\n",
            serial("a", "/dev/ttyUSB0")
        ));
        let p = plan(&old, &policy).unwrap();
        assert_eq!(p.changed.len(), 1);
    }

    /// The disk floor and the days-left warning are fixed at start (the
    /// outbox writer's `Floor`, the metrics thread): a reload that changes
    /// them must say so, not report "nothing changed" and keep the old ones.
    #[test]
    fn the_disk_floor_and_days_left_warning_need_a_restart() {
        let old = settings(&format!("{BASE}{}", serial("a", "/dev/ttyUSB0")));
        let new = settings(&format!(
            "{BASE}[outbox]\nmin_free_mb = 500\nwarn_days_left = 30\n{}",
            serial("a", "/dev/ttyUSB0")
        ));
        assert_eq!(
            plan(&old, &new).unwrap_err(),
            ["outbox.min_free_mb", "outbox.warn_days_left"]
        );
    }

    #[test]
    fn with_redis_a_scanners_shared_flag_needs_a_restart() {
        let redis = "[redis]\nurl = \"redis://127.0.0.1:1/\"\n";
        let old = settings(&format!("{BASE}{redis}{}", serial("a", "/dev/ttyUSB0")));
        let shared = format!("{}shared = true\n", serial("a", "/dev/ttyUSB0"));
        let new = settings(&format!("{BASE}{redis}{shared}"));
        assert_eq!(plan(&old, &new).unwrap_err(), ["scanner[0].shared"]);
        // Without [redis], `shared` is a key like any other of the scanner.
        let (old, new) = (
            settings(&format!("{BASE}{}", serial("a", "/dev/ttyUSB0"))),
            settings(&format!("{BASE}{shared}")),
        );
        assert_eq!(plan(&old, &new).unwrap().describe(), "changed a");
    }
}
