//! Redis Sentinel (`[redis] sentinels`, `service_name`): which server is
//! the facility's primary right now.
//!
//! Asked at every connect (`SENTINEL get-master-addr-by-name`), so after a
//! failover the claimer's next reconnect reaches the promoted node without a
//! restart. Each sentinel is asked within the configured connect and command
//! timeouts (redis-rs's own Sentinel client connects without them: a
//! sentinel host that is down would hold a claimer lane for minutes).

use super::{FacilityError, open};
use std::time::Duration;

/// The `host:port` a majority of `sentinels` names as the primary of
/// `service`, over `scheme` (`redis` or `rediss`, verified against `ca_pem`
/// as the data connection is). Every sentinel is asked: one that is
/// partitioned or lags behind a failover may still name the old primary,
/// and a gateway that trusted the first answer would write to a node about
/// to be demoted. Without a majority (sentinels down, or disagreeing) no
/// primary is named, and the claimer asks again after its back-off.
/// Sentinels are asked without credentials.
pub fn primary_of(
    sentinels: &[String],
    service: &str,
    scheme: &str,
    ca_pem: Option<&[u8]>,
    connect_timeout: Duration,
    command_timeout: Duration,
) -> Result<String, FacilityError> {
    let mut said = Vec::new();
    let mut votes: Vec<(String, usize)> = Vec::new();
    for addr in sentinels {
        let url = format!("{scheme}://{addr}/");
        let answer = open(
            &url,
            ca_pem.map(<[u8]>::to_vec),
            connect_timeout,
            command_timeout,
        )
        .and_then(|mut conn| {
            redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(service)
                .query::<Option<(String, String)>>(&mut conn)
        });
        let named = match answer {
            Ok(Some((host, port))) if host.contains(':') => format!("[{host}]:{port}"),
            Ok(Some((host, port))) => format!("{host}:{port}"),
            Ok(None) => {
                said.push(format!("{addr} does not monitor {service:?}"));
                continue;
            }
            Err(e) => {
                said.push(format!("{addr}: {e}"));
                continue;
            }
        };
        said.push(format!("{addr} names {named}"));
        match votes.iter_mut().find(|(a, _)| *a == named) {
            Some((_, n)) => *n += 1,
            None => votes.push((named, 1)),
        }
    }
    if let Some((primary, _)) = votes.iter().find(|(_, n)| 2 * n > sentinels.len()) {
        return Ok(primary.clone());
    }
    said.push(format!(
        "no address is named by a majority of the {} sentinels",
        sentinels.len()
    ));
    Err(FacilityError::NoPrimary {
        sentinels: sentinels.join(", "),
        service: service.to_string(),
        detail: said.join("; "),
    })
}
