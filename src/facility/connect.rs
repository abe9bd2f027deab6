//! Connecting to the facility store as `[redis]` says: the primary (named
//! by the sentinels, with `sentinels`; with `cluster`, the one that owns
//! the facility's slot, redirects followed), with the section's CA and
//! timeouts, and refused credentials named by where the password came from.

use super::config::RedisSettings;
use super::{Facility, FacilityError, cluster, sentinel};
use std::time::Duration;

/// Connect to the primary ([`primary_url`]) for `facility`, with its
/// dedup `window_ms` and `retention`; refused credentials name where the
/// password came from. For the commands (`check-config --online`, `ledger
/// export`, `audit verify`); the claimer connects through its own link.
pub fn connect(
    settings: &RedisSettings,
    facility: &str,
    window_ms: i64,
    retention: Duration,
) -> Result<Facility, FacilityError> {
    // (A cluster's seed node may refuse the credentials too.)
    let url = primary_url(settings, facility).map_err(|e| name_credential(settings, e))?;
    let c = &settings.config;
    let mut f = Facility::connect_with_ca(
        &url,
        settings.ca_pem.clone(),
        facility,
        window_ms,
        retention,
        c.connect_timeout(),
        c.command_timeout(),
    )
    .map_err(|e| name_credential(settings, e))?;
    if c.is_cluster() {
        f.set_cluster(settings);
    }
    Ok(f)
}

/// `e`, if the server refused the credentials
/// ([`FacilityError::AuthRefused`]), naming where the password came from.
pub fn name_credential(settings: &RedisSettings, e: FacilityError) -> FacilityError {
    match e {
        FacilityError::AuthRefused {
            url, user, detail, ..
        } => FacilityError::AuthRefused {
            url,
            user,
            detail,
            credential: settings.password_source().to_string(),
        },
        e => e,
    }
}

/// The URL of the primary (a secret, as [`RedisSettings::url`]): with
/// `sentinels`, the server they name now ([`sentinel::primary_of`]); with
/// `cluster`, the primary that owns `facility`'s slot now
/// ([`cluster::owner_of`]); else `url`.
pub fn primary_url(settings: &RedisSettings, facility: &str) -> Result<String, FacilityError> {
    let c = &settings.config;
    if c.is_cluster() {
        let owner = cluster::owner_of(settings, cluster::facility_slot(facility))?;
        return Ok(c.url_at(Some(&owner), settings.password()));
    }
    match &c.service_name {
        Some(service) if c.uses_sentinel() => {
            let addr = sentinel::primary_of(
                &c.sentinels,
                service,
                c.scheme(),
                settings.ca_pem.as_deref(),
                c.connect_timeout(),
                c.command_timeout(),
            )?;
            Ok(c.url_at(Some(&addr), settings.password()))
        }
        _ => Ok(settings.url()),
    }
}
