//! What a scanner is told about one read, once it is decided: the
//! vocabulary the feedback protocols, the sources that send them and the
//! events that count them share.

use std::fmt;

/// What the scanner is told about one read, once it is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Told {
    /// A new pick: recorded once in the ledger. Nothing more to do.
    Committed,
    /// Certainly an echo of a pick already recorded (a double-fire, a
    /// retransmit, a re-scan of the same item): nothing was added, and
    /// nothing needs doing.
    Echo,
    /// Taken as an echo, but it could have been a second identical item:
    /// if the person did pick another one, they scan REPEAT (or follow the
    /// site's procedure) so it is recorded.
    Ambiguous,
    /// The read was refused (unreadable, torn, not a barcode scangate
    /// accepts): it is stored with the reason, but it is not a pick. Scan
    /// the item again.
    Rejected,
    /// Stored, but the facility store was unreachable: it will be decided
    /// when the store answers. Carry on; nothing is lost.
    Waiting,
    /// A control label (REPEAT, QUANTITY N) was read: it declares the next
    /// read on this scanner. Nothing was recorded yet: scan the item now.
    Control,
    /// A control label read that no read followed in time: it declared
    /// nothing. Scan it again, then the item, if that was meant.
    Lapsed,
    /// Recorded (or waiting), but the label's expiry date (AI 17) has
    /// passed: do not dispense it; set it aside as the site's procedure
    /// says.
    Expired,
    /// Recorded (or waiting), but the label expires within `[checks]
    /// expiry_warn_days`: look at the date.
    Expiring,
    /// Recorded (or waiting), but an ongoing recall names the product (and
    /// its lot, or every lot): stop and check the recall.
    Recalled,
    /// Recorded (or waiting), but the product is not in the product data
    /// loaded on the gateway: check the item.
    Unknown,
    /// Recorded, but this serialised item was received before in this
    /// facility: a possible counterfeit or duplicated shipment. Set it
    /// aside and check where it came from.
    Suspect,
}

impl Told {
    /// Every kind, in declaration order.
    pub const ALL: [Told; 12] = [
        Told::Committed,
        Told::Echo,
        Told::Ambiguous,
        Told::Rejected,
        Told::Waiting,
        Told::Control,
        Told::Lapsed,
        Told::Expired,
        Told::Expiring,
        Told::Recalled,
        Told::Unknown,
        Told::Suspect,
    ];

    /// Whether it is an alert about the product (expired, expiring,
    /// recalled, unknown, suspect) rather than about the decision: it is told
    /// instead of `committed` or `waiting`, and the read is recorded all
    /// the same.
    pub fn is_alert(self) -> bool {
        matches!(
            self,
            Told::Expired | Told::Expiring | Told::Recalled | Told::Unknown | Told::Suspect
        )
    }

    /// The lower-case name, as in the config keys and the docs.
    pub fn as_str(self) -> &'static str {
        match self {
            Told::Committed => "committed",
            Told::Echo => "echo",
            Told::Ambiguous => "ambiguous",
            Told::Rejected => "rejected",
            Told::Waiting => "waiting",
            Told::Control => "control",
            Told::Lapsed => "lapsed",
            Told::Expired => "expired",
            Told::Expiring => "expiring",
            Told::Recalled => "recalled",
            Told::Unknown => "unknown",
            Told::Suspect => "suspect",
        }
    }
}

impl fmt::Display for Told {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
