//! An audit record as the `audit` table stores it (migration 8).
//!
//! The chain hashes a record's canonical JSON, and always will: `hash =
//! SHA-256(prev_hash || "\n" || json)`, the JSON the journal, the archives
//! and `audit trace` show. Stored, a decision record is that JSON packed
//! without loss ([`pack_decision`]): field names as one byte each (`KEYS`), a
//! 64-digit hex string as its 32 bytes, a UUID as its 16, a timestamp as
//! its milliseconds, a common word (`WORDS`) as one byte, integers as
//! varints, every other string byte for byte as it stands between its
//! quotes. [`unpack_record`] writes the same JSON back, so `audit verify`
//! hashes exactly what was hashed at the write: the chain packs a decision
//! from its fields ([`pack_decision`]) and hashes the JSON the packed
//! bytes unpack to. Other records (a checkpoint, a state reset, a
//! conflict: rare, and found by SQL `LIKE`) are stored as their JSON,
//! TEXT. Records written before migration 8 stay TEXT.
//!
//! The first byte is [`FORMAT`]; the tables `KEYS` and `WORDS` are
//! append-only (a packed record names its entries by position).

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ValueRef};

mod fields;
pub use fields::pack_decision;

/// The first byte of a packed record: the packing's version.
pub const FORMAT: u8 = 1;

/// Field names, by their byte (append only).
const KEYS: &[&str] = &[
    "seq",
    "at",
    "gateway",
    "scanner",
    "scan_uuid",
    "captured_at",
    "clock_synced",
    "facility_at",
    "clock_offset_ms",
    "clock_error_ms",
    "decision",
    "content_key",
    "twin_uuid",
    "reason",
    "raw_len",
    "conflict",
    "state_reset",
    "ledger_hash",
    "pruned",
    "ambiguous",
    "declared",
    "other_scan_uuid",
    "other_gateway",
    "why",
    "policy",
    "window_ms",
    "control",
    "by",
    "dea_schedule",
    "alerts",
    "kind",
    "recall_number",
    "recall_class",
    "recall_lot",
    "acknowledged",
    "first_received_at",
    "first_received_gateway",
    "first_received_scanner",
    "first_received_scan",
];

/// String values stored as one byte (append only).
const WORDS: &[&str] = &[
    "pending",
    "unresolved",
    "committed",
    "suppressed",
    "rejected",
    "control",
    "window",
    "double-fire",
    "ask",
    "repeat",
    super::AMBIGUOUS_WHY,
    "recalled",
    "expired",
    "unknown",
    "expiring",
    "lot",
    "every_lot",
    "lot_not_read",
    "acknowledge",
    "suspect",
];

// Value tags.
const NULL: u8 = 0;
const FALSE: u8 = 1;
const TRUE: u8 = 2;
const INT: u8 = 3;
const NUMBER: u8 = 4;
const STRING: u8 = 5;
const HEX32: u8 = 6;
const UUID: u8 = 7;
const TIME: u8 = 8;
const ARRAY: u8 = 9;
const OBJECT: u8 = 10;
const WORD: u8 = 11;
/// A key byte: the key's text follows.
const RAW_KEY: u8 = 0xff;

/// The record's JSON packed into `out` (cleared first), if it unpacks to
/// `json` byte for byte: the packing defined on JSON, which tests hold
/// [`pack_decision`] to (same bytes) and use to write records as a
/// tamperer would.
pub fn pack(json: &str, out: &mut Vec<u8>) -> bool {
    out.clear();
    out.push(FORMAT);
    let mut p = Packer {
        s: json.as_bytes(),
        i: 0,
        out,
    };
    if p.value().is_none() || p.i != p.s.len() {
        return false;
    }
    let mut back = Vec::with_capacity(json.len());
    unpack_into(out, &mut back).is_ok() && back == json.as_bytes()
}

/// The JSON of a packed record.
pub fn unpack_record(bytes: &[u8]) -> Result<String, String> {
    // (A packed decision is about a third of its JSON; room for all of it.)
    let mut out = Vec::with_capacity(bytes.len() * 4);
    unpack_into(bytes, &mut out)?;
    String::from_utf8(out).map_err(|e| e.to_string())
}

/// [`unpack_record`], appended to `out`.
fn unpack_into(bytes: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let mut u = Unpacker {
        b: bytes,
        i: 0,
        out,
    };
    if u.byte()? != FORMAT {
        return Err(format!("unknown record packing {}", bytes[0]));
    }
    u.value(0)?;
    if u.i != bytes.len() {
        return Err(format!("{} bytes after the record", bytes.len() - u.i));
    }
    Ok(())
}

/// A stored record's JSON: TEXT as it is, a BLOB unpacked.
pub fn record_json(v: ValueRef<'_>) -> Result<String, String> {
    match v {
        ValueRef::Text(t) => String::from_utf8(t.to_vec()).map_err(|e| e.to_string()),
        ValueRef::Blob(b) => unpack_record(b),
        _ => Err("not a record (neither TEXT nor BLOB)".into()),
    }
}

/// A stored record read as its JSON ([`record_json`]).
pub struct RecordJson(pub String);

impl FromSql for RecordJson {
    fn column_result(v: ValueRef<'_>) -> FromSqlResult<Self> {
        record_json(v)
            .map(RecordJson)
            .map_err(|e| FromSqlError::Other(e.into()))
    }
}

struct Packer<'a, 'o> {
    s: &'a [u8],
    i: usize,
    out: &'o mut Vec<u8>,
}

impl<'a> Packer<'a, '_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn literal(&mut self, word: &[u8], tag: u8) -> Option<()> {
        self.s[self.i..].starts_with(word).then(|| {
            self.i += word.len();
            self.out.push(tag);
        })
    }

    fn value(&mut self) -> Option<()> {
        match self.peek()? {
            b'n' => self.literal(b"null", NULL),
            b't' => self.literal(b"true", TRUE),
            b'f' => self.literal(b"false", FALSE),
            b'"' => {
                let raw = self.string()?;
                string_value(self.out, raw);
                Some(())
            }
            b'{' => self.object(),
            b'[' => self.array(),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// The raw bytes between a string's quotes (escapes as written).
    fn string(&mut self) -> Option<&'a [u8]> {
        let s = self.s;
        let start = self.i + 1;
        let mut j = start;
        loop {
            match *s.get(j)? {
                b'"' => break,
                b'\\' => j += 2,
                _ => j += 1,
            }
        }
        self.i = j + 1;
        Some(&s[start..j])
    }

    fn number(&mut self) -> Option<()> {
        let start = self.i;
        while matches!(
            self.peek(),
            Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
        ) {
            self.i += 1;
        }
        let raw = &self.s[start..self.i];
        let text = std::str::from_utf8(raw).ok()?;
        match text.parse::<i64>() {
            Ok(n) if itoa::Buffer::new().format(n).as_bytes() == raw => {
                self.out.push(INT);
                varint(self.out, zigzag(n));
            }
            _ => {
                self.out.push(NUMBER);
                varint(self.out, raw.len() as u64);
                self.out.extend_from_slice(raw);
            }
        }
        Some(())
    }

    /// `[` or `{` … its closing byte: the entries, counted in one byte.
    fn entries(
        &mut self,
        tag: u8,
        close: u8,
        mut entry: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        self.i += 1;
        self.out.push(tag);
        let count_at = self.out.len();
        self.out.push(0);
        if self.peek()? == close {
            self.i += 1;
            return Some(());
        }
        let mut n = 0u8;
        loop {
            entry(self)?;
            n = n.checked_add(1)?;
            match self.peek()? {
                b',' => self.i += 1,
                c if c == close => {
                    self.i += 1;
                    break;
                }
                _ => return None,
            }
        }
        self.out[count_at] = n;
        Some(())
    }

    fn object(&mut self) -> Option<()> {
        self.entries(OBJECT, b'}', |p| {
            if p.peek()? != b'"' {
                return None;
            }
            let key = p.string()?;
            match KEYS.iter().position(|k| k.as_bytes() == key) {
                Some(k) => p.out.push(k as u8),
                None => {
                    p.out.push(RAW_KEY);
                    varint(p.out, key.len() as u64);
                    p.out.extend_from_slice(key);
                }
            }
            if p.peek()? != b':' {
                return None;
            }
            p.i += 1;
            p.value()
        })
    }

    fn array(&mut self) -> Option<()> {
        self.entries(ARRAY, b']', Self::value)
    }
}

/// A string value packed from the raw bytes between its quotes: a UUID or
/// a 64-digit hex string as its bytes, a [`WORDS`] word as its byte, a
/// timestamp as its milliseconds, anything else as it stands.
fn string_value(out: &mut Vec<u8>, raw: &[u8]) {
    let text = std::str::from_utf8(raw).unwrap_or("\\");
    if let Some(bytes) = crate::store::packed::packed(text).bytes() {
        out.push(if bytes.len() == 16 { UUID } else { HEX32 });
        out.extend_from_slice(bytes);
    } else if let Some(w) = WORDS.iter().position(|w| w.as_bytes() == raw) {
        out.extend_from_slice(&[WORD, w as u8]);
    } else if let Some(ms) = time_ms(raw) {
        out.push(TIME);
        varint(out, zigzag(ms));
    } else {
        out.push(STRING);
        varint(out, raw.len() as u64);
        out.extend_from_slice(raw);
    }
}

/// The milliseconds of a timestamp written as [`rfc3339_ms`] writes them
/// (`YYYY-MM-DDTHH:MM:SS.mmmZ`), if it is exactly that.
///
/// [`rfc3339_ms`]: crate::capture::clock::rfc3339_ms
fn time_ms(text: &[u8]) -> Option<i64> {
    crate::capture::clock::parse_rfc3339_ms(text)
}

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn unzigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

struct Unpacker<'a, 'o> {
    b: &'a [u8],
    i: usize,
    out: &'o mut Vec<u8>,
}

impl<'a> Unpacker<'a, '_> {
    fn byte(&mut self) -> Result<u8, String> {
        let b = *self.b.get(self.i).ok_or("the record ends early")?;
        self.i += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.i.checked_add(n).filter(|e| *e <= self.b.len());
        let end = end.ok_or("the record ends early")?;
        let s = &self.b[self.i..end];
        self.i = end;
        Ok(s)
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            n |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(n);
            }
        }
        Err("a number is too long".into())
    }

    fn value(&mut self, depth: usize) -> Result<(), String> {
        if depth > 16 {
            return Err("nested too deep".into());
        }
        match self.byte()? {
            NULL => self.out.extend_from_slice(b"null"),
            FALSE => self.out.extend_from_slice(b"false"),
            TRUE => self.out.extend_from_slice(b"true"),
            INT => {
                let n = unzigzag(self.varint()?);
                self.out
                    .extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            }
            NUMBER | STRING => {
                let tag = self.b[self.i - 1];
                let n = self.varint()? as usize;
                let raw = self.take(n)?;
                if tag == STRING {
                    self.quoted(raw);
                } else {
                    self.out.extend_from_slice(raw);
                }
            }
            tag @ (HEX32 | UUID) => {
                let raw = self.take(if tag == HEX32 { 32 } else { 16 })?;
                self.out.push(b'"');
                crate::store::packed::write_text(raw, self.out);
                self.out.push(b'"');
            }
            TIME => {
                let ms = unzigzag(self.varint()?);
                match crate::capture::clock::rfc3339_ms_bytes(ms) {
                    Some(text) => self.quoted(&text),
                    None => self.quoted(crate::capture::clock::rfc3339_ms(ms).as_bytes()),
                }
            }
            WORD => {
                let w = self.byte()?;
                let word = WORDS.get(usize::from(w)).ok_or("unknown word")?;
                self.quoted(word.as_bytes());
            }
            ARRAY => {
                let n = self.byte()?;
                self.out.push(b'[');
                for i in 0..n {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    self.value(depth + 1)?;
                }
                self.out.push(b']');
            }
            OBJECT => {
                let n = self.byte()?;
                self.out.push(b'{');
                for i in 0..n {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    let k = self.byte()?;
                    let key = if k == RAW_KEY {
                        let n = self.varint()? as usize;
                        self.take(n)?
                    } else {
                        KEYS.get(usize::from(k)).ok_or("unknown field")?.as_bytes()
                    };
                    self.quoted(key);
                    self.out.push(b':');
                    self.value(depth + 1)?;
                }
                self.out.push(b'}');
            }
            t => return Err(format!("unknown value tag {t}")),
        }
        Ok(())
    }

    fn quoted(&mut self, text: &[u8]) {
        self.out.push(b'"');
        self.out.extend_from_slice(text);
        self.out.push(b'"');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(json: &str) -> Vec<u8> {
        let mut out = Vec::new();
        assert!(pack(json, &mut out), "{json}");
        assert_eq!(unpack_record(&out).unwrap(), json);
        out
    }

    /// A commit record packs to about a third of its JSON and back.
    #[test]
    fn records_pack_and_unpack_byte_for_byte() {
        let commit = r#"{"seq":123456,"at":"2026-12-03T17:32:47.123Z","gateway":"gw-1","scanner":"counter-1","scan_uuid":"019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a30","captured_at":"2026-12-03T17:32:47.100Z","clock_synced":true,"decision":"committed","content_key":"e9ed54d3a1a38a0e6c0c5c2a2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b","twin_uuid":null,"reason":null,"raw_len":58,"ledger_hash":"0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"}"#;
        let packed = round_trip(commit);
        assert!(packed.len() * 3 < commit.len(), "{} bytes", packed.len());
        for json in [
            r#"{}"#,
            r#"[]"#,
            r#"{"a":[1,-2,0,9223372036854775807,-9223372036854775808],"b":"x\"y\\z\u0001é","c":false}"#,
            r#"{"n":1.5,"m":-0,"o":00,"p":1e3,"q":"2026-12-03T17:32:47.123+00:00","r":"2026-12-03T17:32:47Z"}"#,
            r#"{"u":"019AE4C4-0D52-7C41-9F8E-2F0B7D1E6A30","k":"ABAB","w":"committed ","x":"window"}"#,
        ] {
            round_trip(json);
        }
    }

    /// What is not canonical JSON is left to be stored as text.
    #[test]
    fn what_does_not_round_trip_is_refused() {
        let mut out = Vec::new();
        for json in [
            r#"{ "a":1}"#,
            r#"{"a":1} "#,
            r#"{"a":tru}"#,
            r#"{"a":"x"#,
            "",
            r#"{"a" :1}"#,
        ] {
            assert!(!pack(json, &mut out), "{json:?}");
        }
    }

    /// Any damage to a packed record is an error or other JSON, never a panic.
    #[test]
    fn damaged_records_unpack_to_an_error_or_other_json() {
        let commit = r#"{"seq":7,"at":"2026-12-03T17:32:47.123Z","decision":"suppressed","twin_uuid":"019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a30","reason":"a \"b\"","raw_len":58}"#;
        let packed = round_trip(commit);
        for i in 0..packed.len() {
            for flip in [1u8, 0x80, 0xff] {
                let mut b = packed.clone();
                b[i] ^= flip;
                if let Ok(json) = unpack_record(&b) {
                    assert_ne!(json, commit, "byte {i} ^ {flip}");
                }
            }
            let _ = unpack_record(&packed[..i]);
        }
    }
}
