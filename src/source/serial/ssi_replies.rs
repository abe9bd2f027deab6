//! A Zebra SSI scanner answers every packet the host sends (the BEEP of
//! its feedback) with a `CMD_ACK` or `CMD_NAK` packet on the same line as
//! its scans. [`SsiReplies`] takes them out of the byte stream before it
//! is framed, wherever they fall between frames — also split across two
//! reads, or right after a frame's last byte in one read — so a reply is
//! never framed as (or into) a scan. A reply can only come between
//! frames: inside a frame the bytes are the scan's. While the answer to
//! the revision request sent at connect is awaited
//! ([`SsiReplies::expect_revision`]), a `REPLY_REVISION` packet is taken
//! out the same way and kept ([`SsiReplies::take_revision`]).

use crate::feedback::ssi::{
    CMD_ACK, CMD_NAK, REPLY_REVISION, SOURCE_DECODER, reply_at, revision_at,
};

/// The reply filter of one connection.
#[derive(Debug, Default)]
pub struct SsiReplies {
    /// The start of what may be a reply, cut off at the end of a read.
    held: Vec<u8>,
    /// A `REPLY_REVISION` is awaited.
    expecting: bool,
    /// The `REPLY_REVISION` data taken out, not yet taken.
    revision: Option<Vec<u8>>,
}

impl SsiReplies {
    /// Await a `REPLY_REVISION` (the request was sent), or no longer.
    pub fn expect_revision(&mut self, on: bool) {
        self.expecting = on;
    }

    /// The `REPLY_REVISION` data taken out of the stream, once.
    pub fn take_revision(&mut self) -> Option<Vec<u8>> {
        self.revision.take()
    }

    /// `data` less the replies in it. `between_frames`: no frame is
    /// begun (the framer holds nothing). A frame ends at CR, LF or ETX.
    pub fn filter(&mut self, data: &[u8], between_frames: bool) -> Vec<u8> {
        let mut buf = std::mem::take(&mut self.held);
        buf.extend_from_slice(data);
        let mut out = Vec::with_capacity(buf.len());
        let mut boundary = between_frames;
        let mut i = 0;
        while i < buf.len() {
            if boundary {
                if let Some((_, n)) = reply_at(&buf[i..]) {
                    i += n;
                    continue;
                }
                if self.expecting
                    && let Some((data, n)) = revision_at(&buf[i..])
                {
                    self.revision = Some(data.to_vec());
                    self.expecting = false;
                    i += n;
                    continue;
                }
                if may_be_reply(&buf[i..], self.expecting) {
                    self.held = buf[i..].to_vec();
                    break;
                }
            }
            let b = buf[i];
            out.push(b);
            boundary = matches!(b, b'\r' | b'\n' | 0x03);
            i += 1;
        }
        out
    }
}

/// Whether `bytes` is the start of a reply not yet complete (with
/// `revision`, also of a `REPLY_REVISION`, of any length).
fn may_be_reply(bytes: &[u8], revision: bool) -> bool {
    let Some(&len) = bytes.first() else {
        return false;
    };
    let ack = (4..=6).contains(&len)
        && bytes
            .get(1)
            .is_none_or(|&op| op == CMD_ACK || op == CMD_NAK);
    let reply = revision && len >= 4 && bytes.get(1).is_none_or(|&op| op == REPLY_REVISION);
    (ack || reply)
        && bytes.len() < usize::from(len) + 2
        && bytes.get(2).is_none_or(|&src| src == SOURCE_DECODER)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CMD_ACK from the decoder: 04 D0 00 00, then the two's complement of
    /// the sum (0xD4) → FF 2C.
    const ACK: [u8; 6] = [0x04, 0xD0, 0x00, 0x00, 0xFF, 0x2C];

    #[test]
    fn replies_go_wherever_they_fall_between_frames_and_scans_stay_whole() {
        let mut f = SsiReplies::default();
        // At the start of a read.
        assert_eq!(f.filter(&[&ACK[..], b"SCAN1\r"].concat(), true), b"SCAN1\r");
        // Right after a frame, in the same read.
        assert_eq!(
            f.filter(&[&b"SCAN2\r"[..], &ACK].concat(), true),
            b"SCAN2\r"
        );
        // Split across reads, one byte at a time.
        let mut got = Vec::new();
        for b in ACK {
            got.extend(f.filter(&[b], true));
        }
        assert!(got.is_empty(), "{got:?}");
        assert_eq!(f.filter(b"SCAN3\r", true), b"SCAN3\r");
        // Inside a frame the bytes are the scan's, whatever they are.
        assert_eq!(
            f.filter(&[&b"AB"[..], &ACK].concat(), false),
            [&b"AB"[..], &ACK].concat()
        );
        // A held start that turns out not to be a reply is given back.
        let mut f = SsiReplies::default();
        assert!(f.filter(&[0x04], true).is_empty());
        assert_eq!(f.filter(b"x\r", true), [&[0x04][..], b"x\r"].concat());
    }

    /// REPLY_REVISION from the decoder with `data`.
    fn revision(data: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8, REPLY_REVISION, SOURCE_DECODER, 0x00];
        p.extend_from_slice(data);
        p[0] = p.len() as u8;
        p.extend_from_slice(&crate::feedback::ssi::checksum(&p).to_be_bytes());
        p
    }

    #[test]
    fn the_revision_reply_is_taken_out_only_while_awaited() {
        let reply = revision(b"NBRPUCAM 0 SE923 7A2C");
        // Awaited, split across reads one byte at a time, before a scan.
        let mut f = SsiReplies::default();
        f.expect_revision(true);
        let mut got = Vec::new();
        for b in &reply {
            got.extend(f.filter(&[*b], true));
        }
        got.extend(f.filter(b"SCAN1\r", true));
        assert_eq!(got, b"SCAN1\r");
        assert_eq!(
            f.take_revision().as_deref(),
            Some(&b"NBRPUCAM 0 SE923 7A2C"[..])
        );
        assert_eq!(f.take_revision(), None);
        // Taken once: a second one flows as data (the control), as does one
        // never awaited.
        assert_eq!(f.filter(&reply, true), reply);
        let mut g = SsiReplies::default();
        assert_eq!(g.filter(&reply, true), reply);
        assert_eq!(g.take_revision(), None);
    }
}
