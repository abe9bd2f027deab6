//! The tap socket: `scangate tap` (and `scangate top`) attached to the
//! running daemon, each reader sent every read, decision, ACK and signal
//! as a JSON line ([`crate::telemetry::tap`] builds and fans them out).
//!
//! A Unix socket in the state directory ([`TAP_SOCKET`]), mode 0660: the
//! state directory is the service's (0750), so the readers are the
//! service's account and the members of its group — the technicians who
//! may read `status` — and nobody else; no port is opened to the network
//! (a TCP endpoint would need a password and TLS to say as much).
//!
//! The conversation: the reader sends one line, a JSON object
//! (`{"raw":false}`; `raw: true` asks for the bytes of each read), within
//! [`GREETING_WITHIN`]; the daemon answers with a `hello` line (gateway,
//! release) and then the lines as they happen, a `lost` line where the
//! reader fell behind. At most [`MAX_READERS`] at once; one more is told
//! why and closed. A reader that stops reading blocks only its own task:
//! it loses lines, never slows the pipeline.

use crate::events::{self, Event as _};
use crate::shutdown::Stop;
use crate::telemetry::Telemetry;
use crate::telemetry::tap::Next;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

/// The socket's name in the state directory.
pub const TAP_SOCKET: &str = "tap.sock";
/// Readers attached at once, at most.
pub const MAX_READERS: usize = 8;
/// How long a new connection has to send its greeting.
pub const GREETING_WITHIN: Duration = Duration::from_secs(2);
/// After a write, a reader's task lets lines gather this long.
const GATHER: Duration = Duration::from_millis(50);
/// A write to a reader gathers the lines waiting up to about this much.
const BATCH_BYTES: usize = 64 * 1024;
/// The longest greeting read.
const GREETING_MAX: u64 = 4096;

/// What a reader asks for (its greeting).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Greeting {
    /// The raw bytes of each read too.
    #[serde(default)]
    pub raw: bool,
}

/// The daemon's answer to a greeting: the first line a reader gets.
#[derive(Debug, Serialize, Deserialize)]
pub struct Hello {
    /// `hello`, or `refused` (then `why` says why).
    pub event: String,
    /// The gateway's name.
    #[serde(default)]
    pub gateway: String,
    /// The daemon's release.
    #[serde(default)]
    pub version: String,
    /// Why it was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// The tap socket's path in `state_dir`.
pub fn socket_path(state_dir: &Path) -> PathBuf {
    state_dir.join(TAP_SOCKET)
}

/// Open the tap socket in `state_dir`, replacing one a daemon before this
/// one left (this process holds the state directory's lock: no other
/// daemon listens there). `None`, told, when it cannot be opened.
pub fn bind(state_dir: &Path) -> Option<UnixListener> {
    let path = socket_path(state_dir);
    let opened = (|| {
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let listener = UnixListener::bind(&path)?;
        // Group members connect (connect(2) needs write permission);
        // the unit's umask (0027) would leave them out.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o660))?;
        Ok(listener)
    })();
    match opened {
        Ok(listener) => Some(listener),
        Err(e) => {
            events::Tap::Unavailable {
                path: &path,
                error: &e,
            }
            .emit();
            None
        }
    }
}

/// Serve the tap socket in `state_dir` on a task of its own until
/// `stop`, then remove it (a reader then finds no daemon rather than a
/// socket nobody answers). `None` when it cannot be opened (told).
pub fn start(
    state_dir: &Path,
    telemetry: &Telemetry,
    gateway: &str,
    stop: &Stop,
) -> Option<tokio::task::JoinHandle<()>> {
    let listener = bind(state_dir)?;
    let (telemetry, gateway, stop) = (telemetry.clone(), gateway.to_string(), stop.clone());
    let path = socket_path(state_dir);
    Some(tokio::spawn(async move {
        serve(listener, telemetry, gateway, stop).await;
        let _ = std::fs::remove_file(path);
    }))
}

/// Serve the tap on `listener` until `stop`, as gateway `gateway`.
pub async fn serve(listener: UnixListener, telemetry: Telemetry, gateway: String, mut stop: Stop) {
    loop {
        let conn = tokio::select! {
            a = listener.accept() => a,
            _ = stop.wait() => break,
        };
        match conn {
            Ok((conn, _)) => {
                let (telemetry, gateway, stop) = (telemetry.clone(), gateway.clone(), stop.clone());
                tokio::spawn(async move { reader(conn, telemetry, &gateway, stop).await });
            }
            Err(e) => {
                // E.g. out of file descriptors: wait a moment, go on.
                events::Tap::AcceptFailed { error: &e }.emit();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// One reader: its greeting, then every line until it leaves or `stop`.
async fn reader(conn: UnixStream, telemetry: Telemetry, gateway: &str, mut stop: Stop) {
    let (read, mut write) = conn.into_split();
    let mut read = BufReader::new(read.take(GREETING_MAX));
    let mut first = String::new();
    let greeting = match tokio::time::timeout(GREETING_WITHIN, read.read_line(&mut first)).await {
        Ok(Ok(n)) if n > 0 => serde_json::from_str::<Greeting>(first.trim())
            .map_err(|e| format!("its greeting is not one the tap knows ({e})")),
        Ok(_) => Err("it closed before its greeting".to_string()),
        Err(_) => Err(format!(
            "no greeting within {} s",
            GREETING_WITHIN.as_secs()
        )),
    };
    let refused = match &greeting {
        Err(why) => Some(why.clone()),
        Ok(_) if telemetry.tap_readers() >= MAX_READERS => Some(format!(
            "{MAX_READERS} readers are attached already, the most the tap serves: close one"
        )),
        Ok(_) => None,
    };
    if let Some(why) = refused {
        events::Tap::Refused { why: &why }.emit();
        let _ = write
            .write_all(&line(&hello("refused", gateway, Some(why))))
            .await;
        return;
    }
    let raw = greeting.is_ok_and(|g| g.raw);
    let mut tap = telemetry.tap(raw);
    events::Tap::Attached {
        readers: telemetry.tap_readers(),
        raw,
    }
    .emit();
    let mut lost = 0;
    if write
        .write_all(&line(&hello("hello", gateway, None)))
        .await
        .is_ok()
    {
        let mut gone = [0u8; 64];
        let mut read = read.into_inner().into_inner();
        let mut batch = Vec::with_capacity(BATCH_BYTES);
        loop {
            let next = tokio::select! {
                next = tap.next() => next,
                // Anything more it sends is ignored; its end is its leaving.
                n = read.read(&mut gone) => match n {
                    Ok(0) | Err(_) => break,
                    Ok(_) => continue,
                },
                _ = stop.wait() => break,
            };
            // What came meanwhile goes in the same write (a burst of
            // decisions is one write per reader, not one per line).
            batch.clear();
            let mut next = Some(next);
            let mut closed = false;
            while let Some(n) = next.take() {
                match n {
                    Next::Line(json) => batch.extend_from_slice(json.as_bytes()),
                    Next::Lost(n) => {
                        lost += n;
                        batch.extend_from_slice(
                            format!(r#"{{"event":"lost","lines":{n}}}"#).as_bytes(),
                        );
                    }
                    Next::Closed => {
                        closed = true;
                        break;
                    }
                }
                batch.push(b'\n');
                if batch.len() < BATCH_BYTES {
                    next = tap.next_now();
                }
            }
            let written = tokio::select! {
                w = write.write_all(&batch) => w.is_ok(),
                _ = stop.wait() => false,
            };
            if !written || closed {
                break;
            }
            // Then gather for a moment: a burst wakes this task once per
            // GATHER, not once per line (each wake-up is the sender's
            // cost too), and a lone read is still shown at once.
            tokio::select! {
                _ = tokio::time::sleep(GATHER) => {}
                _ = stop.wait() => break,
            }
        }
    }
    drop(tap);
    events::Tap::Detached {
        readers: telemetry.tap_readers(),
        lost,
    }
    .emit();
}

fn hello(event: &str, gateway: &str, why: Option<String>) -> Hello {
    Hello {
        event: event.to_string(),
        gateway: gateway.to_string(),
        version: crate::build::VERSION.to_string(),
        why,
    }
}

fn line(value: &impl Serialize) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(value).expect("a tap line serialises");
    bytes.push(b'\n');
    bytes
}
