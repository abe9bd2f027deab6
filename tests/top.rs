//! `scangate top` in a real terminal: tmux (a server of the test's own,
//! `-L`), driven with `send-keys` and read with `capture-pane` at 80×24.
//!
//! - It shows each scanner (plugged in or not), the decisions the tap
//!   showed, the store and the health; `s` sorts, `/` filters.
//! - `q`, SIGINT and SIGHUP (the session closed, as when SSH drops)
//!   leave it, the terminal put back (canonical mode, echo).
//! - A terminal smaller than 80×24 is told what size is needed; a
//!   stopped daemon is told, exit 1.

use crate::util::*;

/// A tmux server of this test's own, killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn new(name: &str, (w, h): (u16, u16)) -> Tmux {
        let t = Tmux {
            socket: format!("scangate-{name}-{}", std::process::id()),
        };
        t.run(&[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            &w.to_string(),
            "-y",
            &h.to_string(),
            "sh",
        ]);
        t
    }

    fn run(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .env("TERM", "xterm-256color")
            .output()
            .expect("tmux runs (script/test installs it)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// Type `line` into the shell and press Enter.
    fn line(&self, line: &str) {
        self.keys(&["-l", line]);
        self.keys(&["Enter"]);
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "t"])
    }

    fn wait_for(&self, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let mut last = String::new();
        wait_until_for(what, event_timeout(), || {
            last = self.screen();
            cond(&last)
        });
        last
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}

/// Kills, when dropped, any `scangate top` left running for `cfg` (a
/// failing test must not leave one behind).
struct NoTopLeft<'a>(&'a std::path::Path);

impl Drop for NoTopLeft<'_> {
    fn drop(&mut self) {
        let _ = std::process::Command::new("pkill")
            .args(["-KILL", "-f", &format!("top --config {}", self.0.display())])
            .status();
    }
}

/// The command line that runs `scangate top` for `cfg`, then says how it
/// exited and whether the terminal is canonical again.
fn top_line(cfg: &std::path::Path) -> String {
    format!(
        "{} top --config {}; echo TOP-EXIT=$?; stty -a | tr ' ;' '\\n\\n' | grep -x -- '-*icanon'",
        bin(),
        cfg.display()
    )
}

/// The shell printed how `top` exited (not the typed command line).
fn exited(screen: &str) -> bool {
    screen.lines().any(|l| l.starts_with("TOP-EXIT="))
}

fn running_tops(cfg: &std::path::Path) -> usize {
    let out = std::process::Command::new("pgrep")
        .args(["-f", &format!("top --config {}", cfg.display())])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

#[test]
fn top_shows_the_scanners_sorts_filters_and_q_puts_the_terminal_back() {
    let mut gw = Gateway::builder("scangate-top-")
        .window_ms(60_000)
        .pty(ScannerSpec::named("counter").ack())
        .pty(ScannerSpec::named("back").ack())
        .config(
            "\n[[scanner]]\nname = \"drawer\"\nkind = \"serial\"\npath = \"/dev/scangate-test-absent\"\nscan_type = \"dispense\"\n",
        )
        .build();
    gw.start();
    let [mut counter, _back] = gw.take_scanners();
    let _no_top_left = NoTopLeft(&gw.cfg);
    let tmux = Tmux::new("top", (80, 24));
    tmux.line(&top_line(&gw.cfg));
    let screen = tmux.wait_for("top's screen", |s| {
        s.contains("scangate top") && s.contains("drawer")
    });
    assert!(screen.contains("store: embedded"), "{screen}");
    wait_until("top attached to the tap", || {
        gw.daemon().log().contains("a tap reader attached")
    });
    for serial in ["TOP001", "TOP001", "TOP002"] {
        counter.send(&frame(&dscsa(serial))).unwrap();
        replies(&mut counter, 1);
    }
    // counter: 2 committed, 1 echo; its row says so.
    let screen = tmux.wait_for("counter's decisions", |s| {
        s.lines().any(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            cells.first() == Some(&"counter")
                && cells.get(1..5) == Some(&["connected", "3", "2", "1"][..])
        })
    });
    assert!(screen.lines().count() <= 24, "{screen}");
    // The scanner whose device is absent is shown unplugged, and why the
    // gateway is degraded.
    assert!(
        screen
            .lines()
            .any(|l| l.starts_with("drawer") && l.contains("UNPLUGGED")),
        "{screen}"
    );
    assert!(screen.contains("DEGRADED: scanner drawer"), "{screen}");
    // Sorted by reads per minute: counter first.
    tmux.keys(&["s"]);
    let screen = tmux.wait_for("the sort", |s| s.contains("sort: reads/min"));
    let order: Vec<&str> = screen
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| ["counter", "back", "drawer"].contains(w))
        .collect();
    assert_eq!(order.first(), Some(&"counter"), "{screen}");
    // Filtered by name.
    tmux.keys(&["/"]);
    tmux.keys(&["-l", "dra"]);
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the filter", |s| s.contains("filter \"dra\""));
    assert!(
        !screen.lines().any(|l| l.starts_with("counter")),
        "{screen}"
    );
    assert!(screen.lines().any(|l| l.starts_with("drawer")), "{screen}");
    // q: the shell again, its terminal canonical.
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("top to leave", exited);
    assert!(screen.contains("TOP-EXIT=0"), "{screen}");
    let after = tmux.wait_for("stty", |s| {
        s.lines()
            .any(|l| l.trim() == "icanon" || l.trim() == "-icanon")
    });
    assert!(after.lines().any(|l| l.trim() == "icanon"), "{after}");
}

#[test]
fn sigint_and_a_closed_session_leave_top_and_a_small_terminal_is_told_the_size() {
    let mut gw = Gateway::builder("scangate-top-sig-")
        .pty(ScannerSpec::named("counter").ack())
        .build();
    gw.start();
    let _no_top_left = NoTopLeft(&gw.cfg);
    // SIGINT from outside (kill -INT): the terminal put back.
    let tmux = Tmux::new("topint", (80, 24));
    tmux.line(&top_line(&gw.cfg));
    tmux.wait_for("top's screen", |s| s.contains("q quit"));
    let pid = std::process::Command::new("pgrep")
        .args(["-f", &format!("top --config {}", gw.cfg.display())])
        .output()
        .unwrap();
    let pid = String::from_utf8_lossy(&pid.stdout).trim().to_string();
    assert!(!pid.is_empty());
    std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    let screen = tmux.wait_for("top to leave on SIGINT", |s| {
        s.lines()
            .any(|l| l.trim() == "icanon" || l.trim() == "-icanon")
    });
    assert!(screen.contains("TOP-EXIT=0"), "{screen}");
    assert!(screen.lines().any(|l| l.trim() == "icanon"), "{screen}");
    // The session closed under it (SIGHUP): it leaves, nothing left running.
    tmux.line(&top_line(&gw.cfg));
    tmux.wait_for("top's screen again", |s| s.contains("q quit"));
    assert_eq!(running_tops(&gw.cfg), 1);
    tmux.run(&["kill-session", "-t", "t"]);
    wait_until("top to end with its session", || running_tops(&gw.cfg) == 0);
    // Too small: it says what it needs and exits 2.
    let small = Tmux::new("topsmall", (60, 20));
    small.line(&top_line(&gw.cfg));
    let screen = small.wait_for("the size message", exited);
    assert!(screen.contains("at least 80x24"), "{screen}");
    assert!(screen.contains("TOP-EXIT=2"), "{screen}");
}

#[test]
fn against_a_stopped_daemon_top_says_so_and_exits_1() {
    let gw = Gateway::builder("scangate-top-stopped-")
        .pty(ScannerSpec::named("counter").ack())
        .build();
    let out: Outcome = cli_cfg(&gw.cfg, &["top"]).into();
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("not running"), "{}", out.stderr);
}
