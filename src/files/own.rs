//! A file of scangate's own, in a directory that another account may
//! write, opened without ever writing through what that account planted
//! there.
//!
//! The state directory belongs to the service user, and a technician runs
//! `scangate` commands in it as root. Whoever holds the service account
//! could put a symbolic link, a FIFO, a device node or a second name of
//! another file (a hard link) where scangate expects its own file; opening
//! that name as `std::fs` does would write through it into whatever it
//! names. Here every name is opened with `O_NOFOLLOW` (a link is not
//! followed: the open fails) and `O_NONBLOCK` (a FIFO does not hang the
//! open), and what was opened is checked, on the open descriptor, to be a
//! regular file with one name before a byte is read or written. A new
//! file is made `rw-r-----` at most, whatever the umask.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The mode of a file scangate creates, before the umask (which may only
/// take more away): the owner reads and writes, its group reads.
pub const FILE_MODE: u32 = 0o640;

/// The mode of a directory scangate creates: the owner's, its group may
/// look in.
pub const DIR_MODE: u32 = 0o750;

/// Take from the process's umask what [`FILE_MODE`] and [`DIR_MODE`] do
/// not give (group write, everything for others), keeping what it takes
/// already. Called first thing, before any thread: SQLite creates the
/// database and the files beside it under the umask, and a command run
/// by hand under `umask 022` must not leave them readable by every user
/// (the database keeps rejected reads' raw bytes, which may carry
/// patient data).
pub fn restrict_umask() {
    use nix::sys::stat::{Mode, umask};
    let old = umask(Mode::from_bits_truncate(0o077));
    umask(old | Mode::S_IWGRP | Mode::S_IRWXO);
}

/// Create `dir` and its missing parents, each [`DIR_MODE`] at most.
pub fn create_dir_all(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
}

/// What was found at a name where a regular file of scangate's belongs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unfit {
    /// A symbolic link, and where it points.
    Link(PathBuf),
    /// A named pipe.
    Fifo,
    /// A character or block device node.
    Device,
    /// A Unix socket.
    Socket,
    /// A directory.
    Directory,
    /// A regular file with other names too (hard links): writing it would
    /// change the file under its other names.
    HardLinked(u64),
}

impl std::fmt::Display for Unfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unfit::Link(to) => write!(f, "a symbolic link (to {})", to.display()),
            Unfit::Fifo => f.write_str("a named pipe (FIFO)"),
            Unfit::Device => f.write_str("a device node"),
            Unfit::Socket => f.write_str("a socket"),
            Unfit::Directory => f.write_str("a directory"),
            Unfit::HardLinked(n) => write!(f, "a file with {n} names (hard links)"),
        }
    }
}

/// A name that could not be opened as a file of scangate's own.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Something other than a regular file with one name is there.
    #[error(
        "{path} is {unfit}, where scangate keeps a file of its own: it is left as it is and nothing is read from or written through it. Fix: find out who put it there (`ls -l {path}`), remove it (`rm {path}`), then run the command again; to keep this state on another disk, point the config's state_dir at a directory there instead of linking files"
    )]
    Unfit {
        /// The name.
        path: PathBuf,
        /// What is there.
        unfit: Unfit,
    },
    /// The open, read or write failed.
    #[error("{path}: {source}")]
    Io {
        /// The name.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// How to open a file with [`open`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read an existing file.
    Read,
    /// Read and write, creating the file if it is not there (never
    /// truncating it).
    ReadWrite,
    /// Write from empty, creating the file if it is not there.
    Replace,
}

/// What is at `path`, looked at without following a link: `None` when
/// nothing is there or a regular file with one name is.
pub fn unfit(path: &Path) -> Result<Option<Unfit>, FileError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => Ok(judge(path, &meta)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(FileError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

/// [`unfit`], as an error.
pub fn refuse_unfit(path: &Path) -> Result<(), FileError> {
    match unfit(path)? {
        None => Ok(()),
        Some(unfit) => Err(FileError::Unfit {
            path: path.to_owned(),
            unfit,
        }),
    }
}

fn judge(path: &Path, meta: &std::fs::Metadata) -> Option<Unfit> {
    let t = meta.file_type();
    if t.is_symlink() {
        let to = std::fs::read_link(path).unwrap_or_else(|_| PathBuf::from("?"));
        Some(Unfit::Link(to))
    } else if t.is_fifo() {
        Some(Unfit::Fifo)
    } else if t.is_char_device() || t.is_block_device() {
        Some(Unfit::Device)
    } else if t.is_socket() {
        Some(Unfit::Socket)
    } else if t.is_dir() {
        Some(Unfit::Directory)
    } else if meta.nlink() > 1 {
        Some(Unfit::HardLinked(meta.nlink()))
    } else {
        None
    }
}

/// Open `path` as a file of scangate's own: never through a link, never a
/// FIFO, device, socket or a file with other names. A file created is
/// [`FILE_MODE`] at most.
pub fn open(path: &Path, access: Access) -> Result<File, FileError> {
    let io = |source| FileError::Io {
        path: path.to_owned(),
        source,
    };
    let mut options = std::fs::OpenOptions::new();
    match access {
        Access::Read => options.read(true),
        Access::ReadWrite => options.read(true).write(true).create(true),
        Access::Replace => options.write(true).create(true),
    };
    options
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    let file = match options.open(path) {
        Ok(f) => f,
        // ELOOP: the name is a link (O_NOFOLLOW); ENXIO: a FIFO with no
        // reader opened for writing without blocking.
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENXIO)) => {
            return Err(match unfit(path) {
                Ok(Some(unfit)) => FileError::Unfit {
                    path: path.to_owned(),
                    unfit,
                },
                _ => io(e),
            });
        }
        Err(e) => return Err(io(e)),
    };
    let meta = file.metadata().map_err(io)?;
    if let Some(unfit) = judge(path, &meta) {
        return Err(FileError::Unfit {
            path: path.to_owned(),
            unfit,
        });
    }
    // A regular file: back to ordinary blocking reads and writes.
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
    // SAFETY: fcntl on a descriptor this function owns, with plain flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags >= 0 {
        // SAFETY: as above.
        unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) };
    }
    if access == Access::Replace {
        file.set_len(0).map_err(io)?;
    }
    Ok(file)
}

/// Read `path` as text, as a file of scangate's own ([`open`]), at most
/// `limit` bytes (more is refused as [`std::io::ErrorKind::FileTooLarge`]).
pub fn read_to_string(path: &Path, limit: u64) -> Result<String, FileError> {
    let io = |source| FileError::Io {
        path: path.to_owned(),
        source,
    };
    let file = open(path, Access::Read)?;
    let mut text = String::new();
    file.take(limit + 1).read_to_string(&mut text).map_err(io)?;
    if text.len() as u64 > limit {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!("longer than the {limit} bytes scangate ever writes there"),
        )));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_link_is_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let name = dir.path().join("ours");
        std::os::unix::fs::symlink(&victim, &name).unwrap();
        for access in [Access::Read, Access::ReadWrite, Access::Replace] {
            let e = open(&name, access).unwrap_err();
            assert!(
                matches!(&e, FileError::Unfit { unfit: Unfit::Link(to), .. } if *to == victim),
                "{e}"
            );
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        // A dangling link is not created through either.
        let gone = dir.path().join("gone");
        std::fs::remove_file(&name).unwrap();
        std::os::unix::fs::symlink(&gone, &name).unwrap();
        assert!(open(&name, Access::ReadWrite).is_err());
        assert!(!gone.exists());
    }

    #[test]
    fn fifos_and_second_names_are_refused_without_hanging() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        for access in [Access::Read, Access::ReadWrite, Access::Replace] {
            let e = open(&fifo, access).unwrap_err();
            assert!(
                matches!(
                    e,
                    FileError::Unfit {
                        unfit: Unfit::Fifo,
                        ..
                    }
                ),
                "{e}"
            );
        }
        let a = dir.path().join("a");
        std::fs::write(&a, "a").unwrap();
        std::fs::hard_link(&a, dir.path().join("b")).unwrap();
        let e = open(&a, Access::Replace).unwrap_err();
        assert!(
            matches!(
                e,
                FileError::Unfit {
                    unfit: Unfit::HardLinked(2),
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "a");
    }

    #[test]
    fn new_files_are_not_for_everyone_and_replace_empties() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let mut f = open(&p, Access::Replace).unwrap();
        f.write_all(b"longer text").unwrap();
        drop(f);
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o007,
            0
        );
        open(&p, Access::Replace).unwrap().write_all(b"x").unwrap();
        assert_eq!(read_to_string(&p, 100).unwrap(), "x");
        assert!(read_to_string(&p, 0).is_err());
    }
}
