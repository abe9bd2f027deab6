//! A decision record packed from its fields ([`pack_decision`]): the bytes
//! [`super::pack`] makes of its serde JSON, without writing that JSON and
//! parsing it back. The chain hashes the JSON the packed bytes unpack to,
//! so what is stored and what was hashed are the same by construction;
//! tests (and every debug build, at every append) hold that JSON equal to
//! the record's serde JSON, the canonical form.

use super::{ARRAY, FALSE, INT, NULL, OBJECT, TRUE, string_value, varint, zigzag};
use crate::audit::{AuditAmbiguous, AuditDeclared, AuditRecord};
use crate::model::AlertFound;

/// A field name's byte: its position in [`super::KEYS`] (evaluated at
/// compile time through `k!`: a name not in the table does not compile).
const fn key(name: &str) -> u8 {
    let name = name.as_bytes();
    let mut k = 0;
    while k < super::KEYS.len() {
        let candidate = super::KEYS[k].as_bytes();
        if candidate.len() == name.len() {
            let mut i = 0;
            while i < name.len() && candidate[i] == name[i] {
                i += 1;
            }
            if i == name.len() {
                return k as u8;
            }
        }
        k += 1;
    }
    panic!("a packed record's field name is not in KEYS")
}

/// An object's entries written after its tag and count byte; the count is
/// set when it is finished.
struct Object<'o> {
    out: &'o mut Vec<u8>,
    count_at: usize,
}

impl<'o> Object<'o> {
    fn open(out: &'o mut Vec<u8>) -> Object<'o> {
        out.push(OBJECT);
        let count_at = out.len();
        out.push(0);
        Object { out, count_at }
    }

    fn key(&mut self, k: u8) -> &mut Vec<u8> {
        // (At most 24 entries: a record's fields.)
        self.out[self.count_at] += 1;
        self.out.push(k);
        self.out
    }

    fn str(&mut self, k: u8, s: &str) {
        let out = self.key(k);
        string(out, s);
    }

    fn opt_str(&mut self, k: u8, s: Option<&str>) {
        match s {
            Some(s) => self.str(k, s),
            None => self.key(k).push(NULL),
        }
    }

    fn int(&mut self, k: u8, n: i64) {
        let out = self.key(k);
        out.push(INT);
        varint(out, zigzag(n));
    }

    fn bool(&mut self, k: u8, b: bool) {
        self.key(k).push(if b { TRUE } else { FALSE });
    }
}

/// A string value: its bytes as they stand between the quotes of its JSON
/// (escaped as serde_json escapes them), then packed as [`super::pack`]
/// packs them.
fn string(out: &mut Vec<u8>, s: &str) {
    if s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        let json = serde_json::to_string(s).expect("a string always serialises");
        string_value(out, &json.as_bytes()[1..json.len() - 1]);
    } else {
        string_value(out, s.as_bytes());
    }
}

/// A field name's byte, found when the crate is compiled.
macro_rules! k {
    ($name:literal) => {
        const { key($name) }
    };
}

/// A decision record (no `conflict`, `state_reset` or `pruned`) packed
/// into `out` (cleared first); `false` for any other record. Every struct
/// is taken apart field by field (no `..`): a field added to a record does
/// not compile until it is packed here too.
pub fn pack_decision(rec: &AuditRecord, out: &mut Vec<u8>) -> bool {
    let AuditRecord {
        seq,
        at,
        gateway,
        scanner,
        scan_uuid,
        captured_at,
        clock_synced,
        facility_at,
        clock_offset_ms,
        clock_error_ms,
        decision,
        content_key,
        twin_uuid,
        reason,
        raw_len,
        conflict,
        state_reset,
        ledger_hash,
        pruned,
        ambiguous,
        declared,
        dea_schedule,
        alerts,
        acknowledged,
    } = rec;
    // (An array's count is one byte, as `pack` counts it.)
    let too_many = alerts.as_ref().map_or(0, Vec::len) > usize::from(u8::MAX)
        || acknowledged.as_ref().map_or(0, Vec::len) > usize::from(u8::MAX);
    if conflict.is_some() || state_reset.is_some() || pruned.is_some() || too_many {
        return false;
    }
    out.clear();
    out.push(super::FORMAT);
    let mut o = Object::open(out);
    o.int(k!("seq"), *seq);
    o.str(k!("at"), at);
    o.str(k!("gateway"), gateway);
    o.str(k!("scanner"), scanner);
    o.str(k!("scan_uuid"), scan_uuid);
    o.str(k!("captured_at"), captured_at);
    o.bool(k!("clock_synced"), *clock_synced);
    if let Some(at) = facility_at {
        o.str(k!("facility_at"), at);
    }
    if let Some(ms) = clock_offset_ms {
        o.int(k!("clock_offset_ms"), *ms);
    }
    if let Some(ms) = clock_error_ms {
        o.int(k!("clock_error_ms"), *ms);
    }
    o.str(k!("decision"), decision.as_str());
    o.opt_str(k!("content_key"), content_key.as_deref());
    o.opt_str(k!("twin_uuid"), twin_uuid.as_deref());
    o.opt_str(k!("reason"), reason.as_deref());
    o.int(k!("raw_len"), *raw_len);
    if let Some(hash) = ledger_hash {
        o.str(k!("ledger_hash"), hash);
    }
    if let Some(AuditAmbiguous {
        why,
        policy,
        window_ms,
    }) = ambiguous
    {
        let mut inner = Object::open(o.key(k!("ambiguous")));
        inner.str(k!("why"), why);
        inner.str(k!("policy"), policy);
        inner.int(k!("window_ms"), *window_ms);
    }
    if let Some(AuditDeclared { control, by }) = declared {
        let mut inner = Object::open(o.key(k!("declared")));
        inner.str(k!("control"), control);
        inner.str(k!("by"), by);
    }
    if let Some(schedule) = dea_schedule {
        o.str(k!("dea_schedule"), schedule);
    }
    if let Some(alerts) = alerts {
        let out = o.key(k!("alerts"));
        out.extend_from_slice(&[ARRAY, alerts.len() as u8]);
        for AlertFound {
            kind,
            recall_number,
            recall_class,
            recall_lot,
            first_received_at,
            first_received_gateway,
            first_received_scanner,
            first_received_scan,
        } in alerts
        {
            let mut inner = Object::open(&mut *out);
            inner.str(k!("kind"), kind.as_str());
            for (k, v) in [
                (k!("recall_number"), recall_number),
                (k!("recall_class"), recall_class),
                (k!("recall_lot"), recall_lot),
                (k!("first_received_at"), first_received_at),
                (k!("first_received_gateway"), first_received_gateway),
                (k!("first_received_scanner"), first_received_scanner),
                (k!("first_received_scan"), first_received_scan),
            ] {
                if let Some(v) = v {
                    inner.str(k, v);
                }
            }
        }
    }
    if let Some(reads) = acknowledged {
        let out = o.key(k!("acknowledged"));
        out.extend_from_slice(&[ARRAY, reads.len() as u8]);
        for uuid in reads {
            string(out, uuid);
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::AuditPruned;
    use crate::model::ScanState;

    fn commit() -> AuditRecord {
        AuditRecord {
            seq: 123_456,
            at: "2026-12-03T17:32:47.123Z".into(),
            gateway: "gw-1".into(),
            scanner: "counter-1".into(),
            scan_uuid: "019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a30".into(),
            captured_at: "2026-12-03T17:32:47.100Z".into(),
            clock_synced: true,
            facility_at: None,
            clock_offset_ms: None,
            clock_error_ms: None,
            decision: ScanState::Committed,
            content_key: Some(
                "e9ed54d3a1a38a0e6c0c5c2a2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b".into(),
            ),
            twin_uuid: None,
            reason: None,
            raw_len: 58,
            conflict: None,
            state_reset: None,
            ledger_hash: Some(
                "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0".into(),
            ),
            pruned: None,
            ambiguous: None,
            declared: None,
            dea_schedule: None,
            alerts: None,
            acknowledged: None,
        }
    }

    /// Packed from its fields, a record unpacks to its serde JSON, and its
    /// bytes are the ones packing that JSON makes.
    fn same_as_serde(rec: &AuditRecord) {
        let json = serde_json::to_string(rec).unwrap();
        let mut direct = Vec::new();
        assert!(pack_decision(rec, &mut direct), "{json}");
        assert_eq!(super::super::unpack_record(&direct).unwrap(), json);
        let mut via_json = Vec::new();
        assert!(super::super::pack(&json, &mut via_json), "{json}");
        assert_eq!(direct, via_json, "{json}");
    }

    #[test]
    fn every_field_packs_as_its_json_would() {
        same_as_serde(&commit());
        let mut echo = commit();
        echo.seq = -1;
        echo.decision = ScanState::Suppressed;
        echo.twin_uuid = Some("019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a31".into());
        echo.ledger_hash = None;
        echo.facility_at = Some("2026-12-03T17:32:47.090Z".into());
        echo.clock_offset_ms = Some(-10);
        echo.clock_error_ms = Some(0);
        echo.clock_synced = false;
        echo.ambiguous = Some(AuditAmbiguous {
            why: crate::audit::AMBIGUOUS_WHY.into(),
            policy: "ask".into(),
            window_ms: i64::MAX,
        });
        echo.declared = Some(AuditDeclared {
            control: "quantity 3".into(),
            by: "019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a32".into(),
        });
        echo.acknowledged = Some(vec![
            "019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a33".into(),
            "not a uuid".into(),
        ]);
        echo.dea_schedule = Some("CII".into());
        echo.alerts = Some(vec![
            AlertFound {
                recall_number: Some("D-0123-2026".into()),
                recall_class: Some("Class II".into()),
                recall_lot: Some("lot_not_read".into()),
                ..AlertFound::of(crate::model::Alert::Recalled)
            },
            AlertFound {
                first_received_at: Some("2026-11-02T09:15:00.250Z".into()),
                first_received_gateway: Some("gw-2".into()),
                first_received_scanner: Some("receiving-1".into()),
                first_received_scan: Some("019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a34".into()),
                ..AlertFound::of(crate::model::Alert::Suspect)
            },
            AlertFound::of(crate::model::Alert::Expired),
        ]);
        same_as_serde(&echo);
        // Strings that need escapes, that only look like a key, a word, a
        // time or a UUID, and an empty one.
        let mut odd = commit();
        odd.scanner = "counter \"1\" \\ \n\t\u{1}é".into();
        odd.reason = Some("committed".into());
        odd.gateway = String::new();
        odd.content_key = None;
        odd.scan_uuid = "019AE4C4-0D52-7C41-9F8E-2F0B7D1E6A30".into();
        odd.at = "2026-12-03T17:32:47Z".into();
        odd.captured_at = "not a time".into();
        odd.decision = ScanState::Rejected;
        odd.raw_len = i64::MIN;
        odd.dea_schedule = Some("unknown".into());
        odd.alerts = Some(Vec::new());
        odd.acknowledged = Some(Vec::new());
        same_as_serde(&odd);
    }

    #[test]
    fn records_that_are_not_decisions_are_left_to_the_json_path() {
        let mut checkpoint = commit();
        checkpoint.pruned = Some(AuditPruned {
            first_seq: 1,
            through_seq: 2,
            through_hash: "00".into(),
            ledger_entries: 0,
            archives: vec![],
            keep_days: 730,
            unacknowledged: None,
        });
        assert!(!pack_decision(&checkpoint, &mut Vec::new()));
    }
}
