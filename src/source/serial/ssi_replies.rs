//! A Zebra SSI scanner answers every packet the host sends (the BEEP of
//! its feedback) with a `CMD_ACK` or `CMD_NAK` packet on the same line as
//! its scans. [`SsiReplies`] takes them out of the byte stream before it
//! is framed, wherever they fall between frames — also split across two
//! reads, or right after a frame's last byte in one read — so a reply is
//! never framed as (or into) a scan. A reply can only come between
//! frames: inside a frame the bytes are the scan's.

use crate::feedback::ssi::{CMD_ACK, CMD_NAK, SOURCE_DECODER, reply_at};

/// The reply filter of one connection.
#[derive(Debug, Default)]
pub struct SsiReplies {
    /// The start of what may be a reply, cut off at the end of a read.
    held: Vec<u8>,
}

impl SsiReplies {
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
                if may_be_reply(&buf[i..]) {
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

/// Whether `bytes` is the start of a reply not yet complete.
fn may_be_reply(bytes: &[u8]) -> bool {
    let Some(&len) = bytes.first() else {
        return false;
    };
    (4..=6).contains(&len)
        && bytes.len() < usize::from(len) + 2
        && bytes
            .get(1)
            .is_none_or(|&op| op == CMD_ACK || op == CMD_NAK)
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
}
