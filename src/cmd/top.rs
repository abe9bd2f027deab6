//! `scangate top`: the gateway at a glance, full screen, refreshed each
//! second: per scanner its reads per minute, decisions, last read, ACK
//! p99, feedback channel and whether it is plugged in; the outbox, the
//! facility store, the disk, the latest alerts.
//!
//! Two sources: the status `scangate status` reads (the status file and
//! the database, read-only, once a second), and the tap socket
//! ([`crate::daemon::tap`]), read on a thread of its own, for what
//! happens between two refreshes (counted from when `top` started). The
//! terminal is put back as it was on `q`, Ctrl-C, SIGINT, SIGTERM, and
//! when drawing fails; on SIGHUP (a closed SSH session) there is no
//! terminal left to put back and it leaves at once.

mod view;

use super::{Failure, load};
use crate::cli::args::ConfigArg;
use crate::daemon::tap::{Greeting, Hello, socket_path};
use crate::exit::Exit;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write as _};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use view::{Board, Live, MIN_SIZE, Sort};

/// How often the status is read again.
const REFRESH: Duration = Duration::from_secs(1);

/// Set by SIGINT and SIGTERM: leave, putting the terminal back.
static LEAVE: AtomicBool = AtomicBool::new(false);

extern "C" fn leave(_: libc::c_int) {
    LEAVE.store(true, Ordering::Relaxed);
}

/// SIGHUP: the terminal is gone (a closed SSH session, a killed
/// multiplexer), so there is nothing to put back, and reading it would
/// only return its hang-up again: leave at once.
extern "C" fn hung_up(_: libc::c_int) {
    // SAFETY: _exit is async-signal-safe; nothing is left to flush.
    unsafe { libc::_exit(0) }
}

/// `scangate top`.
pub fn run(config: &ConfigArg) -> Result<Exit, Failure> {
    let cfg = load(config)?;
    let path = config.path();
    let status = |now_ms| crate::cmd::status::gather(&cfg, path.as_deref(), now_ms);
    let tap = match attach(&cfg.state_dir()) {
        Ok(tap) => tap,
        Err(_) => {
            eprintln!(
                "scangate top: the daemon is not running (no fresh status file, no tap socket in {}): start it (`systemctl start scangate`), or name this gateway's config with --config",
                cfg.state_dir().display()
            );
            return Ok(Exit::CheckFailed);
        }
    };
    let (w, h) = ratatui::crossterm::terminal::size().map_err(|e| {
        Failure::Usage(format!(
            "scangate top needs a terminal ({e}): run it in one, e.g. over SSH with `ssh -t`"
        ))
    })?;
    if w < MIN_SIZE.0 || h < MIN_SIZE.1 {
        return Err(Failure::Usage(format!(
            "scangate top needs a terminal of at least {}x{}; this one is {w}x{h}: enlarge it, or use `scangate status`",
            MIN_SIZE.0, MIN_SIZE.1
        )));
    }
    let first = status(now_ms()).map_err(Failure::Store)?;
    let live = Arc::new(Mutex::new(Live::default()));
    read_tap(tap, live.clone());
    let handlers: [(libc::c_int, extern "C" fn(libc::c_int)); 3] = [
        (libc::SIGINT, leave),
        (libc::SIGTERM, leave),
        (libc::SIGHUP, hung_up),
    ];
    for (sig, handler) in handlers {
        // SAFETY: each handler only stores to an atomic or calls _exit
        // (both async-signal-safe).
        unsafe { libc::signal(sig, handler as *const () as libc::sighandler_t) };
    }
    let feedback: HashMap<String, String> = cfg
        .scanners
        .iter()
        .map(|s| (s.name.clone(), feedback_channel(s)))
        .collect();
    let mut terminal = ratatui::init();
    let ended = screen(&mut terminal, first, &status, &live, &feedback);
    ratatui::restore();
    ended.map_err(|e| Failure::Runtime(format!("scangate top: the terminal failed: {e}")))?;
    Ok(Exit::Ok)
}

/// The screen until `q` or a signal.
fn screen(
    terminal: &mut ratatui::DefaultTerminal,
    mut status: crate::cmd::status::Status,
    read: &dyn Fn(i64) -> Result<crate::cmd::status::Status, crate::store::StoreError>,
    live: &Mutex<Live>,
    feedback: &HashMap<String, String>,
) -> std::io::Result<()> {
    let (mut sort, mut filter, mut typing, mut selected) =
        (Sort::default(), String::new(), false, 0);
    let mut refreshed = Instant::now();
    loop {
        if LEAVE.load(Ordering::Relaxed) {
            return Ok(());
        }
        if refreshed.elapsed() >= REFRESH {
            refreshed = Instant::now();
            // A read that fails (the database busy a moment) keeps the last.
            if let Ok(s) = read(now_ms()) {
                status = s;
            }
        }
        {
            let mut live = live.lock().unwrap_or_else(PoisonError::into_inner);
            terminal.draw(|frame| {
                view::render(
                    frame,
                    &mut Board {
                        status: &status,
                        live: &mut live,
                        feedback,
                        sort,
                        filter: &filter,
                        typing,
                        selected,
                        now_ms: now_ms(),
                        now: Instant::now(),
                    },
                )
            })?;
        }
        let wait = REFRESH
            .saturating_sub(refreshed.elapsed())
            .min(Duration::from_millis(250));
        if !event::poll(wait)? {
            continue;
        }
        let Event::Key(key) = event::read()? else {
            continue; // a resize: drawn again at once
        };
        if key.kind != KeyEventKind::Press {
            continue;
        }
        if typing {
            match key.code {
                KeyCode::Enter => typing = false,
                KeyCode::Esc => (typing, filter) = (false, String::new()),
                KeyCode::Backspace => {
                    filter.pop();
                }
                KeyCode::Char(c) => filter.push(c),
                _ => {}
            }
            continue;
        }
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => return Ok(()),
            KeyCode::Char('s') => sort = sort.next(),
            KeyCode::Char('/') => typing = true,
            KeyCode::Up => selected = selected.saturating_sub(1),
            KeyCode::Down => selected += 1,
            _ => {}
        }
    }
}

/// Attach to the tap socket in `state_dir`.
fn attach(state_dir: &std::path::Path) -> std::io::Result<BufReader<UnixStream>> {
    let mut conn = UnixStream::connect(socket_path(state_dir))?;
    let mut greeting = serde_json::to_vec(&Greeting { raw: false }).expect("serialises");
    greeting.push(b'\n');
    conn.write_all(&greeting)?;
    let mut lines = BufReader::new(conn);
    let mut first = String::new();
    lines.read_line(&mut first)?;
    match serde_json::from_str::<Hello>(&first) {
        Ok(hello) if hello.event == "hello" => Ok(lines),
        Ok(hello) => Err(std::io::Error::other(
            hello.why.unwrap_or_else(|| "refused".into()),
        )),
        Err(e) => Err(std::io::Error::other(e)),
    }
}

/// Read the tap into `live` on a thread of its own until it closes.
fn read_tap(tap: BufReader<UnixStream>, live: Arc<Mutex<Live>>) {
    std::thread::spawn(move || {
        for line in tap.lines().map_while(Result::ok) {
            if let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) {
                live.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take(&event, Instant::now());
            }
        }
        live.lock().unwrap_or_else(PoisonError::into_inner).closed = true;
    });
}

/// How a scanner is told its decisions: its protocol, the LED, or none.
fn feedback_channel(s: &crate::config::ScannerConfig) -> String {
    let Some(fb) = &s.feedback else {
        return "none".into();
    };
    match (fb.protocol, &fb.led) {
        (Some(p), Some(_)) => format!("{}+led", p.as_str()),
        (Some(p), None) => p.as_str().to_string(),
        (None, Some(_)) => "led".into(),
        (None, None) => "none".into(),
    }
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
