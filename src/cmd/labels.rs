//! `scangate labels [--config FILE] [--format svg|zpl|text] [--out DIR]`:
//! print the control labels (REPEAT, and QUANTITY N for each of
//! `[controls] quantities`) with the contents the config gives them, so
//! the labels at the counter are the ones this gateway recognises.
//!
//! - `svg` (default): `scangate-repeat.svg`, `scangate-qty-N.svg` in `--out`
//!   (default: the current directory; created if missing), and an index on
//!   stdout, one line a file: its path, its content, what it does (tabs
//!   between).
//! - `zpl`: ZPL II on stdout, one format per label, for a 203 dpi Zebra
//!   printer: `scangate labels --format zpl | nc PRINTER 9100`.
//! - `text`: each content and what it does, a tab between, one a line.
//!
//! The forms themselves are drawn by [`crate::controls::print`].
//!
//! Exit codes: 0 printed; 2 a configuration error, or `--out` with a
//! format that prints to stdout; 4 a file or stdout cannot be written.

use super::{Failure, load};
use crate::cli::args::LabelFormat;
use crate::controls::{Label, print};
use crate::exit::Exit;
use std::io::Write;
use std::path::Path;

/// Arguments of `scangate labels` (defined with the other clap definitions).
pub use crate::cli::args::LabelsArgs;

/// Run `scangate labels`.
pub fn run(args: &LabelsArgs) -> Result<Exit, Failure> {
    if args.out.is_some() && args.format != LabelFormat::Svg {
        return Err(Failure::Usage(
            "--out applies only to --format svg: zpl and text are printed on stdout. Fix: drop --out, and redirect stdout to a file or a printer (`| nc PRINTER 9100`)".into(),
        ));
    }
    let cfg = load(&args.config)?;
    let labels = cfg.controls.labels();
    let out = match args.format {
        LabelFormat::Svg => write_svgs(&labels, args.out.as_deref().unwrap_or(Path::new(".")))?,
        LabelFormat::Zpl => print::zpl(&labels),
        LabelFormat::Text => print::text(&labels),
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| Failure::Runtime(format!("cannot write to stdout: {e}")))?;
    Ok(Exit::Ok)
}

/// Write each label's SVG into `dir`; the index of what was written.
fn write_svgs(labels: &[Label], dir: &Path) -> Result<String, Failure> {
    std::fs::create_dir_all(dir).map_err(|e| {
        Failure::Runtime(format!(
            "cannot create the directory {} for the labels: {e}. Fix: name a directory you may write with --out",
            dir.display()
        ))
    })?;
    let mut index = String::new();
    for label in labels {
        let path = dir.join(print::file_name(label));
        // (Never through a link or into a FIFO put at a label's name.)
        crate::files::open(&path, crate::files::Access::Replace)
            .and_then(|mut f| {
                std::io::Write::write_all(&mut f, print::svg(label).as_bytes()).map_err(|source| {
                    crate::files::FileError::Io {
                        path: path.clone(),
                        source,
                    }
                })
            })
            .map_err(|e| match e {
                io @ crate::files::FileError::Io { .. } => Failure::Runtime(format!(
                    "cannot write {io}. Fix: name a directory you may write with --out"
                )),
                planted => Failure::Runtime(planted.to_string()),
            })?;
        index.push_str(&format!(
            "{}\t{}\t{}\n",
            path.display(),
            label.content,
            label.control.caption()
        ));
    }
    Ok(index)
}
