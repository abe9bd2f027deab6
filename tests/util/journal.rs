//! A stand-in for systemd-journald: a datagram socket of the test's own,
//! which a daemon sees as `/run/systemd/journal/socket` from a mount
//! namespace of its own (`unshare -m`: a tmpfs over `/run`, the test's
//! directory bound at `/run/systemd/journal`; needs root), and the
//! journal's native protocol parsed into fields.

use std::collections::BTreeMap;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};

/// One journal entry: field name → value (text).
pub type Entry = BTreeMap<String, String>;

/// The socket, and what came through it.
pub struct FakeJournal {
    socket: UnixDatagram,
    dir: PathBuf,
    entries: Vec<Entry>,
}

impl FakeJournal {
    /// Bind `<dir>/journal/socket`.
    pub fn bind(dir: &Path) -> FakeJournal {
        let dir = dir.join("journal");
        std::fs::create_dir_all(&dir).expect("creating the journal directory");
        let socket = UnixDatagram::bind(dir.join("socket")).expect("binding the journal socket");
        socket
            .set_nonblocking(true)
            .expect("a non-blocking journal socket");
        FakeJournal {
            socket,
            dir,
            entries: Vec::new(),
        }
    }

    /// The wrapper (for [`super::command_via`]) that runs the binary with
    /// this socket in journald's place.
    pub fn wrapper(&self) -> Vec<String> {
        [
            "unshare",
            "-m",
            "--",
            "sh",
            "-c",
            "mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/journal \
             && mount --bind \"$0\" /run/systemd/journal && exec \"$@\"",
            self.dir.to_str().expect("utf-8 temp path"),
        ]
        .map(str::to_string)
        .to_vec()
    }

    /// Every entry received so far (an empty datagram, the probe
    /// tracing-journald sends when it starts, is no entry).
    pub fn entries(&mut self) -> &[Entry] {
        let mut buf = vec![0u8; 1 << 17];
        loop {
            match self.socket.recv(&mut buf) {
                Ok(0) => {}
                Ok(n) => self.entries.push(parse(&buf[..n])),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("reading the journal socket: {e}"),
            }
        }
        &self.entries
    }
}

/// A datagram of the native protocol: `NAME=value\n`, or `NAME\n`, the
/// value's length (64-bit little-endian), the value, `\n`.
pub fn parse(mut d: &[u8]) -> Entry {
    let mut entry = Entry::new();
    while !d.is_empty() {
        let end = d
            .iter()
            .position(|&b| b == b'=' || b == b'\n')
            .unwrap_or_else(|| panic!("a journal field without a value: {d:?}"));
        let name = String::from_utf8_lossy(&d[..end]).into_owned();
        let value;
        if d[end] == b'=' {
            let rest = &d[end + 1..];
            let nl = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
            value = &rest[..nl];
            d = rest.get(nl + 1..).unwrap_or_default();
        } else {
            let rest = &d[end + 1..];
            let len = u64::from_le_bytes(rest[..8].try_into().expect("8 length bytes")) as usize;
            value = &rest[8..8 + len];
            assert_eq!(rest.get(8 + len), Some(&b'\n'), "field {name} not ended");
            d = &rest[8 + len + 1..];
        }
        entry.insert(name, String::from_utf8_lossy(value).into_owned());
    }
    entry
}
