//! `scangate run`: the daemon ([`crate::daemon::run_with`]) until SIGTERM
//! or SIGINT stops it in order; SIGHUP (`systemctl reload`) re-reads the
//! config.

use super::{Failure, resolve, runtime};
use crate::cli::args::ConfigArg;
use crate::exit::Exit;

/// Run the daemon configured by `arg` until a signal stops it.
pub fn run(arg: &ConfigArg) -> Result<Exit, Failure> {
    let settings = resolve(arg)?;
    // A state directory no directory can ever be made at (a link loop, a
    // link to nothing, a path too long) is named as such before the
    // database is opened, as `check-config` names it.
    super::check_config::reachable_state_dir(&settings.config.state_dir())?;
    runtime()?.block_on(async {
        // Installed before anything starts: a SIGTERM that comes
        // while the daemon starts up stops it in order too (the
        // default action would kill it).
        let shutdown = shutdown_signal()?;
        // SIGHUP (`systemctl reload`) reloads; it never kills.
        let reloads = crate::daemon::Reloads {
            config: arg.path(),
            requests: reload_signal()?,
        };
        crate::daemon::run_with(settings, shutdown, Some(reloads)).await?;
        Ok(Exit::Ok)
    })
}

/// One message per SIGHUP, from now on (the default action, which would
/// end the process, is replaced at once).
fn reload_signal() -> Result<tokio::sync::mpsc::UnboundedReceiver<()>, Failure> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hup = signal(SignalKind::hangup())
        .map_err(|e| Failure::Runtime(format!("cannot handle SIGHUP: {e}")))?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            if tx.send(()).is_err() {
                break;
            }
        }
    });
    Ok(rx)
}

/// Handle SIGTERM and SIGINT from now on; the future completes on the
/// first of them. Call inside the runtime.
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()>, Failure> {
    use tokio::signal::unix::{SignalKind, signal};
    let handler = |kind: SignalKind, name: &str| {
        signal(kind).map_err(|e| Failure::Runtime(format!("cannot handle {name}: {e}")))
    };
    let mut term = handler(SignalKind::terminate(), "SIGTERM")?;
    let mut int = handler(SignalKind::interrupt(), "SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}
