//! The consumers of the gateway's own ledger (`ledger export --follow
//! --consumer`, `ledger consumers remove`, `audit prune`): target
//! `scangate::ledger::cursor`.

use super::Event;

// The log targets operators filter on (`RUST_LOG`, the journal): keep the values.
const CURSOR_TARGET: &str = "scangate::ledger::cursor";

/// What happened to a ledger consumer's cursor.
pub enum LedgerConsumer<'a> {
    /// A new consumer was registered, reading from the first entry the
    /// ledger keeps (INFO).
    Registered {
        /// Its name.
        consumer: &'a str,
    },
    /// The ledger's positions started again (every entry had been
    /// pruned): the consumer reads from the start (WARN).
    Restarted {
        /// Its name.
        consumer: &'a str,
    },
    /// The consumer was removed (INFO).
    Removed {
        /// Its name.
        consumer: &'a str,
    },
    /// A prune removed entries the consumer had not acknowledged, because
    /// they were past `[records] keep_days` + `consumer_hold_days`
    /// (WARN; the checkpoint record names them too).
    PrunedUnacknowledged {
        /// Its name.
        consumer: &'a str,
        /// How many.
        entries: i64,
        /// The first of them (ledger position).
        first_seq: i64,
        /// The last of them.
        through_seq: i64,
        /// `[records] keep_days` + `consumer_hold_days`.
        held_days: u64,
    },
}

impl Event for LedgerConsumer<'_> {
    /// Log it: WARN for entries a consumer will not get in order, else INFO.
    fn emit(self) {
        match self {
            LedgerConsumer::Registered { consumer } => tracing::info!(
                target: CURSOR_TARGET,
                consumer,
                "ledger consumer {consumer:?} registered: it reads from the first entry the ledger keeps, and `audit prune` keeps what it has not acknowledged"
            ),
            LedgerConsumer::Restarted { consumer } => tracing::warn!(
                target: CURSOR_TARGET,
                consumer,
                "the ledger's positions started again from 1 (every entry had been pruned): consumer {consumer:?} reads from the first entry (dedup by scan_uuid)"
            ),
            LedgerConsumer::Removed { consumer } => tracing::info!(
                target: CURSOR_TARGET,
                consumer,
                "ledger consumer {consumer:?} removed: it no longer holds entries from a prune"
            ),
            LedgerConsumer::PrunedUnacknowledged {
                consumer,
                entries,
                first_seq,
                through_seq,
                held_days,
            } => tracing::warn!(
                target: CURSOR_TARGET,
                consumer,
                entries,
                first_seq,
                through_seq,
                "pruned {entries} ledger entries ({first_seq}..={through_seq}) that consumer {consumer:?} had not acknowledged: they were captured more than {held_days} days ago ([records] keep_days + consumer_hold_days); their archive holds them, and the checkpoint record names them"
            ),
        }
    }
}
