//! `[metrics] listen`: a minimal HTTP/1 server for `GET /metrics` on the
//! daemon's tokio runtime.
//!
//! Hand-rolled over [`tokio::net::TcpListener`] rather than hyper: a scrape
//! is one GET of one path, answered with `Connection: close`, so the whole
//! server is a request-head reader and one response; hyper + hyper-util
//! would add a dozen crates for the same and would still not bound the
//! connections as below. A request head of at most [`MAX_HEAD`] bytes
//! asking for anything but `GET` or `HEAD /metrics` is answered 400, 404
//! or 405 and closed.
//!
//! No client, however many connections it opens or however slowly it
//! sends, keeps a scraper from its answer:
//!
//! - a connection has [`HEAD_TIMEOUT`] in all to send its request head (one
//!   deadline for the whole head, so a client sending a byte at a time is
//!   cut too) and [`WRITE_TIMEOUT`] to take the response;
//! - at most [`MAX_CONNECTIONS`] are open at once, at most
//!   [`MAX_PER_PEER`] from one peer (an IPv4 address, an IPv6 address's
//!   /64). A new connection beyond either bound is served all the same:
//!   a connection of the same peer (at the per-peer bound) or of the peer
//!   holding the most (at the total bound) is closed to make room for it,
//!   the oldest of them still waiting for its request head, or, when every
//!   one is being answered, the oldest (`Slots::admit`). The accept loop
//!   never waits for room, and the daemon holds about [`MAX_CONNECTIONS`]
//!   sockets for the endpoint at most, far below its file descriptor
//!   limit (systemd's default soft limit is 1024).
//!
//! Every connection closed without an answer is counted
//! (`scangate_metrics_http_dropped_connections_total{reason}`,
//! [`events::MetricsConnectionDropped`]); the log tells them in one WARN
//! at most every [`REPORT_EVERY`] ([`events::MetricsConnectionsDropped`]).

use crate::events::{self, Event as _, MetricsDrop};
use crate::shutdown::Stop;
use crate::telemetry::Telemetry;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// The longest request head accepted.
pub const MAX_HEAD: usize = 8 * 1024;
/// How long a client may take to send its whole request head, from the
/// moment its connection is taken up.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a client may take to take the whole response.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections open at once at most.
pub const MAX_CONNECTIONS: usize = 64;
/// Connections open at once at most from one peer (an IPv4 address, an
/// IPv6 address's /64).
pub const MAX_PER_PEER: usize = 16;
/// Connections closed without an answer are told in the log at most this
/// often.
pub const REPORT_EVERY: Duration = Duration::from_secs(60);

/// `[metrics] listen` could not be bound.
#[derive(Debug, thiserror::Error)]
#[error(
    "[metrics] listen = \"{addr}\": cannot listen there: {source}. Fix: choose a free local address and port (e.g. 127.0.0.1:9464), or stop what holds it"
)]
pub struct BindError {
    /// The configured address.
    pub addr: SocketAddr,
    /// The OS error.
    pub source: std::io::Error,
}

/// Bind `addr` (at start, so that a taken port fails the start).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, BindError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| BindError { addr, source })
}

/// What the accept loop shares with the connections it serves.
struct Shared {
    /// Each open connection; dropping its sender closes it.
    slots: Slots<oneshot::Sender<()>>,
    /// The connections closed without an answer, not yet told.
    tally: Tally,
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Serve `GET /metrics` on `listener` until `stop`.
pub async fn serve(listener: TcpListener, telemetry: Telemetry, mut stop: Stop) {
    let shared = Arc::new(Mutex::new(Shared {
        slots: Slots::new(MAX_CONNECTIONS, MAX_PER_PEER),
        tally: Tally::default(),
    }));
    loop {
        let due = lock(&shared).tally.due();
        let report_at = tokio::time::Instant::from_std(due.unwrap_or_else(Instant::now));
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.wait() => break,
            _ = tokio::time::sleep_until(report_at), if due.is_some() => {
                dropped(&shared, &telemetry, &[]);
                continue;
            }
        };
        match accepted {
            Ok((conn, peer)) => {
                if admit(&shared, &telemetry, conn, peer.ip()) {
                    // Let the connections told to go close their sockets
                    // before the next is taken up.
                    tokio::task::yield_now().await;
                }
            }
            Err(e) => {
                // E.g. out of file descriptors: wait a moment, go on.
                events::MetricsFailed {
                    step: events::MetricsStep::Accept,
                    error: &e,
                }
                .emit();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    let untold = lock(&shared).tally.take(None);
    if let Some(report) = untold {
        report.emit();
    }
}

/// Take `conn` from `peer` up (making room for it, [`Slots::admit`]) and
/// answer it on a task of its own; true if others were told to go.
fn admit(
    shared: &Arc<Mutex<Shared>>,
    telemetry: &Telemetry,
    conn: TcpStream,
    peer: IpAddr,
) -> bool {
    let (close, closed) = oneshot::channel::<()>();
    let (id, made_room) = lock(shared).slots.admit(peer, close);
    let room = !made_room.is_empty();
    if room {
        // Their senders are dropped here: each of those tasks ends,
        // closing its connection.
        let gone: Vec<_> = made_room
            .into_iter()
            .map(|(peer, _close)| (MetricsDrop::Room, peer))
            .collect();
        dropped(shared, telemetry, &gone);
    }
    let shared = shared.clone();
    let telemetry = telemetry.clone();
    tokio::spawn(async move {
        let ended = tokio::select! {
            ended = connection(conn, &telemetry, || lock(&shared).slots.answering(id)) => Some(ended),
            // Closed to make room (counted there).
            _ = closed => None,
        };
        lock(&shared).slots.leave(id);
        let why = match ended {
            Some(Ended::HeadTimeout) => MetricsDrop::HeadTimeout,
            Some(Ended::WriteTimeout) => MetricsDrop::WriteTimeout,
            Some(Ended::Answered | Ended::Gone) | None => return,
        };
        dropped(&shared, &telemetry, &[(why, peer)]);
    });
    room
}

/// Count the connections `gone` (why, from whom) and tell the tally in
/// the log when it is due.
fn dropped(shared: &Mutex<Shared>, telemetry: &Telemetry, gone: &[(MetricsDrop, IpAddr)]) {
    let report = {
        let mut s = lock(shared);
        let now = Instant::now();
        for &(why, peer) in gone {
            s.tally.add(why, peer);
        }
        s.tally.take(Some(now))
    };
    for &(reason, peer) in gone {
        events::MetricsConnectionDropped {
            reason,
            peer,
            telemetry,
        }
        .emit();
    }
    if let Some(report) = report {
        report.emit();
    }
}

/// The open connections, oldest first, each with what closes it (its `T`,
/// dropped), and which of them make room for a new one.
#[derive(Debug)]
struct Slots<T> {
    total: usize,
    per_peer: usize,
    next: u64,
    open: BTreeMap<u64, Slot<T>>,
}

#[derive(Debug)]
struct Slot<T> {
    /// The peer's address.
    peer: IpAddr,
    /// What it is bounded by ([`peer_key`]).
    key: IpAddr,
    /// Its request head came: it is being answered.
    answering: bool,
    close: T,
}

impl<T> Slots<T> {
    /// At most `total` connections, `per_peer` from one peer (both at
    /// least 1).
    fn new(total: usize, per_peer: usize) -> Slots<T> {
        assert!(total > 0 && per_peer > 0, "a bound of 0 admits nothing");
        Slots {
            total,
            per_peer,
            next: 0,
            open: BTreeMap::new(),
        }
    }

    /// Admit a connection from `peer`, closed by dropping `close`: its id,
    /// and the connections that go to make room for it (peer and `close`
    /// each; none while both bounds have room). At the per-peer bound one
    /// of that peer's goes; then at the total bound one of the peer (or
    /// peers) holding the most, so that a flood from a few addresses does
    /// not take the place of a scraper's one connection. Of those, the
    /// oldest still waiting for its request head goes, or, when every one
    /// is being answered, the oldest.
    fn admit(&mut self, peer: IpAddr, close: T) -> (u64, Vec<(IpAddr, T)>) {
        let key = peer_key(peer);
        let mut gone = Vec::new();
        let of_peer = self.open.values().filter(|s| s.key == key).count();
        if of_peer >= self.per_peer {
            gone.extend(self.evict(|s| s.key == key));
        }
        if self.open.len() >= self.total {
            let mut held = BTreeMap::<IpAddr, usize>::new();
            for s in self.open.values() {
                *held.entry(s.key).or_default() += 1;
            }
            let most = held.values().copied().max().unwrap_or(0);
            gone.extend(self.evict(|s| held[&s.key] == most));
        }
        let id = self.next;
        self.next += 1;
        self.open.insert(
            id,
            Slot {
                peer,
                key,
                answering: false,
                close,
            },
        );
        (id, gone)
    }

    /// Remove the oldest connection of those `theirs` picks still waiting
    /// for its request head, else the oldest of them.
    fn evict(&mut self, theirs: impl Fn(&Slot<T>) -> bool) -> Option<(IpAddr, T)> {
        let id = self
            .open
            .iter()
            .find(|(_, s)| theirs(s) && !s.answering)
            .or_else(|| self.open.iter().find(|(_, s)| theirs(s)))
            .map(|(id, _)| *id)?;
        self.open.remove(&id).map(|s| (s.peer, s.close))
    }

    /// Connection `id` sent its request head and is being answered.
    fn answering(&mut self, id: u64) {
        if let Some(s) = self.open.get_mut(&id) {
            s.answering = true;
        }
    }

    /// Connection `id` is closed (if it was not made to go already).
    fn leave(&mut self, id: u64) {
        self.open.remove(&id);
    }
}

/// What a peer is bounded by: its IPv4 address (an IPv4-mapped IPv6
/// address as that), or its IPv6 address's /64 (one host may use a
/// whole /64).
fn peer_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & (u128::MAX << 64))),
        v4 => v4,
    }
}

/// The connections closed without an answer since the log last told
/// them: the first at once, then at most once per [`REPORT_EVERY`].
#[derive(Debug, Default)]
struct Tally {
    room: u64,
    head_timeout: u64,
    write_timeout: u64,
    last_peer: Option<IpAddr>,
    told: Option<Instant>,
}

impl Tally {
    /// One more, closed for `why`, from `peer`.
    fn add(&mut self, why: MetricsDrop, peer: IpAddr) {
        match why {
            MetricsDrop::Room => self.room += 1,
            MetricsDrop::HeadTimeout => self.head_timeout += 1,
            MetricsDrop::WriteTimeout => self.write_timeout += 1,
        }
        self.last_peer = Some(peer);
    }

    /// When what is counted is due to be told (`None`: nothing counted).
    fn due(&self) -> Option<Instant> {
        self.last_peer?;
        Some(self.told.map_or_else(Instant::now, |t| t + REPORT_EVERY))
    }

    /// What is counted, to tell, if it is due at `now` (`None`: due or
    /// not, at the stop); counting starts again.
    fn take(&mut self, now: Option<Instant>) -> Option<events::MetricsConnectionsDropped> {
        let last_peer = self.last_peer?;
        if let (Some(now), Some(told)) = (now, self.told)
            && now < told + REPORT_EVERY
        {
            return None;
        }
        self.last_peer = None;
        self.told = Some(now.unwrap_or_else(Instant::now));
        Some(events::MetricsConnectionsDropped {
            room: std::mem::take(&mut self.room),
            head_timeout: std::mem::take(&mut self.head_timeout),
            write_timeout: std::mem::take(&mut self.write_timeout),
            last_peer,
        })
    }
}

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
enum Request {
    Metrics { head_only: bool },
    NotFound,
    BadMethod,
    Bad,
}

fn parse(head: &[u8]) -> Request {
    let Some(line) = head.split(|b| *b == b'\n').next() else {
        return Request::Bad;
    };
    let line = String::from_utf8_lossy(line);
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Request::Bad;
    };
    if parts.next().is_some() || !version.starts_with("HTTP/1.") {
        return Request::Bad;
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Request::BadMethod,
    };
    let path = target.split('?').next().unwrap_or_default();
    if path == "/metrics" {
        Request::Metrics { head_only }
    } else {
        Request::NotFound
    }
}

/// How a connection ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// Its request was answered.
    Answered,
    /// No complete request head within [`HEAD_TIMEOUT`].
    HeadTimeout,
    /// The response was not taken within [`WRITE_TIMEOUT`].
    WriteTimeout,
    /// The peer went away (or its socket failed).
    Gone,
}

/// Read `conn`'s request head (within [`HEAD_TIMEOUT`] in all), tell
/// `answering`, answer it (within [`WRITE_TIMEOUT`]) and close it.
async fn connection(mut conn: TcpStream, telemetry: &Telemetry, answering: impl FnOnce()) -> Ended {
    let request = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut conn)).await {
        Err(_) => return Ended::HeadTimeout,
        Ok(Err(_)) => return Ended::Gone,
        Ok(Ok(request)) => request,
    };
    answering();
    let response = response(request, telemetry);
    let write = async {
        conn.write_all(&response).await?;
        conn.shutdown().await
    };
    match tokio::time::timeout(WRITE_TIMEOUT, write).await {
        Err(_) => Ended::WriteTimeout,
        Ok(Err(_)) => Ended::Gone,
        Ok(Ok(())) => Ended::Answered,
    }
}

/// The request `conn` sends: its head up to the empty line, of at most
/// [`MAX_HEAD`] bytes (a longer one, or one the peer ends early, is
/// [`Request::Bad`]).
async fn read_head(conn: &mut TcpStream) -> std::io::Result<Request> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    loop {
        let n = conn.read(&mut buf).await?;
        if n == 0 {
            return Ok(Request::Bad);
        }
        // Only the new bytes and the three before them can end the head.
        let from = head.len().saturating_sub(3);
        head.extend_from_slice(&buf[..n]);
        let tail = &head[from..];
        if tail.windows(4).any(|w| w == b"\r\n\r\n") || tail.windows(2).any(|w| w == b"\n\n") {
            return Ok(parse(&head));
        }
        if head.len() > MAX_HEAD {
            return Ok(Request::Bad);
        }
    }
}

/// The whole response to `request` (`Connection: close`).
fn response(request: Request, telemetry: &Telemetry) -> Vec<u8> {
    let (status, content_type, body, head_only) = match request {
        Request::Metrics { head_only } => (
            "200 OK",
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            telemetry.encode(),
            head_only,
        ),
        Request::NotFound => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "scangate serves /metrics only\n".to_string(),
            false,
        ),
        Request::BadMethod => (
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            "only GET /metrics\n".to_string(),
            false,
        ),
        Request::Bad => (
            "400 Bad Request",
            "text/plain; charset=utf-8",
            "bad request\n".to_string(),
            false,
        ),
    };
    let allow = if status.starts_with("405") {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    let mut response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        response.extend_from_slice(body.as_bytes());
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// Who `slots` closed, by name.
    fn names(gone: Vec<(IpAddr, &'static str)>) -> Vec<&'static str> {
        gone.into_iter().map(|(_, name)| name).collect()
    }

    #[test]
    fn at_the_bound_the_oldest_connection_still_waiting_for_its_head_makes_room() {
        let mut slots = Slots::new(3, 3);
        let (a, _) = slots.admit(ip("10.0.0.1"), "a");
        slots.admit(ip("10.0.0.2"), "b");
        slots.admit(ip("10.0.0.3"), "c");
        // `a` is being answered: `b` is the oldest still waiting.
        slots.answering(a);
        let (_, gone) = slots.admit(ip("10.0.0.4"), "d");
        assert_eq!(names(gone), ["b"]);
        let (_, gone) = slots.admit(ip("10.0.0.5"), "e");
        assert_eq!(names(gone), ["c"]);
        assert_eq!(slots.open.len(), 3);
        // A connection that left frees its place.
        slots.leave(a);
        let (_, gone) = slots.admit(ip("10.0.0.6"), "f");
        assert!(gone.is_empty());
    }

    #[test]
    fn with_every_connection_being_answered_the_oldest_makes_room() {
        let mut slots = Slots::new(2, 2);
        let (a, _) = slots.admit(ip("10.0.0.1"), "a");
        let (b, _) = slots.admit(ip("10.0.0.2"), "b");
        slots.answering(b);
        slots.answering(a);
        let (_, gone) = slots.admit(ip("10.0.0.3"), "c");
        assert_eq!(names(gone), ["a"]);
    }

    #[test]
    fn a_peer_at_its_bound_makes_room_among_its_own_connections_only() {
        let mut slots = Slots::new(10, 2);
        let (x1, _) = slots.admit(ip("10.0.0.9"), "x1");
        slots.admit(ip("10.0.0.7"), "y1");
        slots.admit(ip("10.0.0.9"), "x2");
        slots.answering(x1);
        let (x3, gone) = slots.admit(ip("10.0.0.9"), "x3");
        assert_eq!(names(gone), ["x2"]);
        // Both of its own are being answered: its oldest goes, not `y1`.
        slots.answering(x3);
        let (_, gone) = slots.admit(ip("10.0.0.9"), "x4");
        assert_eq!(names(gone), ["x1"]);
        assert_eq!(slots.open.len(), 3);
    }

    #[test]
    fn the_total_bound_takes_the_oldest_waiting_of_any_peer() {
        let mut slots = Slots::new(3, 2);
        slots.admit(ip("10.0.0.2"), "y1");
        slots.admit(ip("10.0.0.1"), "x1");
        slots.admit(ip("10.0.0.3"), "z1");
        let (_, gone) = slots.admit(ip("10.0.0.1"), "x2");
        assert_eq!(names(gone), ["y1"]);
        // Now `x` is at its bound too: one of its own goes, which leaves
        // room in all.
        let (_, gone) = slots.admit(ip("10.0.0.1"), "x3");
        assert_eq!(names(gone), ["x1"]);
    }

    #[test]
    fn the_total_bound_takes_from_the_peer_holding_the_most() {
        let mut slots = Slots::new(3, 3);
        // The scraper's one connection is the oldest waiting of all.
        slots.admit(ip("10.0.0.1"), "scraper");
        slots.admit(ip("10.0.0.66"), "flood-1");
        slots.admit(ip("10.0.0.66"), "flood-2");
        let (_, gone) = slots.admit(ip("10.0.0.77"), "other");
        assert_eq!(names(gone), ["flood-1"]);
        // Every peer holds one: the oldest waiting of all goes.
        let (_, gone) = slots.admit(ip("10.0.0.88"), "next");
        assert_eq!(names(gone), ["scraper"]);
    }

    #[test]
    fn an_ipv6_peer_is_bounded_by_its_64_and_a_mapped_ipv4_as_ipv4() {
        assert_eq!(peer_key(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
        assert_eq!(
            peer_key(ip("2001:db8:1:2:ffff:ffff:ffff:ffff")),
            peer_key(ip("2001:db8:1:2::5"))
        );
        assert_ne!(
            peer_key(ip("2001:db8:1:3::5")),
            peer_key(ip("2001:db8:1:2::5"))
        );
        assert_eq!(peer_key(ip("::ffff:192.0.2.7")), ip("192.0.2.7"));
        assert_eq!(peer_key(ip("192.0.2.7")), ip("192.0.2.7"));
        let mut slots = Slots::new(10, 1);
        slots.admit(ip("2001:db8::1"), "a");
        let (_, gone) = slots.admit(ip("2001:db8::2"), "b");
        assert_eq!(names(gone), ["a"]);
    }

    #[test]
    fn connections_closed_are_told_first_at_once_then_at_most_once_per_interval() {
        let mut tally = Tally::default();
        assert_eq!(tally.due(), None);
        assert_eq!(tally.take(None), None);
        let t0 = Instant::now();
        tally.add(MetricsDrop::Room, ip("10.0.0.1"));
        let first = tally.take(Some(t0)).expect("the first is told at once");
        assert_eq!((first.room, first.head_timeout), (1, 0));
        for _ in 0..500 {
            tally.add(MetricsDrop::Room, ip("10.0.0.2"));
        }
        tally.add(MetricsDrop::HeadTimeout, ip("10.0.0.3"));
        assert_eq!(tally.take(Some(t0 + REPORT_EVERY / 2)), None);
        assert_eq!(tally.due(), Some(t0 + REPORT_EVERY));
        let next = tally.take(Some(t0 + REPORT_EVERY)).expect("due");
        assert_eq!(
            next,
            events::MetricsConnectionsDropped {
                room: 500,
                head_timeout: 1,
                write_timeout: 0,
                last_peer: ip("10.0.0.3"),
            }
        );
        assert_eq!(tally.due(), None);
        // What is left at the stop is told whenever due.
        tally.add(MetricsDrop::WriteTimeout, ip("10.0.0.4"));
        assert_eq!(tally.take(None).map(|r| r.write_timeout), Some(1));
    }

    #[test]
    fn request_lines_are_told_apart() {
        let m = |s: &str| parse(s.as_bytes());
        assert_eq!(
            m("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Request::Metrics { head_only: false }
        );
        assert_eq!(
            m("HEAD /metrics?x=1 HTTP/1.0\r\n\r\n"),
            Request::Metrics { head_only: true }
        );
        assert_eq!(m("GET / HTTP/1.1\r\n\r\n"), Request::NotFound);
        assert_eq!(m("POST /metrics HTTP/1.1\r\n\r\n"), Request::BadMethod);
        assert_eq!(m("GET /metrics\r\n\r\n"), Request::Bad);
        assert_eq!(m("\u{0}\u{1}garbage"), Request::Bad);
    }
}
