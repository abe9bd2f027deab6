//! What `scangate top` draws: the gateway's status (read once a second,
//! as `scangate status` reads it) and what the tap showed since `top`
//! started ([`Live`]: reads per minute, decisions, ACK latencies per
//! scanner), laid out for 80×24 and more.

use crate::cmd::status::Status;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table};
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// The smallest terminal `top` draws in.
pub const MIN_SIZE: (u16, u16) = (80, 24);

/// ACKs kept per scanner for its p99.
const ACKS_KEPT: usize = 200;

/// One scanner as the tap showed it since `top` started.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// When each read of the last minute came.
    reads: VecDeque<Instant>,
    /// Decisions by the tap's word (committed, echo, …).
    pub decided: HashMap<String, u64>,
    /// The last ACK latencies (ms).
    acks: VecDeque<f64>,
}

impl Seen {
    /// Reads in the last minute, at `now`.
    pub fn per_minute(&mut self, now: Instant) -> usize {
        while self
            .reads
            .front()
            .is_some_and(|t| now.duration_since(*t) > Duration::from_secs(60))
        {
            self.reads.pop_front();
        }
        self.reads.len()
    }

    /// The 99th percentile of the ACKs kept (ms).
    pub fn ack_p99(&self) -> Option<f64> {
        let mut v: Vec<f64> = self.acks.iter().copied().collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let i = ((v.len() - 1) as f64 * 0.99).round() as usize;
        Some(v[i])
    }

    fn count(&self, word: &str) -> u64 {
        self.decided.get(word).copied().unwrap_or(0)
    }
}

/// What the tap showed since `top` started.
#[derive(Debug, Default)]
pub struct Live {
    /// Per scanner.
    pub scanners: HashMap<String, Seen>,
    /// Lines this reader lost by falling behind.
    pub lost: u64,
    /// The tap closed (the daemon stopped).
    pub closed: bool,
}

impl Live {
    /// Take one line of the tap in, seen at `now`.
    pub fn take(&mut self, event: &serde_json::Value, now: Instant) {
        let scanner = event["scanner"].as_str().unwrap_or_default();
        match event["event"].as_str() {
            Some("read") => self.seen(scanner).reads.push_back(now),
            Some("decided") => {
                let word = event["decision"].as_str().unwrap_or("?").to_string();
                *self.seen(scanner).decided.entry(word).or_default() += 1;
            }
            Some("acked") => {
                if let Some(ms) = event["ack_ms"].as_f64() {
                    let acks = &mut self.seen(scanner).acks;
                    if acks.len() == ACKS_KEPT {
                        acks.pop_front();
                    }
                    acks.push_back(ms);
                }
            }
            Some("lost") => self.lost += event["lines"].as_u64().unwrap_or(0),
            _ => {}
        }
    }

    fn seen(&mut self, scanner: &str) -> &mut Seen {
        self.scanners.entry(scanner.to_string()).or_default()
    }
}

/// The column the scanners are sorted by (`s` cycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sort {
    /// By name.
    #[default]
    Name,
    /// Busiest first.
    ReadsPerMinute,
    /// Most recent read first.
    LastRead,
    /// Most rejected first.
    Rejected,
}

impl Sort {
    /// The next one.
    pub fn next(self) -> Sort {
        match self {
            Sort::Name => Sort::ReadsPerMinute,
            Sort::ReadsPerMinute => Sort::LastRead,
            Sort::LastRead => Sort::Rejected,
            Sort::Rejected => Sort::Name,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Sort::Name => "name",
            Sort::ReadsPerMinute => "reads/min",
            Sort::LastRead => "last read",
            Sort::Rejected => "rejected",
        }
    }
}

/// Everything one frame shows.
pub struct Board<'a> {
    /// The gateway's status.
    pub status: &'a Status,
    /// What the tap showed.
    pub live: &'a mut Live,
    /// Each scanner's feedback channel (from the config).
    pub feedback: &'a HashMap<String, String>,
    /// The sort.
    pub sort: Sort,
    /// Only scanners whose name holds this.
    pub filter: &'a str,
    /// The filter is being typed.
    pub typing: bool,
    /// The selected row.
    pub selected: usize,
    /// Now: Unix ms, and the monotonic clock.
    pub now_ms: i64,
    /// The monotonic clock now.
    pub now: Instant,
}

/// One scanner's row.
struct RowData {
    name: String,
    connected: bool,
    per_minute: usize,
    seen: Seen,
    last_read_ms: Option<i64>,
}

/// Draw `board` into `frame`; a terminal smaller than [`MIN_SIZE`] gets
/// what size is needed instead.
pub fn render(frame: &mut Frame, board: &mut Board<'_>) {
    let area = frame.area();
    if area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
        let text = format!(
            "scangate top needs a terminal of at least {}x{} (this one is {}x{}); q leaves",
            MIN_SIZE.0, MIN_SIZE.1, area.width, area.height
        );
        frame.render_widget(Paragraph::new(text), area);
        return;
    }
    let rows = rows(board);
    let alerts = alerts(board.status, board.now_ms);
    let [head, table, detail, alert_area, keys] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Min(4),
        Constraint::Length(1),
        Constraint::Length(alerts.len().clamp(1, 6) as u16 + 1),
        Constraint::Length(1),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(header(board)), head);
    render_table(frame, table, board, &rows);
    let selected = board.selected.min(rows.len().saturating_sub(1));
    let detail_line = rows
        .get(selected)
        .map(|r| what_it_is(board.status, &r.name))
        .unwrap_or_default();
    frame.render_widget(Paragraph::new(detail_line), detail);
    let mut lines = vec![Line::styled(
        "Latest alerts",
        Style::default().add_modifier(Modifier::BOLD),
    )];
    if alerts.is_empty() {
        lines.push(Line::raw("  none since the daemon started"));
    }
    lines.extend(alerts.into_iter().take(6).map(Line::raw));
    frame.render_widget(Paragraph::new(lines), alert_area);
    let keys_text = if board.typing {
        format!(
            "filter: {}_   (Enter keeps it, Esc clears it)",
            board.filter
        )
    } else {
        format!(
            "q quit  s sort: {}  / filter{}  up/down select",
            board.sort.label(),
            if board.filter.is_empty() {
                String::new()
            } else {
                format!(" \"{}\"", board.filter)
            }
        )
    };
    frame.render_widget(
        Paragraph::new(keys_text).style(Style::default().add_modifier(Modifier::REVERSED)),
        keys,
    );
}

/// The three lines at the top: the gateway, the store, the health.
fn header(board: &Board<'_>) -> Vec<Line<'static>> {
    let st = board.status;
    let up = st
        .daemon
        .started_ms
        .map(|s| age((board.now_ms - s) / 1000))
        .unwrap_or_else(|| "-".into());
    let version = st.daemon.version.as_deref().unwrap_or(st.build.version);
    let running = if st.daemon.running && !board.live.closed {
        Span::raw(format!("running {up}"))
    } else {
        Span::styled("NOT RUNNING", Style::default().fg(Color::Red))
    };
    let days = st
        .storage
        .space
        .days_left
        .map(|d| format!("{d:.0} days of disk left"))
        .unwrap_or_else(|| "disk: not filling".into());
    let first = Line::from(vec![
        Span::styled(
            "scangate top ",
            Style::default().add_modifier(Modifier::BOLD),
        ),
        Span::raw(format!("{version}  ")),
        running,
        Span::raw(format!(
            "  outbox {} undecided  {days}",
            st.outbox.pending + st.outbox.unresolved
        )),
    ]);
    let store = match &st.facility {
        None => "store: embedded (no [redis])".to_string(),
        Some(f) => {
            let link = match f.answering {
                Some(true) => "answering".to_string(),
                Some(false) => format!(
                    "NOT answering{}",
                    f.reason
                        .as_deref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default()
                ),
                None => "not asked yet".to_string(),
            };
            let clock = f
                .clock_offset_ms
                .map(|o| format!(", clock {o:+.0} ms"))
                .unwrap_or_default();
            let lag = f
                .ledger_stream
                .as_ref()
                .and_then(|s| s.oldest_unacked_age_s)
                .map(|a| format!(", stream lag {a:.0} s"))
                .unwrap_or_default();
            format!("facility store: {link}{clock}{lag}")
        }
    };
    let lost = if board.live.lost > 0 {
        format!("  (top fell behind: {} tap lines lost)", board.live.lost)
    } else {
        String::new()
    };
    let health = if st.healthy {
        Line::styled("healthy", Style::default().fg(Color::Green))
    } else {
        Line::styled(
            format!(
                "DEGRADED: {}",
                st.degraded.first().map(String::as_str).unwrap_or("")
            ),
            Style::default().fg(Color::Red),
        )
    };
    vec![first, Line::raw(format!("{store}{lost}")), health]
}

fn rows(board: &mut Board<'_>) -> Vec<RowData> {
    let mut rows: Vec<RowData> = board
        .status
        .scanners
        .iter()
        .filter(|s| s.name.contains(board.filter))
        .map(|s| {
            let mut seen = board
                .live
                .scanners
                .get(&s.name)
                .cloned()
                .unwrap_or_default();
            RowData {
                name: s.name.clone(),
                connected: s.connected,
                per_minute: seen.per_minute(board.now),
                seen,
                last_read_ms: s.last_read_ms,
            }
        })
        .collect();
    match board.sort {
        Sort::Name => rows.sort_by(|a, b| a.name.cmp(&b.name)),
        Sort::ReadsPerMinute => rows.sort_by_key(|r| std::cmp::Reverse(r.per_minute)),
        Sort::LastRead => rows.sort_by_key(|r| std::cmp::Reverse(r.last_read_ms)),
        Sort::Rejected => rows.sort_by_key(|r| std::cmp::Reverse(r.seen.count("rejected"))),
    }
    rows
}

fn render_table(frame: &mut Frame, area: Rect, board: &Board<'_>, rows: &[RowData]) {
    let head = Row::new([
        "SCANNER", "STATE", "R/MIN", "COMMIT", "ECHO", "AMBIG", "REJECT", "LAST", "ACK p99",
        "FEEDBACK",
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    let selected = board.selected.min(rows.len().saturating_sub(1));
    let body = rows.iter().enumerate().map(|(i, r)| {
        let state = if r.connected {
            Cell::from("connected")
        } else {
            Cell::from(Span::styled("UNPLUGGED", Style::default().fg(Color::Red)))
        };
        let last = r
            .last_read_ms
            .map(|t| age((board.now_ms - t) / 1000))
            .unwrap_or_else(|| "-".into());
        let ack = r
            .seen
            .ack_p99()
            .map(|ms| format!("{ms:.1}ms"))
            .unwrap_or_else(|| "-".into());
        let row = Row::new([
            Cell::from(r.name.clone()),
            state,
            Cell::from(r.per_minute.to_string()),
            Cell::from(r.seen.count("committed").to_string()),
            Cell::from(r.seen.count("echo").to_string()),
            Cell::from(r.seen.count("ambiguous").to_string()),
            Cell::from(r.seen.count("rejected").to_string()),
            Cell::from(last),
            Cell::from(ack),
            Cell::from(board.feedback.get(&r.name).cloned().unwrap_or_default()),
        ]);
        if i == selected {
            row.style(Style::default().add_modifier(Modifier::REVERSED))
        } else {
            row
        }
    });
    let widths = [
        Constraint::Min(10),
        Constraint::Length(9),
        Constraint::Length(5),
        Constraint::Length(6),
        Constraint::Length(5),
        Constraint::Length(5),
        Constraint::Length(6),
        Constraint::Length(5),
        Constraint::Length(7),
        Constraint::Length(9),
    ];
    frame.render_widget(
        Table::new(body, widths).header(head).column_spacing(1),
        area,
    );
}

/// What the selected scanner is: its device, model, firmware, serial.
fn what_it_is(status: &Status, name: &str) -> String {
    let Some(s) = status.scanners.iter().find(|s| s.name == name) else {
        return String::new();
    };
    let mut parts = vec![format!("{name}:")];
    if let Some(id) = &s.identity {
        parts.push(id.model());
        if let Some(serial) = &id.serial {
            parts.push(format!("serial {serial}"));
        }
    }
    if let Some(fw) = s
        .software
        .as_deref()
        .or(s.identity.as_ref().and_then(|i| i.release.as_deref()))
    {
        parts.push(format!("firmware {fw}"));
    }
    parts.push(format!(
        "on {}",
        s.device.as_deref().unwrap_or(&s.configured)
    ));
    parts.join(" ")
}

/// The latest alerts of every scanner, newest first, one line each.
fn alerts(status: &Status, now_ms: i64) -> Vec<String> {
    let mut all: Vec<(i64, String)> = status
        .scanners
        .iter()
        .flat_map(|s| {
            s.recent_alerts.iter().map(move |a| {
                (
                    a.at_ms,
                    format!(
                        "  {:>5} ago  {:<12} {:<9} scan {}",
                        age((now_ms - a.at_ms) / 1000),
                        s.name,
                        a.kind,
                        a.scan_uuid
                    ),
                )
            })
        })
        .collect();
    all.sort_by_key(|a| std::cmp::Reverse(a.0));
    all.into_iter().map(|(_, l)| l).collect()
}

/// An age in seconds, short: `42s`, `7m`, `3h`, `2d`.
fn age(s: i64) -> String {
    match s.max(0) {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}
