//! The printed forms of a control [`Label`]: an SVG for any printer, ZPL II
//! for a Zebra label printer, a line of text for other label software.
//! Each barcode is Code 128 set B ([`super::code128`]).
//!
//! Sized for a counter label of 50 × 25 mm: the SVG draws with a module
//! (narrowest bar) of 0.25 mm, so a content of up to 13 characters fits
//! 50 mm with its quiet zones, and a longer one makes the label wider; the
//! ZPL is for 203 dpi (8 dots/mm), with 2-dot modules where the symbol
//! fits 50 mm and 1-dot modules where not.

use super::Label;
use super::code128::{Code128, QUIET_ZONE};
use std::fmt::Write;

/// SVG user units per millimetre: one unit is one module (0.25 mm).
const UNITS_PER_MM: usize = 4;
/// The label's width and height in units (50 × 25 mm).
const LABEL_W: usize = 50 * UNITS_PER_MM;
const LABEL_H: usize = 25 * UNITS_PER_MM;
/// Where the bars start and end vertically, in units.
const BARS_TOP: usize = 36;
const BARS_BOTTOM: usize = 86;
/// The longest line of the printed explanation, in characters.
const LINE_CHARS: usize = 30;

/// The file name `scangate labels` writes a label's SVG to:
/// `scangate-repeat.svg`, `scangate-qty-3.svg`, `scangate-acknowledge.svg`.
pub fn file_name(label: &Label) -> String {
    match label.control {
        super::Control::Repeat => "scangate-repeat.svg".into(),
        super::Control::Quantity(n) => format!("scangate-qty-{n}.svg"),
        super::Control::Acknowledge => "scangate-acknowledge.svg".into(),
    }
}

/// The label as an SVG document: the title, what it does, the barcode with
/// its quiet zones, the content in small text beneath. Bars are `<rect
/// class="bar">` on whole modules.
pub fn svg(label: &Label) -> String {
    let code = symbol(label);
    let width = LABEL_W.max(code.modules() + 2 * QUIET_ZONE + 8);
    let left = (width - code.modules()) / 2;
    let mid = width / 2;
    let mm = |units: usize| format!("{}", units as f64 / UNITS_PER_MM as f64);
    let mut s = String::new();
    let _ = writeln!(s, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}mm" height="{}mm" viewBox="0 0 {width} {LABEL_H}">"#,
        mm(width),
        mm(LABEL_H)
    );
    let _ = writeln!(s, "<title>{}</title>", xml(&label.control.caption()));
    let _ = writeln!(
        s,
        "<desc>scangate control label: Code 128 (set B) of {}, check symbol {}</desc>",
        xml(&label.content),
        code.check()
    );
    let _ = writeln!(
        s,
        r##"<rect x="0" y="0" width="{width}" height="{LABEL_H}" fill="#ffffff"/>"##
    );
    let font = r#"font-family="DejaVu Sans, Arial, Helvetica, sans-serif" text-anchor="middle""#;
    let _ = writeln!(
        s,
        r#"<text x="{mid}" y="14" {font} font-size="13" font-weight="bold">{}</text>"#,
        xml(&label.control.title())
    );
    for (i, line) in wrap(&label.control.meaning(), LINE_CHARS)
        .iter()
        .enumerate()
    {
        let _ = writeln!(
            s,
            r#"<text x="{mid}" y="{}" {font} font-size="7.5">{}</text>"#,
            23 + 8 * i,
            xml(line)
        );
    }
    let _ = writeln!(s, r##"<g fill="#000000">"##);
    for (x, w) in code.bars() {
        let _ = writeln!(
            s,
            r#"<rect class="bar" x="{}" y="{BARS_TOP}" width="{w}" height="{}"/>"#,
            left + x,
            BARS_BOTTOM - BARS_TOP
        );
    }
    let _ = writeln!(s, "</g>");
    let _ = writeln!(
        s,
        r#"<text x="{mid}" y="95" font-family="DejaVu Sans Mono, Courier New, monospace" text-anchor="middle" font-size="6">{}</text>"#,
        xml(&label.content)
    );
    s.push_str("</svg>\n");
    s
}

/// The labels as ZPL II, one `^XA … ^XZ` format each, for a 203 dpi
/// printer with 50 × 25 mm labels: title, what it does, and a `^BC`
/// barcode with its interpretation line.
pub fn zpl(labels: &[Label]) -> String {
    const DOTS_W: usize = 400;
    let mut s = String::new();
    for label in labels {
        let modules = symbol(label).modules() + 2 * QUIET_ZONE;
        let module = if 2 * modules <= DOTS_W { 2 } else { 1 };
        let width = DOTS_W.max(module * modules);
        let x = (width - module * (modules - 2 * QUIET_ZONE)) / 2;
        // Contents hold only letters, digits and - . _ / + : (validated),
        // none of which ZPL or `^BC` treats specially.
        let _ = write!(
            s,
            "^XA\n^FX scangate control label: {caption}^FS\n^CI0\n^PW{width}\n^LL200\n^LH0,0\n\
             ^FO0,12^FB{width},1,0,C,0^A0N,34,34^FD{title}^FS\n\
             ^FO0,52^FB{width},2,0,C,0^A0N,20,20^FD{meaning}^FS\n\
             ^BY{module},3,56\n^FO{x},100^BCN,56,Y,N,N^FD{content}^FS\n^XZ\n",
            caption = zpl_text(&label.control.caption()),
            title = zpl_text(&label.control.title()),
            meaning = zpl_text(&label.control.meaning()),
            content = label.content,
        );
    }
    s
}

/// The labels as text, one a line: the content, a tab, what it does.
pub fn text(labels: &[Label]) -> String {
    labels
        .iter()
        .map(|l| format!("{}\t{}\n", l.content, l.control.caption()))
        .collect()
}

/// The label's barcode. Its content was validated to be set B text (a
/// character outside it, from an unvalidated label, is encoded as `?`).
fn symbol(label: &Label) -> Code128 {
    let content: String = label
        .content
        .chars()
        .map(|c| if c.is_ascii_graphic() { c } else { '?' })
        .collect();
    Code128::set_b(&content).expect("ASCII graphic characters are set B")
}

/// `text` in lines of at most `max` characters, broken at spaces.
fn wrap(text: &str, max: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split(' ') {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= max => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

/// `text` with XML's special characters escaped.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` for a ZPL field in the printer's default code page: the dash
/// as ASCII, and nothing ZPL reads as a command (`^`, `~`).
fn zpl_text(text: &str) -> String {
    text.replace('—', "-").replace(['^', '~'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controls::{Control, ControlsConfig};

    fn labels() -> Vec<Label> {
        ControlsConfig::default().labels()
    }

    #[test]
    fn svg_bars_are_the_symbol_inside_its_quiet_zones() {
        let label = &labels()[0];
        let doc = svg(label);
        let code = Code128::set_b("SGCTL-REPEAT").unwrap();
        let bars: Vec<(usize, usize)> = doc
            .lines()
            .filter(|l| l.starts_with(r#"<rect class="bar""#))
            .map(|l| {
                let attr = |name: &str| -> usize {
                    let start = l.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
                    l[start..].split('"').next().unwrap().parse().unwrap()
                };
                (attr("x"), attr("width"))
            })
            .collect();
        assert_eq!(bars.len(), code.bars().len());
        let left = bars[0].0;
        assert!(left >= QUIET_ZONE);
        let right = bars.last().map(|(x, w)| x + w).unwrap();
        assert!(right + QUIET_ZONE <= LABEL_W, "{right}");
        for ((x, w), (cx, cw)) in bars.iter().zip(code.bars()) {
            assert_eq!((x - left, *w), (cx, cw));
        }
        assert!(doc.contains(r#"width="50mm" height="25mm""#));
        assert!(doc.contains(">REPEAT</text>"));
        assert!(doc.contains(">the next read on this scanner</text>"));
        assert!(doc.contains(">is another item</text>"));
        assert!(doc.contains(">SGCTL-REPEAT</text>"));
    }

    #[test]
    fn a_long_content_widens_the_svg_label() {
        let label = Label {
            control: Control::Repeat,
            content: "X".repeat(40),
        };
        let doc = svg(&label);
        // 42 symbols × 11 + 13 = 475 modules, 10 of quiet zone each side
        // and 4 of margin: 503 units of 0.25 mm.
        assert!(doc.contains(r#"width="125.75mm""#), "{doc}");
    }

    #[test]
    fn zpl_has_one_format_per_label_with_its_barcode() {
        let out = zpl(&labels());
        assert_eq!(out.matches("^XA").count(), 10);
        assert_eq!(out.matches("^XZ").count(), 10);
        assert!(out.contains("^FDACKNOWLEDGE^FS"));
        assert!(out.contains("^FDQUANTITY 12^FS"));
        assert!(out.contains("^BCN,56,Y,N,N^FDSGCTL-QTY-12^FS"));
        assert!(out.contains("^FDREPEAT^FS"));
        assert!(out.is_ascii());
        // "SGCTL-REPEAT": 14 symbols × 11 + 13 = 167 modules, 2 dots each,
        // centred on 400 dots.
        assert!(out.contains("^BY2,3,56\n^FO33,100^BCN"), "{out}");
    }

    #[test]
    fn text_is_one_line_per_label() {
        let out = text(&labels());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 10);
        assert_eq!(
            lines[9],
            "SGCTL-ACK\tACKNOWLEDGE — staff saw this scanner's alerts"
        );
        assert_eq!(
            lines[0],
            "SGCTL-REPEAT\tREPEAT — the next read on this scanner is another item"
        );
        assert_eq!(
            lines[2],
            "SGCTL-QTY-3\tQUANTITY 3 — the next read counts 3 units"
        );
    }

    #[test]
    fn file_names_say_which_label() {
        let names: Vec<String> = labels().iter().map(file_name).collect();
        assert_eq!(names[0], "scangate-repeat.svg");
        assert_eq!(names[2], "scangate-qty-3.svg");
    }

    #[test]
    fn special_characters_are_escaped() {
        assert_eq!(xml(r#"<a & "b">"#), "&lt;a &amp; &quot;b&quot;&gt;");
        assert_eq!(zpl_text("A — ^B~"), "A -  B ");
        assert_eq!(wrap("a bb ccc", 4), ["a bb", "ccc"]);
    }
}
