//! How a `scangate` command ends: its exit code. The codes and their
//! meanings are written once, here ([`Exit::meaning`]); `--help` prints
//! them from here and a test checks README's table against them. Which
//! error gets which code is decided in one place, `cli::Failure::exit`.

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

    /// What it means, for a technician.
    pub fn meaning(self) -> &'static str {
        match self {
            Exit::Ok => "success",
            Exit::CheckFailed => {
                "a check failed: `status` found the gateway degraded (each reason listed), `audit verify` found a broken record or ledger entry, a lost tail, an anchor it cannot reach, or an archive altered, truncated, not an archive or not joining the chain (`audit prune` refuses such an archive too), `decode` got an invalid barcode, the demo lost or doubled a scan, `audit trace` found nothing or an echo naming a commit of this gateway that has no readable record, `check-config --online` could not reach the facility Redis or found a scanner's device path unusable, `pair` heard no scan that decodes before `--timeout` or was cancelled (Esc), or found no unpaired HID scanner"
            }
            Exit::Config => {
                "configuration or usage error (the message names the key and the fix; `audit export` with nothing to archive or onto an existing file, `audit prune` given another state's archive; `[metrics] listen` on an address that cannot be bound; an unreadable `[redis]` `password_file` or `ca_file` too, also for `check-config`), or a facility Redis set up so that claims could be lost (`maxmemory-policy` not `noeviction`), that refuses this gateway's window and retention or its credentials (`WRONGPASS`, `NOAUTH`: the message names the ACL user and `[redis] password_file`), or whose ACL user lacks a grant"
            }
            Exit::State => {
                "state error: state directory not writable or in use by another scangate, database corrupt, unreadable or of another schema version (never overwritten), or lost: missing, emptied or replaced by another state's while `state-id` (or its leftovers) says one was here (restore it, or `state reset`); also `run` stopping because the page check it runs after start found damage"
            }
            Exit::Runtime => {
                "runtime failure (I/O, e.g. an archive file that cannot be read or written; an internal thread died, output that cannot be written; `audit prune` with a facility Redis that does not answer; `pair` able to read none of the scanner interfaces, e.g. not run as root)"
            }
        }
    }

    /// One line per code, for `scangate --help`.
    pub fn summary() -> String {
        let mut out = String::from("Exit codes:\n");
        for e in Exit::ALL {
            let _ = writeln!(out, "  {}  {}", e.code(), e.meaning());
        }
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
