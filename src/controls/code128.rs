//! A Code 128 encoder, code set B only: what the control labels need
//! (printable ASCII), nothing more.
//!
//! A symbol is: the quiet zone (at least 10 modules), START B (value 104),
//! one symbol character per data character (value = ASCII − 32), the check
//! symbol, STOP, the quiet zone. Each symbol character is 11 modules in
//! three bars and three spaces, bar first; STOP is 13 modules, its last bar
//! 2 modules wide. The check symbol is (104 + Σ position × value) mod 103,
//! positions counted from 1 after the start character.
//!
//! Source of the width table, the check symbol and the quiet zone:
//! ISO/IEC 15417:2007, *Information technology — Automatic identification
//! and data capture techniques — Code 128 bar code symbology
//! specification*, table 1 (the symbol character widths) and sections
//! 4.3.3 (check character) and 4.3.4 (quiet zone). The table is a public
//! fact, also listed in ANSI/AIM BC4-1999 (USS-128).

/// The widths of symbol values 0..=105 in modules: bar, space, bar, space,
/// bar, space (ISO/IEC 15417, table 1). Each sums to 11 and its bars to an
/// even number.
const PATTERNS: [[u8; 6]; 106] = [
    [2, 1, 2, 2, 2, 2], // 0: space
    [2, 2, 2, 1, 2, 2],
    [2, 2, 2, 2, 2, 1],
    [1, 2, 1, 2, 2, 3],
    [1, 2, 1, 3, 2, 2],
    [1, 3, 1, 2, 2, 2], // 5
    [1, 2, 2, 2, 1, 3],
    [1, 2, 2, 3, 1, 2],
    [1, 3, 2, 2, 1, 2],
    [2, 2, 1, 2, 1, 3],
    [2, 2, 1, 3, 1, 2], // 10
    [2, 3, 1, 2, 1, 2],
    [1, 1, 2, 2, 3, 2],
    [1, 2, 2, 1, 3, 2],
    [1, 2, 2, 2, 3, 1],
    [1, 1, 3, 2, 2, 2], // 15
    [1, 2, 3, 1, 2, 2],
    [1, 2, 3, 2, 2, 1],
    [2, 2, 3, 2, 1, 1],
    [2, 2, 1, 1, 3, 2],
    [2, 2, 1, 2, 3, 1], // 20
    [2, 1, 3, 2, 1, 2],
    [2, 2, 3, 1, 1, 2],
    [3, 1, 2, 1, 3, 1],
    [3, 1, 1, 2, 2, 2],
    [3, 2, 1, 1, 2, 2], // 25
    [3, 2, 1, 2, 2, 1],
    [3, 1, 2, 2, 1, 2],
    [3, 2, 2, 1, 1, 2],
    [3, 2, 2, 2, 1, 1],
    [2, 1, 2, 1, 2, 3], // 30
    [2, 1, 2, 3, 2, 1],
    [2, 3, 2, 1, 2, 1],
    [1, 1, 1, 3, 2, 3],
    [1, 3, 1, 1, 2, 3],
    [1, 3, 1, 3, 2, 1], // 35
    [1, 1, 2, 3, 1, 3],
    [1, 3, 2, 1, 1, 3],
    [1, 3, 2, 3, 1, 1],
    [2, 1, 1, 3, 1, 3],
    [2, 3, 1, 1, 1, 3], // 40
    [2, 3, 1, 3, 1, 1],
    [1, 1, 2, 1, 3, 3],
    [1, 1, 2, 3, 3, 1],
    [1, 3, 2, 1, 3, 1],
    [1, 1, 3, 1, 2, 3], // 45
    [1, 1, 3, 3, 2, 1],
    [1, 3, 3, 1, 2, 1],
    [3, 1, 3, 1, 2, 1],
    [2, 1, 1, 3, 3, 1],
    [2, 3, 1, 1, 3, 1], // 50
    [2, 1, 3, 1, 1, 3],
    [2, 1, 3, 3, 1, 1],
    [2, 1, 3, 1, 3, 1],
    [3, 1, 1, 1, 2, 3],
    [3, 1, 1, 3, 2, 1], // 55
    [3, 3, 1, 1, 2, 1],
    [3, 1, 2, 1, 1, 3],
    [3, 1, 2, 3, 1, 1],
    [3, 3, 2, 1, 1, 1],
    [3, 1, 4, 1, 1, 1], // 60
    [2, 2, 1, 4, 1, 1],
    [4, 3, 1, 1, 1, 1],
    [1, 1, 1, 2, 2, 4],
    [1, 1, 1, 4, 2, 2],
    [1, 2, 1, 1, 2, 4], // 65
    [1, 2, 1, 4, 2, 1],
    [1, 4, 1, 1, 2, 2],
    [1, 4, 1, 2, 2, 1],
    [1, 1, 2, 2, 1, 4],
    [1, 1, 2, 4, 1, 2], // 70
    [1, 2, 2, 1, 1, 4],
    [1, 2, 2, 4, 1, 1],
    [1, 4, 2, 1, 1, 2],
    [1, 4, 2, 2, 1, 1],
    [2, 4, 1, 2, 1, 1], // 75
    [2, 2, 1, 1, 1, 4],
    [4, 1, 3, 1, 1, 1],
    [2, 4, 1, 1, 1, 2],
    [1, 3, 4, 1, 1, 1],
    [1, 1, 1, 2, 4, 2], // 80
    [1, 2, 1, 1, 4, 2],
    [1, 2, 1, 2, 4, 1],
    [1, 1, 4, 2, 1, 2],
    [1, 2, 4, 1, 1, 2],
    [1, 2, 4, 2, 1, 1], // 85
    [4, 1, 1, 2, 1, 2],
    [4, 2, 1, 1, 1, 2],
    [4, 2, 1, 2, 1, 1],
    [2, 1, 2, 1, 4, 1],
    [2, 1, 4, 1, 2, 1], // 90
    [4, 1, 2, 1, 2, 1],
    [1, 1, 1, 1, 4, 3],
    [1, 1, 1, 3, 4, 1],
    [1, 3, 1, 1, 4, 1],
    [1, 1, 4, 1, 1, 3], // 95
    [1, 1, 4, 3, 1, 1],
    [4, 1, 1, 1, 1, 3],
    [4, 1, 1, 3, 1, 1],
    [1, 1, 3, 1, 4, 1],
    [1, 1, 4, 1, 3, 1], // 100
    [3, 1, 1, 1, 4, 1],
    [4, 1, 1, 1, 3, 1],
    [2, 1, 1, 4, 1, 2], // 103: START A
    [2, 1, 1, 2, 1, 4], // 104: START B
    [2, 1, 1, 2, 3, 2], // 105: START C
];

/// STOP (value 106): bar, space, bar, space, bar, space and the final
/// 2-module bar.
const STOP: [u8; 7] = [2, 3, 3, 1, 1, 1, 2];

/// The START B symbol value.
pub const START_B: u8 = 104;

/// The least quiet zone on each side, in modules (ISO/IEC 15417, 4.3.4).
pub const QUIET_ZONE: usize = 10;

/// A character code set B cannot carry (outside ASCII 32..=127), and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotSetB {
    /// Its position in the text (0-based, in characters).
    pub at: usize,
    /// The character.
    pub char: char,
}

/// One Code 128 symbol: its symbol values from START B to the check
/// symbol (STOP implied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Code128 {
    values: Vec<u8>,
}

impl Code128 {
    /// Encode `text` in code set B.
    pub fn set_b(text: &str) -> Result<Code128, NotSetB> {
        let mut values = Vec::with_capacity(text.len() + 2);
        values.push(START_B);
        for (at, char) in text.chars().enumerate() {
            match u8::try_from(char) {
                Ok(b @ 32..=127) => values.push(b - 32),
                _ => return Err(NotSetB { at, char }),
            }
        }
        let weighted: u32 = values
            .iter()
            .enumerate()
            .map(|(i, &v)| i.max(1) as u32 * u32::from(v))
            .sum();
        values.push((weighted % 103) as u8);
        Ok(Code128 { values })
    }

    /// The symbol values: START B, the data, the check symbol (no STOP).
    #[cfg(test)]
    pub fn values(&self) -> &[u8] {
        &self.values
    }

    /// The check symbol's value.
    pub fn check(&self) -> u8 {
        self.values[self.values.len() - 1]
    }

    /// The widths of every bar and space in modules, from START's first bar
    /// to STOP's last (bar, space, bar, …; quiet zones not included).
    pub fn widths(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.values.len() * 6 + STOP.len());
        for &v in &self.values {
            out.extend_from_slice(&PATTERNS[usize::from(v)]);
        }
        out.extend_from_slice(&STOP);
        out
    }

    /// The symbol's width in modules, quiet zones not included.
    pub fn modules(&self) -> usize {
        self.values.len() * 11 + 13
    }

    /// The bars as (start, width) in modules from the symbol's left edge
    /// (the end of the left quiet zone).
    pub fn bars(&self) -> Vec<(usize, usize)> {
        let mut x = 0;
        let mut out = Vec::with_capacity(self.values.len() * 3 + 4);
        for (i, w) in self.widths().into_iter().map(usize::from).enumerate() {
            if i % 2 == 0 {
                out.push((x, w));
            }
            x += w;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_well_formed() {
        let mut seen = std::collections::HashSet::new();
        for (v, p) in PATTERNS.iter().enumerate() {
            assert_eq!(p.iter().map(|&w| u32::from(w)).sum::<u32>(), 11, "{v}");
            assert_eq!((p[0] + p[2] + p[4]) % 2, 0, "bars of {v} are odd");
            assert!(p.iter().all(|w| (1..=4).contains(w)), "{v}");
            assert!(seen.insert(*p), "{v} repeats a pattern");
        }
        assert_eq!(STOP.iter().map(|&w| u32::from(w)).sum::<u32>(), 13);
    }

    /// Check symbols worked by hand: (104 + Σ i × (ASCII − 32)) mod 103.
    #[test]
    fn check_symbols_match_the_hand_computed_ones() {
        for (text, check) in [
            // "A": 104 + 1×33 = 137; 137 − 103 = 34.
            ("A", 34),
            // "PJJ123C" (the example of Wikipedia's Code 128 article):
            // P 48, J 42, J 42, 1 17, 2 18, 3 19, C 35:
            // 104 + 48 + 84 + 126 + 68 + 90 + 114 + 245 = 879;
            // 879 − 8×103 = 55.
            ("PJJ123C", 55),
            // "SGCTL-REPEAT": S 51, G 39, C 35, T 52, L 44, - 13, R 50,
            // E 37, P 48, E 37, A 33, T 52:
            // 104 + 51 + 78 + 105 + 208 + 220 + 78 + 350 + 296 + 432
            // + 370 + 363 + 624 = 3279; 3279 − 31×103 = 86.
            ("SGCTL-REPEAT", 86),
            // "SGCTL-QTY-24": the first six as above (844 with START),
            // Q 49, T 52, Y 57, - 13, 2 18, 4 20:
            // 844 + 343 + 416 + 513 + 130 + 198 + 240 = 2684;
            // 2684 − 26×103 = 6.
            ("SGCTL-QTY-24", 6),
        ] {
            let c = Code128::set_b(text).unwrap();
            assert_eq!(c.check(), check, "{text}");
            assert_eq!(c.values().len(), text.len() + 2);
            assert_eq!(c.values()[0], START_B);
        }
    }

    #[test]
    fn widths_and_bars_add_up() {
        let c = Code128::set_b("SGCTL-QTY-3").unwrap();
        let widths = c.widths();
        assert_eq!(
            widths.iter().map(|&w| usize::from(w)).sum::<usize>(),
            c.modules()
        );
        // START B, then "S" (51): 2 1 1 2 1 4 | 2 1 3 1 1 3 …; STOP at the end.
        assert_eq!(&widths[..12], &[2, 1, 1, 2, 1, 4, 2, 1, 3, 1, 1, 3]);
        assert_eq!(&widths[widths.len() - 7..], &STOP);
        let bars = c.bars();
        assert_eq!(bars.len(), c.values().len() * 3 + 4);
        assert_eq!(bars[0], (0, 2));
        assert_eq!(bars[1], (3, 1));
        let (x, w) = bars[bars.len() - 1];
        assert_eq!(x + w, c.modules());
    }

    #[test]
    fn only_set_b_characters_are_encoded() {
        assert_eq!(
            Code128::set_b("AB\u{e9}").unwrap_err(),
            NotSetB {
                at: 2,
                char: '\u{e9}'
            }
        );
        assert_eq!(Code128::set_b("\t").unwrap_err().at, 0);
        assert!(Code128::set_b(" ~").is_ok());
    }
}
