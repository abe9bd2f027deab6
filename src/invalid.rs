//! [`Invalid`]: a value a component refuses in its own config section.
//!
//! Each component validates the section it owns (the serial source its
//! scanner keys, the HID source its own, the facility `[redis]`) and names
//! the key relative to that section; [`crate::config`], which assembles the
//! file, adds the section (`redis.`, `scanner[1].`) and the file name. This
//! module depends on nothing, so no component imports the assembler.

use std::fmt;

/// A refused value: the key (relative to its section), what is wrong, the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The key, e.g. `quantity`; [`Invalid::within`] prefixes the section.
    pub key: String,
    /// What is wrong.
    pub problem: String,
    /// What to do about it.
    pub fix: String,
}

impl Invalid {
    /// `key` is refused because of `problem`; `fix` says what to do.
    pub fn new(key: impl Into<String>, problem: impl Into<String>, fix: impl Into<String>) -> Self {
        Invalid {
            key: key.into(),
            problem: problem.into(),
            fix: fix.into(),
        }
    }

    /// The same refusal, its key named inside `section` (`redis` → `redis.url`;
    /// an empty key, the section itself).
    pub fn within(self, section: &str) -> Invalid {
        let key = match self.key.as_str() {
            "" => section.to_string(),
            key => format!("{section}.{key}"),
        };
        Invalid { key, ..self }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}`: {}. Fix: {}",
            cut_long(&self.key),
            cut_long(&self.problem),
            cut_long(&self.fix)
        )
    }
}

impl std::error::Error for Invalid {}

/// The characters of a value a message quotes ([`shown`]).
pub const SHOWN_CHARS: usize = 80;

/// A run of characters without a space longer than this is cut where a
/// message is shown ([`cut_long`]).
pub const LONG_RUN_CHARS: usize = 120;

/// The characters of a whole message part (key, problem, fix) shown
/// ([`cut_long`]).
pub const MESSAGE_CHARS: usize = 1000;

/// A value as a message quotes it (`{:?}`): whole up to [`SHOWN_CHARS`]
/// characters; a longer one, its first [`SHOWN_CHARS`] characters, `…`
/// and its length (`"xxxx…" (5000 characters)`), so a value of megabytes
/// makes a line a person can read.
pub fn shown(value: &str) -> String {
    let chars = value.chars().count();
    if chars <= SHOWN_CHARS {
        return format!("{value:?}");
    }
    let head: String = value.chars().take(SHOWN_CHARS).collect();
    format!("{:?} ({chars} characters)", format!("{head}…"))
}

/// `text` with every run of more than [`LONG_RUN_CHARS`] characters
/// without whitespace cut to its first [`SHOWN_CHARS`], `…` and its
/// length, and then the whole cut after [`MESSAGE_CHARS`] characters: what
/// a parser's message or a key echoes of a config file stays readable,
/// whatever the file held. Text within the bounds is returned as it is.
pub fn cut_long(text: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    let long_run = text
        .split(char::is_whitespace)
        .any(|run| run.chars().nth(LONG_RUN_CHARS).is_some());
    let long_text = text.chars().nth(MESSAGE_CHARS).is_some();
    if !long_run && !long_text {
        return Cow::Borrowed(text);
    }
    let mut out = String::new();
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        let n = run.chars().count();
        if n > LONG_RUN_CHARS {
            out.extend(run.chars().take(SHOWN_CHARS));
            out.push_str(&format!("… ({n} characters)"));
        } else {
            out.push_str(run);
        }
        run.clear();
    };
    for c in text.chars() {
        if c.is_whitespace() {
            flush(&mut run, &mut out);
            out.push(c);
        } else {
            run.push(c);
        }
    }
    flush(&mut run, &mut out);
    let total = out.chars().count();
    if total > MESSAGE_CHARS {
        let mut head: String = out.chars().take(MESSAGE_CHARS).collect();
        head.push_str(&format!("… (cut: {total} characters)"));
        return Cow::Owned(head);
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_value_is_quoted_whole_and_a_long_one_cut_with_its_length() {
        assert_eq!(shown("counter-1"), "\"counter-1\"");
        let long = "x".repeat(5000);
        let s = shown(&long);
        assert!(
            s.starts_with(&format!("\"{}…\"", "x".repeat(SHOWN_CHARS))),
            "{s}"
        );
        assert!(s.ends_with("(5000 characters)"), "{s}");
        assert!(s.len() < 120, "{s}");
        // Cut on a character, never inside one.
        let wide = "é".repeat(100);
        assert!(shown(&wide).contains("(100 characters)"));
    }

    #[test]
    fn long_runs_in_a_message_are_cut_and_the_rest_kept() {
        let msg = format!(
            "invalid type: string \"{}\", expected u64 (line 2, column 13)",
            "x".repeat(1_000_000)
        );
        let cut = cut_long(&msg);
        assert!(cut.len() < 300, "{cut}");
        assert!(cut.starts_with("invalid type: string \"xxx"), "{cut}");
        assert!(cut.contains("(1000003 characters)"), "{cut}");
        assert!(cut.ends_with("expected u64 (line 2, column 13)"), "{cut}");
        // Many short words: the whole is cut, saying so.
        let words = "x y ".repeat(10_000);
        let cut = cut_long(&words);
        assert!(cut.chars().count() < MESSAGE_CHARS + 40, "{}", cut.len());
        assert!(cut.ends_with("(cut: 40000 characters)"), "{cut}");
        // Within the bounds: untouched.
        let ordinary = "`dedup.window_ms`: 0 is out of range";
        assert!(matches!(cut_long(ordinary), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn an_invalid_value_is_shown_cut() {
        let e = Invalid::new("url", format!("{} is bad", "u".repeat(10_000)), "fix it");
        let shown = e.to_string();
        assert!(shown.len() < 200, "{shown}");
        assert!(shown.starts_with("`url`: uuu"), "{shown}");
    }
}
