//! Keys an earlier release accepted and this one no longer reads as they
//! are: carried over instead of refused, so a gateway upgraded unattended
//! starts with the config it had. Each is applied to the parsed TOML
//! before the sections are read ([`carry_over`]): a renamed key's value
//! moves to its new name, a retired key is dropped. Either way the gateway
//! says so — a WARN at start, a line from `check-config`, a `status`
//! reason — for at least two releases, after which the key may be refused
//! (only with a CHANGELOG entry saying what to do).

use super::ConfigError;
use serde::Serialize;
use std::borrow::{BorrowMut, Cow};
use std::path::Path;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// What became of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Its value is read under this name now (same meaning).
    RenamedTo(&'static str),
    /// It has no meaning any more: its value is ignored.
    Retired,
}

/// A key of an earlier release, where it lives and what became of it.
#[derive(Debug, Clone, Copy)]
pub struct OldKey {
    /// The table it is in: a section (`redis`), or an array of tables
    /// (`scanner`, `sink`: every entry's).
    pub table: &'static str,
    /// Its name there.
    pub key: &'static str,
    /// The release that stopped reading it as it was.
    pub since: &'static str,
    /// What became of it.
    pub fate: Fate,
    /// Why, and what the gateway does instead (a sentence).
    pub why: &'static str,
}

/// Every key carried over, oldest first. Never remove an entry before two
/// releases after its `since`, and then only with a CHANGELOG entry.
pub const OLD_KEYS: &[OldKey] = &[OldKey {
    table: "redis",
    key: "require_synced_clock",
    since: "0.2.0",
    fate: Fate::Retired,
    why: "a gateway claims on the facility Redis's clock (each capture's boot-clock stamp mapped through measurements of it), whether or not its own wall clock is NTP-synchronised; max_clock_error_ms (default 250) bounds how far a capture's facility time may be off before its scan waits",
}];

/// One old key found in a config file, carried over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Carried {
    /// Where it was, e.g. `redis.require_synced_clock` or
    /// `scanner[1].old_name`.
    pub key: String,
    /// Its 1-based line in the file.
    pub line: usize,
    /// The release that stopped reading it as it was.
    pub since: &'static str,
    /// Its new name (`None`: retired, ignored).
    pub renamed_to: Option<String>,
    /// Why, and what the gateway does instead.
    pub why: &'static str,
}

impl Carried {
    /// The warning, as every command shows it: what, where, and the fix.
    pub fn warning(&self, file: Option<&Path>) -> String {
        let place = file.map_or_else(String::new, |f| format!("{}: ", f.display()));
        match &self.renamed_to {
            Some(new) => format!(
                "{place}`{}` (line {}) is deprecated since {}: read as `{new}` ({}). Fix: rename it to `{new}`; a later release will refuse the old name",
                self.key, self.line, self.since, self.why
            ),
            None => format!(
                "{place}`{}` (line {}) is deprecated since {} and ignored: {}. Fix: remove it; a later release will refuse it",
                self.key, self.line, self.since, self.why
            ),
        }
    }
}

/// Carry every key of `old_keys` found in `root` over (rename or drop it),
/// returning what was found; a file that has both a key's old and new
/// name is refused, naming both. `text` gives the line numbers.
pub(super) fn carry_over(
    root: &mut DeTable<'_>,
    old_keys: &[OldKey],
    text: &str,
    file: Option<&Path>,
) -> Result<Vec<Carried>, ConfigError> {
    let mut found = Vec::new();
    for old in old_keys {
        let Some(value) = root.get_mut(old.table) else {
            continue;
        };
        match value.get_mut() {
            DeValue::Table(t) => carry_one(t, old, old.table.to_owned(), text, file, &mut found)?,
            DeValue::Array(entries) => {
                let entries: &mut [Spanned<DeValue<'_>>] = entries.borrow_mut();
                for (i, entry) in entries.iter_mut().enumerate() {
                    if let DeValue::Table(t) = entry.get_mut() {
                        let at = format!("{}[{i}]", old.table);
                        carry_one(t, old, at, text, file, &mut found)?;
                    }
                }
            }
            // Not a table: the sections' own parse refuses it.
            _ => {}
        }
    }
    Ok(found)
}

/// [`carry_over`] for one table, `at` its name in messages.
fn carry_one(
    table: &mut DeTable<'_>,
    old: &OldKey,
    at: String,
    text: &str,
    file: Option<&Path>,
    found: &mut Vec<Carried>,
) -> Result<(), ConfigError> {
    let Some((key, value)) = table.remove_entry(old.key) else {
        return Ok(());
    };
    let line = line_of(text, key.span().start);
    let renamed_to = match old.fate {
        Fate::Retired => None,
        Fate::RenamedTo(new) => {
            if let Some(both) = table.get(new) {
                return Err(ConfigError {
                    file: file.map(Path::to_owned),
                    key: format!("{at}.{}", old.key),
                    problem: format!(
                        "both `{at}.{}` (line {line}, its name before {}) and `{at}.{new}` (line {}) are set",
                        old.key,
                        old.since,
                        line_of(text, both.span().start)
                    ),
                    fix: format!("keep only `{new}`, with the value you mean"),
                });
            }
            table.insert(Spanned::new(key.span(), Cow::Borrowed(new)), value);
            Some(format!("{at}.{new}"))
        }
    };
    found.push(Carried {
        key: format!("{at}.{}", old.key),
        line,
        since: old.since,
        renamed_to,
        why: old.why,
    });
    Ok(())
}

/// The 1-based line of byte `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const RENAMED: &[OldKey] = &[OldKey {
        table: "scanner",
        key: "old_name",
        since: "9.9.0",
        fate: Fate::RenamedTo("new_name"),
        why: "a test",
    }];

    fn carry(text: &str, keys: &[OldKey]) -> Result<(String, Vec<Carried>), ConfigError> {
        let mut root = DeTable::parse(text).unwrap().into_inner();
        let found = carry_over(&mut root, keys, text, None)?;
        let mut names: Vec<String> = Vec::new();
        if let Some(DeValue::Array(a)) = root.get("scanner").map(|v| v.get_ref()) {
            let a: &[Spanned<DeValue<'_>>] = std::borrow::Borrow::borrow(a);
            for t in a {
                if let DeValue::Table(t) = t.get_ref() {
                    names.extend(t.keys().map(|k| k.get_ref().to_string()));
                }
            }
        }
        Ok((names.join(","), found))
    }

    #[test]
    fn a_retired_key_is_dropped_and_named_with_its_line() {
        let text =
            "[gateway]\nid = \"g\"\n[redis]\nurl = \"redis://h/\"\nrequire_synced_clock = true\n";
        let mut root = DeTable::parse(text).unwrap().into_inner();
        let found = carry_over(&mut root, OLD_KEYS, text, None).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].key, "redis.require_synced_clock");
        assert_eq!(found[0].line, 5);
        assert_eq!(found[0].renamed_to, None);
        let DeValue::Table(redis) = root.get("redis").unwrap().get_ref() else {
            panic!("redis is a table")
        };
        assert!(redis.get("require_synced_clock").is_none());
        assert!(redis.get("url").is_some());
        let w = found[0].warning(Some(Path::new("/etc/scangate/scangate.toml")));
        assert!(w.contains("deprecated since 0.2.0 and ignored"), "{w}");
        assert!(w.contains("Fix: remove it"), "{w}");
    }

    #[test]
    fn a_renamed_key_moves_in_every_entry_of_an_array() {
        let (names, found) = carry(
            "[[scanner]]\nold_name = 1\n[[scanner]]\nother = 2\n[[scanner]]\nold_name = 3\n",
            RENAMED,
        )
        .unwrap();
        assert_eq!(names, "new_name,other,new_name");
        let keys: Vec<_> = found.iter().map(|c| (c.key.as_str(), c.line)).collect();
        assert_eq!(
            keys,
            [("scanner[0].old_name", 2), ("scanner[2].old_name", 6)]
        );
        assert_eq!(found[1].renamed_to.as_deref(), Some("scanner[2].new_name"));
    }

    #[test]
    fn both_names_in_one_table_are_refused_naming_both() {
        let e = carry("[[scanner]]\nnew_name = 1\nold_name = 2\n", RENAMED).unwrap_err();
        assert_eq!(e.key, "scanner[0].old_name");
        assert!(
            e.problem.contains("`scanner[0].old_name` (line 3"),
            "{}",
            e.problem
        );
        assert!(
            e.problem.contains("`scanner[0].new_name` (line 2)"),
            "{}",
            e.problem
        );
        // Control: either name alone is read.
        assert!(carry("[[scanner]]\nnew_name = 1\n", RENAMED).is_ok());
        assert!(carry("[[scanner]]\nold_name = 2\n", RENAMED).is_ok());
    }

    #[test]
    fn a_config_without_old_keys_finds_nothing() {
        let (_, found) = carry(
            "[[scanner]]\nname = \"a\"\n[redis]\nurl = \"x\"\n",
            OLD_KEYS,
        )
        .unwrap();
        assert!(found.is_empty());
    }
}
