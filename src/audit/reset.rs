//! `scangate state reset`: a new audit chain whose first record names the
//! lost state. The store moves the lost database aside and creates a new
//! one ([`identity::begin_reset`]); this writes the new identity and the
//! reset record in one transaction, then anchors the new head.

use super::{AuditRecord, AuditStateReset, Chain};
use crate::store::StoreError;
use crate::store::identity::{self, Begun, Head, ResetStart, StateId};
use std::path::{Path, PathBuf};

/// What `scangate state reset` did, or why it did nothing.
#[derive(Debug)]
pub enum Reset {
    /// A new state was started; its first audit record names the lost one.
    Done {
        /// The new state's identity.
        new_id: String,
        /// The lost state's.
        lost_id: String,
        /// Files moved aside (full paths), in place of the database.
        moved_aside: Vec<PathBuf>,
    },
    /// The state directory's database is there and its own: nothing to reset.
    Intact {
        /// Its identity.
        id: Option<String>,
    },
    /// `--confirm` did not name the lost state.
    WrongConfirm {
        /// What it must be.
        expected: String,
    },
}

/// `scangate state reset --confirm <id>`: when this state directory lost
/// its database (or it was replaced), move whatever is in its place aside
/// (never deleted), create a new database with a new identity, and write
/// the reset as the first record of its audit chain, naming the lost
/// state's identity and its last anchored head. Holds the state
/// directory's lock (the daemon must be stopped).
pub fn reset(state_dir: &Path, confirm: &str, gateway: &str) -> Result<Reset, StoreError> {
    // (The lock first: bound first, dropped last, after the database has
    // closed, on every path.)
    let Begun {
        lock,
        mut store,
        new,
        lost_id,
        lost_head,
        moved_aside,
    } = match identity::begin_reset(state_dir, confirm)? {
        ResetStart::Begun(begun) => *begun,
        ResetStart::Intact { id } => return Ok(Reset::Intact { id }),
        ResetStart::WrongConfirm { expected } => return Ok(Reset::WrongConfirm { expected }),
    };
    let record = reset_record(gateway, &new, &lost_id, lost_head.as_ref(), &moved_aside);
    let emitted = {
        let w = store.write()?;
        identity::set_id(&w, &new.id, &lost_id).map_err(|e| w.err(e))?;
        let mut chain = Chain::begin(&w).map_err(|e| w.err(e))?;
        chain.append(record).map_err(|e| w.err(e))?;
        let emitted = chain.finish().map_err(|e| w.err(e))?;
        w.commit()?;
        emitted
    };
    super::emit(&emitted);
    let head = emitted.last().map(|e| Head {
        seq: e.seq,
        hash: e.hash.clone(),
    });
    identity::finish_reset(
        store,
        state_dir,
        &StateId {
            head,
            ..new.clone()
        },
    )?;
    drop(lock);
    Ok(Reset::Done {
        new_id: new.id,
        lost_id,
        moved_aside,
    })
}

/// The new chain's first record: the reset, naming the lost state and its
/// last anchored head.
fn reset_record(
    gateway: &str,
    new: &StateId,
    lost_id: &str,
    lost_head: Option<&Head>,
    moved_aside: &[PathBuf],
) -> AuditRecord {
    let now_ms = chrono::Utc::now().timestamp_millis();
    let reason = format!(
        "state reset (scangate state reset): the database of state {lost_id} was lost; {}; this chain starts over with an empty ledger",
        lost_head.map_or_else(
            || "no audit record of it was anchored".to_string(),
            |h| format!("its audit chain was last anchored at {h}")
        )
    );
    AuditRecord {
        state_reset: Some(AuditStateReset {
            lost_state_id: lost_id.to_string(),
            lost_head_seq: lost_head.map(|h| h.seq),
            lost_head_hash: lost_head.map(|h| h.hash.clone()),
            moved_aside: moved_aside
                .iter()
                .filter_map(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .collect(),
        }),
        ..AuditRecord::system(now_ms, gateway, new.id.clone(), reason)
    }
}
