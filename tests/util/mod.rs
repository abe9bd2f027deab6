//! Helpers for the integration tests, by job: the real `scangate` binary
//! ([`cli`]) and daemon ([`daemon`]); a gateway with N PTY scanners, the
//! fixture most daemon tests start from ([`gateway`]), and gateways of a
//! facility Redis ([`facility`]); systemd's notify socket ([`notify`]), a
//! `redis-server` of the test's own ([`redis_server`]), a stand-in for
//! journald ([`journal`]), a Prometheus and node_exporter
//! ([`prometheus`]), labels and scans ([`scans`]), PTYs as serial scanners
//! ([`pty`]), and waits ([`wait`]). Everything runs in unique temporary
//! directories.

mod cli;
mod daemon;
mod facility;
mod fda;
mod gateway;
mod journal;
mod notify;
mod prometheus;
mod pty;
mod redis_cluster;
mod redis_server;
mod scans;
mod wait;

pub use cli::*;
pub use daemon::*;
pub use facility::*;
pub use fda::*;
pub use gateway::*;
pub use journal::*;
pub use notify::*;
pub use prometheus::*;
pub use pty::*;
pub use redis_cluster::*;
pub use redis_server::*;
pub use scans::*;
pub use wait::*;
