//! What can go wrong with the facility store, each error saying what to do
//! next; a failed command classified ([`failed`]) as credentials refused, a
//! permission missing, or a store not available.

/// What an ACL user needs (`ACL SETUSER <user> on ><password>` and these):
/// its keys, the commands scangate sends, and those the claim script runs.
/// `tests/facility_connect.rs` runs a gateway as a user with exactly these. A
/// server with `WAITAOF` needs [`ACL_GRANTS_WAITAOF`] as well.
pub const ACL_GRANTS: &str = "resetkeys ~scangate:* resetchannels -@all +evalsha +script|load +config|get +info +wait +xrange +hmget +hset +get +set +zscore +zrange +zrangebyscore +zadd +zremrangebyscore +xadd +pexpire +time +exists +xinfo|groups +xpending +xtrim +xlen";

/// What an ACL user needs besides [`ACL_GRANTS`] on a server with
/// `WAITAOF` (Redis 7.2 and later, Valkey), which confirms every round on
/// disk when `appendonly` is on. Not in `ACL_GRANTS`: Redis 7.0 refuses a
/// command it does not know in `ACL SETUSER`.
pub const ACL_GRANTS_WAITAOF: &str = "+waitaof";

/// What an ACL user needs besides [`ACL_GRANTS`] in a Redis Cluster
/// (`[redis] cluster`): the slot map, and following an `ASK`.
pub const ACL_GRANTS_CLUSTER: &str = "+cluster|slots +asking";

/// What went wrong talking to the facility store.
#[derive(Debug, thiserror::Error)]
pub enum FacilityError {
    /// Could not connect or the command failed or timed out. Retry later.
    #[error("facility Redis {url}: {source}")]
    Unavailable {
        /// The server, without credentials.
        url: String,
        /// What redis-rs said.
        source: redis::RedisError,
    },
    /// The server is out of memory (`maxmemory` reached; with `noeviction`
    /// it refuses every write), so no claim can be recorded. Retry later.
    #[error(
        "facility Redis {url} is full: it refuses new claims ({detail}). Fix: raise `maxmemory` on the server, or shorten `[dedup] retention_hours` (claims expire after it)"
    )]
    Full {
        /// The server, without credentials.
        url: String,
        /// What the server said.
        detail: String,
    },
    /// The server is a read-only replica: it refuses every claim. Retry
    /// later (it may be promoted), but the configuration likely needs the
    /// primary's address.
    #[error(
        "facility Redis {url} is a read-only replica: it refuses claims. Fix: point `[redis] url` at the primary (after a failover: the new primary)"
    )]
    ReadOnly {
        /// The server, without credentials.
        url: String,
    },
    /// The ACL user may not run a command scangate needs (`NOPERM`, or a
    /// command inside the claim script refused): nothing was claimed.
    #[error(
        "facility Redis {url}: the ACL user {user:?} may not run what scangate needs ({detail}). Fix: on the server, `ACL SETUSER {user} {ACL_GRANTS}`, on Redis 7.2 or later and Valkey with `{ACL_GRANTS_WAITAOF}` too, in a Redis Cluster with `{ACL_GRANTS_CLUSTER}` too (see [redis] username in config/scangate.toml), or configure a user that has these"
    )]
    NoPermission {
        /// The server, without credentials.
        url: String,
        /// The ACL user (`default` without `[redis] username`).
        user: String,
        /// What the server said.
        detail: String,
    },
    /// The server refused this gateway's credentials (`WRONGPASS`, or
    /// `NOAUTH`: it wants a password and none was sent). Nothing was
    /// claimed. At start a configuration error; later (the ACL changed
    /// under a running gateway) scans wait unresolved, logged as an ERROR.
    #[error(
        "facility Redis {url} refused the credentials of ACL user {user:?} ({detail}). Fix: put that user's password in {credential}, or correct [redis] username; on the server, `ACL SETUSER {user} on >PASSWORD` (for the user \"default\": requirepass) sets it"
    )]
    AuthRefused {
        /// The server, without credentials.
        url: String,
        /// The ACL user (`default` without `[redis] username`).
        user: String,
        /// What was refused.
        detail: String,
        /// Where the password comes from
        /// ([`super::config::RedisSettings::password_source`]).
        credential: String,
    },
    /// The server is configured so that a claim could be lost.
    #[error("facility Redis {url}: {problem}. Fix: {fix}")]
    Misconfigured {
        /// The server, without credentials.
        url: String,
        /// What is wrong.
        problem: String,
        /// What to do.
        fix: String,
    },
    /// The facility runs with another window or retention than this
    /// gateway (the first gateway to claim set them): nothing was claimed.
    #[error("facility Redis {url}: {problem}. Fix: {fix}")]
    SettingsDiffer {
        /// The server, without credentials.
        url: String,
        /// Both settings.
        problem: String,
        /// What to do.
        fix: String,
    },
    /// A scanner this gateway declares `shared` is another gateway's own
    /// there, or the other way round: their reads would be judged by
    /// different rules. Nothing was claimed.
    #[error("facility Redis {url}: {problem}. Fix: {fix}")]
    ScannerDiffers {
        /// The server, without credentials.
        url: String,
        /// Which scanner, and how each gateway declares it.
        problem: String,
        /// What to do.
        fix: String,
    },
    /// Fewer replicas than `min_replicas_ack` confirmed a claim batch.
    #[error(
        "facility Redis {url}: {acked} of {wanted} replicas confirmed the claims in time (min_replicas_ack)"
    )]
    Unconfirmed {
        /// The server.
        url: String,
        /// Replicas that acknowledged.
        acked: i64,
        /// Replicas required.
        wanted: u32,
    },
    /// The primary did not confirm, in time, that it wrote a claim round to
    /// its append-only file (`WAITAOF`).
    #[error(
        "facility Redis {url}: the primary did not confirm in time that the claims are in its append-only file (WAITAOF); they are claimed again"
    )]
    NotOnDisk {
        /// The server.
        url: String,
    },
    /// No sentinel named a primary for the service.
    #[error(
        "no Redis Sentinel of {sentinels} named the primary of {service:?}: {detail}. Fix: check that a sentinel answers, and [redis] sentinels and service_name (the name in `sentinel monitor NAME …` in sentinel.conf)"
    )]
    NoPrimary {
        /// The sentinels asked.
        sentinels: String,
        /// `service_name`.
        service: String,
        /// What each sentinel said.
        detail: String,
    },
    /// No node of the Redis Cluster named the primary of the facility's
    /// slot.
    #[error(
        "no node of the Redis Cluster {nodes} named the primary of slot {slot} (the facility's): {detail}. Fix: check that a node answers and that every slot is covered (`redis-cli --cluster check HOST:PORT`), and [redis] cluster"
    )]
    NoSlotOwner {
        /// The seed nodes asked.
        nodes: String,
        /// The facility's slot.
        slot: u16,
        /// What each node said.
        detail: String,
    },
    /// The store lacks this gateway's latest recorded commit: it lost data
    /// (emptied, replaced, a lagging replica promoted, an old backup
    /// restored). Nothing was claimed; the claimer re-publishes this
    /// gateway's commits ([`super::Facility::claim_batch`] without a marker), then
    /// claims again.
    #[error(
        "facility Redis {url} has lost data: this gateway's commit {marker} is recorded here but not there (the server was emptied or replaced, a lagging replica promoted, or an older backup restored). Nothing was claimed; this gateway re-publishes its commits of the retention horizon, then claims again"
    )]
    Lost {
        /// The server, without credentials.
        url: String,
        /// The commit the server should have had.
        marker: String,
    },
    /// The script answered something it never returns.
    #[error("facility Redis {url}: unexpected reply {reply:?} from the claim script")]
    Protocol {
        /// The server.
        url: String,
        /// The reply.
        reply: String,
    },
}

impl FacilityError {
    /// The server is set up so that claims could be lost, or refuses this
    /// gateway (its credentials, a grant, its settings or a scanner's
    /// declaration): a technician's fix, not an outage to wait out. `run`
    /// stops on it at start (exit 2), `check-config --online` refuses.
    pub fn needs_technician(&self) -> bool {
        matches!(
            self,
            FacilityError::Misconfigured { .. }
                | FacilityError::SettingsDiffer { .. }
                | FacilityError::NoPermission { .. }
                | FacilityError::AuthRefused { .. }
                | FacilityError::ScannerDiffers { .. }
        )
    }
}

/// The ACL user a `redis://user:password@host` URL logs in as
/// (percent-decoded); `default` when it names none.
pub fn url_user(url: &str) -> String {
    let authority = url.split_once("://").map_or("", |(_, r)| r);
    let authority = authority.split('/').next().unwrap_or("");
    let user = authority
        .rsplit_once('@')
        .map_or("", |(info, _)| info.split(':').next().unwrap_or(""));
    let bytes = user.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    match String::from_utf8_lossy(&out) {
        u if u.is_empty() => "default".into(),
        u => u.into_owned(),
    }
}

/// Where the password comes from when nothing more is known (a connection
/// made without [`super::config::RedisSettings`] at hand).
const SOME_CREDENTIAL: &str =
    "the file [redis] password_file names (or the systemd credential redis-password)";

/// A failed command as the error it is: credentials refused or the ACL
/// user lacking a permission are a technician's fix, anything else a store
/// that is not available. `user` is the ACL user ([`url_user`]).
pub(super) fn failed(url: &str, user: &str, source: redis::RedisError) -> FacilityError {
    if source.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(source.code(), Some("NOAUTH" | "WRONGPASS"))
    {
        return FacilityError::AuthRefused {
            url: url.to_string(),
            user: user.to_string(),
            detail: match source.code() {
                Some("NOAUTH") => "NOAUTH: the server requires a password and none was sent".into(),
                _ => "WRONGPASS: wrong password, or the user does not exist or is disabled".into(),
            },
            credential: SOME_CREDENTIAL.into(),
        };
    }
    // Redis 7 refuses a command inside a script with a plain ERR.
    let in_script = source
        .detail()
        .is_some_and(|d| d.contains("user executing the script can't"));
    if source.code() == Some("NOPERM") || in_script {
        return FacilityError::NoPermission {
            url: url.to_string(),
            user: user.to_string(),
            detail: format!(
                "{} {}",
                source.code().unwrap_or_default(),
                source.detail().unwrap_or_default().trim()
            )
            .trim()
            .to_string(),
        };
    }
    FacilityError::Unavailable {
        url: url.to_string(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::url_user;

    #[test]
    fn the_acl_user_is_read_from_the_url() {
        assert_eq!(url_user("redis://scan%40gate:p%3Aw@h:1/0"), "scan@gate");
        assert_eq!(url_user("rediss://:pw@h:1/0"), "default");
        assert_eq!(url_user("redis://h:1/0"), "default");
        assert_eq!(url_user("redis://u:pw@h:1/0?x=a@b"), "u");
    }

    /// The example tells a technician the same ACL grants as the refusal
    /// message (`facility::ACL_GRANTS`, which a test runs a gateway with).
    #[test]
    fn the_documented_acl_grants_are_the_ones_scangate_needs() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/scangate.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let documented: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# #"))
            .skip_while(|l| !l.contains("ACL SETUSER"))
            .take_while(|l| !l.contains("(the claim script"))
            .flat_map(str::split_whitespace)
            .filter(|w| w.starts_with(['+', '-', '~']) || w.starts_with("reset"))
            .collect();
        let needed: Vec<&str> = super::ACL_GRANTS.split_whitespace().collect();
        assert_eq!(documented, needed);
    }
}
