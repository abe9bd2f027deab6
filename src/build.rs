//! Which build this is: the release version, the database schema version
//! it reads and writes, the commit and target it was built from (the last
//! two from `build.rs`). `scangate --version`, the `Starting` log line,
//! `status` and `scangate_build_info` all show these.

/// The release version (Cargo.toml's; CHANGELOG.md has a section per
/// release).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The database schema version this build migrates to and writes (`PRAGMA
/// user_version` of its database: the number of migrations; the store
/// checks at compile time that they agree). An older binary refuses a
/// newer schema without touching it.
pub const SCHEMA_VERSION: i64 = 13;

/// The commit built (12 hex digits), or `unknown` when built outside git
/// without `SCANGATE_COMMIT`.
pub const COMMIT: &str = env!("SCANGATE_COMMIT");

/// The target triple built for.
pub const TARGET: &str = env!("SCANGATE_TARGET");
