//! What confirms a claim round on the facility's backend, said plainly for
//! `check-config --online`: replicas (`WAIT`) and the primary's own disk
//! (`WAITAOF`), each available or not, and what covers a guarantee the
//! backend cannot give. Never a failure: a backend without them still
//! decides every scan exactly; what it lacks is durability after a crash,
//! which the gateways' own ledgers make up for.

use crate::facility::config::ReplicaAck;
use crate::model::ServerInfo;

/// What the backend offers, as `check-config --online` found it.
pub struct Backend<'a> {
    /// Its facts.
    pub info: &'a ServerInfo,
    /// Whether it answered `WAIT 0 0` (some managed offerings refuse it),
    /// else what it said.
    pub wait: Result<(), String>,
    /// In a Redis Cluster: the facility's slot (the shard is that slot's
    /// primary and its replicas).
    pub slot: Option<u16>,
    /// `[redis] min_replicas_ack`.
    pub ack: ReplicaAck,
}

/// What covers a claim the backend lost after confirming it.
const RECONCILED: &str = "covered by the reconciliation: each gateway keeps its own ledger, notices at its next claim or within a minute that the store lacks its latest commit, and re-publishes its commits of the retention horizon (docs/design.md, \"Reconciliation\"); an echo another gateway heard meanwhile may be committed twice, and is listed as a conflict";

/// The lines `check-config --online` prints about `b`'s confirmation.
pub fn report(b: &Backend) -> Vec<String> {
    let shard = match b.slot {
        Some(slot) => format!(
            " (Redis Cluster: slot {slot}'s shard, its primary and replicas only; other shards' replicas are never waited for)"
        ),
        None => String::new(),
    };
    let mut lines = vec![format!("confirmation{shard}:")];
    let connected = b.info.connected_replicas;
    let wanted = b.ack.wanted(connected);
    lines.push(match (&b.wait, connected, wanted) {
        (Err(e), _, _) => format!(
            "  replicas: NOT available, the backend refuses WAIT ({e}); set min_replicas_ack = 0, and a failover may lose claims it had confirmed: {RECONCILED}"
        ),
        (Ok(()), 0, _) => format!(
            "  replicas: WAIT available, but no replica is connected: a claim is confirmed by the primary alone, and a primary lost with its data loses claims: {RECONCILED}"
        ),
        (Ok(()), n, 0) => format!(
            "  replicas: WAIT available, {n} replica(s) connected, NOT waited for (min_replicas_ack = 0): a failover may lose claims confirmed just before it: {RECONCILED}"
        ),
        (Ok(()), n, w) => format!(
            "  replicas: WAIT available, {n} replica(s) connected; each round waits for {w} (min_replicas_ack), so a promoted replica has every confirmed claim"
        ),
    });
    let i = b.info;
    lines.push(match (i.has_waitaof, i.appendonly == "yes") {
        (true, true) => "  on disk: WAITAOF available, appendonly yes; each round waits for the primary's append-only file, so a restarted primary has every confirmed claim".into(),
        (true, false) => format!(
            "  on disk: NOT available, appendonly is off (WAITAOF would have nothing to wait for): a primary that restarts loses claims since its last snapshot; {}",
            covered_on_disk(wanted)
        ),
        (false, aof) => format!(
            "  on disk: NOT available, Redis {} has no WAITAOF (7.2 and later, Valkey have it){}: a claim may be confirmed before the primary's disk has it; {}",
            i.version,
            if aof { ", appendonly yes writes it within a second" } else { ", and appendonly is off" },
            covered_on_disk(wanted)
        ),
    });
    lines
}

/// What covers claims a primary's disk lacks, with `wanted` replicas
/// waited for.
fn covered_on_disk(wanted: u32) -> String {
    match wanted {
        0 => RECONCILED.to_string(),
        w => format!(
            "covered by the {w} replica(s) each round waits for (a failover to one keeps them), and where the whole shard restarts: {RECONCILED}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(version: &str, aof: &str, replicas: u32) -> ServerInfo {
        ServerInfo {
            version: version.into(),
            maxmemory_policy: "noeviction".into(),
            appendonly: aof.into(),
            save: String::new(),
            role: "master".into(),
            connected_replicas: replicas,
            has_waitaof: version.starts_with('8'),
        }
    }

    #[test]
    fn each_missing_guarantee_is_named_with_what_covers_it() {
        let i = info("7.0.15", "no", 0);
        let lines = report(&Backend {
            info: &i,
            wait: Ok(()),
            slot: None,
            ack: ReplicaAck::Auto,
        });
        assert!(
            lines[1].contains("no replica is connected") && lines[1].contains("reconciliation")
        );
        assert!(lines[2].contains("has no WAITAOF") && lines[2].contains("reconciliation"));
        let i = info("8.0.1", "yes", 1);
        let lines = report(&Backend {
            info: &i,
            wait: Ok(()),
            slot: Some(7),
            ack: ReplicaAck::Auto,
        });
        assert!(lines[0].contains("slot 7's shard"), "{lines:?}");
        assert!(lines[1].contains("each round waits for 1"), "{lines:?}");
        assert!(lines[2].contains("WAITAOF available"), "{lines:?}");
        let lines = report(&Backend {
            info: &i,
            wait: Err("ERR unknown command".into()),
            slot: None,
            ack: ReplicaAck::Exactly(0),
        });
        assert!(lines[1].contains("refuses WAIT"), "{lines:?}");
    }
}
