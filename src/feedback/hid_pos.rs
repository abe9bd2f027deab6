//! HID POS output reports on the Bar Code Scanner page (0x8C): what a USB
//! HID POS scanner is told, found in its report descriptor.
//!
//! A scanner that can be told anything says so in its report descriptor:
//! Output fields carrying the usages below. [`outputs`] reads the
//! descriptor (short items: Usage Page, Usage, Usage Minimum/Maximum,
//! Logical Minimum/Maximum, Report Size/Count/ID, Push/Pop, Input, Output,
//! Feature, Collection, End Collection; long items are skipped) and keeps
//! every 1-or-more-bit variable Output field on page 0x8C with its report
//! id and bit position. Nothing is assumed: a descriptor without such
//! fields gives `None`, and that scanner is told nothing.
//!
//! # Usages (HID Point of Sale Usage Tables 1.02, page 0x8C)
//!
//! | usage | name |
//! |---|---|
//! | 0x7D | Good Read LED |
//! | 0x85 | Sound Error Beep |
//! | 0x86 | Sound Good Read Beep |
//! | 0x87 | Sound Not On File Beep |
//!
//! # What each decision sets ([`PosOutputs::usages_for`])
//!
//! | told | usages set (those the device offers) |
//! |---|---|
//! | committed | Sound Good Read Beep and Good Read LED |
//! | echo | none: no report |
//! | ambiguous | Sound Not On File Beep, else Sound Error Beep |
//! | rejected | Sound Error Beep, else Sound Not On File Beep |
//! | waiting | Good Read LED (a light, no sound) |
//! | expired | Sound Error Beep and Good Read LED, else Sound Error Beep |
//! | recalled | Sound Error Beep and Sound Not On File Beep, else Sound Error Beep |
//! | expiring | Sound Good Read Beep and Sound Not On File Beep, else Sound Not On File Beep |
//! | unknown | Sound Not On File Beep and Good Read LED, else Sound Not On File Beep |
//! | suspect | Sound Good Read Beep and Sound Error Beep, else Sound Error Beep |
//!
//! A usage the device does not offer is not set; a decision none of whose
//! usages is offered gets no report. Every other bit of the report is 0.

use super::Told;
use std::collections::BTreeMap;
use std::fmt;

/// The Bar Code Scanner usage page.
pub const PAGE_BAR_CODE_SCANNER: u16 = 0x8C;

/// Usage ids on the Bar Code Scanner page.
pub mod usage {
    /// Prevent Read of Barcodes (the "untrigger" output of some scanners).
    pub const PREVENT_READ: u16 = 0x5F;
    /// Initiate Barcode Read (the "trigger" output of some scanners).
    pub const INITIATE_READ: u16 = 0x60;
    /// Good Read LED.
    pub const GOOD_READ_LED: u16 = 0x7D;
    /// Sound Error Beep.
    pub const SOUND_ERROR_BEEP: u16 = 0x85;
    /// Sound Good Read Beep.
    pub const SOUND_GOOD_READ_BEEP: u16 = 0x86;
    /// Sound Not On File Beep.
    pub const SOUND_NOT_ON_FILE_BEEP: u16 = 0x87;
}

/// Longest report descriptor read (the Linux kernel's limit).
pub const MAX_DESCRIPTOR: usize = 4096;
/// Largest output report built, in bits (without the report id).
const MAX_REPORT_BITS: u32 = 8 * 4096;
/// Deepest Push stack accepted.
const MAX_PUSH: usize = 16;
/// Most usages one Usage Minimum/Maximum range expands to.
const MAX_RANGE: u32 = 4096;

/// One Output field on page 0x8C.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputField {
    /// Report id (0: the descriptor uses none).
    pub report_id: u8,
    /// Usage id on page 0x8C.
    pub usage: u16,
    /// First bit of the field in the report, after the report id byte.
    pub bit: u32,
    /// Width in bits.
    pub size: u32,
}

/// A report descriptor that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescriptorError {
    /// Byte offset of the item at fault.
    pub offset: usize,
    /// What is wrong.
    pub problem: String,
}

impl fmt::Display for DescriptorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "HID report descriptor, byte {}: {}",
            self.offset, self.problem
        )
    }
}

impl std::error::Error for DescriptorError {}

/// The 0x8C Output fields a device offers, and how to build its reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PosOutputs {
    numbered: bool,
    /// Output report length in bits, by report id.
    report_bits: BTreeMap<u8, u32>,
    fields: Vec<OutputField>,
}

/// The 0x8C Output fields of `descriptor`; `None` when it offers none (or
/// does not parse: see [`output_fields`] for why).
pub fn outputs(descriptor: &[u8]) -> Option<PosOutputs> {
    let parsed = parse(descriptor).ok()?;
    (!parsed.fields.is_empty()).then_some(parsed)
}

/// Every 0x8C Output field of `descriptor`, or why it does not parse.
pub fn output_fields(descriptor: &[u8]) -> Result<Vec<OutputField>, DescriptorError> {
    parse(descriptor).map(|p| p.fields)
}

impl PosOutputs {
    /// The fields found, in descriptor order.
    pub fn fields(&self) -> &[OutputField] {
        &self.fields
    }

    /// Whether the descriptor declares report ids (then every report
    /// starts with its id byte).
    pub fn uses_report_ids(&self) -> bool {
        self.numbered
    }

    /// Whether the device offers the Output usage `usage` (page 0x8C).
    pub fn offers(&self, usage: u16) -> bool {
        self.field(usage).is_some()
    }

    fn field(&self, usage: u16) -> Option<&OutputField> {
        self.fields.iter().find(|f| f.usage == usage)
    }

    /// The usages set for `told`, among those the device offers (see the
    /// module's table).
    pub fn usages_for(&self, told: Told) -> Vec<u16> {
        use usage::*;
        let choices: &[&[u16]] = match told {
            Told::Committed => &[&[SOUND_GOOD_READ_BEEP, GOOD_READ_LED]],
            Told::Echo => &[],
            Told::Ambiguous => &[&[SOUND_NOT_ON_FILE_BEEP], &[SOUND_ERROR_BEEP]],
            Told::Rejected => &[&[SOUND_ERROR_BEEP], &[SOUND_NOT_ON_FILE_BEEP]],
            Told::Waiting => &[&[GOOD_READ_LED]],
            // A beep without the light (with no Good Read LED output it
            // sounds as a commit: use the gateway LED to tell them apart).
            Told::Control => &[&[SOUND_GOOD_READ_BEEP]],
            Told::Lapsed => &[&[SOUND_ERROR_BEEP], &[SOUND_NOT_ON_FILE_BEEP]],
            // The alerts: two outputs at once, a pair no decision sets;
            // else the sound alone.
            Told::Expired => &[&[SOUND_ERROR_BEEP, GOOD_READ_LED], &[SOUND_ERROR_BEEP]],
            Told::Recalled => &[
                &[SOUND_ERROR_BEEP, SOUND_NOT_ON_FILE_BEEP],
                &[SOUND_ERROR_BEEP],
            ],
            Told::Expiring => &[
                &[SOUND_GOOD_READ_BEEP, SOUND_NOT_ON_FILE_BEEP],
                &[SOUND_NOT_ON_FILE_BEEP],
            ],
            Told::Unknown => &[
                &[SOUND_NOT_ON_FILE_BEEP, GOOD_READ_LED],
                &[SOUND_NOT_ON_FILE_BEEP],
            ],
            Told::Suspect => &[
                &[SOUND_GOOD_READ_BEEP, SOUND_ERROR_BEEP],
                &[SOUND_ERROR_BEEP],
            ],
        };
        choices
            .iter()
            .map(|set| {
                set.iter()
                    .copied()
                    .filter(|&u| self.offers(u))
                    .collect::<Vec<_>>()
            })
            .find(|offered| !offered.is_empty())
            .unwrap_or_default()
    }

    /// The output reports for `told`, one per report id involved (usually
    /// one), ascending by id: the report id byte first when the descriptor
    /// uses report ids, then the report with the chosen usages set to 1.
    /// Empty: nothing is sent.
    pub fn reports(&self, told: Told) -> Vec<Vec<u8>> {
        let mut by_id: BTreeMap<u8, Vec<OutputField>> = BTreeMap::new();
        for u in self.usages_for(told) {
            let f = *self.field(u).expect("usages_for keeps offered usages");
            by_id.entry(f.report_id).or_default().push(f);
        }
        by_id
            .into_iter()
            .map(|(id, fields)| {
                let bits = self.report_bits[&id];
                let head = usize::from(self.numbered);
                let mut report = vec![0u8; head + bits.div_ceil(8) as usize];
                if self.numbered {
                    report[0] = id;
                }
                for f in fields {
                    set_bits(&mut report[head..], f.bit, f.size, 1);
                }
                report
            })
            .collect()
    }

    /// The first of [`reports`](Self::reports), if any: the report for a
    /// device whose beeps and LED are in one report.
    pub fn report(&self, told: Told) -> Option<Vec<u8>> {
        self.reports(told).into_iter().next()
    }

    /// `report` as hidapi's `HidDevice::write` takes it: its first byte
    /// must be the report id, 0 for a device without report ids.
    pub fn for_hidapi(&self, report: &[u8]) -> Vec<u8> {
        if self.numbered {
            report.to_vec()
        } else {
            let mut buf = Vec::with_capacity(report.len() + 1);
            buf.push(0);
            buf.extend_from_slice(report);
            buf
        }
    }
}

/// Set `size` bits from bit `bit` (LSB first, as HID lays out fields) to
/// `value`.
fn set_bits(buf: &mut [u8], bit: u32, size: u32, value: u32) {
    for i in 0..size.min(32) {
        if value >> i & 1 == 1 {
            let at = bit + i;
            buf[(at / 8) as usize] |= 1 << (at % 8);
        }
    }
}

/// The global items that Push saves and Pop restores.
#[derive(Debug, Clone, Copy, Default)]
struct Globals {
    page: u16,
    logical_max: i64,
    size: u32,
    count: u32,
    report_id: u8,
}

/// An Output main item (`flags`: its data) under globals `g`: its bits
/// take their place in `g`'s report; a variable, non-constant field on
/// the Bar Code Scanner page is recorded in `fields`.
fn output_item(
    g: &Globals,
    flags: u32,
    usages: &[u32],
    report_bits: &mut BTreeMap<u8, u32>,
    fields: &mut Vec<OutputField>,
) -> Result<(), String> {
    let bits = g.size.saturating_mul(g.count);
    let start = *report_bits.get(&g.report_id).unwrap_or(&0);
    let end = start.saturating_add(bits);
    if end > MAX_REPORT_BITS {
        return Err(format!(
            "output report {} of more than {} bytes",
            g.report_id,
            MAX_REPORT_BITS / 8
        ));
    }
    report_bits.insert(g.report_id, end);
    let constant = flags & 0x01 != 0;
    let variable = flags & 0x02 != 0;
    if !constant && variable && g.logical_max >= 1 && g.size >= 1 {
        for i in 0..g.count {
            // Fewer usages than fields: the last one repeats.
            let Some(&u) = usages.get(i as usize).or(usages.last()) else {
                break;
            };
            if (u >> 16) as u16 == PAGE_BAR_CODE_SCANNER {
                fields.push(OutputField {
                    report_id: g.report_id,
                    usage: u as u16,
                    bit: start + i * g.size,
                    size: g.size,
                });
            }
        }
    }
    Ok(())
}

fn parse(d: &[u8]) -> Result<PosOutputs, DescriptorError> {
    let err = |offset: usize, problem: String| DescriptorError { offset, problem };
    if d.len() > MAX_DESCRIPTOR {
        return Err(err(
            0,
            format!("{} bytes; at most {MAX_DESCRIPTOR} expected", d.len()),
        ));
    }
    let mut g = Globals::default();
    let mut stack: Vec<Globals> = Vec::new();
    // Local items: usages as (page << 16) | id, and a pending Usage Minimum.
    let mut usages: Vec<u32> = Vec::new();
    let mut usage_min: Option<u32> = None;
    let mut depth = 0usize;
    let mut numbered = false;
    let mut report_bits: BTreeMap<u8, u32> = BTreeMap::new();
    let mut fields = Vec::new();
    let mut at = 0;
    while at < d.len() {
        let prefix = d[at];
        if prefix == 0xFE {
            // Long item: size, tag, data.
            let size =
                *d.get(at + 1)
                    .ok_or_else(|| err(at, "long item cut short".into()))? as usize;
            at += 3 + size;
            if at > d.len() {
                return Err(err(at, "long item runs past the end".into()));
            }
            continue;
        }
        let size = [0, 1, 2, 4][(prefix & 0x03) as usize];
        let data = d
            .get(at + 1..at + 1 + size)
            .ok_or_else(|| err(at, format!("item {prefix:#04x} cut short")))?;
        let unsigned = data
            .iter()
            .rev()
            .fold(0u32, |v, &b| (v << 8) | u32::from(b));
        let signed = match size {
            1 => i64::from(unsigned as u8 as i8),
            2 => i64::from(unsigned as u16 as i16),
            4 => i64::from(unsigned as i32),
            _ => 0,
        };
        // A local usage: its page is the current one unless it carries its own.
        let full_usage = |v: u32| {
            if size == 4 {
                v
            } else {
                (u32::from(g.page) << 16) | (v & 0xFFFF)
            }
        };
        match (prefix >> 2) & 0x03 {
            0 => {
                // Main item.
                match prefix >> 4 {
                    // Input (0x8) and Feature (0xB) have report spaces of
                    // their own: only Output (0x9) moves these offsets.
                    0x9 => output_item(&g, unsigned, &usages, &mut report_bits, &mut fields)
                        .map_err(|problem| err(at, problem))?,
                    0xA => depth += 1,
                    0xC => {
                        depth = depth
                            .checked_sub(1)
                            .ok_or_else(|| err(at, "End Collection without a Collection".into()))?;
                    }
                    _ => {}
                }
                usages.clear();
                usage_min = None;
            }
            1 => match prefix >> 4 {
                0x0 => g.page = unsigned as u16,
                0x2 => g.logical_max = signed,
                0x7 => g.size = unsigned,
                0x8 => {
                    if unsigned == 0 || unsigned > 0xFF {
                        return Err(err(at, format!("report id {unsigned} (1..=255 expected)")));
                    }
                    g.report_id = unsigned as u8;
                    numbered = true;
                }
                0x9 => g.count = unsigned,
                0xA => {
                    if stack.len() == MAX_PUSH {
                        return Err(err(at, format!("more than {MAX_PUSH} nested Push items")));
                    }
                    stack.push(g);
                }
                0xB => {
                    g = stack
                        .pop()
                        .ok_or_else(|| err(at, "Pop without a Push".into()))?;
                }
                _ => {}
            },
            2 => match prefix >> 4 {
                0x0 => usages.push(full_usage(unsigned)),
                0x1 => usage_min = Some(full_usage(unsigned)),
                0x2 => {
                    let max = full_usage(unsigned);
                    if let Some(min) = usage_min.take() {
                        if max < min || max - min >= MAX_RANGE {
                            return Err(err(
                                at,
                                format!("usage range {min:#x}..={max:#x} is empty or too wide"),
                            ));
                        }
                        usages.extend(min..=max);
                    }
                }
                _ => {}
            },
            _ => return Err(err(at, format!("reserved item type in {prefix:#04x}"))),
        }
        at += 1 + size;
    }
    if numbered && report_bits.contains_key(&0) {
        return Err(err(
            0,
            "output fields before the first Report ID in a descriptor that uses report ids".into(),
        ));
    }
    Ok(PosOutputs {
        numbered,
        report_bits,
        fields,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The output report of Honeywell's HID POS interface, as its USB
    /// interfaces guide draws it: report id 4, one byte: bit 1 Prevent
    /// Read, bit 2 Initiate Read, bit 5 Sound Error Beep, bit 6 Sound Good
    /// Read Beep, the other bits constant. With an input report of the same
    /// id (a report space of its own) before it.
    const HONEYWELL_LIKE: &[u8] = &[
        0x05, 0x8C, //       Usage Page (Bar Code Scanner)
        0x09, 0x02, //       Usage (Bar Code Scanner)
        0xA1, 0x01, //       Collection (Application)
        0x85, 0x04, //         Report ID (4)
        0x15, 0x00, //         Logical Minimum (0)
        0x26, 0xFF, 0x00, //   Logical Maximum (255)
        0x75, 0x08, //         Report Size (8)
        0x95, 0x02, //         Report Count (2)
        0x09, 0x15, //         Usage (Status Report)
        0x81, 0x02, //         Input (Data,Var,Abs): 16 bits, not outputs
        0x25, 0x01, //         Logical Maximum (1)
        0x75, 0x01, //         Report Size (1)
        0x95, 0x01, //         Report Count (1)
        0x91, 0x03, //         Output (Const): bit 0
        0x09, 0x5F, //         Usage (Prevent Read of Barcodes)
        0x09, 0x60, //         Usage (Initiate Barcode Read)
        0x95, 0x02, //         Report Count (2)
        0x91, 0x02, //         Output (Data,Var,Abs): bits 1, 2
        0x91, 0x03, //         Output (Const): bits 3, 4
        0x09, 0x85, //         Usage (Sound Error Beep)
        0x09, 0x86, //         Usage (Sound Good Read Beep)
        0x91, 0x02, //         Output (Data,Var,Abs): bits 5, 6
        0x95, 0x01, //         Report Count (1)
        0x91, 0x03, //         Output (Const): bit 7
        0xC0, //               End Collection
    ];

    /// No report ids; Good Read LED in bit 0, padding, the three beeps
    /// as a Usage Minimum/Maximum range in bits 4-6.
    const UNNUMBERED_WITH_LED: &[u8] = &[
        0x05, 0x8C, //       Usage Page (Bar Code Scanner)
        0x09, 0x02, //       Usage (Bar Code Scanner)
        0xA1, 0x01, //       Collection (Application)
        0x15, 0x00, //         Logical Minimum (0)
        0x25, 0x01, //         Logical Maximum (1)
        0x75, 0x01, //         Report Size (1)
        0x09, 0x7D, //         Usage (Good Read LED)
        0x95, 0x01, //         Report Count (1)
        0x91, 0x02, //         Output (Data,Var,Abs): bit 0
        0x95, 0x03, //         Report Count (3)
        0x91, 0x01, //         Output (Const,Array): bits 1-3
        0x19, 0x85, //         Usage Minimum (Sound Error Beep)
        0x29, 0x87, //         Usage Maximum (Sound Not On File Beep)
        0x91, 0x02, //         Output (Data,Var,Abs): bits 4, 5, 6
        0x95, 0x01, //         Report Count (1)
        0x91, 0x03, //         Output (Const): bit 7
        0xC0, //               End Collection
    ];

    /// The scanned-data report of tests/vm/vmhid.c: inputs only.
    const VM_INPUT_ONLY: &[u8] = &[
        0x05, 0x8C, 0x09, 0x02, 0xA1, 0x01, 0x85, 0x02, 0x09, 0x12, 0xA1, 0x02, 0x15, 0x00, 0x26,
        0xFF, 0x00, 0x75, 0x08, 0x05, 0x01, 0x09, 0x3B, 0x95, 0x01, 0x81, 0x02, 0x05, 0x8C, 0x09,
        0xFB, 0x09, 0xFC, 0x09, 0xFD, 0x95, 0x03, 0x81, 0x02, 0x09, 0xFE, 0x95, 0x38, 0x82, 0x02,
        0x01, 0x06, 0x66, 0xFF, 0x09, 0x04, 0x09, 0x05, 0x95, 0x02, 0x81, 0x02, 0x05, 0x8C, 0x09,
        0xFF, 0x25, 0x01, 0x75, 0x01, 0x95, 0x01, 0x81, 0x02, 0x75, 0x07, 0x81, 0x03, 0xC0, 0xC0,
    ];

    #[test]
    fn honeywell_like_reports_are_exact() {
        let o = outputs(HONEYWELL_LIKE).expect("0x8C outputs");
        assert!(o.uses_report_ids());
        assert_eq!(
            o.fields()
                .iter()
                .map(|f| (f.report_id, f.usage, f.bit))
                .collect::<Vec<_>>(),
            [(4, 0x5F, 1), (4, 0x60, 2), (4, 0x85, 5), (4, 0x86, 6)]
        );
        assert_eq!(o.report(Told::Committed), Some(vec![0x04, 0x40]));
        // The guide's own example: 04h, 20h sounds the error beep.
        assert_eq!(o.report(Told::Rejected), Some(vec![0x04, 0x20]));
        // No not-on-file beep: the error beep stands in.
        assert_eq!(o.report(Told::Ambiguous), Some(vec![0x04, 0x20]));
        // No LED: nothing for waiting; never anything for an echo.
        assert_eq!(o.report(Told::Waiting), None);
        assert_eq!(o.report(Told::Echo), None);
        assert_eq!(o.for_hidapi(&[0x04, 0x40]), [0x04, 0x40]);
    }

    #[test]
    fn unnumbered_reports_with_led_and_a_usage_range() {
        let o = outputs(UNNUMBERED_WITH_LED).expect("0x8C outputs");
        assert!(!o.uses_report_ids());
        // LED bit 0; error, good read, not on file in bits 4, 5, 6.
        assert_eq!(o.report(Told::Committed), Some(vec![0b0010_0001]));
        assert_eq!(o.report(Told::Rejected), Some(vec![0b0001_0000]));
        assert_eq!(o.report(Told::Ambiguous), Some(vec![0b0100_0000]));
        assert_eq!(o.report(Told::Waiting), Some(vec![0b0000_0001]));
        assert_eq!(o.report(Told::Echo), None);
        // hidapi wants a leading 0 for a device without report ids.
        assert_eq!(o.for_hidapi(&[0x21]), [0x00, 0x21]);
    }

    #[test]
    fn a_descriptor_without_0x8c_outputs_gets_nothing() {
        assert_eq!(outputs(VM_INPUT_ONLY), None);
        assert_eq!(output_fields(VM_INPUT_ONLY), Ok(vec![]));
        // A keyboard's LED outputs are on the LED page (0x08), not ours.
        let keyboard_leds = [
            0x05, 0x01, 0x09, 0x06, 0xA1, 0x01, // Generic Desktop, Keyboard, Collection
            0x05, 0x08, 0x19, 0x01, 0x29, 0x05, // LEDs page, Num Lock..Kana
            0x15, 0x00, 0x25, 0x01, 0x75, 0x01, 0x95, 0x05, 0x91, 0x02, // 5 bits
            0x95, 0x03, 0x91, 0x03, 0xC0, // padding, End Collection
        ];
        assert_eq!(outputs(&keyboard_leds), None);
        assert_eq!(outputs(&[]), None);
    }

    #[test]
    fn push_pop_extended_usages_and_several_reports() {
        let d = [
            0x05, 0x08, //       Usage Page (LEDs)
            0xA1, 0x01, //       Collection (Application)
            0x85, 0x01, //         Report ID (1)
            0x15, 0x00, 0x25, 0x01, 0x75, 0x01, 0x95, 0x08, // 0..1, 1 bit x 8
            0x09, 0x01, //         Usage (Num Lock): LED page, not ours
            0x91, 0x02, //         Output: report 1, 8 bits
            0xA4, //               Push
            0x85, 0x05, //         Report ID (5)
            0x75, 0x04, //         Report Size (4)
            0x95, 0x01, //         Report Count (1)
            0x91, 0x03, //         Output (Const): report 5, bits 0-3
            0x0B, 0x86, 0x00, 0x8C, 0x00, // Usage (0x8C:0x86 Sound Good Read Beep)
            0x91, 0x02, //         Output: report 5, bits 4-7 (4 bits wide)
            0xB4, //               Pop: report id 1, size 1, count 8 again
            0x0B, 0x7D, 0x00, 0x8C, 0x00, // Usage (0x8C:0x7D Good Read LED)
            0x91, 0x02, //         Output: report 1, bits 8-15 (the LED repeats)
            0xFE, 0x01, 0x10, 0xAA, // a long item, skipped
            0xC0, //               End Collection
        ];
        let o = outputs(&d).expect("0x8C outputs");
        assert_eq!(
            o.fields()[0],
            OutputField {
                report_id: 5,
                usage: 0x86,
                bit: 4,
                size: 4
            }
        );
        assert_eq!(
            o.fields()[1],
            OutputField {
                report_id: 1,
                usage: 0x7D,
                bit: 8,
                size: 1
            }
        );
        // The beep and the LED are in two reports: one each, by id.
        assert_eq!(
            o.reports(Told::Committed),
            [vec![0x01, 0x00, 0x01], vec![0x05, 0x10]]
        );
        assert_eq!(o.report(Told::Waiting), Some(vec![0x01, 0x00, 0x01]));
        assert_eq!(o.report(Told::Rejected), None);
    }

    #[test]
    fn arrays_and_constants_are_not_fields_we_set() {
        let d = [
            0x05, 0x8C, 0x15, 0x00, 0x25, 0x01, 0x75, 0x01, 0x95, 0x01, //
            0x09, 0x86, 0x91, 0x00, // Output (Data,Array)
            0x09, 0x85, 0x91, 0x03, // Output (Const)
        ];
        assert_eq!(outputs(&d), None);
    }

    #[test]
    fn malformed_descriptors_are_refused_with_the_offset() {
        let cut = [0x05, 0x8C, 0x26, 0xFF];
        let e = output_fields(&cut).unwrap_err();
        assert_eq!(e.offset, 2);
        assert!(e.to_string().contains("byte 2"), "{e}");
        assert!(
            output_fields(&[0xC0])
                .unwrap_err()
                .problem
                .contains("End Collection")
        );
        assert!(output_fields(&[0xB4]).unwrap_err().problem.contains("Pop"));
        assert!(
            output_fields(&[0x85, 0x00])
                .unwrap_err()
                .problem
                .contains("report id")
        );
        assert!(output_fields(&[0x19, 0x10, 0x29, 0x01]).is_err());
        assert!(output_fields(&[0xFE, 0x09, 0x10]).is_err());
        let huge = [0x75, 0xFF, 0x96, 0xFF, 0xFF, 0x91, 0x02];
        assert!(output_fields(&huge).unwrap_err().problem.contains("bytes"));
        assert!(output_fields(&vec![0u8; MAX_DESCRIPTOR + 1]).is_err());
        // A descriptor that does not parse offers nothing.
        assert_eq!(outputs(&cut), None);
        // Outputs before the first Report ID in a numbered descriptor.
        let mixed = [
            0x05, 0x8C, 0x25, 0x01, 0x75, 0x01, 0x95, 0x01, 0x09, 0x86, 0x91, 0x02, 0x85, 0x01,
        ];
        assert!(output_fields(&mixed).is_err());
    }
}
