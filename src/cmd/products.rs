//! `scangate products import FILE`, `products show NDC|GTIN [--lot L]
//! [--json]` and `scangate recalls import FILE`: the product and recall
//! data of [`crate::products`].

use super::{Failure, load};
use crate::cli::args::{ProductsCommand, RecallsCommand};
use crate::exit::Exit;
use crate::products::{Catalog, Imported, LotMatch, Product, ProductsError, RecallMatch};
use serde::Serialize;
use std::time::Instant;

/// Run a `products` subcommand.
pub fn run(command: ProductsCommand) -> Result<Exit, Failure> {
    match command {
        ProductsCommand::Import { config, file } => {
            let cfg = load(&config)?;
            let started = Instant::now();
            let done = crate::products::import_products(&cfg.state_dir(), &file)?;
            report(&done, started);
            Ok(Exit::Ok)
        }
        ProductsCommand::Show {
            config,
            ndc,
            lot,
            json,
        } => show(&load(&config)?, &ndc, lot.as_deref(), json),
    }
}

/// Run a `recalls` subcommand.
pub fn recalls(command: RecallsCommand) -> Result<Exit, Failure> {
    match command {
        RecallsCommand::Import { config, file } => {
            let cfg = load(&config)?;
            let started = Instant::now();
            let done = crate::products::import_recalls(&cfg.state_dir(), &file)?;
            report(&done, started);
            Ok(Exit::Ok)
        }
    }
}

fn report(done: &Imported, started: Instant) {
    let rows: Vec<String> = done.rows.iter().map(|(k, n)| format!("{n} {k}")).collect();
    let left: Vec<String> = done
        .left_out
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    println!(
        "imported {} (data of {}) into {} in {:.1} s{}",
        rows.join(", "),
        done.published,
        done.path.display(),
        started.elapsed().as_secs_f64(),
        if left.is_empty() {
            String::new()
        } else {
            format!("; left out: {}", left.join(", "))
        }
    );
}

/// A package with the recalls of it, as `show --json` prints it.
#[derive(Serialize)]
struct Shown {
    #[serde(flatten)]
    product: Product,
    excluded: bool,
    recalls: Vec<RecallMatch>,
}

fn show(
    cfg: &crate::config::Config,
    text: &str,
    lot: Option<&str>,
    json: bool,
) -> Result<Exit, Failure> {
    let catalog = Catalog::new(&cfg.state_dir());
    let Some(info) = catalog.products_info()? else {
        eprintln!(
            "scangate: no product data in {}: the checks that need it are off. Fix: `scangate products import ndctext.zip` (the FDA NDC Directory)",
            cfg.state_dir().display()
        );
        return Ok(Exit::CheckFailed);
    };
    let recall_data = catalog.recalls_info()?.is_some();
    let mut shown = Vec::new();
    for product in catalog.lookup(text)? {
        let recalls = if recall_data {
            catalog.recalls_for(&product.package_ndc, lot)?
        } else {
            Vec::new()
        };
        shown.push(Shown {
            excluded: product.excluded(),
            product,
            recalls,
        });
    }
    if json {
        #[derive(Serialize)]
        struct Out<'a> {
            query: &'a str,
            packages: &'a [Shown],
            products_published: chrono::NaiveDate,
            recalls_loaded: bool,
        }
        let out = Out {
            query: text,
            packages: &shown,
            products_published: info.published,
            recalls_loaded: recall_data,
        };
        println!("{}", serde_json::to_string(&out).expect("serialises"));
    } else if shown.is_empty() {
        eprintln!(
            "scangate: no package of the NDC Directory (data of {}) has {text:?}",
            info.published
        );
    } else {
        for s in &shown {
            print!("{}", render(s, recall_data));
        }
    }
    Ok(if shown.is_empty() {
        Exit::CheckFailed
    } else {
        Exit::Ok
    })
}

fn render(s: &Shown, recall_data: bool) -> String {
    use std::fmt::Write;
    let p = &s.product;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "package {} (NDC11 {}, GTIN {})",
        p.package_ndc, p.ndc11, p.gtin14
    );
    let _ = writeln!(out, "  product: {} {}", p.product_ndc, p.name);
    let _ = writeln!(out, "  package: {}", p.package_description);
    let _ = writeln!(
        out,
        "  DEA schedule: {}",
        p.dea_schedule.as_deref().unwrap_or("none")
    );
    let _ = writeln!(
        out,
        "  marketing end: {}",
        p.marketing_end
            .map_or_else(|| "none".to_string(), |d| d.to_string())
    );
    let _ = writeln!(out, "  sample: {}", if p.sample { "yes" } else { "no" });
    let _ = writeln!(
        out,
        "  in the directory: {} (NDC_EXCLUDE_FLAG {})",
        if s.excluded { "EXCLUDED" } else { "yes" },
        if p.exclude_flag.is_empty() {
            "empty"
        } else {
            &p.exclude_flag
        }
    );
    if !recall_data {
        let _ = writeln!(out, "  recalls: no recall data imported");
    } else if s.recalls.is_empty() {
        let _ = writeln!(out, "  recalls: none ongoing");
    }
    for r in &s.recalls {
        let _ = writeln!(
            out,
            "  RECALL {} ({}): {}",
            r.recall_number,
            r.classification,
            match r.lot {
                LotMatch::Lot => "names this lot",
                LotMatch::EveryLot => "names no lot: every lot",
                LotMatch::LotNotRead => "names lots; give --lot to tell whether this one",
            }
        );
    }
    out
}

impl From<ProductsError> for Failure {
    fn from(e: ProductsError) -> Self {
        Failure::Products(e)
    }
}
