//! Who may read the state directory: it and its database are the service
//! user's, readable by its group (`status` as a member of it), and no one
//! else's. scangate creates them so ([`crate::files::restrict_umask`]);
//! one made by an earlier release or by hand may be looser, and is told,
//! with the `chmod` that fixes it, at the daemon's start and in `status`.

use super::DB_FILE;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The bits no one but the owner and its group should have: the group's
/// write, and everything for others.
const LOOSE_BITS: u32 = 0o027;

/// A file or directory of the state directory that others may read or
/// write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loose {
    /// The file or directory.
    pub path: PathBuf,
    /// Its permission bits.
    pub mode: u32,
}

impl Loose {
    /// Who may do what they should not.
    pub fn who(&self) -> String {
        let mut may = Vec::new();
        if self.mode & 0o020 != 0 {
            may.push("its group may write it");
        }
        if self.mode & 0o002 != 0 {
            may.push("every user may write it");
        }
        if self.mode & 0o005 != 0 {
            may.push("every user may read it");
        }
        may.join(" and ")
    }

    /// The command that fixes it (the group keeps reading).
    pub fn fix(&self) -> String {
        format!(
            "chmod {:04o} {}",
            self.mode & 0o7777 & !LOOSE_BITS,
            self.path.display()
        )
    }
}

impl std::fmt::Display for Loose {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is mode {:04o}: {} (the database keeps rejected reads' raw bytes, which may carry patient data). Fix: `{}`",
            self.path.display(),
            self.mode & 0o7777,
            self.who(),
            self.fix()
        )
    }
}

/// The state directory and its database, where others may read or write
/// them (nothing when they are not there).
pub fn loose(state_dir: &Path) -> Vec<Loose> {
    [state_dir.to_owned(), state_dir.join(DB_FILE)]
        .into_iter()
        .filter_map(|path| {
            let mode = std::fs::symlink_metadata(&path).ok()?.permissions().mode();
            (mode & LOOSE_BITS != 0).then_some(Loose { path, mode })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loose_modes_are_named_with_their_fix() {
        let dir = tempfile::tempdir().unwrap();
        let set = |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
        let db = dir.path().join(DB_FILE);
        std::fs::write(&db, "").unwrap();
        set(dir.path(), 0o750).unwrap();
        set(&db, 0o640).unwrap();
        assert_eq!(loose(dir.path()), vec![]);
        set(dir.path(), 0o755).unwrap();
        set(&db, 0o664).unwrap();
        let found = loose(dir.path());
        assert_eq!(found.len(), 2);
        assert_eq!(
            found[0].fix(),
            format!("chmod 0750 {}", dir.path().display())
        );
        assert_eq!(found[0].who(), "every user may read it");
        assert_eq!(found[1].fix(), format!("chmod 0640 {}", db.display()));
        assert!(
            found[1]
                .to_string()
                .contains("its group may write it and every user may read it")
        );
    }
}
