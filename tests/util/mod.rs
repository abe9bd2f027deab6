//! Helpers for the integration tests, by job: the real `scangate` binary
//! ([`cli`]) and daemon ([`daemon`]), a `redis-server` of the test's own
//! ([`redis_server`]), labels and scans ([`scans`]), PTYs as serial
//! scanners ([`pty`]), and waits ([`wait`]). Everything runs in unique
//! temporary directories.

mod cli;
mod daemon;
mod pty;
mod redis_server;
mod scans;
mod wait;

pub use cli::*;
pub use daemon::*;
pub use pty::*;
pub use redis_server::*;
pub use scans::*;
pub use wait::*;
