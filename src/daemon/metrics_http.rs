//! `[metrics] listen`: a minimal HTTP/1 server for `GET /metrics` on the
//! daemon's tokio runtime.
//!
//! Hand-rolled over [`tokio::net::TcpListener`] rather than hyper: a scrape
//! is one GET of one path, answered with `Connection: close`, so the whole
//! server is a request-head reader and one response; hyper + hyper-util
//! would add a dozen crates for the same. Each connection gets
//! [`READ_TIMEOUT`] to send its request head of at most [`MAX_HEAD`] bytes;
//! anything else is answered 400, 404 or 405 and closed.

use crate::shutdown::Stop;
use crate::telemetry::Telemetry;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The longest request head accepted.
pub const MAX_HEAD: usize = 8 * 1024;
/// How long a client may take to send its request head.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once at most (the rest wait in the backlog).
const CONCURRENT: usize = 16;

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

/// Serve `GET /metrics` on `listener` until `stop`.
pub async fn serve(listener: TcpListener, telemetry: Telemetry, mut stop: Stop) {
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(CONCURRENT));
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.wait() => return,
        };
        match accepted {
            Ok((conn, _peer)) => {
                let Ok(slot) = slots.clone().acquire_owned().await else {
                    return;
                };
                let telemetry = telemetry.clone();
                tokio::spawn(async move {
                    let _ = answer(conn, &telemetry).await;
                    drop(slot);
                });
            }
            Err(e) => {
                // E.g. out of file descriptors: wait a moment, go on.
                crate::events::MetricsFailed {
                    step: crate::events::MetricsStep::Accept,
                    error: &e,
                }
                .emit();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
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

async fn answer(mut conn: TcpStream, telemetry: &Telemetry) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    let complete = tokio::time::timeout(READ_TIMEOUT, async {
        loop {
            let n = conn.read(&mut buf).await?;
            if n == 0 {
                return Ok::<bool, std::io::Error>(false);
            }
            head.extend_from_slice(&buf[..n]);
            if head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n") {
                return Ok(true);
            }
            if head.len() > MAX_HEAD {
                return Ok(false);
            }
        }
    })
    .await;
    let request = match complete {
        Ok(Ok(true)) => parse(&head),
        Ok(Ok(false)) => Request::Bad,
        Ok(Err(e)) => return Err(e),
        Err(_) => return Ok(()), // timed out: just close
    };
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
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(response.as_bytes()).await?;
    if !head_only {
        conn.write_all(body.as_bytes()).await?;
    }
    conn.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

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
