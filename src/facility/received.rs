//! Serialised items received in the facility (`received.lua`): the first
//! `receive` read of each GTIN + serial, kept under
//! `scangate:{<facility>}:rcv:<gtin>:<serial>` for `[checks]
//! serial_retention_days`, so a later receipt on any gateway of the
//! facility is told `suspect` (`claimer::claims`, before the claims are
//! sent). The facility-wide counterpart of `checks::received`.

use super::{Facility, FacilityError};
use crate::checks::received::Receipt;
use crate::model::Received;
use std::time::Duration;

/// The script, run with `EVALSHA` (loaded with `SCRIPT LOAD` when the
/// server lacks it: the grants a gateway's ACL user already has).
const RECEIVED_LUA: &str = include_str!("received.lua");

impl Facility {
    /// For each of `receipts` (reads `gateway` is about to claim, or
    /// committed), the facility's first receipt of its item if it had one
    /// (the read's own when kept before: a retried round); `None` when it
    /// had none, and the read's is kept now, until `keep` after its
    /// capture time.
    pub fn receive_serials(
        &mut self,
        gateway: &str,
        receipts: &[Receipt<'_>],
        keep: Duration,
    ) -> Result<Vec<Option<Received>>, FacilityError> {
        if receipts.is_empty() {
            return Ok(Vec::new());
        }
        let script = redis::Script::new(RECEIVED_LUA);
        let mut call = script.prepare_invoke();
        for r in receipts {
            call.key(self.key("rcv", &format!("{}:{}", r.gtin, r.serial)));
        }
        for r in receipts {
            call.arg(format!(
                "{} {} {} {}",
                r.scan_uuid, r.at_ms, gateway, r.scanner
            ));
        }
        let now_ms = chrono::Utc::now().timestamp_millis();
        let keep_ms = keep.as_millis() as i64;
        for r in receipts {
            // (At least 1 ms: PX refuses 0. A receipt past its retention
            // is not asked: the callers pick them within it.)
            call.arg((keep_ms - (now_ms - r.at_ms).max(0)).clamp(1, keep_ms));
        }
        let held: Vec<Option<String>> =
            call.invoke(&mut self.conn).map_err(|e| self.classify(e))?;
        if held.len() != receipts.len() {
            return Err(FacilityError::Protocol {
                url: self.url.clone(),
                reply: format!("{} receipts for {} asked", held.len(), receipts.len()),
            });
        }
        held.iter()
            .map(|text| match text {
                None => Ok(None),
                Some(text) => parse(text)
                    .map(Some)
                    .ok_or_else(|| FacilityError::Protocol {
                        url: self.url.clone(),
                        reply: format!("{text:?} where a receipt was due"),
                    }),
            })
            .collect()
    }
}

/// `"<scan_uuid> <captured_ms> <gateway> <scanner>"` (the scanner last:
/// the only part that may hold a space).
fn parse(text: &str) -> Option<Received> {
    let mut parts = text.splitn(4, ' ');
    Some(Received {
        scan_uuid: parts.next()?.to_string(),
        at_ms: parts.next()?.parse().ok()?,
        gateway: parts.next()?.to_string(),
        scanner: parts.next()?.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receipt_reads_back_as_written() {
        let r = parse("019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a30 1764950400123 gw-1 receiving dock")
            .unwrap();
        assert_eq!(r.scan_uuid, "019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a30");
        assert_eq!(r.at_ms, 1_764_950_400_123);
        assert_eq!(r.gateway, "gw-1");
        assert_eq!(r.scanner, "receiving dock");
        assert_eq!(parse("019ae4c4 notanumber gw-1 s"), None);
        assert_eq!(parse("019ae4c4 1"), None);
    }
}
