//! Zebra (Symbol, Motorola) Simple Serial Interface: the BEEP packets a
//! host sends to sound the scanner's beeper.
//!
//! # Packet
//!
//! | byte | field |
//! |---|---|
//! | 0 | Length: the bytes of the packet without the checksum (max 0xFF) |
//! | 1 | Opcode (BEEP 0xE6, LED_ON 0xE7, LED_OFF 0xE8, CMD_ACK 0xD0, CMD_NAK 0xD1) |
//! | 2 | Message source: 0x04 host, 0x00 decoder |
//! | 3 | Status: bit 0 retransmit; unused bits 0 |
//! | 4… | Data |
//! | last 2 | Checksum: the 2's complement of the 16-bit sum of every byte before it, high byte first |
//!
//! # What scangate sends
//!
//! One BEEP packet per decision, with a beep code from the scanner's beep
//! code table ([`beep_code`]); a certain echo gets nothing (the scanner
//! has already sounded its own decode beep, if that is enabled).
//!
//! With ACK/NAK handshaking on (the scanner's default) the scanner answers
//! every host packet with CMD_ACK (or CMD_NAK) and would resend its own
//! packets until the host acknowledges them. scangate sends and does not
//! wait: a BEEP that is lost or NAKed is not retried, and the scanner's
//! CMD_ACK comes back on the serial line, where [`reply_at`] recognises it
//! so that it is dropped rather than read as a scan. LED_ON/LED_OFF are not
//! used: an LED_ON stays lit until an LED_OFF, and the meaning of the LED
//! selection bits was not found in a vendor document
//! (`docs/scanner-feedback.md`).

use super::Told;

/// BEEP: sound the beeper (host → scanner). Data: one beep code.
pub const BEEP: u8 = 0xE6;
/// LED_ON: activate LED output (host → scanner). Not used by scangate.
pub const LED_ON: u8 = 0xE7;
/// LED_OFF: de-activate LED output (host → scanner). Not used by scangate.
pub const LED_OFF: u8 = 0xE8;
/// CMD_ACK: positive acknowledgment of a received packet (either way).
pub const CMD_ACK: u8 = 0xD0;
/// CMD_NAK: negative acknowledgment of a received packet (either way).
pub const CMD_NAK: u8 = 0xD1;
/// REQUEST_REVISION: ask the scanner for its software revision (host →
/// scanner; no data).
pub const REQUEST_REVISION: u8 = 0xA3;
/// REPLY_REVISION: the scanner's answer, its revision string in ASCII
/// (`S/W_REVISION BOARD_TYPE SCANNER_ID PGM_CHKSUM`).
pub const REPLY_REVISION: u8 = 0xA4;
/// Message source of a packet the host sends.
pub const SOURCE_HOST: u8 = 0x04;
/// Message source of a packet the scanner (decoder) sends.
pub const SOURCE_DECODER: u8 = 0x00;
/// Most data bytes in one packet (the length byte counts 4 header bytes).
pub const MAX_DATA: usize = 0xFF - 4;

/// Beep codes of the scanner's beep code table (the BEEP packet's data).
pub mod beep {
    /// One short high beep.
    pub const ONE_SHORT_HIGH: u8 = 0x00;
    /// Two short high beeps.
    pub const TWO_SHORT_HIGH: u8 = 0x01;
    /// Three short high beeps.
    pub const THREE_SHORT_HIGH: u8 = 0x02;
    /// One short low beep.
    pub const ONE_SHORT_LOW: u8 = 0x05;
    /// Two short low beeps.
    pub const TWO_SHORT_LOW: u8 = 0x06;
    /// One long low beep.
    pub const ONE_LONG_LOW: u8 = 0x0F;
    /// Two long low beeps.
    pub const TWO_LONG_LOW: u8 = 0x10;
    /// Three long low beeps.
    pub const THREE_LONG_LOW: u8 = 0x11;
    /// Fast warble.
    pub const FAST_WARBLE: u8 = 0x14;
    /// Slow warble.
    pub const SLOW_WARBLE: u8 = 0x15;
    /// Low-high.
    pub const LOW_HIGH: u8 = 0x17;
    /// High-low-high.
    pub const HIGH_LOW_HIGH: u8 = 0x18;
    /// Low-high-low.
    pub const LOW_HIGH_LOW: u8 = 0x19;
}

/// The checksum of `bytes`: the 2's complement of their 16-bit sum.
pub fn checksum(bytes: &[u8]) -> u16 {
    let sum = bytes
        .iter()
        .fold(0u16, |s, &b| s.wrapping_add(u16::from(b)));
    sum.wrapping_neg()
}

/// A host packet: length, `opcode`, source 0x04 (host), status 0 (first
/// transmission), `data`, checksum (high byte first).
///
/// # Panics
///
/// If `data` is longer than [`MAX_DATA`] (the length is one byte).
pub fn packet(opcode: u8, data: &[u8]) -> Vec<u8> {
    assert!(data.len() <= MAX_DATA, "SSI data of {} bytes", data.len());
    let mut p = Vec::with_capacity(6 + data.len());
    p.push((4 + data.len()) as u8);
    p.extend_from_slice(&[opcode, SOURCE_HOST, 0x00]);
    p.extend_from_slice(data);
    p.extend_from_slice(&checksum(&p).to_be_bytes());
    p
}

/// Whether `packet` is exactly one well-formed SSI packet: its length byte
/// matches and its checksum is right.
pub fn verify(packet: &[u8]) -> bool {
    let Some(&len) = packet.first() else {
        return false;
    };
    let len = len as usize;
    if len < 4 || packet.len() != len + 2 {
        return false;
    }
    let sent = u16::from_be_bytes([packet[len], packet[len + 1]]);
    checksum(&packet[..len]) == sent
}

/// A BEEP packet for `code`.
pub fn beep(code: u8) -> Vec<u8> {
    packet(BEEP, &[code])
}

/// The beep code for `told`; `None`: nothing is sent.
///
/// | told | beep |
/// |---|---|
/// | committed | one short high |
/// | echo | — |
/// | ambiguous | high-low-high |
/// | rejected | two long low |
/// | waiting | two short high |
/// | control | three short high |
/// | lapsed | two short low |
/// | expired | three long low |
/// | expiring | low-high |
/// | recalled | fast warble |
/// | unknown | low-high-low |
/// | suspect | slow warble |
pub fn beep_code(told: Told) -> Option<u8> {
    match told {
        Told::Committed => Some(beep::ONE_SHORT_HIGH),
        Told::Echo => None,
        Told::Ambiguous => Some(beep::HIGH_LOW_HIGH),
        Told::Rejected => Some(beep::TWO_LONG_LOW),
        Told::Waiting => Some(beep::TWO_SHORT_HIGH),
        Told::Control => Some(beep::THREE_SHORT_HIGH),
        Told::Lapsed => Some(beep::TWO_SHORT_LOW),
        Told::Expired => Some(beep::THREE_LONG_LOW),
        Told::Expiring => Some(beep::LOW_HIGH),
        Told::Recalled => Some(beep::FAST_WARBLE),
        Told::Unknown => Some(beep::LOW_HIGH_LOW),
        Told::Suspect => Some(beep::SLOW_WARBLE),
    }
}

/// The bytes sent for `told`: a BEEP packet, or nothing.
pub fn bytes(told: Told) -> Vec<u8> {
    beep_code(told).map(beep).unwrap_or_default()
}

/// The REQUEST_REVISION packet: `04 A3 04 00 FF 55`.
pub fn request_revision() -> Vec<u8> {
    packet(REQUEST_REVISION, &[])
}

/// The host's CMD_ACK of a packet the scanner sent (its REPLY_REVISION):
/// `04 D0 04 00 FF 28`.
pub fn host_ack() -> Vec<u8> {
    packet(CMD_ACK, &[])
}

/// A scanner's REPLY_REVISION packet at the start of `buf`: its data and
/// its length in bytes. `None` for anything else (including a packet not
/// yet complete).
pub fn revision_at(buf: &[u8]) -> Option<(&[u8], usize)> {
    let len = *buf.first()? as usize + 2;
    let p = buf.get(..len)?;
    (verify(p) && p[1] == REPLY_REVISION && p[2] == SOURCE_DECODER).then(|| (&p[4..len - 2], len))
}

/// The software revision a REPLY_REVISION's data names (its first field),
/// if the data is a revision string: printable ASCII, not empty.
pub fn software_revision(data: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(data).ok()?;
    if !text.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
        return None;
    }
    text.split_whitespace().next().map(str::to_string)
}

/// The scanner's answer to a host packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// CMD_ACK: the packet was received.
    Ack,
    /// CMD_NAK with its cause byte (absent in a short NAK).
    Nak(Option<u8>),
}

/// A scanner's CMD_ACK or CMD_NAK packet at the start of `buf`, and its
/// length in bytes: what the serial source drops instead of reading it as
/// a scan. `None` for anything else (including a packet not yet complete).
pub fn reply_at(buf: &[u8]) -> Option<(Reply, usize)> {
    let len = *buf.first()? as usize + 2;
    let p = buf.get(..len)?;
    if !verify(p) || p[2] != SOURCE_DECODER {
        return None;
    }
    match p[1] {
        CMD_ACK => Some((Reply::Ack, len)),
        CMD_NAK => Some((Reply::Nak(p.get(4).copied().filter(|_| len > 6)), len)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checksum computed independently of [`checksum`]: the sum in a
    /// wide integer, then 0x10000 minus it.
    fn independent_checksum(bytes: &[u8]) -> [u8; 2] {
        let sum: u32 = bytes.iter().map(|&b| b as u32).sum();
        let ck = (0x1_0000 - (sum & 0xFFFF)) & 0xFFFF;
        [(ck >> 8) as u8, (ck & 0xFF) as u8]
    }

    #[test]
    fn the_aim_off_packet_of_the_integration_guide() {
        // AIM_OFF (0xC4), no data: 04 C4 04 00, sum 0xCC → FF 34.
        assert_eq!(packet(0xC4, &[]), [0x04, 0xC4, 0x04, 0x00, 0xFF, 0x34]);
    }

    #[test]
    fn each_decision_kind_is_exactly_these_bytes() {
        let expected: [(Told, &[u8]); 7] = [
            // 05 E6 04 00 00: sum 0xEF → 0xFF11.
            (Told::Committed, &[0x05, 0xE6, 0x04, 0x00, 0x00, 0xFF, 0x11]),
            (Told::Echo, &[]),
            // sum 0xEF + 0x18 = 0x107 → 0xFEF9.
            (Told::Ambiguous, &[0x05, 0xE6, 0x04, 0x00, 0x18, 0xFE, 0xF9]),
            // sum 0xEF + 0x10 = 0xFF → 0xFF01.
            (Told::Rejected, &[0x05, 0xE6, 0x04, 0x00, 0x10, 0xFF, 0x01]),
            // sum 0xEF + 0x01 = 0xF0 → 0xFF10.
            (Told::Waiting, &[0x05, 0xE6, 0x04, 0x00, 0x01, 0xFF, 0x10]),
            // sum 0xEF + 0x02 = 0xF1 → 0xFF0F.
            (Told::Control, &[0x05, 0xE6, 0x04, 0x00, 0x02, 0xFF, 0x0F]),
            // sum 0xEF + 0x06 = 0xF5 → 0xFF0B.
            (Told::Lapsed, &[0x05, 0xE6, 0x04, 0x00, 0x06, 0xFF, 0x0B]),
        ];
        for (told, want) in expected {
            let got = bytes(told);
            assert_eq!(got, want, "{told}");
            if !got.is_empty() {
                assert!(verify(&got), "{told}");
                assert_eq!(
                    got[got.len() - 2..],
                    independent_checksum(&got[..got.len() - 2])
                );
            }
        }
    }

    #[test]
    fn checksums_match_the_independent_sum_for_every_code() {
        for code in 0..=0xFFu8 {
            let p = beep(code);
            assert_eq!(p[5..], independent_checksum(&p[..5]), "code {code:#04x}");
            assert!(verify(&p));
        }
        let long = packet(0x80, &[0xFF; MAX_DATA]);
        assert_eq!(long[0], 0xFF);
        assert!(verify(&long));
    }

    #[test]
    fn verify_refuses_damage() {
        let good = beep(beep::ONE_SHORT_HIGH);
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x01;
            assert!(!verify(&bad), "byte {i} flipped");
        }
        assert!(!verify(&good[..good.len() - 1]));
        assert!(!verify(&[]));
        assert!(!verify(&[0x02, 0x00, 0xFF, 0xFE]));
    }

    #[test]
    fn the_revision_request_and_its_reply() {
        // REQUEST_REVISION: 04 A3 04 00, sum 0xAB → FF 55.
        assert_eq!(request_revision(), [0x04, 0xA3, 0x04, 0x00, 0xFF, 0x55]);
        // The host's CMD_ACK: 04 D0 04 00, sum 0xD8 → FF 28.
        assert_eq!(host_ack(), [0x04, 0xD0, 0x04, 0x00, 0xFF, 0x28]);
        // A REPLY_REVISION from the decoder, its string in the guide's
        // form (S/W revision, board type, scanner ID, checksum).
        let mut reply = vec![0u8, REPLY_REVISION, SOURCE_DECODER, 0x00];
        reply.extend_from_slice(b"NBRPUCAM 0 SE923 7A2C");
        reply[0] = reply.len() as u8;
        reply.extend_from_slice(&checksum(&reply).to_be_bytes());
        let (data, n) = revision_at(&reply).unwrap();
        assert_eq!(n, reply.len());
        assert_eq!(software_revision(data).as_deref(), Some("NBRPUCAM"));
        // Damaged, from the host, or another opcode: not a reply.
        let mut bad = reply.clone();
        bad[6] ^= 1;
        assert_eq!(revision_at(&bad), None);
        assert_eq!(revision_at(&reply[..reply.len() - 1]), None);
        assert_eq!(revision_at(&packet(REPLY_REVISION, b"X")), None);
        // Data that is no revision string.
        assert_eq!(software_revision(&[0xFF, 0x00]), None);
        assert_eq!(software_revision(b"   "), None);
    }

    #[test]
    fn the_scanners_acks_and_naks_are_recognised() {
        // CMD_ACK from the decoder: 04 D0 00 00, sum 0xD4 → FF 2C.
        let ack = [0x04, CMD_ACK, SOURCE_DECODER, 0x00, 0xFF, 0x2C];
        assert_eq!(reply_at(&ack), Some((Reply::Ack, 6)));
        let mut with_scan = ack.to_vec();
        with_scan.extend_from_slice(b"0123\r");
        assert_eq!(reply_at(&with_scan), Some((Reply::Ack, 6)));
        let mut nak = vec![0x05, CMD_NAK, SOURCE_DECODER, 0x00, 0x02];
        nak.extend_from_slice(&checksum(&nak).to_be_bytes());
        assert_eq!(reply_at(&nak), Some((Reply::Nak(Some(0x02)), 7)));
        // Not a reply: the host's own packet, a torn one, scan data.
        assert_eq!(reply_at(&packet(CMD_ACK, &[])), None);
        assert_eq!(reply_at(&ack[..5]), None);
        assert_eq!(reply_at(b"0123456789012\r"), None);
        assert_eq!(reply_at(&[]), None);
    }
}
