//! Framing: split a scanner's byte stream into frames.
//!
//! A serial scanner sends `[prefix][data][suffix]`, or `STX [prefix][data]
//! ETX`, or — with no terminator at all — `[prefix][data]` followed by a
//! pause. [`FrameSpec`] says which; [`Framer`] applies it incrementally, so a
//! frame split across many reads joins up and one read holding several frames
//! gives several.
//!
//! End of a frame, by [`End`]:
//! - [`End::Lines`] (the default): CR or LF; CRLF ends one frame (the empty
//!   frame between CR and LF is not a scan).
//! - [`End::Suffix`]: exactly the configured byte string (matched across
//!   reads; a self-overlapping suffix such as `"\r\r\n"` is handled).
//! - [`End::StxEtx`]: STX starts, ETX ends. CR/LF between frames (sent after
//!   ETX by many scanners) are ignored; any other bytes outside STX…ETX are
//!   delivered as a rejected frame. STX inside a frame means the previous
//!   frame was torn: it is delivered rejected and a new one starts.
//! - [`End::Timeout`]: `frame_timeout_ms` of silence ([`Framer::expire`]).
//!
//! With a terminator and a timeout, an unfinished frame that stays silent
//! for the timeout is delivered rejected ("torn"), instead of being glued to
//! the front of the next scan.
//!
//! Nothing is dropped silently and memory is bounded: a frame longer than
//! `max_frame_bytes` is delivered **as soon as it crosses the limit**, cut to
//! the limit and marked with a framing error (so even an endless flood
//! without a terminator is audited once); the bytes that follow are counted
//! and discarded until the next terminator (or pause), where the stream
//! resynchronises. The framer never holds more than `max_frame_bytes` plus
//! the length of the suffix.
//!
//! A frame that lacks the configured prefix is delivered with a framing
//! error; otherwise the prefix is stripped.

use super::config::SerialConfig;
use crate::capture::RawScan;

/// STX: start of text.
pub const STX: u8 = 0x02;
/// ETX: end of text.
pub const ETX: u8 = 0x03;

/// What ends a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// CR, LF or CRLF (default).
    Lines,
    /// Exactly these bytes (non-empty).
    Suffix(Vec<u8>),
    /// STX … ETX.
    StxEtx,
    /// Only a pause of `frame_timeout_ms`.
    Timeout,
}

/// A scanner's framing, resolved from its config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameSpec {
    /// Bytes every frame must start with (stripped); empty for none.
    pub prefix: Vec<u8>,
    /// What ends a frame.
    pub end: End,
    /// Inter-byte timeout in milliseconds, if any.
    pub timeout_ms: Option<u64>,
    /// Longest frame in bytes (prefix included, terminator excluded).
    pub max: usize,
}

impl FrameSpec {
    /// CR/LF/CRLF frames of at most `max` bytes, no prefix, no timeout.
    #[cfg(test)]
    pub fn lines(max: usize) -> FrameSpec {
        FrameSpec {
            prefix: Vec::new(),
            end: End::Lines,
            timeout_ms: None,
            max,
        }
    }

    /// The framing a (validated) serial scanner config asks for, frames of
    /// at most `max` bytes (`max_frame_bytes`).
    pub fn from_config(c: &SerialConfig, max: usize) -> FrameSpec {
        let end = match (&c.suffix, c.stx_etx) {
            (_, true) => End::StxEtx,
            (None, false) => End::Lines,
            (Some(s), false) if s.0.is_empty() => End::Timeout,
            (Some(s), false) => End::Suffix(s.0.clone()),
        };
        FrameSpec {
            prefix: c.prefix.as_ref().map(|p| p.0.clone()).unwrap_or_default(),
            end,
            timeout_ms: c.frame_timeout_ms,
            max,
        }
    }

    /// Short human description for logs, e.g. `suffix 0d0a, prefix 5d`.
    pub fn describe(&self) -> String {
        let mut s = match &self.end {
            End::Lines => "CR/LF/CRLF".to_string(),
            End::Suffix(b) => format!("suffix {}", hex::encode(b)),
            End::StxEtx => "STX/ETX".to_string(),
            End::Timeout => "no terminator".to_string(),
        };
        if !self.prefix.is_empty() {
            s += &format!(", prefix {}", hex::encode(&self.prefix));
        }
        if let Some(ms) = self.timeout_ms {
            s += &format!(", frame_timeout_ms {ms}");
        }
        s
    }
}

/// Where the framer is in the byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Collecting a frame (for STX/ETX: after STX).
    Frame,
    /// STX/ETX only: between ETX and the next STX; stray bytes are collected.
    Outside,
    /// The frame crossed `max` and was delivered; discarding to the next
    /// terminator (or pause).
    Discard,
}

/// Incremental framer with a length limit. See the module docs.
#[derive(Debug)]
pub struct Framer {
    spec: FrameSpec,
    state: State,
    buf: Vec<u8>,
    /// Bytes discarded since the over-long frame was delivered.
    discarded: usize,
    /// KMP: how many bytes of the suffix the stream currently ends with.
    matched: usize,
    /// KMP failure function of the suffix.
    fail: Vec<usize>,
}

impl Framer {
    /// A CR/LF framer that accepts frames of at most `max` bytes.
    #[cfg(test)]
    pub fn new(max: usize) -> Framer {
        Framer::with_spec(FrameSpec::lines(max))
    }

    /// A framer for `spec`.
    pub fn with_spec(spec: FrameSpec) -> Framer {
        let fail = match &spec.end {
            End::Suffix(s) => kmp_failure(s),
            _ => Vec::new(),
        };
        let state = if spec.end == End::StxEtx {
            State::Outside
        } else {
            State::Frame
        };
        Framer {
            buf: Vec::with_capacity(spec.max.min(4096)),
            spec,
            state,
            discarded: 0,
            matched: 0,
            fail,
        }
    }

    /// The framing in use.
    pub fn spec(&self) -> &FrameSpec {
        &self.spec
    }

    /// Feed bytes; returns the frames they complete, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<RawScan> {
        let mut out = Vec::new();
        for &b in bytes {
            match self.spec.end {
                End::Lines => self.push_line_byte(b, &mut out),
                End::Suffix(_) => self.push_suffix_byte(b, &mut out),
                End::StxEtx => self.push_stx_byte(b, &mut out),
                End::Timeout => self.collect(b, 0, &mut out),
            }
        }
        out
    }

    /// The inter-byte timeout ran out with no new byte: end what is pending.
    /// For a scanner without a terminator this completes the frame; with a
    /// terminator the unfinished frame is delivered rejected as torn. Returns
    /// `None` when nothing was pending (or an over-long frame, already
    /// delivered, just finished being discarded).
    pub fn expire(&mut self) -> Option<RawScan> {
        let state = self.state;
        let timeout = self.spec.timeout_ms.unwrap_or(0);
        self.matched = 0;
        self.discarded = 0;
        if self.spec.end == End::StxEtx {
            self.state = State::Outside;
        } else {
            self.state = State::Frame;
        }
        let bytes = std::mem::take(&mut self.buf);
        match state {
            State::Discard => None,
            _ if bytes.is_empty() => None,
            State::Outside => Some(stray(bytes)),
            State::Frame if self.spec.end == End::Timeout => Some(self.finish(bytes)),
            State::Frame => Some(RawScan {
                bytes,
                framing_error: Some(format!(
                    "incomplete frame: no terminator within frame_timeout_ms = {timeout}"
                )),
            }),
        }
    }

    /// Bytes of an unfinished frame (lost if the device goes away now),
    /// including bytes being discarded after an over-long frame.
    pub fn partial(&self) -> usize {
        self.buf.len() + self.discarded
    }

    /// True when [`expire`](Self::expire) would have something to end.
    pub fn pending(&self) -> bool {
        !self.buf.is_empty() || self.state == State::Discard
    }

    /// Bytes held in memory right now (bounded by `max` + suffix length).
    #[cfg(test)]
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    fn push_line_byte(&mut self, b: u8, out: &mut Vec<RawScan>) {
        if b == b'\r' || b == b'\n' {
            self.terminate(out);
        } else {
            self.collect(b, 0, out);
        }
    }

    fn push_suffix_byte(&mut self, b: u8, out: &mut Vec<RawScan>) {
        let End::Suffix(sfx) = &self.spec.end else {
            return;
        };
        let mut m = self.matched;
        while m > 0 && sfx[m] != b {
            m = self.fail[m - 1];
        }
        if sfx[m] == b {
            m += 1;
        }
        if m == sfx.len() {
            // The suffix bytes before this one are at the end of the buffer
            // (they were never counted against the limit).
            self.matched = 0;
            if self.state == State::Frame {
                let keep = self.buf.len() - (sfx.len() - 1);
                self.buf.truncate(keep);
            }
            self.terminate(out);
        } else {
            self.matched = m;
            self.collect(b, m, out);
        }
    }

    fn push_stx_byte(&mut self, b: u8, out: &mut Vec<RawScan>) {
        match (self.state, b) {
            (State::Outside, STX) => {
                if !self.buf.is_empty() {
                    out.push(stray(std::mem::take(&mut self.buf)));
                }
                self.state = State::Frame;
            }
            (State::Outside, b'\r' | b'\n') => {}
            (State::Outside, _) => {
                self.buf.push(b);
                if self.buf.len() > self.spec.max {
                    // A flood outside any frame: report it once now, then
                    // discard up to the next STX (or ETX, or pause).
                    let mut bytes = std::mem::take(&mut self.buf);
                    bytes.truncate(self.spec.max);
                    out.push(stray(bytes));
                    self.state = State::Discard;
                    self.discarded = 1;
                }
            }
            (State::Frame, STX) => {
                let bytes = std::mem::take(&mut self.buf);
                out.push(RawScan {
                    bytes,
                    framing_error: Some("frame restarted by STX before its ETX (torn)".into()),
                });
            }
            (State::Discard, STX) => {
                self.discarded = 0;
                self.state = State::Frame;
            }
            (_, ETX) => {
                self.terminate(out);
                self.state = State::Outside;
            }
            (_, _) => self.collect(b, 0, out),
        }
    }

    /// Add a data byte to the frame; `pending_suffix` bytes at the end of the
    /// buffer may still turn out to be the terminator and do not count
    /// against the limit.
    fn collect(&mut self, b: u8, pending_suffix: usize, out: &mut Vec<RawScan>) {
        match self.state {
            // Only counted; the suffix matcher (`matched`) finds the resync
            // point on its own.
            State::Discard => self.discarded = self.discarded.saturating_add(1),
            _ => {
                self.buf.push(b);
                if self.buf.len() - pending_suffix > self.spec.max {
                    let mut bytes = std::mem::take(&mut self.buf);
                    bytes.truncate(self.spec.max);
                    out.push(RawScan {
                        bytes,
                        framing_error: Some(format!(
                            "frame longer than max_frame_bytes = {}; the rest up to the next terminator is discarded",
                            self.spec.max
                        )),
                    });
                    self.state = State::Discard;
                    self.discarded = 1;
                }
            }
        }
    }

    /// A terminator arrived.
    fn terminate(&mut self, out: &mut Vec<RawScan>) {
        match self.state {
            State::Discard => {
                tracing::debug!(
                    discarded = self.discarded,
                    "resynchronised after an over-long frame"
                );
                self.buf.clear();
                self.discarded = 0;
                self.state = State::Frame;
            }
            State::Outside => {}
            State::Frame => {
                if !self.buf.is_empty() {
                    let bytes = std::mem::take(&mut self.buf);
                    out.push(self.finish(bytes));
                }
            }
        }
    }

    /// A complete frame: check and strip the prefix.
    fn finish(&self, mut bytes: Vec<u8>) -> RawScan {
        let p = &self.spec.prefix;
        if p.is_empty() {
            return RawScan {
                bytes,
                framing_error: None,
            };
        }
        if bytes.starts_with(p) {
            bytes.drain(..p.len());
            RawScan {
                bytes,
                framing_error: None,
            }
        } else {
            RawScan {
                bytes,
                framing_error: Some(format!(
                    "frame does not start with the configured prefix ({} bytes)",
                    p.len()
                )),
            }
        }
    }
}

/// Bytes that arrived outside STX…ETX (at most `max` of them are kept).
fn stray(bytes: Vec<u8>) -> RawScan {
    RawScan {
        bytes,
        framing_error: Some("bytes outside STX…ETX framing".into()),
    }
}

/// KMP failure function: `f[i]` = length of the longest proper prefix of
/// `s[..=i]` that is also its suffix.
fn kmp_failure(s: &[u8]) -> Vec<usize> {
    let mut f = vec![0; s.len()];
    let mut k = 0;
    for i in 1..s.len() {
        while k > 0 && s[i] != s[k] {
            k = f[k - 1];
        }
        if s[i] == s[k] {
            k += 1;
        }
        f[i] = k;
    }
    f
}

#[cfg(test)]
mod tests;
