//! Datalogic (and PSC) RS-232 host commands: single characters the scanner
//! acts on (Magellan, PowerScan, QuickScan product reference guides).
//!
//! | command | byte | action |
//! |---|---|---|
//! | Force Good Read Tone | 0x01 | one good-read tone, whatever the beeper setting |
//! | Beep Good Read Tone | `B` 0x42 | one good-read tone if the good-read beep is enabled |
//! | Not On File | `F` 0x46 | a long series of beeps; on PowerScan models it also disables the scanner |
//! | Enable Scanner | `E` 0x45 | enables the scanner |
//!
//! The scanner sounds its own good-read beep on decode (unless configured
//! off) and does not wait for the host, so a certain echo and a waiting
//! read get nothing more. There is no error tone of its own among these
//! commands: a rejected read gets Not On File, followed by Enable so that a
//! model on which Not On File disables the scanner is scannable again.
//! Whether two Force Good Read Tones in a row sound as two tones was not
//! found in the guides: try it on the model (`docs/scanner-feedback.md`),
//! and use `protocol = "raw"` where it does not.

use super::Told;

/// Force Good Read Tone.
pub const FORCE_GOOD_READ: u8 = 0x01;
/// Not On File indication.
pub const NOT_ON_FILE: u8 = b'F';
/// Enable Scanner.
pub const ENABLE: u8 = b'E';

/// The bytes sent for `told`.
///
/// | told | bytes | the person hears |
/// |---|---|---|
/// | committed | 01 | one good-read tone (after the decode beep) |
/// | echo | — | nothing more |
/// | ambiguous | 01 01 | two good-read tones |
/// | rejected | `F` `E` | the not-on-file series of beeps |
/// | waiting | — | nothing more |
/// | control | 01 01 01 | three good-read tones |
/// | lapsed | `F` `E` | the not-on-file series (as rejected: these commands have no other tone) |
/// | expired | 01 `F` `E` | a good-read tone, then the not-on-file series |
/// | recalled | 01 01 `F` `E` | two good-read tones, then the not-on-file series |
/// | expiring | 01 01 01 01 | four good-read tones |
/// | unknown | 01 01 01 01 01 | five good-read tones |
/// | suspect | 01 01 01 `F` `E` | three good-read tones, then the not-on-file series |
pub fn bytes(told: Told) -> &'static [u8] {
    match told {
        Told::Committed => &[FORCE_GOOD_READ],
        Told::Echo => &[],
        Told::Ambiguous => &[FORCE_GOOD_READ, FORCE_GOOD_READ],
        Told::Rejected => &[NOT_ON_FILE, ENABLE],
        Told::Waiting => &[],
        Told::Control => &[FORCE_GOOD_READ, FORCE_GOOD_READ, FORCE_GOOD_READ],
        Told::Lapsed => &[NOT_ON_FILE, ENABLE],
        Told::Expired => &[FORCE_GOOD_READ, NOT_ON_FILE, ENABLE],
        Told::Recalled => &[FORCE_GOOD_READ, FORCE_GOOD_READ, NOT_ON_FILE, ENABLE],
        Told::Expiring => &[FORCE_GOOD_READ; 4],
        Told::Unknown => &[FORCE_GOOD_READ; 5],
        Told::Suspect => &[
            FORCE_GOOD_READ,
            FORCE_GOOD_READ,
            FORCE_GOOD_READ,
            NOT_ON_FILE,
            ENABLE,
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_decision_kind_is_exactly_these_bytes() {
        let expected: [(Told, &[u8]); 7] = [
            (Told::Committed, &[0x01]),
            (Told::Echo, &[]),
            (Told::Ambiguous, &[0x01, 0x01]),
            (Told::Rejected, &[0x46, 0x45]),
            (Told::Waiting, &[]),
            (Told::Control, &[0x01, 0x01, 0x01]),
            (Told::Lapsed, &[0x46, 0x45]),
        ];
        for (told, want) in expected {
            assert_eq!(bytes(told), want, "{told}");
        }
    }
}
