//! Keyboard-wedge scanners: 8-byte boot keyboard reports (or 9 bytes with a
//! leading report id) turned into keystrokes, and keystrokes into scans.
//!
//! # Reports
//!
//! `[modifiers, reserved, key1..key6]`, optionally preceded by a report id
//! (a 9-byte report; Microscan readers use id 0x02). Reports of any other
//! length (consumer-control, vendor reports of a composite device) are not
//! keyboard reports and are ignored.
//!
//! # Press / release (what a real keyboard does)
//!
//! A character is typed when a usage **appears** in the key array that was
//! not there in the previous report; the modifiers are read from the report
//! in which the key appears. So:
//!
//! - press, release, press, release of the same key = two characters;
//! - the same press report twice (the key still held, a duplicated report)
//!   = one character;
//! - a missing release between two *different* keys loses nothing (the new
//!   key appears); a missing release between two presses of the *same* key
//!   cannot be seen and is one character, exactly as on a PC;
//! - a report whose slots hold ErrorRollOver / POSTFail / ErrorUndefined
//!   (0x01–0x03, "too many keys") types nothing and does not change which
//!   keys count as held;
//! - no auto-repeat: a held key is one character however long it is held
//!   (a host's auto-repeat would only invent data).
//!
//! Shift is either shift bit (left 0x02 or right 0x20); AltGr is right Alt
//! (0x40); Ctrl is either Ctrl bit (0x01, 0x10).
//!
//! # GS (the GS1 separator, ASCII 0x1D)
//!
//! A keyboard has no GS key; scanners use a convention ([`GsConvention`]):
//! Ctrl+] (Honeywell "Control+X mode", Datalogic), F8 (Honeywell with
//! Control+X off), a substitute string the scanner is told to type, or
//! nothing at all (the data cannot be recovered). The default, `auto`,
//! accepts Ctrl+] and F8: neither means anything else inside a scan.
//!
//! # Scans
//!
//! Keystrokes collect into a scan until a terminator key (Enter by default;
//! Tab, both, or none — then a pause ends the scan). Enter or Tab that is
//! not a terminator is data (CR, HT) and the barcode decoder will reject it.

use super::layout::{Layout, LayoutKey};
use crate::capture::RawScan;

/// Usage of Escape.
pub const USAGE_ESCAPE: u8 = 0x29;

/// The modifier byte and the six key slots of a keyboard report (8 bytes,
/// or 9 with a report id first); any other length is not one.
pub fn split_report(report: &[u8]) -> Result<(u8, [u8; 6]), Skipped> {
    let body: &[u8; 8] = match report.len() {
        8 => report.try_into().expect("8 bytes"),
        9 => report[1..].try_into().expect("8 bytes"),
        n => return Err(Skipped::NotAKeyboardReport(n)),
    };
    Ok((body[0], body[2..].try_into().expect("6 slots")))
}

/// Usage of F8 (F1 = 0x3A).
pub const USAGE_F8: u8 = 0x41;
/// Usage of the key HID calls "] and }" (US position).
pub const USAGE_RIGHT_BRACKET: u8 = 0x30;
/// Modifier bits: either Ctrl.
pub const MOD_CTRL: u8 = 0x01 | 0x10;
/// Modifier bits: either Shift.
pub const MOD_SHIFT: u8 = 0x02 | 0x20;
/// Modifier bit: right Alt (AltGr).
pub const MOD_ALTGR: u8 = 0x40;
/// The GS1 group separator.
pub const GS: u8 = 0x1D;

/// How a scanner types GS in keyboard mode (`gs` in the config).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GsConvention {
    /// Ctrl+] or F8 (default).
    Auto,
    /// Ctrl+] only: Ctrl with the key that types `]` in the layout, or with
    /// the key at the US `]` position (usage 0x30). Ctrl with another key
    /// types that key's ASCII control code, as a terminal would.
    CtrlBracket,
    /// F8 only (Honeywell with Control+X mode off).
    F8,
    /// The scanner types this string instead of GS; every occurrence in a
    /// scan becomes 0x1D.
    Substitute(Vec<u8>),
    /// The scanner does not send GS.
    None,
}

impl GsConvention {
    fn ctrl(&self) -> bool {
        matches!(self, GsConvention::Auto | GsConvention::CtrlBracket)
    }
    fn f8(&self) -> bool {
        matches!(self, GsConvention::Auto | GsConvention::F8)
    }
    /// Parse the command-line form: `auto`, `ctrl-]`, `f8`, `none`,
    /// `substitute:STRING`.
    pub fn parse(s: &str) -> Option<GsConvention> {
        Some(match s {
            "auto" => GsConvention::Auto,
            "ctrl-]" => GsConvention::CtrlBracket,
            "f8" => GsConvention::F8,
            "none" => GsConvention::None,
            _ => {
                let sub = s.strip_prefix("substitute:")?;
                if sub.is_empty() {
                    return None;
                }
                GsConvention::Substitute(sub.as_bytes().to_vec())
            }
        })
    }
}

/// One keystroke, after layout and GS convention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stroke {
    /// A character (control codes typed with Ctrl included).
    Char(char),
    /// GS (0x1D), by the scanner's convention.
    Gs,
    /// Enter.
    Enter,
    /// Tab.
    Tab,
}

impl Stroke {
    /// The character this stroke stands for (Enter = CR, Tab = HT).
    pub fn as_char(self) -> char {
        match self {
            Stroke::Char(c) => c,
            Stroke::Gs => GS as char,
            Stroke::Enter => '\r',
            Stroke::Tab => '\t',
        }
    }
}

/// Why a report typed nothing although it was not a plain key report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skipped {
    /// Not 8 or 9 bytes: not a boot keyboard report.
    NotAKeyboardReport(usize),
    /// ErrorRollOver / POSTFail / ErrorUndefined in the key slots.
    Rollover,
}

/// Boot-report decoder: reports in, keystrokes out (press/release state).
#[derive(Debug, Clone)]
pub struct KeyDecoder {
    layout: Layout,
    gs: GsConvention,
    held: [u8; 6],
    dead: Option<char>,
}

impl KeyDecoder {
    /// A decoder for a scanner with this layout and GS convention.
    pub fn new(layout: Layout, gs: GsConvention) -> KeyDecoder {
        KeyDecoder {
            layout,
            gs,
            held: [0; 6],
            dead: None,
        }
    }

    /// Forget held keys and a pending dead key (a new connection).
    pub fn reset(&mut self) {
        self.held = [0; 6];
        self.dead = None;
    }

    /// Decode one report, appending its keystrokes to `out`.
    pub fn push(&mut self, report: &[u8], out: &mut Vec<Stroke>) -> Result<(), Skipped> {
        let (mods, keys) = split_report(report)?;
        if keys.iter().any(|&k| (0x01..=0x03).contains(&k)) {
            return Err(Skipped::Rollover);
        }
        for &usage in keys.iter() {
            if usage == 0 || self.held.contains(&usage) {
                continue;
            }
            self.press(usage, mods, out);
        }
        self.held = keys;
        Ok(())
    }

    fn press(&mut self, usage: u8, mods: u8, out: &mut Vec<Stroke>) {
        if (0xE0..=0xE7).contains(&usage) {
            return; // a modifier reported as a key: no character
        }
        let shift = mods & MOD_SHIFT != 0;
        let altgr = mods & MOD_ALTGR != 0;
        let ctrl = mods & MOD_CTRL != 0;
        if usage == USAGE_F8 {
            if self.gs.f8() {
                self.emit(Stroke::Gs, out);
            }
            return;
        }
        let key = self.layout.key(usage, shift, altgr);
        if ctrl {
            if !self.gs.ctrl() {
                return;
            }
            if usage == USAGE_RIGHT_BRACKET || key == LayoutKey::Char(']') {
                self.emit(Stroke::Gs, out);
                return;
            }
            // Ctrl+@ … Ctrl+_ and Ctrl+letter: the ASCII control codes.
            if let LayoutKey::Char(c) = key
                && (('@'..='_').contains(&c) || c.is_ascii_lowercase())
            {
                let code = (c.to_ascii_uppercase() as u8) & 0x1F;
                self.emit(Stroke::Char(code as char), out);
            }
            return;
        }
        match key {
            LayoutKey::Char(c) => self.emit(Stroke::Char(c), out),
            LayoutKey::Enter => self.emit(Stroke::Enter, out),
            LayoutKey::Tab => self.emit(Stroke::Tab, out),
            LayoutKey::Dead(c) => {
                if let Some(prev) = self.dead.take() {
                    out.push(Stroke::Char(prev));
                }
                self.dead = Some(c);
            }
            LayoutKey::Nothing => {}
        }
    }

    /// Emit `s`, resolving a pending dead key first: dead key + Space is the
    /// accent itself; dead key + anything else types the accent and then the
    /// key (composed letters such as `â` never occur in barcode data).
    fn emit(&mut self, s: Stroke, out: &mut Vec<Stroke>) {
        if let Some(accent) = self.dead.take() {
            out.push(Stroke::Char(accent));
            if s == Stroke::Char(' ') {
                return;
            }
        }
        out.push(s);
    }
}

/// Which keys end a scan (`terminator` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Terminators {
    /// Enter (main or keypad) ends a scan.
    pub enter: bool,
    /// Tab ends a scan.
    pub tab: bool,
}

impl Default for Terminators {
    fn default() -> Self {
        Terminators {
            enter: true,
            tab: false,
        }
    }
}

/// A keyboard-wedge scanner's decoder: reports in, complete scans out.
#[derive(Debug, Clone)]
pub struct KeyboardScanner {
    keys: KeyDecoder,
    terminators: Terminators,
    substitute: Option<Vec<u8>>,
    max_bytes: usize,
    text: Vec<u8>,
    over_long: bool,
    strokes: Vec<Stroke>,
}

impl KeyboardScanner {
    /// A decoder; `max_bytes` is the longest accepted scan.
    pub fn new(
        layout: Layout,
        gs: GsConvention,
        terminators: Terminators,
        max_bytes: usize,
    ) -> KeyboardScanner {
        let substitute = match &gs {
            GsConvention::Substitute(s) => Some(s.clone()),
            _ => None,
        };
        KeyboardScanner {
            keys: KeyDecoder::new(layout, gs),
            terminators,
            substitute,
            max_bytes,
            text: Vec::new(),
            over_long: false,
            strokes: Vec::new(),
        }
    }

    /// Whether part of a scan has been typed (no terminator yet).
    pub fn pending(&self) -> bool {
        !self.text.is_empty() || self.over_long
    }

    /// Feed one report; complete scans are appended to `out`.
    pub fn push(&mut self, report: &[u8], out: &mut Vec<RawScan>) -> Result<(), Skipped> {
        self.strokes.clear();
        let mut strokes = std::mem::take(&mut self.strokes);
        let result = self.keys.push(report, &mut strokes);
        for &s in &strokes {
            match s {
                Stroke::Enter if self.terminators.enter => self.finish(out),
                Stroke::Tab if self.terminators.tab => self.finish(out),
                s => {
                    let mut buf = [0u8; 4];
                    let bytes = s.as_char().encode_utf8(&mut buf).as_bytes();
                    if self.text.len() + bytes.len() > self.max_bytes {
                        self.over_long = true;
                    } else {
                        self.text.extend_from_slice(bytes);
                    }
                }
            }
        }
        self.strokes = strokes;
        result
    }

    /// A terminator key: the scan typed so far is complete.
    fn finish(&mut self, out: &mut Vec<RawScan>) {
        if self.over_long {
            self.text.clear();
            self.over_long = false;
            out.push(RawScan {
                bytes: Vec::new(),
                framing_error: Some(format!(
                    "over-long keyboard scan: more than {} bytes before the terminator key",
                    self.max_bytes
                )),
            });
            return;
        }
        if self.text.is_empty() {
            return; // a lone terminator: no scan
        }
        let mut bytes = std::mem::take(&mut self.text);
        if let Some(sub) = &self.substitute {
            bytes = replace_all(&bytes, sub, GS);
        }
        out.push(RawScan {
            bytes,
            framing_error: None,
        });
    }

    /// The scan cannot be completed (silence, device gone, input ended):
    /// whatever was typed is rejected, never glued to the next scan.
    pub fn abort(&mut self, why: &str) -> Option<RawScan> {
        self.keys.reset();
        if !self.pending() {
            return None;
        }
        let bytes = std::mem::take(&mut self.text);
        self.over_long = false;
        Some(RawScan {
            bytes,
            framing_error: Some(format!(
                "incomplete keyboard scan (no terminator key): {why}"
            )),
        })
    }

    /// Whether this scanner's scans end only by a pause (no terminator key).
    pub fn ends_by_pause(&self) -> bool {
        !self.terminators.enter && !self.terminators.tab
    }

    /// With no terminator key configured: the pause that ends a scan.
    pub fn end_by_pause(&mut self, out: &mut Vec<RawScan>) {
        self.finish(out);
        self.keys.reset();
    }
}

/// Replace every non-overlapping `from` in `data` by the byte `to`.
fn replace_all(data: &[u8], from: &[u8], to: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while i < data.len() {
        if data[i..].starts_with(from) {
            out.push(to);
            i += from.len();
        } else {
            out.push(data[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strokes(layout: Layout, gs: GsConvention, reports: &[[u8; 8]]) -> String {
        let mut d = KeyDecoder::new(layout, gs);
        let mut out = Vec::new();
        for r in reports {
            let _ = d.push(r, &mut out);
        }
        out.into_iter().map(Stroke::as_char).collect()
    }

    const UP: [u8; 8] = [0; 8];

    #[test]
    fn press_release_semantics() {
        let one = [0, 0, 0x1E, 0, 0, 0, 0, 0];
        let two = [0, 0, 0x1F, 0, 0, 0, 0, 0];
        assert_eq!(
            strokes(Layout::Us, GsConvention::Auto, &[one, UP, one, UP]),
            "11"
        );
        assert_eq!(
            strokes(Layout::Us, GsConvention::Auto, &[one, one, one, UP]),
            "1"
        );
        assert_eq!(
            strokes(Layout::Us, GsConvention::Auto, &[one, two, UP]),
            "12"
        );
        // Both held, then the first released: only the new one types.
        let both = [0, 0, 0x1E, 0x1F, 0, 0, 0, 0];
        assert_eq!(
            strokes(Layout::Us, GsConvention::Auto, &[one, both, two, UP]),
            "12"
        );
        // Rollover between two reports does not re-type held keys.
        let roll = [0, 0, 1, 1, 1, 1, 1, 1];
        assert_eq!(
            strokes(Layout::Us, GsConvention::Auto, &[one, roll, one, UP]),
            "1"
        );
        // Right shift counts as shift.
        let a = [0x20, 0, 0x04, 0, 0, 0, 0, 0];
        assert_eq!(strokes(Layout::Us, GsConvention::Auto, &[a, UP]), "A");
    }

    #[test]
    fn gs_conventions() {
        let ctrl = [0x01, 0, 0x30, 0, 0, 0, 0, 0];
        let f8 = [0, 0, USAGE_F8, 0, 0, 0, 0, 0];
        let g = "\u{1d}";
        assert_eq!(
            strokes(Layout::Us, GsConvention::Auto, &[ctrl, UP, f8, UP]),
            format!("{g}{g}")
        );
        assert_eq!(
            strokes(Layout::Us, GsConvention::F8, &[ctrl, UP, f8, UP]),
            g
        );
        assert_eq!(
            strokes(Layout::Us, GsConvention::CtrlBracket, &[ctrl, UP, f8, UP]),
            g
        );
        assert_eq!(
            strokes(Layout::Us, GsConvention::None, &[ctrl, UP, f8, UP]),
            ""
        );
        // German: Ctrl + AltGr + 9 (the key that types `]`).
        let de = [0x01 | 0x40, 0, 0x26, 0, 0, 0, 0, 0];
        assert_eq!(strokes(Layout::German, GsConvention::Auto, &[de, UP]), g);
    }

    #[test]
    fn dead_keys_and_substitute() {
        let caret = [0, 0, 0x35, 0, 0, 0, 0, 0];
        let space = [0, 0, 0x2C, 0, 0, 0, 0, 0];
        assert_eq!(
            strokes(Layout::German, GsConvention::Auto, &[caret, UP, space, UP]),
            "^"
        );
        let mut k = KeyboardScanner::new(
            Layout::Us,
            GsConvention::Substitute(b"~".to_vec()),
            Terminators::default(),
            64,
        );
        let mut out = Vec::new();
        for r in [
            [0, 0, 0x1E, 0, 0, 0, 0, 0],
            [0x02, 0, 0x35, 0, 0, 0, 0, 0],
            [0, 0, 0x1F, 0, 0, 0, 0, 0],
            [0, 0, 0x28, 0, 0, 0, 0, 0],
            UP,
        ] {
            k.push(&r, &mut out).unwrap();
        }
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].bytes, b"1\x1d2");
    }
}
