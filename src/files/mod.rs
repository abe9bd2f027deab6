//! Files: the two ways scangate opens one.
//!
//! - [`named`]: a file a setting names (the config, a password or token, a
//!   CA bundle), typed by a technician: read whole, up to a limit, only if
//!   it is a regular file; links followed.
//! - `own` (its items re-exported here: [`open`], [`unfit`], …): a file
//!   of scangate's own in the state directory, which another account may
//!   write: never through a link, never a FIFO, a device or a second name
//!   of another file; created `0640` at most, whatever the umask.

pub mod named;
mod own;

pub use own::*;
