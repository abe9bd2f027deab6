//! The state directory's lock: held by the writing scangate (two daemons
//! on one database would each trust their own Bloom filter and
//! double-commit), and seen by others in `/proc/locks`.

use super::StoreError;
use nix::fcntl::{Flock, FlockArg};
use std::path::Path;

/// File in the state directory that a writing scangate holds locked.
pub const LOCK_FILE: &str = "scangate.lock";

/// Take `dir`'s lock (without waiting) and write this process's pid into
/// it; [`StoreError::Locked`] names the holder's.
pub(super) fn lock_state_dir(dir: &Path) -> Result<Flock<std::fs::File>, StoreError> {
    use std::io::{Read, Seek, Write};
    let path = dir.join(LOCK_FILE);
    let file = crate::files::open(&path, crate::files::Access::ReadWrite)
        .map_err(|e| super::file_error(&path, e))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(mut lock) => {
            let _ = lock.set_len(0);
            let _ = lock.rewind();
            let _ = writeln!(lock, "{}", std::process::id());
            Ok(lock)
        }
        Err((mut file, _)) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            Err(StoreError::Locked {
                dir: dir.to_owned(),
                holder: holder.trim().to_string(),
            })
        }
    }
}

/// Whether a scangate holds `state_dir`'s lock, read from `/proc/locks`
/// (taking a lock to find out could make a daemon starting at that moment
/// fail). Unknown (no lock file, no `/proc/locks`) counts as running.
pub fn is_running(state_dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(state_dir.join(LOCK_FILE)) else {
        return true;
    };
    let Ok(locks) = std::fs::read_to_string("/proc/locks") else {
        return true;
    };
    let dev = meta.dev();
    let id = format!(
        "{:02x}:{:02x}:{}",
        libc::major(dev),
        libc::minor(dev),
        meta.ino()
    );
    locks.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.get(1) == Some(&"FLOCK") && f.get(3) == Some(&"WRITE") && f.get(5) == Some(&id.as_str())
    })
}
