//! Control labels: barcodes staff scan to declare what the next read on
//! the same scanner is, printed for the counter by `scangate labels`.
//!
//! - **REPEAT** ([`Control::Repeat`]): the next read of a label on this
//!   scanner is another item, even inside the echo window.
//! - **QUANTITY N** ([`Control::Quantity`]): the next read counts N units.
//! - **ACKNOWLEDGE** ([`Control::Acknowledge`]): staff saw the alerts this
//!   scanner gave (recalled, expired, …) that no one acknowledged yet. It
//!   looks back, not forward: it declares nothing about the next read.
//!
//! A control label is never a pick. The gate audits its read (decision
//! `control`) and applies REPEAT or QUANTITY to the next read on the same
//! scanner within [`ControlsConfig::within_ms`]; one not followed by a
//! read in time expires with an audit record. ACKNOWLEDGE's record names
//! the alerted reads it acknowledges. This module is the vocabulary: the
//! `[controls]` section ([`ControlsConfig`]: the labels' contents and the
//! bound), recognising a frame as a control ([`ControlsConfig::recognise`],
//! called on every read), and what each label says ([`Label`]). The
//! Code 128 encoder ([`code128`]) and the printed forms
//! ([`print`](mod@print): SVG, ZPL, text) are beside it.

use crate::capture::barcode::{aim, decode_with_year};
use crate::invalid::Invalid;
use serde::Deserialize;
use std::ops::RangeInclusive;
use std::time::Duration;

pub mod code128;
pub mod print;

/// Default content of the REPEAT label.
pub const DEFAULT_REPEAT: &str = "SGCTL-REPEAT";
/// Default content of the ACKNOWLEDGE label.
pub const DEFAULT_ACKNOWLEDGE: &str = "SGCTL-ACK";
/// Default start of a QUANTITY N label's content (N follows in decimal).
pub const DEFAULT_QUANTITY_PREFIX: &str = "SGCTL-QTY-";
/// The QUANTITY labels `scangate labels` prints by default.
pub const DEFAULT_QUANTITIES: [u32; 8] = [2, 3, 4, 5, 6, 10, 12, 24];
/// Default bound: a control applies to the next read within this many ms.
pub const DEFAULT_WITHIN_MS: u64 = 20_000;
/// The quantities a QUANTITY label may declare (1 is every read's own).
pub const QUANTITIES: RangeInclusive<u32> = 2..=999;
/// The longest content of a control label, in characters (a longer one no
/// longer fits a counter label at a width scanners read well).
pub const MAX_CONTENT_LEN: usize = 40;
/// The range of `within_ms`.
pub const WITHIN_MS: RangeInclusive<u64> = 1_000..=600_000;

/// What a content may hold, for the messages.
const CHARSET: &str = "letters, digits and - . _ / + :";

/// `[controls]`: the control labels' contents and how long a control waits
/// for the read it applies to. Every key is optional; without the section
/// the defaults are in force (control labels are always available).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ControlsConfig {
    /// Content of the REPEAT label.
    pub repeat: String,
    /// Content of the ACKNOWLEDGE label.
    pub acknowledge: String,
    /// A QUANTITY N label's content is this followed by N in decimal.
    pub quantity_prefix: String,
    /// Which QUANTITY labels `scangate labels` prints (any N in
    /// [`QUANTITIES`] is recognised, printed or not).
    pub quantities: Vec<u32>,
    /// A control applies to the next read on the same scanner within this
    /// many milliseconds; else it expires.
    pub within_ms: u64,
}

impl Default for ControlsConfig {
    fn default() -> Self {
        ControlsConfig {
            repeat: DEFAULT_REPEAT.into(),
            acknowledge: DEFAULT_ACKNOWLEDGE.into(),
            quantity_prefix: DEFAULT_QUANTITY_PREFIX.into(),
            quantities: DEFAULT_QUANTITIES.to_vec(),
            within_ms: DEFAULT_WITHIN_MS,
        }
    }
}

/// What a control label declares about the next read on its scanner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// The next read is another item, even inside the echo window.
    Repeat,
    /// The next read counts this many units (in [`QUANTITIES`]).
    Quantity(u32),
    /// Staff saw the scanner's alerts not yet acknowledged (it declares
    /// nothing about the next read).
    Acknowledge,
}

/// [`Control::describe`] of [`Control::Acknowledge`], as the outbox and
/// the audit trail keep it.
pub const ACKNOWLEDGE: &str = "acknowledge";

impl Control {
    /// Its name in logs and the audit trail: `repeat`, `quantity 3`.
    pub fn describe(&self) -> String {
        match self {
            Control::Repeat => "repeat".into(),
            Control::Quantity(n) => format!("quantity {n}"),
            Control::Acknowledge => ACKNOWLEDGE.into(),
        }
    }

    /// The heading printed on the label: `REPEAT`, `QUANTITY 3`.
    pub fn title(&self) -> String {
        self.describe().to_uppercase()
    }

    /// What it does, for the people at the counter.
    pub fn meaning(&self) -> String {
        match self {
            Control::Repeat => "the next read on this scanner is another item".into(),
            Control::Quantity(n) => format!("the next read counts {n} units"),
            Control::Acknowledge => "staff saw this scanner's alerts".into(),
        }
    }

    /// Title and meaning in one line: `REPEAT — the next read on this
    /// scanner is another item`.
    pub fn caption(&self) -> String {
        format!("{} — {}", self.title(), self.meaning())
    }
}

/// One label to print: what it declares and the text its barcode carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// What it declares.
    pub control: Control,
    /// The barcode's content.
    pub content: String,
}

impl ControlsConfig {
    /// The control `frame` is, if it is one: the frame as a source delivers
    /// it (framing removed), optionally after an AIM symbology identifier
    /// (`]C0`), trailing CR, LF and blanks ignored. A QUANTITY label's
    /// number is 1 to 3 digits without a leading zero, in [`QUANTITIES`].
    /// Allocates nothing.
    pub fn recognise(&self, frame: &[u8]) -> Option<Control> {
        let data = payload(frame)?;
        if data == self.repeat.as_bytes() {
            return Some(Control::Repeat);
        }
        if data == self.acknowledge.as_bytes() {
            return Some(Control::Acknowledge);
        }
        let digits = data.strip_prefix(self.quantity_prefix.as_bytes())?;
        quantity(digits).map(Control::Quantity)
    }

    /// The content of `control`'s label.
    pub fn content(&self, control: Control) -> String {
        match control {
            Control::Repeat => self.repeat.clone(),
            Control::Quantity(n) => format!("{}{n}", self.quantity_prefix),
            Control::Acknowledge => self.acknowledge.clone(),
        }
    }

    /// The labels `scangate labels` prints: REPEAT, each of `quantities`
    /// in order, then ACKNOWLEDGE.
    pub fn labels(&self) -> Vec<Label> {
        std::iter::once(Control::Repeat)
            .chain(self.quantities.iter().map(|&n| Control::Quantity(n)))
            .chain(std::iter::once(Control::Acknowledge))
            .map(|control| Label {
                control,
                content: self.content(control),
            })
            .collect()
    }

    /// `within_ms` as a duration.
    pub fn within(&self) -> Duration {
        Duration::from_millis(self.within_ms)
    }

    /// Check every value; the first one refused is named (relative to the
    /// section: `repeat`, `quantities[2]`), with what to do.
    pub fn validate(&self) -> Result<(), Invalid> {
        content_ok("repeat", &self.repeat, MAX_CONTENT_LEN)?;
        if let Some(gtin) = product(&self.repeat) {
            return Err(a_product("repeat", &gtin));
        }
        // The longest QUANTITY content is the prefix and three digits.
        content_ok(
            "quantity_prefix",
            &self.quantity_prefix,
            MAX_CONTENT_LEN - 3,
        )?;
        let mut every = QUANTITIES;
        if let Some(gtin) = every.find_map(|n| product(&format!("{}{n}", self.quantity_prefix))) {
            return Err(a_product("quantity_prefix", &gtin));
        }
        if self.repeat.starts_with(&self.quantity_prefix) {
            return Err(Invalid::new(
                "repeat",
                format!(
                    "{:?} starts with quantity_prefix {:?}: a REPEAT label would read as the start of a QUANTITY label",
                    self.repeat, self.quantity_prefix
                ),
                "give the two labels contents where neither starts with the other (the defaults are \"SGCTL-REPEAT\" and \"SGCTL-QTY-\")",
            ));
        }
        if self.quantity_prefix.starts_with(&self.repeat) {
            return Err(Invalid::new(
                "quantity_prefix",
                format!(
                    "{:?} starts with the REPEAT label's content {:?}",
                    self.quantity_prefix, self.repeat
                ),
                "give the two labels contents where neither starts with the other (the defaults are \"SGCTL-REPEAT\" and \"SGCTL-QTY-\")",
            ));
        }
        content_ok("acknowledge", &self.acknowledge, MAX_CONTENT_LEN)?;
        if let Some(gtin) = product(&self.acknowledge) {
            return Err(a_product("acknowledge", &gtin));
        }
        // (Recognised whole: it is only another label's when it is the
        // REPEAT content or reads as a QUANTITY label.)
        let as_quantity = self
            .acknowledge
            .strip_prefix(self.quantity_prefix.as_str())
            .and_then(|digits| quantity(digits.as_bytes()));
        if self.acknowledge == self.repeat || as_quantity.is_some() {
            return Err(Invalid::new(
                "acknowledge",
                format!(
                    "{:?} reads as another control label (repeat {:?}, quantity_prefix {:?})",
                    self.acknowledge, self.repeat, self.quantity_prefix
                ),
                "give it a content of its own (the default is \"SGCTL-ACK\")",
            ));
        }
        for (i, &n) in self.quantities.iter().enumerate() {
            let key = format!("quantities[{i}]");
            if !QUANTITIES.contains(&n) {
                return Err(Invalid::new(
                    key,
                    format!("{n} is out of range"),
                    "list quantities in 2..=999 (a read counts 1 unit without a QUANTITY label)",
                ));
            }
            if self.quantities[..i].contains(&n) {
                return Err(Invalid::new(
                    key,
                    format!("{n} is listed twice"),
                    "list each quantity once",
                ));
            }
        }
        if !WITHIN_MS.contains(&self.within_ms) {
            return Err(Invalid::new(
                "within_ms",
                format!("{} is out of range", self.within_ms),
                "use 1000..=600000 milliseconds (default 20000): long enough to pick up the item after scanning the label",
            ));
        }
        Ok(())
    }
}

/// `frame` without trailing blanks and without a leading AIM symbology
/// identifier; `None` if nothing is left.
fn payload(frame: &[u8]) -> Option<&[u8]> {
    let end = frame.iter().rposition(|b| !b.is_ascii_whitespace())? + 1;
    let frame = &frame[..end];
    match frame {
        // System expansion: the modifier's length is in its first digit.
        [b']', b'Y', ..] => aim::parse(frame).ok().map(|(_, len)| &frame[len..]),
        // `]` + code character + modifier character, known to the
        // decoder or not (a label printed as another symbology).
        [b']', code, modifier, rest @ ..]
            if code.is_ascii_alphabetic() && modifier.is_ascii_alphanumeric() =>
        {
            Some(rest)
        }
        _ => Some(frame),
    }
}

/// A QUANTITY label's number: 1-3 digits, no leading zero, in [`QUANTITIES`].
fn quantity(digits: &[u8]) -> Option<u32> {
    if !(1..=3).contains(&digits.len())
        || digits[0] == b'0'
        || !digits.iter().all(u8::is_ascii_digit)
    {
        return None;
    }
    let n = digits.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0'));
    QUANTITIES.contains(&n).then_some(n)
}

/// Refuse a content that is empty, longer than `max` or holds a character
/// outside [`CHARSET`] (what Code 128 set B carries, and what no label
/// printer language or keyboard layout treats specially).
fn content_ok(key: &str, content: &str, max: usize) -> Result<(), Invalid> {
    let fix = format!(
        "use 1-{max} {CHARSET}, e.g. the default {:?}",
        match key {
            "repeat" => DEFAULT_REPEAT,
            "acknowledge" => DEFAULT_ACKNOWLEDGE,
            _ => DEFAULT_QUANTITY_PREFIX,
        }
    );
    if content.is_empty() {
        return Err(Invalid::new(key, "is empty", fix));
    }
    if content.chars().count() > max {
        return Err(Invalid::new(
            key,
            format!("{content:?} is longer than {max} characters"),
            fix,
        ));
    }
    if let Some((at, c)) = content
        .chars()
        .enumerate()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || "-._/+:".contains(*c)))
    {
        return Err(Invalid::new(
            key,
            format!("{content:?} holds {c:?} at position {at}, which a control label cannot carry"),
            fix,
        ));
    }
    Ok(())
}

/// The GTIN `content` names when a scanner that sends no AIM identifier
/// delivers it: a control label that reads as a dispensable product could
/// not be told from a pick.
fn product(content: &str) -> Option<String> {
    let decoded = decode_with_year(content.as_bytes(), 2026).ok()?;
    if decoded.product.is_dispensable() {
        decoded.product.gtin
    } else {
        None
    }
}

/// The refusal of a content that reads as a product barcode.
fn a_product(key: &str, gtin: &str) -> Invalid {
    Invalid::new(
        key,
        format!("a label with it would read as a product barcode (GTIN {gtin})"),
        "use text that is no barcode, e.g. the default (\"SGCTL-REPEAT\", \"SGCTL-QTY-\")",
    )
}

#[cfg(test)]
mod tests;
