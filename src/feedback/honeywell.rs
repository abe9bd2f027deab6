//! Honeywell (Hand Held Products: Xenon, Granit, Voyager, …) Host ACK
//! responses: `[ESC] x,` escape commands that sound the beeper and light
//! the LED.
//!
//! With **Host ACK On** the scanner gives no indication of its own after a
//! read: it sends the data and waits, unable to scan, until the host sends
//! an escape command or its time-out (10 s by default) passes, which it
//! signals with an error tone. So every decision kind sends something,
//! including a certain echo (a short green LED blink). A signal skipped
//! because the decision came after `max_delay_ms` leaves the scanner to
//! its own time-out: keep `max_delay_ms` below it.
//!
//! Each command is ESC (0x1B), one character, and a comma: the terminator,
//! which is required. Commands may be strung together.
//!
//! | command | action |
//! |---|---|
//! | `[ESC] 1,` | green LED for 135 ms |
//! | `[ESC] 4,` / `5,` / `6,` | one beep, low / medium / high pitch |
//! | `[ESC] 7,` | the successful decode and communication indication |
//! | `[ESC] 8,` | the razz or error tone |

use super::Told;

/// ESC, the start of every command.
pub const ESC: u8 = 0x1B;
/// The comma that ends every command.
pub const TERMINATOR: u8 = b',';

/// Green LED for 135 ms.
pub const GREEN_LED_SHORT: u8 = b'1';
/// One low-pitch beep.
pub const BEEP_LOW: u8 = b'4';
/// One medium-pitch beep.
pub const BEEP_MEDIUM: u8 = b'5';
/// One high-pitch beep.
pub const BEEP_HIGH: u8 = b'6';
/// Successful decode and communication to the host.
pub const GOOD: u8 = b'7';
/// Razz or error tone: unsuccessful decode or communication.
pub const ERROR: u8 = b'8';

/// `[ESC] c,` for each command character, strung together.
pub fn commands(chars: &[u8]) -> Vec<u8> {
    chars.iter().flat_map(|&c| [ESC, c, TERMINATOR]).collect()
}

/// The command characters sent for `told`.
///
/// | told | commands | the person hears / sees |
/// |---|---|---|
/// | committed | `7` | the good-read indication |
/// | echo | `1` | a short green blink, no sound (releases the scanner) |
/// | ambiguous | `4`, `4` | two low beeps |
/// | rejected | `8` | the error tone |
/// | waiting | `5`, `5` | two medium beeps |
/// | control | `6`, `6` | two high beeps |
/// | lapsed | `5`, `4` | a medium beep, then a low one |
/// | expired | `8`, `8` | the error tone twice |
/// | expiring | `7`, `4` | the good-read indication, then a low beep |
/// | recalled | `6`, `4`, `6`, `4` | high, low, high, low |
/// | unknown | `4`, `5`, `4` | low, medium, low |
/// | suspect | `8`, `6`, `6` | the error tone, then two high beeps |
pub fn command_chars(told: Told) -> &'static [u8] {
    match told {
        Told::Committed => &[GOOD],
        Told::Echo => &[GREEN_LED_SHORT],
        Told::Ambiguous => &[BEEP_LOW, BEEP_LOW],
        Told::Rejected => &[ERROR],
        Told::Waiting => &[BEEP_MEDIUM, BEEP_MEDIUM],
        Told::Control => &[BEEP_HIGH, BEEP_HIGH],
        Told::Lapsed => &[BEEP_MEDIUM, BEEP_LOW],
        Told::Expired => &[ERROR, ERROR],
        Told::Expiring => &[GOOD, BEEP_LOW],
        Told::Recalled => &[BEEP_HIGH, BEEP_LOW, BEEP_HIGH, BEEP_LOW],
        Told::Unknown => &[BEEP_LOW, BEEP_MEDIUM, BEEP_LOW],
        Told::Suspect => &[ERROR, BEEP_HIGH, BEEP_HIGH],
    }
}

/// The bytes sent for `told`.
pub fn bytes(told: Told) -> Vec<u8> {
    commands(command_chars(told))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_decision_kind_is_exactly_these_bytes() {
        let expected: [(Told, &[u8]); 7] = [
            (Told::Committed, b"\x1b7,"),
            (Told::Echo, b"\x1b1,"),
            (Told::Ambiguous, b"\x1b4,\x1b4,"),
            (Told::Rejected, b"\x1b8,"),
            (Told::Waiting, b"\x1b5,\x1b5,"),
            (Told::Control, b"\x1b6,\x1b6,"),
            (Told::Lapsed, b"\x1b5,\x1b4,"),
        ];
        for (told, want) in expected {
            assert_eq!(bytes(told), want, "{told}");
        }
    }

    #[test]
    fn the_guides_example_string() {
        // "[ESC]4,[ESC]5,[ESC]6," beeps low, medium, high.
        assert_eq!(
            commands(&[BEEP_LOW, BEEP_MEDIUM, BEEP_HIGH]),
            [0x1B, b'4', b',', 0x1B, b'5', b',', 0x1B, b'6', b',']
        );
    }

    #[test]
    fn every_kind_releases_a_waiting_scanner() {
        // Host ACK On: the scanner waits for a command after every read.
        for told in Told::ALL {
            let b = bytes(told);
            assert!(!b.is_empty(), "{told}");
            assert!(
                b.chunks(3).all(|c| c[0] == ESC && c[2] == TERMINATOR),
                "{told}"
            );
        }
    }
}
