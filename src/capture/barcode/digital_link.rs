//! GS1 Digital Link URIs in plain QR / Data Matrix (`]Q1https://…/01/<gtin>/…`).
//!
//! Follows gs1-syntax-engine `dl.c` (`gs1_parseDLuri`), without its optional
//! leniencies (no zero-suppressed GTINs, no convenience alphas such as `gtin`):
//! - scheme exactly `https://`, `HTTPS://`, `http://` or `HTTP://`; only URI
//!   characters; a non-empty domain without illegal characters;
//! - the path is searched from the right for `/AI/value` pairs; the pair
//!   whose AI is a Digital Link primary key (01, 00, 253, 255, 401, 402, 414,
//!   415, 417, 8003, 8004, 8006, 8010, 8013, 8017, 8018) is the root; the key
//!   qualifiers after it must follow the order GS1 defines (01: 22, 10, 21 or 235);
//! - query parameters with all-digit keys are AIs (other keys such as
//!   `linkType` are ignored); the fragment is ignored;
//! - values are percent-decoded (`+` is a space in the query) and then
//!   validated exactly like element-string values.
//!
//! Elements come out in path order, then query order.

use super::DecodeError;
use super::ai_table::{self, AiEntry};
use super::gs1;

/// True when `data` starts with a scheme that makes it a Digital Link candidate.
pub fn has_dl_scheme(data: &[u8]) -> bool {
    data.starts_with(b"https://")
        || data.starts_with(b"HTTPS://")
        || data.starts_with(b"http://")
        || data.starts_with(b"HTTP://")
}

fn is_uri_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"-._~:/?#[]@!$&'()*+,;=%".contains(&c)
}

fn is_bad_domain_char(c: u8) -> bool {
    b"_~?#@!$&'()*+,;=%".contains(&c)
}

/// Allowed key-qualifier sequences per primary key (alternatives).
fn qualifiers(pkey: &str) -> Option<&'static [&'static [&'static str]]> {
    Some(match pkey {
        "01" => &[&["22", "10", "21"], &["235"]],
        "8006" => &[&["22", "10", "21"]],
        "414" => &[&["254"], &["7040"]],
        "415" => &[&["8020"]],
        "417" | "8004" => &[&["7040"]],
        "8010" => &[&["8011"]],
        "8017" | "8018" => &[&["8019"]],
        "00" | "253" | "255" | "401" | "402" | "8003" | "8013" => &[],
        _ => return None,
    })
}

fn exact_ai(seg: &str) -> Option<&'static AiEntry> {
    let b = seg.as_bytes();
    if b.len() < 2 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let prefix = (b[0] - b'0') as usize * 10 + (b[1] - b'0') as usize;
    if ai_table::ai_len_by_prefix(prefix) != b.len() {
        return None;
    }
    ai_table::lookup(b)
}

fn hexval(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Percent-decode into `out`. Err(offset) on an encoded NUL.
fn unescape(s: &[u8], query: bool, out: &mut Vec<u8>) -> Result<(), usize> {
    out.clear();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c == b'%'
            && i + 2 < s.len()
            && let (Some(h), Some(l)) = (hexval(s[i + 1]), hexval(s[i + 2]))
        {
            let v = h * 16 + l;
            if v == 0 {
                return Err(i);
            }
            out.push(v);
            i += 3;
            continue;
        }
        out.push(if query && c == b'+' { b' ' } else { c });
        i += 1;
    }
    Ok(())
}

/// The error of a Digital Link that does not parse.
fn derr(m: String) -> DecodeError {
    DecodeError(format!("GS1 Digital Link: {m}"))
}

/// Parse a Digital Link URI (`data` starts at frame byte `base`) and call
/// `emit(ai, value)` for every AI found: the path's primary key and its
/// qualifiers, then the query's attributes.
pub(crate) fn parse(
    data: &[u8],
    base: usize,
    ref_year: i32,
    mut emit: impl FnMut(&str, String),
) -> Result<(), DecodeError> {
    let Parts {
        path_off,
        path,
        query,
    } = split_uri(data, base)?;
    let root = primary_key_root(path)?;
    let mut buf = Vec::with_capacity(32);
    emit_path(
        &path[root + 1..],
        base,
        path_off + root + 1,
        ref_year,
        &mut buf,
        &mut emit,
    )?;
    if let Some((q, q_off)) = query {
        emit_query(q, base, q_off, ref_year, &mut buf, &mut emit)?;
    }
    Ok(())
}

/// A Digital Link's path and, if any, its query: each with its offset
/// in the frame's data.
struct Parts<'u> {
    path_off: usize,
    path: &'u str,
    query: Option<(&'u str, usize)>,
}

/// The URI's path and query (with their offsets in `data`), once its
/// characters, scheme and domain are checked. The fragment is dropped.
fn split_uri(data: &[u8], base: usize) -> Result<Parts<'_>, DecodeError> {
    if let Some(k) = data.iter().position(|&c| !is_uri_char(c)) {
        return Err(derr(format!(
            "character not allowed in a URI at byte {}",
            base + k
        )));
    }
    // All URI characters are ASCII.
    let uri = std::str::from_utf8(data).map_err(|_| derr("not ASCII".into()))?;
    let scheme_len = if uri.starts_with("https://") || uri.starts_with("HTTPS://") {
        8
    } else if uri.starts_with("http://") || uri.starts_with("HTTP://") {
        7
    } else {
        return Err(derr(
            "scheme must be http:// or https:// (all lower or all upper case)".into(),
        ));
    };
    let rest = &uri[scheme_len..];
    let Some(slash) = rest.find('/') else {
        return Err(derr("no path after the domain".into()));
    };
    if slash == 0 {
        return Err(derr(format!("empty domain at byte {}", base + scheme_len)));
    }
    if let Some(k) = rest[..slash].bytes().position(is_bad_domain_char) {
        return Err(derr(format!(
            "character not allowed in a domain at byte {}",
            base + scheme_len + k
        )));
    }
    let path_off = scheme_len + slash;
    let after = &uri[path_off..];
    let after = after.split('#').next().unwrap_or("");
    let (path, query) = match after.find('?') {
        Some(q) => (&after[..q], Some((&after[q + 1..], path_off + q + 1))),
        None => (after, None),
    };
    Ok(Parts {
        path_off,
        path,
        query,
    })
}

/// Where the primary key's `/AI/value` pair begins in `path`: walking back
/// over `/AI/value` pairs to the first that is a primary key.
fn primary_key_root(path: &str) -> Result<usize, DecodeError> {
    let mut end = path.len();
    while let Some(sv) = path[..end].rfind('/') {
        let Some(sa) = path[..sv].rfind('/') else {
            break;
        };
        let Some(entry) = exact_ai(&path[sa + 1..sv]) else {
            break;
        };
        if qualifiers(entry.first).is_some() && entry.first == entry.last {
            return Ok(sa);
        }
        end = sa;
    }
    Err(derr(
        "no GS1 primary key (e.g. /01/<GTIN>) in the path".into(),
    ))
}

/// Emit the primary key and its qualifiers: `pairs` is the path from the
/// primary key's AI on (at `off` in the frame's data, `base` in the frame).
fn emit_path(
    pairs: &str,
    base: usize,
    mut off: usize,
    ref_year: i32,
    buf: &mut Vec<u8>,
    emit: &mut impl FnMut(&str, String),
) -> Result<(), DecodeError> {
    let mut segs = pairs.split('/');
    let mut pkey: Option<&str> = None;
    let mut alt: Option<usize> = None;
    let mut last_q = 0usize;
    while let Some(ai) = segs.next() {
        let ai_pos = base + off;
        let val = segs.next().unwrap_or("");
        let val_off = off + ai.len() + 1;
        off = val_off + val.len() + 1;
        let entry =
            exact_ai(ai).ok_or_else(|| derr(format!("unknown AI in the path at byte {ai_pos}")))?;
        match pkey {
            None => pkey = Some(entry.first),
            Some(k) => {
                // Qualifier: must appear, in order, in one allowed sequence.
                let alts = qualifiers(k).unwrap_or(&[]);
                let mut ok = false;
                for (ai_idx, seq) in alts.iter().enumerate() {
                    if alt.is_some_and(|a| a != ai_idx) {
                        continue;
                    }
                    if let Some(p) = seq.iter().position(|q| *q == ai)
                        && (alt.is_none() || p >= last_q)
                    {
                        alt = Some(ai_idx);
                        last_q = p + 1;
                        ok = true;
                        break;
                    }
                }
                if !ok {
                    return Err(derr(format!(
                        "AI ({ai}) at byte {ai_pos} is not a valid key qualifier here for primary key ({k})"
                    )));
                }
            }
        }
        if val.is_empty() {
            return Err(derr(format!("AI ({ai}) at byte {ai_pos}: empty value")));
        }
        unescape(val.as_bytes(), false, buf).map_err(|k| {
            derr(format!(
                "AI ({ai}): encoded NUL at byte {}",
                base + val_off + k
            ))
        })?;
        gs1::validate_value(entry, ai, buf, base + val_off, ai_pos, ref_year)?;
        emit(
            ai,
            String::from_utf8(buf.clone()).map_err(|_| derr("value not UTF-8".into()))?,
        );
    }
    Ok(())
}

/// Emit the query's AI attributes (`q` at `q_off` in the frame's data);
/// other parameters (e.g. `linkType`) are skipped, a primary key there is
/// refused.
fn emit_query(
    q: &str,
    base: usize,
    q_off: usize,
    ref_year: i32,
    buf: &mut Vec<u8>,
    emit: &mut impl FnMut(&str, String),
) -> Result<(), DecodeError> {
    let mut off = q_off;
    for param in q.split('&') {
        let this_off = off;
        off += param.len() + 1;
        let (key, val) = match param.find('=') {
            Some(e) => (&param[..e], &param[e + 1..]),
            None => continue,
        };
        if key.is_empty() || !key.bytes().all(|c| c.is_ascii_digit()) {
            continue; // non-AI parameter, e.g. linkType
        }
        let ai_pos = base + this_off;
        let entry = exact_ai(key)
            .ok_or_else(|| derr(format!("unknown AI in the query at byte {ai_pos}")))?;
        if qualifiers(entry.first).is_some() && entry.first == entry.last {
            return Err(derr(format!(
                "AI ({key}) at byte {ai_pos} is a primary key and belongs in the path"
            )));
        }
        if val.is_empty() {
            return Err(derr(format!("AI ({key}) at byte {ai_pos}: empty value")));
        }
        let val_off = this_off + key.len() + 1;
        unescape(val.as_bytes(), true, buf).map_err(|k| {
            derr(format!(
                "AI ({key}): encoded NUL at byte {}",
                base + val_off + k
            ))
        })?;
        gs1::validate_value(entry, key, buf, base + val_off, ai_pos, ref_year)?;
        emit(
            key,
            String::from_utf8(buf.clone()).map_err(|_| derr("value not UTF-8".into()))?,
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dl(s: &str) -> Result<Vec<(String, String)>, DecodeError> {
        let mut out = Vec::new();
        parse(s.as_bytes(), 3, 2025, |a, v| out.push((a.to_string(), v)))?;
        Ok(out)
    }

    #[test]
    fn engine_example() {
        assert_eq!(
            dl("https://example.com/01/12312312312333?99=TEST").unwrap(),
            vec![
                ("01".into(), "12312312312333".into()),
                ("99".into(), "TEST".into())
            ]
        );
    }

    #[test]
    fn dscsa_in_path_and_query() {
        let got = dl("https://id.gs1.org/prefix/01/00349281589058/10/AB%2D1/21/S%2B1?17=261031&linkType=gs1:pip")
            .unwrap();
        assert_eq!(
            got,
            vec![
                ("01".into(), "00349281589058".into()),
                ("10".into(), "AB-1".into()),
                ("21".into(), "S+1".into()),
                ("17".into(), "261031".into())
            ]
        );
        assert!(dl("HTTPS://X.ORG/01/00349281589058").is_ok());
    }

    #[test]
    fn rejects() {
        assert!(dl("https://example.com/").is_err());
        assert!(dl("https://example.com/foo/bar").is_err());
        assert!(dl("https://example.com/01/12312312312334").is_err()); // check digit
        assert!(dl("https://example.com/01/1231231231233").is_err()); // 13 digits
        assert!(dl("https://example.com/01/12312312312333/21/A/10/B").is_err()); // order
        assert!(dl("https://example.com/01/12312312312333?99=").is_err());
        assert!(dl("https://example.com/01/12312312312333?89=1").is_err());
        assert!(dl("https://example.com/01/12312312312333?01=12312312312333").is_err());
        assert!(dl("https://example.com/01/12312312312333/10/A%00").is_err());
        assert!(dl("https://exa mple.com/01/12312312312333").is_err());
        assert!(dl("https:///01/12312312312333").is_err());
        assert!(dl("HtTps://example.com/01/12312312312333").is_err());
        assert!(dl("https://example.com").is_err());
    }
}
