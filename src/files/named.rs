//! Reading a file a setting names — the config file, a password or token,
//! a CA bundle — whole, but never more than a limit, and only from a
//! regular file.
//!
//! Such a path is typed by a technician, so it may name anything: a
//! device (`/dev/zero` never ends, and reading it whole ends in out of
//! memory), a FIFO (an open for reading waits for a writer that may never
//! come), a file far larger than any config. Here the path is looked at
//! before it is opened (a device node is never opened: opening some has
//! effects), opened with `O_NONBLOCK` (a FIFO put there meanwhile does not
//! hang the open), checked again on the open descriptor, and read up to
//! `limit + 1` bytes: one byte more than the limit is refused as too
//! large. Links are followed (a config or a CA bundle behind a symbolic
//! link is ordinary), and a systemd credential in `$CREDENTIALS_DIRECTORY`
//! is a regular file like any other.
//!
//! The limits, each far above what such a file holds and far below what
//! would strain a gateway's memory:
//! [`CONFIG_LIMIT`], [`SECRET_LIMIT`], [`CA_LIMIT`].

use std::fmt;
use std::fs::Metadata;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The config file: the full reference of every key, comments and all,
/// is about 25 KiB.
pub const CONFIG_LIMIT: u64 = 1024 * 1024;
/// A password, bearer token or `user:password` file: one line, a few
/// hundred bytes at most (a long JWT a few KiB).
pub const SECRET_LIMIT: u64 = 64 * 1024;
/// A CA bundle (PEM): one CA is 1-2 KiB; Debian's whole trust store
/// (`/etc/ssl/certs/ca-certificates.crt`) about 220 KiB.
pub const CA_LIMIT: u64 = 1024 * 1024;

/// Why a file was not read.
#[derive(Debug)]
pub enum ReadError {
    /// The OS refused: not found, no permission, a name too long.
    Io(std::io::Error),
    /// Not a regular file: what it is instead.
    NotRegular {
        /// "a character device", "a FIFO (named pipe)", …
        kind: &'static str,
        /// The limit the read was to stay under.
        limit: u64,
    },
    /// Larger than `limit` bytes.
    TooLarge {
        /// The limit.
        limit: u64,
        /// Its size, when the file system says (a file that grew while
        /// read, or a pseudo-file, has none).
        size: Option<u64>,
    },
}

impl ReadError {
    /// The OS error's kind, when that is what it was (e.g. `NotFound`).
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            ReadError::Io(e) => Some(e.kind()),
            _ => None,
        }
    }

    /// What to do: for a file that is not regular or too large, name the
    /// `what` itself (a regular file under the limit); for an OS error,
    /// `otherwise` (the caller's fix: the path, the permissions).
    pub fn fix(&self, what: &str, otherwise: &str) -> String {
        match self {
            ReadError::Io(_) => otherwise.to_string(),
            ReadError::NotRegular { limit, .. } | ReadError::TooLarge { limit, .. } => format!(
                "name the {what} itself: a regular file of at most {} (a device, FIFO or socket is never read)",
                size(*limit)
            ),
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::NotRegular { kind, .. } => write!(f, "it is {kind}, not a regular file"),
            ReadError::TooLarge {
                limit,
                size: Some(n),
            } => write!(
                f,
                "it is {n} bytes, more than the {} scangate reads of such a file",
                size(*limit)
            ),
            ReadError::TooLarge { limit, size: None } => write!(
                f,
                "it holds more than the {} scangate reads of such a file",
                size(*limit)
            ),
        }
    }
}

impl std::error::Error for ReadError {}

/// `bytes` as a person reads it: `1 MiB`, `64 KiB`, `100 bytes`.
pub fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// What a file type is, when it is not a regular file.
fn not_regular(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a file")
    }
}

/// The regular file at `path` (links followed), at most `limit` bytes.
pub fn read(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let refuse = |meta: &Metadata| match not_regular(meta) {
        Some(kind) => Err(ReadError::NotRegular { kind, limit }),
        None if meta.len() > limit => Err(ReadError::TooLarge {
            limit,
            size: Some(meta.len()),
        }),
        None => Ok(()),
    };
    refuse(&std::fs::metadata(path).map_err(ReadError::Io)?)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(ReadError::Io)?;
    // What was opened, which the name may no longer be.
    let meta = file.metadata().map_err(ReadError::Io)?;
    refuse(&meta)?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    Read::take(&file, limit + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge { limit, size: None });
    }
    Ok(bytes)
}

/// [`read`], as UTF-8 text.
pub fn read_to_string(path: &Path, limit: u64) -> Result<String, ReadError> {
    String::from_utf8(read(path, limit)?).map_err(|_| {
        ReadError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "it is not UTF-8 text",
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_at_the_limit_is_read_and_one_byte_more_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![b'x'; 100]).unwrap();
        assert_eq!(read(&p, 100).unwrap().len(), 100);
        let e = read(&p, 99).unwrap_err();
        assert!(
            matches!(
                e,
                ReadError::TooLarge {
                    limit: 99,
                    size: Some(100)
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("99 bytes"), "{e}");
    }

    #[test]
    fn devices_fifos_and_directories_are_refused_without_reading() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        for (path, kind) in [
            (Path::new("/dev/zero"), "a character device"),
            (fifo.as_path(), "a FIFO (named pipe)"),
            (dir.path(), "a directory"),
        ] {
            match read(path, CONFIG_LIMIT) {
                Err(ReadError::NotRegular { kind: k, .. }) => assert_eq!(k, kind),
                other => panic!("{}: {other:?}", path.display()),
            }
        }
    }

    #[test]
    fn a_pseudo_file_longer_than_the_limit_is_refused_though_its_size_says_0() {
        // /proc files are regular and report size 0.
        let e = read(Path::new("/proc/self/maps"), 10).unwrap_err();
        assert!(matches!(e, ReadError::TooLarge { size: None, .. }), "{e:?}");
    }

    #[test]
    fn sizes_read_as_a_person_reads_them() {
        assert_eq!(size(CONFIG_LIMIT), "1 MiB");
        assert_eq!(size(SECRET_LIMIT), "64 KiB");
        assert_eq!(size(1000), "1000 bytes");
    }

    #[test]
    fn the_fix_names_the_limit_except_for_an_os_error() {
        let e = ReadError::NotRegular {
            kind: "a FIFO (named pipe)",
            limit: CONFIG_LIMIT,
        };
        assert!(e.fix("config file", "x").contains("at most 1 MiB"));
        let e = ReadError::Io(std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!(e.fix("config file", "check the path"), "check the path");
    }
}
