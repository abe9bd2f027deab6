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
        write!(f, "`{}`: {}. Fix: {}", self.key, self.problem, self.fix)
    }
}

impl std::error::Error for Invalid {}
