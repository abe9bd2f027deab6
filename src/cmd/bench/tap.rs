//! `--tap-readers N` and `--tap-blocked`: the bench's reads and decisions
//! shown to `scangate tap` readers while it runs, as the daemon shows
//! them — the tap socket served in the bench's directory by the daemon's
//! own server ([`crate::daemon::tap`]), each reader a `scangate tap
//! --json` process of its own writing to /dev/null (its CPU is its own,
//! not this process's), and with `--tap-blocked` one more reader that
//! connects and never reads. What it costs the gateway is this process's
//! CPU against a run without.

use crate::telemetry::Telemetry;
use std::io::Write as _;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The readers attached, and the server serving them.
pub(super) struct Taps {
    stopper: crate::shutdown::Stopper,
    server: std::thread::JoinHandle<()>,
    readers: Vec<Child>,
    blocked: Option<UnixStream>,
}

/// Serve the tap in `dir` to `telemetry`'s lines and attach `n` readers
/// (and a blocked one); returns once all are attached.
pub(super) fn attach(
    dir: &Path,
    telemetry: &Telemetry,
    n: u32,
    blocked: bool,
) -> Result<Taps, String> {
    let (stopper, stop) = crate::shutdown::channel();
    let (bound_tx, bound) = std::sync::mpsc::channel();
    let server = {
        let (dir, telemetry) = (dir.to_owned(), telemetry.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(async move {
                let listener = crate::daemon::tap::bind(&dir);
                let _ = bound_tx.send(listener.is_some());
                if let Some(listener) = listener {
                    crate::daemon::tap::serve(listener, telemetry, "bench-gw".into(), stop).await;
                }
            });
        })
    };
    if !bound.recv().unwrap_or(false) {
        return Err(format!(
            "the tap socket cannot be opened in {}",
            dir.display()
        ));
    }
    let config = dir.join("tap-bench.toml");
    std::fs::write(
        &config,
        format!(
            "[gateway]\nfacility = \"bench\"\nid = \"bench-gw\"\nstate_dir = {:?}\n",
            dir.to_str().ok_or("the bench's directory is not UTF-8")?
        ),
    )
    .map_err(|e| format!("writing {}: {e}", config.display()))?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut readers = Vec::new();
    for _ in 0..n {
        let child = Command::new(&exe)
            .args(["tap", "--json", "--config"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting a tap reader: {e}"))?;
        readers.push(child);
    }
    let blocked = if blocked {
        let mut conn = UnixStream::connect(crate::daemon::tap::socket_path(dir))
            .map_err(|e| format!("attaching the blocked reader: {e}"))?;
        conn.write_all(b"{\"raw\":false}\n")
            .map_err(|e| format!("greeting as the blocked reader: {e}"))?;
        Some(conn)
    } else {
        None
    };
    let want = n as usize + usize::from(blocked.is_some());
    let since = Instant::now();
    while telemetry.tap_readers() < want {
        if since.elapsed() > Duration::from_secs(10) {
            return Err(format!(
                "{} of {want} tap readers attached within 10 s",
                telemetry.tap_readers()
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    println!(
        "tap: {n} reader(s) attached{}",
        if blocked.is_some() {
            ", and one that never reads"
        } else {
            ""
        }
    );
    Ok(Taps {
        stopper,
        server,
        readers,
        blocked,
    })
}

impl Taps {
    /// Detach every reader, stop the server, print what the readers cost
    /// themselves.
    pub(super) fn finish(self) {
        self.stopper.stop();
        let _ = self.server.join();
        drop(self.blocked);
        for mut r in self.readers {
            let _ = r.wait();
        }
        if let Some(cpu) = super::cpu_of(nix::sys::resource::UsageWho::RUSAGE_CHILDREN) {
            println!(
                "tap: the readers' own CPU {:.2} s (their processes, not this one)",
                cpu.as_secs_f64()
            );
        }
    }
}
