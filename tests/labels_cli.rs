//! `scangate labels` through the real binary: the SVG files' bars read back
//! with a Code 128 decoder of the test's own (its own width table, written
//! as strings), ZPL and text on stdout, an invalid control refused.

use crate::util::{Outcome, cli_cfg, tempdir};
use std::path::{Path, PathBuf};

/// The Code 128 symbol characters 0..=106 as bar/space widths, bar first
/// (ISO/IEC 15417 table 1; 106 is STOP with its final bar). Written apart
/// from the encoder's table on purpose: the two must agree.
const WIDTHS: [&str; 107] = [
    "212222", "222122", "222221", "121223", "121322", "131222", "122213", "122312", "132212",
    "221213", "221312", "231212", "112232", "122132", "122231", "113222", "123122", "123221",
    "223211", "221132", "221231", "213212", "223112", "312131", "311222", "321122", "321221",
    "312212", "322112", "322211", "212123", "212321", "232121", "111323", "131123", "131321",
    "112313", "132113", "132311", "211313", "231113", "231311", "112133", "112331", "132131",
    "113123", "113321", "133121", "313121", "211331", "231131", "213113", "213311", "213131",
    "311123", "311321", "331121", "312113", "312311", "332111", "314111", "221411", "431111",
    "111224", "111422", "121124", "121421", "141122", "141221", "112214", "112412", "122114",
    "122411", "142112", "142211", "241211", "221114", "413111", "241112", "134111", "111242",
    "121142", "121241", "114212", "124112", "124211", "411212", "421112", "421211", "212141",
    "214121", "412121", "111143", "111341", "131141", "114113", "114311", "411113", "411311",
    "113141", "114131", "311141", "411131", "211412", "211214", "211232", "2331112",
];

/// A config with custom control contents and a quantity list of its own.
fn config(dir: &Path, controls: &str) -> PathBuf {
    let path = dir.join("scangate.toml");
    std::fs::write(
        &path,
        format!(
            "[gateway]\nfacility = \"f\"\nid = \"gw\"\nstate_dir = {:?}\n\n[controls]\n{controls}\n",
            dir.join("state")
        ),
    )
    .unwrap();
    path
}

const CUSTOM: &str = "repeat = \"AGAIN/1\"\nquantity_prefix = \"COUNT.\"\nquantities = [3, 144]\nacknowledge = \"SEEN:1\"\n";

/// The `(x, width)` of every `<rect class="bar" …/>` in an SVG, in the
/// document's units.
fn bars(svg: &str) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for rect in svg.split("<rect").skip(1) {
        let rect = &rect[..rect.find("/>").expect("a closed rect")];
        if !rect.contains(r#"class="bar""#) {
            continue;
        }
        let attr = |name: &str| -> f64 {
            let at = rect
                .find(&format!(" {name}=\""))
                .unwrap_or_else(|| panic!("a bar without {name}: {rect}"));
            rect[at + name.len() + 3..]
                .split('"')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        out.push((attr("x"), attr("width")));
    }
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

/// The viewBox width of an SVG.
fn view_width(svg: &str) -> f64 {
    let at = svg.find("viewBox=\"").expect("a viewBox") + "viewBox=\"".len();
    let vb: Vec<f64> = svg[at..]
        .split('"')
        .next()
        .unwrap()
        .split(' ')
        .map(|n| n.parse().unwrap())
        .collect();
    vb[2]
}

/// What a Code 128 set B symbol read back says.
#[derive(Debug)]
struct Read {
    text: String,
    check: usize,
    /// Modules of white before the first bar and after the last.
    quiet: (f64, f64),
}

/// Decode the bars of a Code 128 set B symbol: widths → modules (the
/// narrowest element is one module; START B has one) → symbol characters
/// by [`WIDTHS`] → START B, data, a check symbol that must be right, STOP.
fn decode(bars: &[(f64, f64)], width: f64) -> Result<Read, String> {
    let mut elements = Vec::new();
    for (i, &(x, w)) in bars.iter().enumerate() {
        elements.push(w);
        if let Some(&(next, _)) = bars.get(i + 1) {
            elements.push(next - (x + w));
        }
    }
    let module = elements.iter().copied().fold(f64::INFINITY, f64::min);
    let modules: Vec<u32> = elements
        .iter()
        .map(|w| {
            let m = w / module;
            assert!((m - m.round()).abs() < 1e-6, "{w} is not whole modules");
            m.round() as u32
        })
        .collect();
    if modules.len() < 6 + 6 + 7 || !(modules.len() - 7).is_multiple_of(6) {
        return Err(format!("{} bars and spaces is no Code 128", modules.len()));
    }
    let (chars, stop) = modules.split_at(modules.len() - 7);
    let code = |ws: &[u32]| -> Option<usize> {
        let s: String = ws.iter().map(|w| w.to_string()).collect();
        WIDTHS.iter().position(|p| *p == s)
    };
    if code(stop) != Some(106) {
        return Err(format!("no STOP at the end: {stop:?}"));
    }
    let values: Vec<usize> = chars
        .chunks(6)
        .map(|c| code(c).ok_or(format!("{c:?} is no symbol character")))
        .collect::<Result<_, _>>()?;
    let (&start, rest) = values.split_first().unwrap();
    if start != 104 {
        return Err(format!("starts with {start}, not START B"));
    }
    let (&check, data) = rest.split_last().unwrap();
    let sum = start
        + data
            .iter()
            .enumerate()
            .map(|(i, v)| (i + 1) * v)
            .sum::<usize>();
    if sum % 103 != check {
        return Err(format!(
            "check symbol {check}, the data gives {}",
            sum % 103
        ));
    }
    let text = data
        .iter()
        .map(|&v| char::from(u8::try_from(v + 32).unwrap()))
        .collect();
    let (first, _) = bars[0];
    let (last, w) = bars[bars.len() - 1];
    Ok(Read {
        text,
        check,
        quiet: (first / module, (width - last - w) / module),
    })
}

#[test]
fn labels_svg_bars_decode_to_the_configured_contents() {
    let d = tempdir("scangate-labels-");
    let cfg = config(d.path(), CUSTOM);
    let out_dir = d.path().join("labels");
    let out: Outcome = cli_cfg(&cfg, &["labels", "--out", out_dir.to_str().unwrap()]).into();
    assert_eq!(out.code, Some(0), "{out}");
    let want = [
        ("scangate-repeat.svg", "AGAIN/1", "REPEAT", "another item"),
        (
            "scangate-qty-3.svg",
            "COUNT.3",
            "QUANTITY 3",
            "counts 3 units",
        ),
        (
            "scangate-qty-144.svg",
            "COUNT.144",
            "QUANTITY 144",
            "counts 144 units",
        ),
        (
            "scangate-acknowledge.svg",
            "SEEN:1",
            "ACKNOWLEDGE",
            "staff saw this scanner's alerts",
        ),
    ];
    let index: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(index.len(), want.len(), "{out}");
    let mut files: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut names: Vec<&str> = want.iter().map(|w| w.0).collect();
    names.sort();
    assert_eq!(files, names);
    for ((file, content, title, meaning), line) in want.iter().zip(&index) {
        let path = out_dir.join(file);
        let cols: Vec<&str> = line.split('\t').collect();
        assert_eq!(cols[0], path.to_str().unwrap(), "{line}");
        assert_eq!(cols[1], *content);
        assert!(cols[2].starts_with(&format!("{title} — ")), "{line}");
        assert!(cols[2].contains(meaning), "{line}");
        let svg = std::fs::read_to_string(&path).unwrap();
        let read = decode(&bars(&svg), view_width(&svg)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(read.text, *content, "{file}");
        // The check symbol, worked here independently of both decoders'
        // sums: START B (104) + Σ position × (ASCII − 32), mod 103.
        let sum: usize = 104
            + content
                .bytes()
                .enumerate()
                .map(|(i, b)| (i + 1) * usize::from(b - 32))
                .sum::<usize>();
        assert_eq!(read.check, sum % 103, "{file}");
        assert!(
            read.quiet.0 >= 10.0 && read.quiet.1 >= 10.0,
            "{file}: quiet zones {:?} modules",
            read.quiet
        );
        assert!(svg.contains(&format!(">{title}</text>")), "{file}");
        assert!(svg.contains(&format!(">{content}</text>")), "{file}");
    }
}

#[test]
fn labels_zpl_and_text_print_every_content() {
    let d = tempdir("scangate-labels-");
    let cfg = config(d.path(), CUSTOM);
    let zpl: Outcome = cli_cfg(&cfg, &["labels", "--format", "zpl"]).into();
    assert_eq!(zpl.code, Some(0), "{zpl}");
    assert_eq!(zpl.stdout.matches("^XA").count(), 4, "{zpl}");
    assert_eq!(zpl.stdout.matches("^XZ").count(), 4, "{zpl}");
    assert_eq!(zpl.stdout.matches("^BC").count(), 4, "{zpl}");
    for content in ["AGAIN/1", "COUNT.3", "COUNT.144", "SEEN:1"] {
        assert!(
            zpl.stdout.contains(&format!("^FD{content}^FS")),
            "{content}: {zpl}"
        );
    }
    assert!(zpl.stdout.contains("^FDQUANTITY 144^FS"), "{zpl}");

    let text: Outcome = cli_cfg(&cfg, &["labels", "--format", "text"]).into();
    assert_eq!(text.code, Some(0), "{text}");
    assert_eq!(
        text.stdout,
        "AGAIN/1\tREPEAT — the next read on this scanner is another item\n\
         COUNT.3\tQUANTITY 3 — the next read counts 3 units\n\
         COUNT.144\tQUANTITY 144 — the next read counts 144 units\n\
         SEEN:1\tACKNOWLEDGE — staff saw this scanner's alerts\n"
    );
    // Nothing written beside the config.
    assert!(!d.path().join("scangate-repeat.svg").exists());

    let out: Outcome = cli_cfg(&cfg, &["labels", "--format", "text", "--out", "x"]).into();
    assert_eq!(out.code, Some(2), "{out}");
    assert!(
        out.stderr.contains("--out applies only to --format svg"),
        "{out}"
    );
}

#[test]
fn labels_refuse_a_control_that_reads_as_a_product() {
    let d = tempdir("scangate-labels-");
    // A GS1 element string with a GTIN: a scanner that sends no AIM id
    // would deliver it as a pick.
    let cfg = config(d.path(), "repeat = \"0100307773105025\"\n");
    let out_dir = d.path().join("labels");
    let out: Outcome = cli_cfg(&cfg, &["labels", "--out", out_dir.to_str().unwrap()]).into();
    assert_eq!(out.code, Some(2), "{out}");
    assert!(out.stderr.contains("`controls.repeat`"), "{out}");
    assert!(out.stderr.contains("GTIN 00307773105025"), "{out}");
    assert!(out.stderr.contains("Fix:"), "{out}");
    assert!(out.stdout.is_empty(), "{out}");
    assert!(!out_dir.exists(), "nothing is written for a refused config");

    // check-config refuses it the same way.
    let out: Outcome = cli_cfg(&cfg, &["check-config"]).into();
    assert_eq!(out.code, Some(2), "{out}");
    assert!(out.stderr.contains("`controls.repeat`"), "{out}");
}

/// The test's decoder against a symbol worked by hand, so a fault in it
/// cannot pass the round trip above by agreeing with the encoder.
#[test]
fn labels_test_decoder_reads_a_hand_made_symbol() {
    // START B, "A" (33), check (104 + 33) mod 103 = 34, STOP.
    let widths: String = [WIDTHS[104], WIDTHS[33], WIDTHS[34], WIDTHS[106]].concat();
    let mut bars = Vec::new();
    let mut x = 10.0;
    for (i, w) in widths
        .chars()
        .map(|c| f64::from(c.to_digit(10).unwrap()))
        .enumerate()
    {
        if i % 2 == 0 {
            bars.push((x * 0.5, w * 0.5));
        }
        x += w;
    }
    let read = decode(&bars, (x + 10.0) * 0.5).unwrap();
    assert_eq!((read.text.as_str(), read.check), ("A", 34));
    assert_eq!(read.quiet, (10.0, 10.0));
    // A wrong check symbol is refused.
    let bad: String = [WIDTHS[104], WIDTHS[33], WIDTHS[35], WIDTHS[106]].concat();
    let mut bars = Vec::new();
    let mut x = 0.0;
    for (i, w) in bad
        .chars()
        .map(|c| f64::from(c.to_digit(10).unwrap()))
        .enumerate()
    {
        if i % 2 == 0 {
            bars.push((x, w));
        }
        x += w;
    }
    assert!(decode(&bars, x).unwrap_err().contains("check symbol 35"));
}

#[test]
fn labels_never_write_through_a_link_at_a_label_name() {
    let d = tempdir("scangate-labels-link-");
    let cfg = config(d.path(), CUSTOM);
    let out_dir = d.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let victim = d.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    std::os::unix::fs::symlink(&victim, out_dir.join("scangate-repeat.svg")).unwrap();
    let out: Outcome = cli_cfg(&cfg, &["labels", "--out", out_dir.to_str().unwrap()]).into();
    assert_ne!(out.code, Some(0), "{out}");
    assert!(out.stderr.contains("is a symbolic link"), "{out}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    // The control: without the link, the same command writes the label.
    std::fs::remove_file(out_dir.join("scangate-repeat.svg")).unwrap();
    let out: Outcome = cli_cfg(&cfg, &["labels", "--out", out_dir.to_str().unwrap()]).into();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(
        std::fs::metadata(out_dir.join("scangate-repeat.svg"))
            .unwrap()
            .len()
            > 0
    );
}
