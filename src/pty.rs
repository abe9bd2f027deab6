//! Pseudo-terminals as virtual serial scanners.
//!
//! The daemon opens the slave side exactly as it would open `/dev/ttyUSB0`;
//! the demo and the tests play the scanner on the master side: they write
//! frames and read back ACK/NAK bytes. Used by `scangate demo` and the tests.

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::pty::openpty;
use nix::sys::termios::{SetArg, cfmakeraw, tcgetattr, tcsetattr};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A scanner played on the master side of a PTY.
pub struct VirtualScanner {
    master: File,
    // Held open so the line stays up while the daemon reconnects.
    _slave: OwnedFd,
    path: PathBuf,
}

impl VirtualScanner {
    /// Create a PTY pair in raw mode.
    pub fn new() -> std::io::Result<VirtualScanner> {
        let pty = openpty(None, None).map_err(std::io::Error::from)?;
        // Children (a spawned daemon) must not inherit the scanner's side.
        for fd in [&pty.master, &pty.slave] {
            fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).map_err(std::io::Error::from)?;
        }
        let mut t = tcgetattr(&pty.slave).map_err(std::io::Error::from)?;
        cfmakeraw(&mut t);
        tcsetattr(&pty.slave, SetArg::TCSANOW, &t).map_err(std::io::Error::from)?;
        let path = nix::unistd::ttyname(&pty.slave).map_err(std::io::Error::from)?;
        Ok(VirtualScanner {
            master: File::from(pty.master),
            _slave: pty.slave,
            path,
        })
    }

    /// The device path the daemon should open (e.g. `/dev/pts/7`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Transmit bytes as the scanner would.
    pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.master.write_all(bytes)?;
        self.master.flush()
    }

    /// Read what the host sent back (ACK/NAK), waiting at most `timeout` for
    /// the first byte. Returns an empty vector on timeout.
    pub fn read_reply(&mut self, timeout: Duration) -> std::io::Result<Vec<u8>> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
            let mut fds = [PollFd::new(self.master.as_fd(), PollFlags::POLLIN)];
            let n = poll(&mut fds, PollTimeout::from(ms)).map_err(std::io::Error::from)?;
            if n > 0 {
                let mut buf = [0u8; 256];
                let got = self.master.read(&mut buf)?;
                return Ok(buf[..got].to_vec());
            }
            if left.is_zero() {
                return Ok(Vec::new());
            }
        }
    }
}
