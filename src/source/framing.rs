//! Framing: split a scanner's byte stream into frames.
//!
//! A frame ends at CR or LF; CRLF ends one frame (the empty frame between CR
//! and LF is not a scan). A frame longer than the limit is cut off, the rest
//! up to the next terminator is discarded, and the frame is delivered with a
//! framing error so it is rejected and audited rather than lost.

use crate::capture::RawScan;

/// Incremental CR/LF framer with a length limit.
#[derive(Debug)]
pub struct Framer {
    buf: Vec<u8>,
    max: usize,
    dropped: usize,
}

impl Framer {
    /// A framer that accepts frames of at most `max` bytes.
    pub fn new(max: usize) -> Framer {
        Framer {
            buf: Vec::with_capacity(max.min(4096)),
            max,
            dropped: 0,
        }
    }

    /// Feed bytes; returns the frames they complete, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<RawScan> {
        let mut out = Vec::new();
        for &b in bytes {
            if b == b'\r' || b == b'\n' {
                if self.dropped > 0 {
                    let len = self.buf.len() + self.dropped;
                    out.push(RawScan {
                        bytes: std::mem::take(&mut self.buf),
                        framing_error: Some(format!(
                            "frame of {len} bytes exceeds max_frame_bytes = {}",
                            self.max
                        )),
                    });
                    self.dropped = 0;
                } else if !self.buf.is_empty() {
                    out.push(RawScan {
                        bytes: std::mem::take(&mut self.buf),
                        framing_error: None,
                    });
                }
            } else if self.buf.len() < self.max {
                self.buf.push(b);
            } else {
                self.dropped += 1;
            }
        }
        out
    }

    /// Bytes of an unfinished frame (lost if the device goes away now).
    pub fn partial(&self) -> usize {
        self.buf.len() + self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(f: &mut Framer, input: &[u8]) -> Vec<(Vec<u8>, bool)> {
        f.push(input)
            .into_iter()
            .map(|r| (r.bytes, r.framing_error.is_some()))
            .collect()
    }

    #[test]
    fn cr_lf_and_crlf_end_frames() {
        let mut f = Framer::new(64);
        let got = frames(&mut f, b"a\rb\nc\r\nd");
        assert_eq!(
            got,
            vec![
                (b"a".to_vec(), false),
                (b"b".to_vec(), false),
                (b"c".to_vec(), false)
            ]
        );
        assert_eq!(f.partial(), 1);
        assert_eq!(frames(&mut f, b"\r"), vec![(b"d".to_vec(), false)]);
    }

    #[test]
    fn split_writes_join() {
        let mut f = Framer::new(64);
        assert!(frames(&mut f, b"01003").is_empty());
        assert_eq!(frames(&mut f, b"49\r"), vec![(b"0100349".to_vec(), false)]);
    }

    #[test]
    fn overlong_frame_is_flagged_and_stream_resyncs() {
        let mut f = Framer::new(16);
        let mut input = vec![b'x'; 100];
        input.extend_from_slice(b"\rok\r");
        let got = frames(&mut f, &input);
        assert_eq!(got.len(), 2);
        assert!(got[0].1, "over-long frame must carry a framing error");
        assert_eq!(got[0].0.len(), 16, "kept bytes are bounded");
        assert_eq!(got[1], (b"ok".to_vec(), false));
    }
}
