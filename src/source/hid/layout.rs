//! Keyboard layouts: what a HID usage (Keyboard/Keypad page 0x07) types.
//!
//! A keyboard-wedge scanner "types" its data as if a person pressed keys on
//! a keyboard with the layout the scanner is set to. The same text comes as
//! different usages under different layouts (on a German scanner `z` is the
//! key HID calls `Y`), so the layout is a per-scanner setting. Built in:
//! US (`us`) and German (`de`, QWERTZ with AltGr). Tables follow TinyUSB's
//! `HID_KEYCODE_TO_ASCII` (US) and the Linux/xkb `de` layout (German).
//!
//! Only what matters for barcode data is mapped: printable characters,
//! Enter, Tab, the keypad. Escape, Backspace, arrows, Caps Lock and the like
//! type nothing here.

/// A keyboard layout the decoder can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
pub enum Layout {
    /// US English (ANSI), the factory default of most scanners.
    #[serde(rename = "us")]
    Us,
    /// German (QWERTZ, ISO), AltGr = right Alt.
    #[serde(rename = "de")]
    German,
}

impl Layout {
    /// Every built-in layout.
    pub const ALL: [Layout; 2] = [Layout::Us, Layout::German];

    /// The config / command-line name (`us`, `de`).
    pub fn name(self) -> &'static str {
        match self {
            Layout::Us => "us",
            Layout::German => "de",
        }
    }

    /// Parse the config / command-line name.
    pub fn parse(s: &str) -> Option<Layout> {
        match s {
            "us" => Some(Layout::Us),
            "de" => Some(Layout::German),
            _ => None,
        }
    }

    /// What `usage` types with the given shift / AltGr state.
    pub fn key(self, usage: u8, shift: bool, altgr: bool) -> LayoutKey {
        if let Some(k) = common(usage) {
            return k;
        }
        match self {
            Layout::Us => us(usage, shift),
            Layout::German => german(usage, shift, altgr),
        }
    }
}

/// What one key press types under a layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutKey {
    /// A character.
    Char(char),
    /// A dead key: types its accent together with the next key (the accent
    /// alone when the next key is Space).
    Dead(char),
    /// Enter (main or keypad).
    Enter,
    /// Tab.
    Tab,
    /// Types nothing (Escape, Backspace, Caps Lock, function keys, …).
    Nothing,
}

/// Keys that type the same under every supported layout.
fn common(usage: u8) -> Option<LayoutKey> {
    Some(match usage {
        0x28 | 0x58 => LayoutKey::Enter,
        0x2B => LayoutKey::Tab,
        0x2C => LayoutKey::Char(' '),
        0x54 => LayoutKey::Char('/'),
        0x55 => LayoutKey::Char('*'),
        0x56 => LayoutKey::Char('-'),
        0x57 => LayoutKey::Char('+'),
        0x59..=0x61 => LayoutKey::Char((b'1' + (usage - 0x59)) as char),
        0x62 => LayoutKey::Char('0'),
        _ => return None,
    })
}

fn us(usage: u8, shift: bool) -> LayoutKey {
    let pick = |lower: char, upper: char| LayoutKey::Char(if shift { upper } else { lower });
    match usage {
        0x04..=0x1D => {
            let c = (b'a' + (usage - 0x04)) as char;
            pick(c, c.to_ascii_uppercase())
        }
        0x1E..=0x26 => {
            let i = (usage - 0x1E) as usize;
            pick((b'1' + i as u8) as char, b"!@#$%^&*("[i] as char)
        }
        0x27 => pick('0', ')'),
        0x2D => pick('-', '_'),
        0x2E => pick('=', '+'),
        0x2F => pick('[', '{'),
        0x30 => pick(']', '}'),
        0x31 => pick('\\', '|'),
        0x32 => pick('#', '~'),
        0x33 => pick(';', ':'),
        0x34 => pick('\'', '"'),
        0x35 => pick('`', '~'),
        0x36 => pick(',', '<'),
        0x37 => pick('.', '>'),
        0x38 => pick('/', '?'),
        0x63 => LayoutKey::Char('.'),
        _ => LayoutKey::Nothing,
    }
}

fn german(usage: u8, shift: bool, altgr: bool) -> LayoutKey {
    let pick = |lower: char, upper: char| LayoutKey::Char(if shift { upper } else { lower });
    if altgr {
        return match usage {
            0x14 => LayoutKey::Char('@'),  // q
            0x08 => LayoutKey::Char('€'),  // e
            0x10 => LayoutKey::Char('µ'),  // m
            0x1F => LayoutKey::Char('²'),  // 2
            0x20 => LayoutKey::Char('³'),  // 3
            0x24 => LayoutKey::Char('{'),  // 7
            0x25 => LayoutKey::Char('['),  // 8
            0x26 => LayoutKey::Char(']'),  // 9
            0x27 => LayoutKey::Char('}'),  // 0
            0x2D => LayoutKey::Char('\\'), // ß
            0x30 => LayoutKey::Char('~'),  // +
            0x64 => LayoutKey::Char('|'),  // < (ISO key left of y)
            _ => LayoutKey::Nothing,
        };
    }
    match usage {
        // QWERTZ: the keys HID calls Y and Z are swapped.
        0x1C => pick('z', 'Z'),
        0x1D => pick('y', 'Y'),
        0x04..=0x1B => {
            let c = (b'a' + (usage - 0x04)) as char;
            pick(c, c.to_ascii_uppercase())
        }
        0x1E..=0x26 => {
            let i = (usage - 0x1E) as usize;
            let shifted = ['!', '"', '§', '$', '%', '&', '/', '(', ')'][i];
            pick((b'1' + i as u8) as char, shifted)
        }
        0x27 => pick('0', '='),
        0x2D => pick('ß', '?'),
        0x2E => LayoutKey::Dead(if shift { '`' } else { '´' }),
        0x2F => pick('ü', 'Ü'),
        0x30 => pick('+', '*'),
        // Linux maps both the ANSI backslash key and the ISO "#" key to
        // KEY_BACKSLASH, which the German layout types as # / '.
        0x31 | 0x32 => pick('#', '\''),
        0x33 => pick('ö', 'Ö'),
        0x34 => pick('ä', 'Ä'),
        0x35 => {
            if shift {
                LayoutKey::Char('°')
            } else {
                LayoutKey::Dead('^')
            }
        }
        0x36 => pick(',', ';'),
        0x37 => pick('.', ':'),
        0x38 => pick('-', '_'),
        0x64 => pick('<', '>'),
        0x63 => LayoutKey::Char(','),
        _ => LayoutKey::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every printable ASCII character can be typed under every layout
    /// (directly or as dead key + Space), and no two key combinations of
    /// the main block type the same character ambiguously wrong.
    #[test]
    fn printable_ascii_is_typeable_under_every_layout() {
        for layout in Layout::ALL {
            for c in ' '..='~' {
                let mut found = false;
                for usage in 0x04..=0x64u8 {
                    for (shift, altgr) in [(false, false), (true, false), (false, true)] {
                        match layout.key(usage, shift, altgr) {
                            LayoutKey::Char(k) | LayoutKey::Dead(k) if k == c => found = true,
                            _ => {}
                        }
                    }
                }
                assert!(found, "{c:?} cannot be typed under {}", layout.name());
            }
        }
    }

    #[test]
    fn german_swaps_y_and_z_and_has_altgr() {
        assert_eq!(Layout::German.key(0x1C, false, false), LayoutKey::Char('z'));
        assert_eq!(Layout::Us.key(0x1C, false, false), LayoutKey::Char('y'));
        assert_eq!(Layout::German.key(0x14, false, true), LayoutKey::Char('@'));
        assert_eq!(Layout::German.key(0x26, false, true), LayoutKey::Char(']'));
        assert_eq!(Layout::German.key(0x24, true, false), LayoutKey::Char('/'));
    }
}
