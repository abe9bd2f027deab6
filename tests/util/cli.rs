//! The `scangate` binary as a short-lived CLI command.

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_scangate")
}

/// A `scangate` command with an environment that cannot leak the host's
/// configuration into the test.
pub fn command() -> Command {
    command_via(&[])
}

/// [`command`] run through `wrapper` (a program and its arguments, to which
/// the binary's path is appended), e.g. `unshare -m …`.
pub fn command_via(wrapper: &[&str]) -> Command {
    let mut c = match wrapper.split_first() {
        None => Command::new(bin()),
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(bin());
            c
        }
    };
    c.env_remove("SCANGATE_CONFIG")
        .env_remove("STATE_DIRECTORY")
        .env_remove("JOURNAL_STREAM")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    c
}

/// Run a short-lived CLI command to completion.
pub fn cli(args: &[&str]) -> Output {
    command()
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} {args:?}: {e}", bin()))
}

/// Run `scangate <args> --config <config>` to completion.
pub fn cli_cfg(config: &Path, args: &[&str]) -> Output {
    let mut all: Vec<&str> = args.to_vec();
    all.push("--config");
    all.push(config.to_str().expect("utf-8 temp path"));
    cli(&all)
}

/// Exit code, stdout and stderr as text (for messages and asserts).
pub struct Outcome {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Outcome {
    fn from(o: Output) -> Self {
        Outcome {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Debian's libfaketime (package `faketime`, which `.ci/run` installs): it
/// shifts a process's wall clock, not its boot clock.
pub fn libfaketime() -> String {
    let found = std::fs::read_dir("/usr/lib")
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path().join("faketime/libfaketime.so.1"))
        .find(|p| p.exists());
    found
        .expect("libfaketime.so.1 under /usr/lib/*/faketime: apt-get install faketime")
        .display()
        .to_string()
}

/// `scangate <args> --config <config>` with the wall clock `days` ahead
/// (libfaketime; the boot clock is left alone).
pub fn cli_later(config: &Path, days: i64, args: &[&str]) -> Outcome {
    command()
        .args(args)
        .arg("--config")
        .arg(config)
        .env("LD_PRELOAD", libfaketime())
        .env("FAKETIME", format!("+{days}d"))
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .output()
        .expect("running scangate under libfaketime")
        .into()
}
