//! `scangate decode [--json] TEXT…`: decode barcode text the way the daemon
//! does, for technicians and tests.
//!
//! Each TEXT is one scanned frame (without its CR/LF suffix). A GS1 separator
//! may be given as the raw byte 0x1D, or written as `<GS>`, `\x1d` (or
//! `\x1D`) or `^]`; these three spellings are always replaced by 0x1D before
//! decoding, wherever they appear. Nothing else is unescaped. Arguments are
//! taken as raw bytes (not required to be UTF-8), so a frame that the decoder
//! rejects as "not UTF-8" can be reproduced too. Put `--` before a TEXT that
//! starts with `-`.
//!
//! # Output
//!
//! Everything about the inputs goes to **stdout**, in input order, valid or
//! not; stderr is used only for usage errors (reported by the argument parser).
//! Indexes count the TEXT arguments from 0.
//!
//! Text (default), per input:
//!
//! ```text
//! [0] valid
//!   symbology:   ]d2 GS1 DataMatrix
//!   elements:    (01) 00307773105025
//!                (17) 281231
//!   gtin:        00307773105025
//!   ndc10:       0777310502
//!   lot:         -
//!   serial:      -
//!   expiry:      2028-12-31
//!   dispensable: yes
//! [1] invalid: AI (01) at byte 3: incorrect check digit at byte 18 (format N14,csum)
//! ```
//!
//! An assumed symbology (no AIM id in the data) reads
//! `]d2 GS1 DataMatrix (assumed: the data has no AIM symbology identifier)`.
//!
//! `--json`: exactly one JSON object per input, one per line:
//!
//! ```text
//! {"input_index":0,"valid":true,"symbology":{"aim":"]d2","name":"GS1 DataMatrix","assumed":false},
//!  "elements":[{"ai":"01","value":"00307773105025"},…],"gtin":"00307773105025","ndc10":"0777310502",
//!  "lot":null,"serial":null,"expiry":"2028-12-31","dispensable":true}
//! {"input_index":1,"valid":false,"reason":"AI (01) at byte 3: …"}
//! ```
//!
//! (each object on one line; absent fields are `null`; `expiry` is
//! `YYYY-MM-DD`). The reason never repeats the scanned data.
//!
//! # Exit codes
//!
//! | code | meaning |
//! |---|---|
//! | 0 | every input decoded (including valid barcodes that are not a dispensable product: see `dispensable`) |
//! | 1 | at least one input is not a valid barcode (every input is still reported) |
//! | 2 | usage error: no TEXT, unknown option (from the argument parser) |
//! | 4 | stdout could not be written |
//!
//! # Raw HID reports: `--hid pos|keyboard`
//!
//! `scangate decode --hid pos|keyboard [--layout us|de] [--gs G] [--json] HEX…`
//! takes one raw HID input report per argument, as hex (as hidraw delivers
//! it: report id first when the device numbers its reports; spaces, `:` and
//! `-` between bytes are allowed), feeds them in order through the same
//! decoder the live HID source uses ([`crate::source::hid::HidDecoder`]),
//! and prints every scan they yield exactly as above, indexed by scan. A
//! scan still unfinished after the last report is reported as invalid
//! (truncated), as the live source rejects it when the device goes away.
//! `--gs` (keyboard): `auto` (Ctrl+] or F8, default), `ctrl-]`, `f8`,
//! `none`, or `substitute:STRING`; `--terminator enter|tab|both|none`
//! (keyboard; default enter). No complete or rejected scan at all: a note
//! on stderr and exit 1. A HEX that is not hex: exit 2.

use super::Failure;
use crate::capture::barcode::{self, Decoded};
use crate::exit::Exit;
use serde::Serialize;
use std::ffi::OsString;
use std::io::Write;

/// Arguments of `scangate decode` (defined with the other clap definitions).
pub use crate::cli::args::DecodeArgs;

/// Parse one report written in hex (`0200…`, `02 00 …`, `02:00:…`).
pub fn parse_hex_report(s: &str) -> Result<Vec<u8>, String> {
    let compact: String = s
        .chars()
        .filter(|c| !matches!(c, ' ' | ':' | '-' | '_'))
        .collect();
    let compact = compact
        .strip_prefix("0x")
        .or_else(|| compact.strip_prefix("0X"))
        .unwrap_or(&compact);
    if compact.is_empty() {
        return Err(format!("{s:?} is an empty report"));
    }
    hex::decode(compact).map_err(|e| format!("{s:?} is not a report in hex ({e})"))
}

/// The decoder `--hid` asks for, or a usage error.
fn hid_decoder(args: &DecodeArgs, mode: &str) -> Result<crate::source::hid::HidDecoder, String> {
    use crate::source::hid::{HidDecoder, keyboard, layout::Layout, pos};
    let timeout = std::time::Duration::from_millis(crate::config::DEFAULT_HID_TIMEOUT_MS);
    let max = 4096;
    if mode == "pos" {
        if args.layout.is_some() || args.gs.is_some() || args.terminator.is_some() {
            return Err("--layout, --gs and --terminator apply only to --hid keyboard".into());
        }
        return Ok(HidDecoder::pos(pos::DEFAULT_REPORT_ID, max, timeout));
    }
    let layout =
        Layout::parse(args.layout.as_deref().unwrap_or("us")).ok_or("--layout must be us or de")?;
    let gs = keyboard::GsConvention::parse(args.gs.as_deref().unwrap_or("auto"))
        .ok_or("--gs must be auto, ctrl-], f8, none or substitute:STRING (STRING not empty)")?;
    let terminators = match args.terminator.as_deref().unwrap_or("enter") {
        "enter" => keyboard::Terminators {
            enter: true,
            tab: false,
        },
        "tab" => keyboard::Terminators {
            enter: false,
            tab: true,
        },
        "both" => keyboard::Terminators {
            enter: true,
            tab: true,
        },
        _ => keyboard::Terminators {
            enter: false,
            tab: false,
        },
    };
    Ok(HidDecoder::keyboard(layout, gs, terminators, max, timeout))
}

/// `--hid`: reports → the live decoder → scans → decode and print.
fn run_hid_to(args: &DecodeArgs, mode: &str, out: &mut impl Write) -> std::io::Result<Exit> {
    let mut decoder = match hid_decoder(args, mode) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("scangate decode: {e}");
            return Ok(Exit::Config);
        }
    };
    let mut reports = Vec::new();
    for text in &args.text {
        match parse_hex_report(&text.to_string_lossy()) {
            Ok(r) => reports.push(r),
            Err(e) => {
                eprintln!("scangate decode: {e}; give one HID report per argument in hex");
                return Ok(Exit::Config);
            }
        }
    }
    let now = std::time::Instant::now();
    let mut raws = Vec::new();
    for r in &reports {
        decoder.push(r, now, &mut raws);
    }
    decoder.finish(&mut raws);
    if raws.is_empty() {
        eprintln!(
            "scangate decode: the {} report(s) make no scan (no terminator key / final report, or nothing typed)",
            reports.len()
        );
        return Ok(Exit::CheckFailed);
    }
    let year = crate::capture::CaptureTime::now().year();
    print_results(args, out, raws.iter().map(|raw| raw.decode(year)))
}

/// Print each result (text or one JSON object per line) in input order;
/// the exit code is 1 if any input was invalid.
fn print_results(
    args: &DecodeArgs,
    out: &mut impl Write,
    results: impl Iterator<Item = Result<Decoded, barcode::DecodeError>>,
) -> std::io::Result<Exit> {
    let mut code = Exit::Ok;
    for (index, result) in results.enumerate() {
        if result.is_err() {
            code = Exit::CheckFailed;
        }
        if args.json {
            write_json(out, index, &result)?;
        } else {
            write_text(out, index, &result)?;
        }
    }
    Ok(code)
}

/// Replace the written forms of GS (`<GS>`, `\x1d`, `\x1D`, `^]`) by 0x1D.
/// Linear in the input; every other byte is kept as is.
pub fn unescape_gs(input: &[u8]) -> Vec<u8> {
    const FORMS: [&[u8]; 4] = [b"<GS>", b"\\x1d", b"\\x1D", b"^]"];
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    'outer: while i < input.len() {
        for form in FORMS {
            if input[i..].starts_with(form) {
                out.push(barcode::gs1::GS);
                i += form.len();
                continue 'outer;
            }
        }
        out.push(input[i]);
        i += 1;
    }
    out
}

#[cfg(unix)]
fn os_bytes(s: &OsString) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    s.as_os_str().as_bytes().to_vec()
}

#[cfg(not(unix))]
fn os_bytes(s: &OsString) -> Vec<u8> {
    s.to_string_lossy().into_owned().into_bytes()
}

#[derive(Serialize)]
struct JsonSymbology<'a> {
    aim: &'a str,
    name: &'a str,
    assumed: bool,
}

#[derive(Serialize)]
struct JsonElement<'a> {
    ai: &'a str,
    value: &'a str,
}

#[derive(Serialize)]
struct JsonValid<'a> {
    input_index: usize,
    valid: bool,
    symbology: JsonSymbology<'a>,
    elements: Vec<JsonElement<'a>>,
    gtin: Option<&'a str>,
    ndc10: Option<&'a str>,
    lot: Option<&'a str>,
    serial: Option<&'a str>,
    expiry: Option<String>,
    dispensable: bool,
}

#[derive(Serialize)]
struct JsonInvalid<'a> {
    input_index: usize,
    valid: bool,
    reason: &'a str,
}

fn expiry_text(d: &Decoded) -> Option<String> {
    d.product.expiry.map(|e| e.format("%Y-%m-%d").to_string())
}

fn write_json(
    out: &mut impl Write,
    index: usize,
    result: &Result<Decoded, barcode::DecodeError>,
) -> std::io::Result<()> {
    match result {
        Ok(d) => {
            let p = &d.product;
            let obj = JsonValid {
                input_index: index,
                valid: true,
                symbology: JsonSymbology {
                    aim: &d.aim,
                    name: d.symbology,
                    assumed: d.symbology_assumed,
                },
                elements: d
                    .elements
                    .iter()
                    .map(|e| JsonElement {
                        ai: e.ai,
                        value: &e.value,
                    })
                    .collect(),
                gtin: p.gtin.as_deref(),
                ndc10: p.ndc10.as_deref(),
                lot: p.lot.as_deref(),
                serial: p.serial.as_deref(),
                expiry: expiry_text(d),
                dispensable: p.is_dispensable(),
            };
            serde_json::to_writer(&mut *out, &obj)?;
        }
        Err(e) => {
            let obj = JsonInvalid {
                input_index: index,
                valid: false,
                reason: &e.0,
            };
            serde_json::to_writer(&mut *out, &obj)?;
        }
    }
    out.write_all(b"\n")
}

fn write_text(
    out: &mut impl Write,
    index: usize,
    result: &Result<Decoded, barcode::DecodeError>,
) -> std::io::Result<()> {
    let d = match result {
        Ok(d) => d,
        Err(e) => return writeln!(out, "[{index}] invalid: {e}"),
    };
    writeln!(out, "[{index}] valid")?;
    let assumed = if d.symbology_assumed {
        " (assumed: the data has no AIM symbology identifier)"
    } else {
        ""
    };
    writeln!(out, "  symbology:   {} {}{assumed}", d.aim, d.symbology)?;
    if d.elements.is_empty() {
        writeln!(out, "  elements:    (none)")?;
    }
    for (i, e) in d.elements.iter().enumerate() {
        let label = if i == 0 {
            "  elements:    "
        } else {
            "               "
        };
        writeln!(out, "{label}({}) {}", e.ai, e.value)?;
    }
    let p = &d.product;
    let show = |v: Option<&str>| v.unwrap_or("-").to_string();
    writeln!(out, "  gtin:        {}", show(p.gtin.as_deref()))?;
    writeln!(out, "  ndc10:       {}", show(p.ndc10.as_deref()))?;
    writeln!(out, "  lot:         {}", show(p.lot.as_deref()))?;
    writeln!(out, "  serial:      {}", show(p.serial.as_deref()))?;
    writeln!(
        out,
        "  expiry:      {}",
        expiry_text(d).unwrap_or_else(|| "-".into())
    )?;
    let disp = if p.is_dispensable() {
        "yes"
    } else {
        "no (no GTIN: the gate rejects it as not a dispensable product)"
    };
    writeln!(out, "  dispensable: {disp}")
}

/// Decode every TEXT and print the results; returns the exit code.
pub fn run(args: &DecodeArgs) -> Result<Exit, Failure> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    run_to(args, &mut out)
        .and_then(|code| out.flush().map(|_| code))
        .map_err(|e| Failure::Runtime(format!("cannot write the decode output: {e}")))
}

/// [`run`] writing to `out` instead of stdout.
pub fn run_to(args: &DecodeArgs, out: &mut impl Write) -> std::io::Result<Exit> {
    if let Some(mode) = &args.hid {
        return run_hid_to(args, mode, out);
    }
    let results = args
        .text
        .iter()
        .map(|text| barcode::decode(&unescape_gs(&os_bytes(text))));
    print_results(args, out, results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gs_spellings() {
        assert_eq!(unescape_gs(b"10A<GS>21B"), b"10A\x1d21B");
        assert_eq!(unescape_gs(b"10A\\x1d21B\\x1D"), b"10A\x1d21B\x1d");
        assert_eq!(unescape_gs(b"10A^]21B"), b"10A\x1d21B");
        assert_eq!(unescape_gs(b"10A\x1d21B"), b"10A\x1d21B");
        assert_eq!(unescape_gs(b"<GS"), b"<GS");
        assert_eq!(unescape_gs(b"\\x1"), b"\\x1");
        assert_eq!(unescape_gs(b"^"), b"^");
        assert_eq!(unescape_gs(b""), b"");
        assert_eq!(unescape_gs(b"<gs>"), b"<gs>");
    }

    #[test]
    fn text_and_json_output() {
        let args = DecodeArgs {
            json: true,
            hid: None,
            layout: None,
            gs: None,
            terminator: None,
            text: vec![
                "]d20100307773105025<GS>17281200".into(),
                "]d20100307773105026".into(),
            ],
        };
        let mut out = Vec::new();
        assert_eq!(run_to(&args, &mut out).unwrap(), Exit::CheckFailed);
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["expiry"], "2028-12-31");
        assert_eq!(lines[0]["ndc10"], "0777310502");
        assert_eq!(lines[1]["valid"], false);
        let args = DecodeArgs {
            json: false,
            ..args
        };
        let mut out = Vec::new();
        assert_eq!(run_to(&args, &mut out).unwrap(), Exit::CheckFailed);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("[0] valid"), "{text}");
        assert!(text.contains("[1] invalid: "), "{text}");
    }
}
