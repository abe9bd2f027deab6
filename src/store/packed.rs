//! Identifiers as the database stores them (migration 8): a canonical
//! UUID (36 characters, lowercase, hyphenated) as its 16 bytes and a
//! 64-digit lowercase hex key or hash as its 32 bytes, both BLOBs; any
//! other text as itself (TEXT), so every value reads back exactly as it
//! was written. Bind with [`Packed`], read with [`Unpacked`] or
//! [`unpack`]. Migration 8 classifies the text it converts with the same
//! rules in SQL ([`UUID_GLOB`], [`HEX64_GLOB`]).

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};

/// The SQL `GLOB` pattern of a canonical UUID, as [`Packed`] recognises one
/// (migration 8 repeats it literally).
pub const UUID_GLOB: &str = "[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]";

/// The SQL `GLOB` pattern a 64-character value must NOT match to be a
/// lowercase hex key (any character outside `0-9a-f`).
pub const HEX64_GLOB: &str = "*[^0-9a-f]*";

/// A text identifier ready to bind: its bytes when it is a canonical UUID
/// or a 64-digit lowercase hex string, else the text itself.
#[derive(Debug, Clone, Copy)]
pub struct Packed<'a> {
    text: &'a str,
    bytes: [u8; 32],
    len: usize,
}

impl<'a> Packed<'a> {
    /// Classify `text` (no allocation; one pass over its bytes).
    pub fn new(text: &'a str) -> Packed<'a> {
        let s = text.as_bytes();
        let mut bytes = [0u8; 32];
        let b = &mut bytes;
        let len = match s.len() {
            36 if [8, 13, 18, 23].iter().all(|&i| s[i] == b'-')
                && decode(&s[..8], &mut b[..4])
                && decode(&s[9..13], &mut b[4..6])
                && decode(&s[14..18], &mut b[6..8])
                && decode(&s[19..23], &mut b[8..10])
                && decode(&s[24..], &mut b[10..16]) =>
            {
                16
            }
            64 if decode(s, b) => 32,
            _ => 0,
        };
        Packed { text, bytes, len }
    }

    /// The stored bytes, if it is stored as a BLOB.
    pub fn bytes(&self) -> Option<&[u8]> {
        (self.len > 0).then(|| &self.bytes[..self.len])
    }
}

/// [`Packed::new`], shorter at the call sites.
pub fn packed(text: &str) -> Packed<'_> {
    Packed::new(text)
}

impl ToSql for Packed<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self.bytes() {
            Some(b) => ValueRef::Blob(b),
            None => ValueRef::Text(self.text.as_bytes()),
        }))
    }
}

/// Each byte's value as a lowercase hex digit; 0x10 and up: not one.
const DIGIT: [u8; 256] = {
    let mut t = [0xff; 256];
    let mut c = 0;
    while c < 10 {
        t[b'0' as usize + c] = c as u8;
        c += 1;
    }
    let mut c = 0;
    while c < 6 {
        t[b'a' as usize + c] = 10 + c as u8;
        c += 1;
    }
    t
};

/// Decode lowercase hex digits, two per byte, from `hex` into `out`;
/// `false` if any character is not one (then `out` holds garbage). A
/// table and no branch per digit: it runs for every identifier bound on
/// the scan path, several per scan.
fn decode(hex: &[u8], out: &mut [u8]) -> bool {
    let mut bad = 0;
    for (o, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        let (high, low) = (DIGIT[usize::from(pair[0])], DIGIT[usize::from(pair[1])]);
        bad |= high | low;
        *o = high << 4 | (low & 0x0f);
    }
    bad < 0x10
}

/// The text of a stored identifier: a 16-byte BLOB as a canonical UUID, a
/// 32-byte BLOB as 64 lowercase hex digits, TEXT as itself.
pub fn unpack(v: ValueRef<'_>) -> FromSqlResult<String> {
    match v {
        ValueRef::Text(t) => std::str::from_utf8(t)
            .map(str::to_owned)
            .map_err(|e| FromSqlError::Other(Box::new(e))),
        ValueRef::Blob(b) if b.len() == 16 => {
            let mut out = String::with_capacity(36);
            for (i, byte) in b.iter().enumerate() {
                if matches!(i, 4 | 6 | 8 | 10) {
                    out.push('-');
                }
                push_hex(&mut out, *byte);
            }
            Ok(out)
        }
        ValueRef::Blob(b) if b.len() == 32 => {
            let bytes: &[u8; 32] = b.try_into().expect("32 bytes");
            Ok(crate::capture::hex32(bytes))
        }
        ValueRef::Blob(b) => Err(FromSqlError::InvalidBlobSize {
            expected_size: 16,
            blob_size: b.len(),
        }),
        _ => Err(FromSqlError::InvalidType),
    }
}

/// Append the text of a 16-byte (UUID) or 32-byte (hex) identifier to
/// `out`, as [`unpack`] reads it (no allocation); any other length as
/// hex without hyphens.
pub fn write_text(b: &[u8], out: &mut Vec<u8>) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (i, byte) in b.iter().enumerate() {
        if b.len() == 16 && matches!(i, 4 | 6 | 8 | 10) {
            out.push(b'-');
        }
        out.extend_from_slice(&[
            DIGITS[usize::from(byte >> 4)],
            DIGITS[usize::from(byte & 15)],
        ]);
    }
}

fn push_hex(out: &mut String, b: u8) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.push(DIGITS[usize::from(b >> 4)] as char);
    out.push(DIGITS[usize::from(b & 15)] as char);
}

/// A stored identifier read back as text ([`unpack`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpacked(pub String);

impl FromSql for Unpacked {
    fn column_result(v: ValueRef<'_>) -> FromSqlResult<Self> {
        unpack(v).map(Unpacked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    /// Every form reads back as written, through SQLite, and the SQL
    /// patterns of migration 8 classify exactly as `Packed` does.
    #[test]
    fn identifiers_read_back_as_written_and_sql_agrees() {
        let c = Connection::open_in_memory().unwrap();
        let cases = [
            "019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a30",
            "019AE4C4-0D52-7C41-9F8E-2F0B7D1E6A30",
            "019ae4c40d527c419f8e2f0b7d1e6a30",
            "019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a3",
            "019ae4c4-0d52-7c41-9f8e_2f0b7d1e6a30",
            &"ab".repeat(32),
            &"AB".repeat(32),
            &"ab".repeat(31),
            &"g".repeat(64),
            &format!("{}a/", "ab".repeat(31)),
            &format!("{}:0", "ab".repeat(31)),
            "019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a3G",
            "u1",
            "",
            "boot-é",
        ];
        for text in cases {
            let p = packed(text);
            let back: Unpacked = c.query_row("SELECT ?1", [p], |r| r.get(0)).unwrap();
            assert_eq!(back.0, text);
            let sql_blob: bool = c
                .query_row(
                    &format!(
                        "SELECT (?1 GLOB '{UUID_GLOB}') OR (length(?1) = 64 AND ?1 NOT GLOB '{HEX64_GLOB}')"
                    ),
                    [text],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(sql_blob, p.bytes().is_some(), "{text}");
            if let Some(b) = p.bytes() {
                let unhexed: Vec<u8> = c
                    .query_row("SELECT unhex(replace(?1, '-', ''))", [text], |r| r.get(0))
                    .unwrap();
                assert_eq!(unhexed, b, "{text}");
            }
        }
    }
}
