//! The facility's conflicts stream: picks two gateways committed twice while
//! the store had lost data, published by the reconciling gateway and read
//! by every gateway.

use super::{Facility, FacilityError, stream_field};

/// Entries the conflicts stream keeps (`XADD … MAXLEN ~`): each gateway
/// reads it every minute, so only a gateway down for longer than it takes
/// this many conflicts could miss one.
pub const CONFLICTS_KEPT: usize = 10_000;

/// A conflict found by another gateway's reconciliation, as the conflicts
/// stream holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConflictNotice {
    /// The stream entry's id (the reader's cursor).
    pub id: String,
    /// The re-published scan the facility suppressed.
    pub scan_uuid: String,
    /// The gateway that re-published it.
    pub gateway: String,
    /// The scan the facility holds as the pick instead (committed while
    /// the store had lost data).
    pub twin_uuid: String,
}

impl Facility {
    /// The conflicts stream's key.
    fn conflicts_key(&self) -> String {
        super::cluster::facility_key(&self.facility, "conflicts")
    }

    /// Tell the facility's gateways that this gateway's re-published
    /// `scan_uuid` was suppressed as an echo of `twin_uuid`, which another
    /// gateway committed while the store had lost data (one entry of the
    /// conflicts stream).
    pub fn publish_conflict(
        &mut self,
        gateway: &str,
        scan_uuid: &str,
        twin_uuid: &str,
    ) -> Result<(), FacilityError> {
        let key = self.conflicts_key();
        self.run::<String>(
            redis::cmd("XADD")
                .arg(&key)
                .arg("MAXLEN")
                .arg("~")
                .arg(CONFLICTS_KEPT)
                .arg("*")
                .arg("scan_uuid")
                .arg(scan_uuid)
                .arg("gateway")
                .arg(gateway)
                .arg("twin_uuid")
                .arg(twin_uuid),
        )
        .map_err(|e| self.unavailable(e))?;
        Ok(())
    }

    /// Up to `count` entries of the conflicts stream after `cursor` (an
    /// entry id; `None`: from the start), oldest first.
    pub fn conflicts_after(
        &mut self,
        cursor: Option<&str>,
        count: usize,
    ) -> Result<Vec<ConflictNotice>, FacilityError> {
        let start = cursor.map_or_else(|| "-".to_string(), |c| format!("({c}"));
        let page: Vec<(String, Vec<(String, String)>)> = self
            .run(
                redis::cmd("XRANGE")
                    .arg(self.conflicts_key())
                    .arg(&start)
                    .arg("+")
                    .arg("COUNT")
                    .arg(count),
            )
            .map_err(|e| self.unavailable(e))?;
        Ok(page
            .into_iter()
            .map(|(id, fields)| {
                let get = |name| stream_field(&fields, name);
                ConflictNotice {
                    scan_uuid: get("scan_uuid"),
                    gateway: get("gateway"),
                    twin_uuid: get("twin_uuid"),
                    id,
                }
            })
            .collect())
    }
}
