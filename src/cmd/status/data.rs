//! The product and recall data in `status`: each one's date, age and
//! size, or that it is not loaded (the checks that need it are off); data
//! older than `[checks] max_data_age_days` is a reason.

use crate::config::Config;
use crate::products::{Catalog, DataInfo};
use chrono::NaiveDate;
use serde::Serialize;
use std::collections::BTreeMap;

/// Product or recall data, as `status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct DataView {
    /// Imported and readable: the checks that need it are on.
    pub loaded: bool,
    /// The file it was imported from.
    pub source: Option<String>,
    /// The data's own date.
    pub published: Option<NaiveDate>,
    /// Whole days from that date to today.
    pub age_days: Option<i64>,
    /// When it was imported (Unix ms).
    pub imported_ms: Option<i64>,
    /// What it holds (`products`, `packages`; `recalls`).
    pub rows: BTreeMap<String, u64>,
    /// `[checks] max_data_age_days`.
    pub max_age_days: u64,
}

/// The product data's view and the recall data's, adding to `degraded`
/// the data that is too old or cannot be read.
pub fn views(cfg: &Config, today: NaiveDate, degraded: &mut Vec<String>) -> (DataView, DataView) {
    let catalog = Catalog::new(&cfg.state_dir());
    let max = cfg.checks.max_data_age_days;
    let products = view(
        catalog.products_info(),
        "product data (FDA NDC Directory)",
        "scangate products import ndctext.zip",
        today,
        max,
        degraded,
    );
    let recalls = view(
        catalog.recalls_info(),
        "recall data (openFDA drug recalls)",
        "scangate recalls import drug-enforcement-0001-of-0001.json.zip",
        today,
        max,
        degraded,
    );
    (products, recalls)
}

fn view(
    info: Result<Option<DataInfo>, crate::products::ProductsError>,
    what: &str,
    import: &str,
    today: NaiveDate,
    max: u64,
    degraded: &mut Vec<String>,
) -> DataView {
    let info = info.unwrap_or_else(|e| {
        degraded.push(format!(
            "{what} cannot be read, so the checks that need it are off: {e}. Fix: `{import}` with a new download"
        ));
        None
    });
    let Some(info) = info else {
        return DataView {
            loaded: false,
            source: None,
            published: None,
            age_days: None,
            imported_ms: None,
            rows: BTreeMap::new(),
            max_age_days: max,
        };
    };
    let age = info.age_days(today);
    if age > max as i64 {
        degraded.push(format!(
            "{what} is {age} days old (of {}), more than [checks] max_data_age_days = {max}: reads are checked against old data. Fix: download it again and `{import}`",
            info.published
        ));
    }
    DataView {
        loaded: true,
        source: Some(info.source),
        published: Some(info.published),
        age_days: Some(age),
        imported_ms: Some(info.imported_ms),
        rows: info.rows.into_iter().collect(),
        max_age_days: max,
    }
}

/// `view`'s line of the text status, named `name`.
pub fn render(name: &str, view: &DataView) -> String {
    use crate::capture::clock::rfc3339_ms;
    match (&view.published, view.age_days) {
        (Some(date), Some(age)) => {
            let rows: Vec<String> = view.rows.iter().map(|(k, n)| format!("{n} {k}")).collect();
            format!(
                "{name}: data of {date} ({age} day(s) old{}), {}, imported {} from {}",
                if age > view.max_age_days as i64 {
                    ", TOO OLD"
                } else {
                    ""
                },
                rows.join(", "),
                view.imported_ms.map_or_else(String::new, rfc3339_ms),
                view.source.as_deref().unwrap_or("?")
            )
        }
        _ => format!("{name}: not loaded: the checks that need it are off"),
    }
}
