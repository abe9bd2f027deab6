//! `[metrics] listen` under attack: hundreds of idle connections, held open
//! (each one the daemon closes is opened again) from ten loopback
//! addresses, and a client sending its request head a byte every 200 ms.
//! Meanwhile a Prometheus-like scrape every second must be answered in
//! full within 1 s, the scans fed meanwhile must all be committed, and the
//! daemon, its file descriptor limit lowered below the attack's
//! connections, must hold no more sockets than its bound.

use crate::util::*;
use scangate::daemon::metrics_http::{HEAD_TIMEOUT, MAX_CONNECTIONS};
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Idle connections the attack holds open.
const IDLE: u64 = 500;
/// The idle connections come from 127.0.0.2 … 127.0.0.11, in turn.
const IDLE_SOURCES: u8 = 10;
/// The byte-by-byte sender's address.
const SLOW_SOURCE: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 12);
/// How often the slow sender sends a byte.
const SLOW_EVERY: Duration = Duration::from_millis(200);
/// Scrapes (one a second), each with a scan fed before it.
const SCRAPES: u32 = 10;
/// A scrape's whole answer must come within this.
const ANSWER_WITHIN: Duration = Duration::from_secs(1);
/// The daemon's soft `RLIMIT_NOFILE` during the attack: below the
/// attack's connections (systemd's default is 1024).
const DAEMON_NOFILE: u64 = 256;

#[test]
fn idle_and_byte_by_byte_clients_do_not_keep_scrapes_or_scans_waiting() {
    let idle = raise_nofile(IDLE);
    let listen = format!("127.0.0.1:{}", free_port());
    let mut gw = Gateway::builder("scangate-metrics-starve-")
        .pty(ScannerSpec::named("counter-1").ack())
        .config(&format!("[metrics]\nlisten = {listen:?}\ninterval_s = 1"))
        .build();
    let mut daemon = gw.launch();
    let [mut vs] = gw.take_scanners();
    let pid = daemon.pid();
    lower_nofile(pid, DAEMON_NOFILE);
    let to: SocketAddr = listen.parse().unwrap();
    let quiet = scrape(to, scaled(ANSWER_WITHIN));
    assert!(quiet.is_ok(), "before the attack: {quiet:?}");
    let sockets_before = sockets(pid);

    let attack = Attack::start(to, idle);
    let mut answers = Vec::new();
    let mut most_sockets = 0;
    let start = Instant::now();
    for i in 0..SCRAPES {
        let tick = start + Duration::from_secs(i.into());
        std::thread::sleep(tick.saturating_duration_since(Instant::now()));
        vs.send(&frame(&dscsa(&format!("STARVE{i:04}")))).unwrap();
        answers.push(scrape(to, scaled(ANSWER_WITHIN)));
        assert_eq!(replies(&mut vs, 1).0, [ACK], "scan {i} during the attack");
        most_sockets = most_sockets.max(sockets(pid));
    }
    let (opened, slow_lives) = attack.stop();

    let late: Vec<_> = answers
        .iter()
        .enumerate()
        .filter(|(_, a)| a.is_err())
        .collect();
    assert!(
        late.is_empty(),
        "scrapes not answered in full within {ANSWER_WITHIN:?} during the attack ({opened} idle connections opened): {late:?}\nall: {answers:?}\n{}",
        daemon.log_digest()
    );
    assert!(
        opened >= idle,
        "the attack opened only {opened} connections"
    );
    // The byte-by-byte sender is cut at the head deadline, each time.
    assert!(
        slow_lives.len() >= 3,
        "the byte-by-byte sender was cut {} times in {SCRAPES} s",
        slow_lives.len()
    );
    let limit = scaled(HEAD_TIMEOUT + Duration::from_millis(1500));
    assert!(
        slow_lives.iter().all(|d| *d < limit),
        "the byte-by-byte sender was held longer than {limit:?}: {slow_lives:?}"
    );
    // The daemon held about its bound of sockets, not the attack's.
    let slack = 16;
    assert!(
        most_sockets <= sockets_before + MAX_CONNECTIONS + slack,
        "the daemon held {most_sockets} sockets during the attack ({sockets_before} before)"
    );

    // Every scan fed during the attack was committed.
    let status = wait_all_decided(&gw.cfg, SCRAPES.into());
    assert_eq!(count(&status, "committed"), i64::from(SCRAPES), "{status}");
    assert_eq!(ledger(&gw.cfg).len(), SCRAPES as usize);

    // What was closed is counted, and told in one warning, not one a
    // connection.
    let (took, body) = scrape(to, scaled(ANSWER_WITHIN)).expect("a scrape after the attack");
    assert!(took <= scaled(ANSWER_WITHIN));
    for reason in ["room", "head_timeout"] {
        let series =
            format!("scangate_metrics_http_dropped_connections_total{{reason=\"{reason}\"}} ");
        let n: f64 = body
            .lines()
            .find_map(|l| l.strip_prefix(&series))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series}in\n{body}"));
        assert!(n >= 1.0, "{series}{n}");
    }
    let log = daemon.log();
    let warnings = log
        .lines()
        .filter(|l| l.contains(" WARN ") && l.contains("without an answer"))
        .count();
    assert!(
        (1..=2).contains(&warnings),
        "{warnings} warnings of connections closed\n{}",
        daemon.log_digest()
    );
    assert!(
        !log.contains("not a loopback address"),
        "a loopback listen address is not warned of"
    );
    assert!(daemon.terminate().success(), "{}", daemon.log_digest());
}

/// The attack: the idle connections and the byte-by-byte sender, each on
/// a thread of its own, until [`Attack::stop`].
struct Attack {
    stop: Arc<AtomicBool>,
    idle: JoinHandle<u64>,
    slow: JoinHandle<Vec<Duration>>,
}

impl Attack {
    /// Start it against `to` and return once `idle` connections were
    /// tried (a server that does not take them up leaves them waiting to
    /// connect) and the slow sender's is open.
    fn start(to: SocketAddr, idle: u64) -> Attack {
        let stop = Arc::new(AtomicBool::new(false));
        let rounds = Arc::new(AtomicU64::new(0));
        let idle_thread = {
            let (stop, rounds) = (stop.clone(), rounds.clone());
            std::thread::spawn(move || hold_idle(to, idle, &stop, &rounds))
        };
        let slow_started = Arc::new(AtomicBool::new(false));
        let slow = {
            let (stop, started) = (stop.clone(), slow_started.clone());
            std::thread::spawn(move || byte_by_byte(to, &stop, &started))
        };
        wait_until(
            "the attack's connections tried, the slow sender's open",
            || rounds.load(Ordering::SeqCst) >= 1 && slow_started.load(Ordering::SeqCst),
        );
        Attack {
            stop,
            idle: idle_thread,
            slow,
        }
    }

    /// Stop it: the idle connections opened in all, and how long each of
    /// the slow sender's connections lived until the daemon closed it.
    fn stop(self) -> (u64, Vec<Duration>) {
        self.stop.store(true, Ordering::SeqCst);
        (self.idle.join().unwrap(), self.slow.join().unwrap())
    }
}

/// Hold `n` idle connections to `to` open from [`IDLE_SOURCES`] addresses:
/// every 500 ms each one the daemon closed is opened again, all at once.
/// Returns how many were opened in all; `rounds` counts the rounds.
fn hold_idle(to: SocketAddr, n: u64, stop: &AtomicBool, rounds: &AtomicU64) -> u64 {
    let rt = runtime();
    let mut conns: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
    let mut opened = 0;
    while !stop.load(Ordering::SeqCst) {
        let reopen: Vec<usize> = (0..conns.len())
            .filter(|&i| conns[i].as_ref().is_none_or(closed))
            .collect();
        let connected = rt.block_on(async {
            let mut tries = tokio::task::JoinSet::new();
            for i in reopen {
                let from = Ipv4Addr::new(127, 0, 0, 2 + (i % IDLE_SOURCES as usize) as u8);
                tries.spawn(async move { (i, connect(from, to).await) });
            }
            tries.join_all().await
        });
        for (i, conn) in connected {
            opened += u64::from(conn.is_ok());
            conns[i] = conn.ok();
        }
        rounds.fetch_add(1, Ordering::SeqCst);
        let round = Instant::now();
        while round.elapsed() < Duration::from_millis(500) && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    opened
}

/// Send a request head to `to` a byte every [`SLOW_EVERY`], never ending
/// it; when the daemon closes the connection, open another. Returns how
/// long each connection lived.
fn byte_by_byte(to: SocketAddr, stop: &AtomicBool, started: &AtomicBool) -> Vec<Duration> {
    let rt = runtime();
    let head = b"GET /metrics HTTP/1.1\r\nHost: scangate\r\nX-Slow: ";
    let mut lives = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let Ok(mut conn) = rt.block_on(connect(SLOW_SOURCE, to)) else {
            std::thread::sleep(SLOW_EVERY);
            continue;
        };
        started.store(true, Ordering::SeqCst);
        let opened = Instant::now();
        for i in 0.. {
            if stop.load(Ordering::SeqCst) {
                return lives;
            }
            let byte = head.get(i).copied().unwrap_or(b'a');
            if conn.write(&[byte]).is_err() || closed(&conn) {
                lives.push(opened.elapsed());
                break;
            }
            std::thread::sleep(SLOW_EVERY);
        }
    }
    lives
}

/// A runtime for [`connect`].
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A connection to `to` from address `from` (non-blocking; the daemon
/// bounds connections per peer address), or an error after 1 s.
async fn connect(from: Ipv4Addr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from.into(), 0))?;
    tokio::time::timeout(Duration::from_secs(1), socket.connect(to))
        .await
        .map_err(|_| std::io::Error::from(ErrorKind::TimedOut))??
        .into_std()
}

/// Whether the peer closed non-blocking `conn` (nothing else is sent on it).
fn closed(conn: &TcpStream) -> bool {
    let mut buf = [0u8; 256];
    match (&*conn).read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != ErrorKind::WouldBlock,
    }
}

/// `GET /metrics` as Prometheus sends it, its whole answer read within
/// `deadline` (connecting included): how long it took and the body, or
/// what went wrong.
fn scrape(to: SocketAddr, deadline: Duration) -> Result<(Duration, String), String> {
    let start = Instant::now();
    let left = || {
        deadline
            .checked_sub(start.elapsed())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| format!("no answer within {deadline:?}"))
    };
    let failed = |what: &str, e: std::io::Error, got: usize| {
        format!("{what} after {:?} ({got} bytes): {e}", start.elapsed())
    };
    let mut conn = TcpStream::connect_timeout(&to, left()?).map_err(|e| failed("connect", e, 0))?;
    conn.set_write_timeout(Some(left()?)).unwrap();
    conn.write_all(
        format!(
            "GET /metrics HTTP/1.1\r\nHost: {to}\r\nUser-Agent: Prometheus/2.45.0\r\n\
             Accept: text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n\
             X-Prometheus-Scrape-Timeout-Seconds: 1\r\n\r\n"
        )
        .as_bytes(),
    )
    .map_err(|e| failed("sending the request", e, 0))?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        conn.set_read_timeout(Some(left()?)).unwrap();
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) => return Err(failed("reading the answer", e, raw.len())),
        }
    }
    let took = start.elapsed();
    if took > deadline {
        return Err(format!("answered in {took:?}"));
    }
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no complete head: {text:?}"))?;
    let length: Option<usize> = head.lines().find_map(|l| {
        l.to_ascii_lowercase()
            .strip_prefix("content-length:")
            .and_then(|v| v.trim().parse().ok())
    });
    if !head.starts_with("HTTP/1.1 200 ") || length != Some(body.len()) {
        return Err(format!(
            "not a whole 200 ({} body bytes): {head:?}",
            body.len()
        ));
    }
    if !body.contains("scangate_scans_read_total") {
        return Err(format!("not the metrics: {body:?}"));
    }
    Ok((took, body.to_string()))
}

/// The sockets process `pid` holds open now.
fn sockets(pid: u32) -> usize {
    open_files(pid)
        .iter()
        .filter(|p| p.to_string_lossy().starts_with("socket:"))
        .count()
}

/// Raise this process's soft `RLIMIT_NOFILE` to hold `idle` connections
/// and what else the tests hold; fewer idle connections if its hard limit
/// is too low (still more than the daemon may hold). Returns how many
/// idle connections to open.
fn raise_nofile(idle: u64) -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let others = 512;
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if soft < idle + others {
        setrlimit(Resource::RLIMIT_NOFILE, (idle + others).min(hard), hard).unwrap();
    }
    let idle = idle.min(hard.max(soft).saturating_sub(others));
    assert!(
        idle > DAEMON_NOFILE,
        "RLIMIT_NOFILE's hard limit ({hard}) leaves room for {idle} idle connections only"
    );
    idle
}

/// Lower process `pid`'s soft `RLIMIT_NOFILE` to `soft`.
fn lower_nofile(pid: u32, soft: u64) {
    let pid = pid as libc::pid_t;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: prlimit reads or writes only `limit`, valid for each call.
    let (got, set) = unsafe {
        let got = libc::prlimit(pid, libc::RLIMIT_NOFILE, std::ptr::null(), &mut limit);
        limit.rlim_cur = soft.min(limit.rlim_max);
        let set = libc::prlimit(pid, libc::RLIMIT_NOFILE, &limit, std::ptr::null_mut());
        (got, set)
    };
    assert_eq!(
        (got, set),
        (0, 0),
        "prlimit: {}",
        std::io::Error::last_os_error()
    );
}
