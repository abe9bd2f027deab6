//! How a `scangate` command ends: its exit code. The codes and their
//! one-line meanings are written once, here ([`Exit::meaning`]); `--help`
//! prints them from here and a test checks README's table against them.
//! Which failure of a command gives which code is said in that command's
//! own help (`src/cli/args.rs`). Which error gets which code is decided in
//! one place, `cmd::Failure::exit`.

use std::fmt::Write;

/// An exit code of `scangate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Success.
    Ok = 0,
    /// A check failed.
    CheckFailed = 1,
    /// Configuration or usage error.
    Config = 2,
    /// The state directory or database cannot be used.
    State = 3,
    /// Runtime failure.
    Runtime = 4,
}

impl Exit {
    /// Every code, in order.
    pub const ALL: [Exit; 5] = [
        Exit::Ok,
        Exit::CheckFailed,
        Exit::Config,
        Exit::State,
        Exit::Runtime,
    ];

    /// The number the process exits with.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// What it means, for a technician: one short line. Which failure of
    /// a command gives which code is in that command's own `--help`.
    pub fn meaning(self) -> &'static str {
        match self {
            Exit::Ok => "success",
            Exit::CheckFailed => {
                "a check failed: status degraded, audit verify found damage, decode got an invalid barcode, …"
            }
            Exit::Config => {
                "configuration or usage error, or a facility Redis that refuses this gateway; the message names the fix"
            }
            Exit::State => {
                "the state directory or database cannot be used: in use, unwritable, unreadable, damaged, lost or of another version"
            }
            Exit::Runtime => {
                "runtime failure: I/O, a thread that died, a facility Redis that does not answer where one is needed"
            }
        }
    }

    /// One line per code, for `scangate --help`.
    pub fn summary() -> String {
        let mut out = String::from("Exit codes:\n");
        for e in Exit::ALL {
            let _ = writeln!(out, "  {}  {}", e.code(), e.meaning());
        }
        out.push_str("Which failure gives which code: `scangate <COMMAND> --help`.\n");
        out
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// README's table of exit codes is this one, row for row.
    #[test]
    fn the_readme_documents_exactly_these_exit_codes() {
        let readme =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
        let rows: Vec<(String, String)> = readme
            .split("### Exit codes")
            .nth(1)
            .expect("README has an Exit codes section")
            .lines()
            .skip_while(|l| !l.starts_with("| code"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| {
                let cells: Vec<&str> = l.trim_matches('|').split(" | ").collect();
                (cells[0].trim().to_string(), cells[1].trim().to_string())
            })
            .collect();
        let expected: Vec<(String, String)> = Exit::ALL
            .iter()
            .map(|e| (e.code().to_string(), e.meaning().to_string()))
            .collect();
        assert_eq!(rows, expected);
    }
}
