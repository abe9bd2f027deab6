//! HID POS scanners (usage page 0x8C): scanned-data reports reassembled
//! into scans.
//!
//! # Report (Honeywell layout, report id 0x02)
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | report id (0x02) |
//! | 1 | 1 | byte count of the data in **this** report (0–56; the AIM id is not counted) |
//! | 2–4 | 3 | AIM symbology id, e.g. `]d2`, repeated in every report of a scan |
//! | 5–60 | 56 | data, zero-padded after the count |
//! | … | 0 or 2 | vendor bytes (Honeywell code id and modifier) |
//! | last | 1 | bit 0: more reports follow for this scan |
//!
//! Real Honeywell firmware sends 64 bytes; emulators leave out the two
//! vendor bytes and send 62. The flag is read from the **last** byte, so both
//! (and longer buffers) parse the same way. GS arrives as the byte 0x1D.
//! Reports with another report id (trigger, status, …) are not scan data
//! and are skipped.
//!
//! # Reassembly
//!
//! Data of reports with the "more" flag collects until a report without
//! it. A scan that cannot be completed is **rejected, never merged**:
//! a report with a different AIM id arriving mid-scan (a new scan began
//! before the last report of the previous one), the device going away, a
//! pause longer than the scanner's timeout (checked by the source), or the
//! input ending. A rejected scan is stored and audited with the reason.
//!
//! One trailing CR / LF / CRLF is removed from a complete scan: a scanner
//! configured with a CR suffix puts it into the data (GS1 data never ends
//! in CR or LF).

use crate::capture::RawScan;

/// Offset of the byte count.
const COUNT: usize = 1;
/// Offset of the AIM id.
const AIM: usize = 2;
/// Offset of the data block.
const DATA: usize = 5;
/// Data bytes per report at most.
pub const BLOCK: usize = 56;
/// Shortest scanned-data report: id, count, AIM, 56 data bytes, flags.
pub const MIN_REPORT: usize = DATA + BLOCK + 1;
/// Honeywell's report id for scanned data.
pub const DEFAULT_REPORT_ID: u8 = 0x02;

/// One parsed scanned-data report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PosReport<'a> {
    /// The AIM symbology id bytes (`]d2`), or zeros when the scanner sends none.
    pub aim: [u8; 3],
    /// This report's data bytes.
    pub data: &'a [u8],
    /// More reports follow for this scan.
    pub more: bool,
}

/// A report that is not usable scan data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PosSkip {
    /// Another report id (not scanned data): skipped.
    OtherReport(u8),
    /// A scanned-data report that does not parse (the reason).
    Malformed(String),
}

/// Parse one report read from the device (report id in byte 0).
pub fn parse_report(report: &[u8], report_id: u8) -> Result<PosReport<'_>, PosSkip> {
    let Some(&id) = report.first() else {
        return Err(PosSkip::Malformed("empty report".into()));
    };
    if id != report_id {
        return Err(PosSkip::OtherReport(id));
    }
    if report.len() < MIN_REPORT {
        return Err(PosSkip::Malformed(format!(
            "scanned-data report of {} bytes; at least {MIN_REPORT} expected",
            report.len()
        )));
    }
    let count = report[COUNT] as usize;
    if count > BLOCK {
        return Err(PosSkip::Malformed(format!(
            "byte count {count} exceeds the {BLOCK}-byte data block"
        )));
    }
    let flags = report[report.len() - 1];
    Ok(PosReport {
        aim: report[AIM..DATA].try_into().expect("3 bytes"),
        data: &report[DATA..DATA + count],
        more: flags & 0x01 != 0,
    })
}

#[derive(Debug, Clone)]
struct Partial {
    aim: [u8; 3],
    data: Vec<u8>,
    reports: usize,
    over_long: bool,
}

/// Reassembles HID POS reports into scans.
#[derive(Debug, Clone)]
pub struct PosAssembler {
    report_id: u8,
    max_bytes: usize,
    partial: Option<Partial>,
}

impl PosAssembler {
    /// An assembler for scanned-data reports with this id; `max_bytes` is
    /// the longest accepted scan (data, without the AIM id).
    pub fn new(report_id: u8, max_bytes: usize) -> PosAssembler {
        PosAssembler {
            report_id,
            max_bytes,
            partial: None,
        }
    }

    /// Whether a multi-report scan is in progress.
    pub fn pending(&self) -> bool {
        self.partial.is_some()
    }

    /// Feed one report. Complete scans (and rejected torn ones) are
    /// appended to `out`; a skipped report is returned as `Err`.
    pub fn push(&mut self, report: &[u8], out: &mut Vec<RawScan>) -> Result<(), PosSkip> {
        let r = match parse_report(report, self.report_id) {
            Ok(r) => r,
            Err(skip @ PosSkip::OtherReport(_)) => return Err(skip),
            Err(PosSkip::Malformed(why)) => {
                // The scan it belonged to cannot be trusted any more.
                if let Some(torn) = self.abort("a malformed report arrived mid-scan") {
                    out.push(torn);
                }
                out.push(RawScan {
                    bytes: Vec::new(),
                    framing_error: Some(format!("malformed HID POS report: {why}")),
                });
                return Err(PosSkip::Malformed(why));
            }
        };
        if let Some(p) = &self.partial
            && p.aim != r.aim
        {
            let torn = self
                .abort("a report of another symbology arrived: a new scan began before the last report of this one")
                .expect("partial");
            out.push(torn);
        }
        let p = self.partial.get_or_insert_with(|| Partial {
            aim: r.aim,
            data: Vec::new(),
            reports: 0,
            over_long: false,
        });
        p.reports += 1;
        if p.data.len() + r.data.len() > self.max_bytes {
            p.over_long = true;
        } else {
            p.data.extend_from_slice(r.data);
        }
        if !r.more {
            let p = self.partial.take().expect("partial");
            out.push(self.complete(p));
        }
        Ok(())
    }

    fn complete(&self, p: Partial) -> RawScan {
        if p.over_long {
            return RawScan {
                bytes: Vec::new(),
                framing_error: Some(format!(
                    "over-long HID POS scan: more than {} data bytes in {} reports",
                    self.max_bytes, p.reports
                )),
            };
        }
        let mut data = p.data;
        if data.ends_with(b"\r\n") {
            data.truncate(data.len() - 2);
        } else if data.ends_with(b"\r") || data.ends_with(b"\n") {
            data.truncate(data.len() - 1);
        }
        let mut bytes = Vec::with_capacity(3 + data.len());
        if p.aim[0] == b']' {
            bytes.extend_from_slice(&p.aim);
        }
        bytes.extend_from_slice(&data);
        RawScan {
            bytes,
            framing_error: None,
        }
    }

    /// The scan in progress cannot be completed: reject it with `why`.
    pub fn abort(&mut self, why: &str) -> Option<RawScan> {
        let p = self.partial.take()?;
        let mut bytes = Vec::new();
        if p.aim[0] == b']' {
            bytes.extend_from_slice(&p.aim);
        }
        bytes.extend_from_slice(&p.data);
        Some(RawScan {
            bytes,
            framing_error: Some(format!(
                "truncated HID POS scan ({} report(s) received, the last one announced more): {why}",
                p.reports
            )),
        })
    }
}

/// Split `aim` + `data` into scanned-data reports the way Honeywell
/// firmware does (56-byte pieces, the "more" flag on all but the last).
/// `vendor_bytes` adds the two HHP bytes (64-byte reports) or leaves them
/// out (62). For tests, benchmarks and documentation.
pub fn encode(report_id: u8, aim: &[u8; 3], data: &[u8], vendor_bytes: bool) -> Vec<Vec<u8>> {
    let pieces: Vec<&[u8]> = if data.is_empty() {
        vec![&[][..]]
    } else {
        data.chunks(BLOCK).collect()
    };
    let n = pieces.len();
    pieces
        .into_iter()
        .enumerate()
        .map(|(i, piece)| {
            let mut r = vec![report_id, piece.len() as u8];
            r.extend_from_slice(aim);
            r.extend_from_slice(piece);
            r.resize(DATA + BLOCK, 0);
            if vendor_bytes {
                r.extend_from_slice(&[0, 0]);
            }
            r.push(u8::from(i + 1 < n));
            r
        })
        .collect()
}
