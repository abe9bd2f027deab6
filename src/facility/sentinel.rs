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

/// The `host:port` the first answering sentinel of `sentinels` names as the
/// primary of `service`, over `scheme` (`redis` or `rediss`, verified
/// against `ca_pem` as the data connection is). Sentinels are asked without
/// credentials.
pub fn primary_of(
    sentinels: &[String],
    service: &str,
    scheme: &str,
    ca_pem: Option<&[u8]>,
    connect_timeout: Duration,
    command_timeout: Duration,
) -> Result<String, FacilityError> {
    let mut said = Vec::new();
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
        match answer {
            Ok(Some((host, port))) if host.contains(':') => return Ok(format!("[{host}]:{port}")),
            Ok(Some((host, port))) => return Ok(format!("{host}:{port}")),
            Ok(None) => said.push(format!("{addr} does not monitor {service:?}")),
            Err(e) => said.push(format!("{addr}: {e}")),
        }
    }
    Err(FacilityError::NoPrimary {
        sentinels: sentinels.join(", "),
        service: service.to_string(),
        detail: said.join("; "),
    })
}
