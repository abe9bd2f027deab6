//! Every way from a URL to a [`Facility`]: connecting as `[redis]` says —
//! the primary (named by the sentinels, with `sentinels`; with `cluster`,
//! the one that owns the facility's slot, redirects followed), with the
//! section's CA and timeouts, refused credentials named by where the
//! password came from — and the connection itself (TLS, timeouts, the
//! claim script loaded).

use super::config::{RedisSettings, redact};
use super::error::{failed, url_user};
use super::{CLAIM_LUA, Facility, FacilityError, cluster, sentinel};
use redis::Script;
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

/// A connection to `url` (TLS verified against `ca_pem`, else the system's
/// trust store) with these timeouts.
pub(super) fn open(
    url: &str,
    ca_pem: Option<Vec<u8>>,
    connect_timeout: Duration,
    command_timeout: Duration,
) -> Result<redis::Connection, redis::RedisError> {
    let client = match ca_pem {
        Some(root_cert) => redis::Client::build_with_tls(
            url,
            redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(root_cert),
            },
        ),
        None => redis::Client::open(url),
    }?;
    let conn = client.get_connection_with_timeout(connect_timeout)?;
    conn.set_read_timeout(Some(command_timeout))?;
    conn.set_write_timeout(Some(command_timeout))?;
    Ok(conn)
}

impl Facility {
    /// Connect with the given timeouts. `url` is `redis://` or `rediss://`
    /// (TLS, verified against the system's trust store).
    pub fn connect(
        url: &str,
        facility: &str,
        window_ms: i64,
        retention: Duration,
        connect_timeout: Duration,
        command_timeout: Duration,
    ) -> Result<Facility, FacilityError> {
        Facility::connect_with_ca(
            url,
            None,
            facility,
            window_ms,
            retention,
            connect_timeout,
            command_timeout,
        )
    }

    /// [`Facility::connect`], verifying a `rediss://` server against
    /// `ca_pem` (PEM) instead of the system's trust store.
    pub fn connect_with_ca(
        url: &str,
        ca_pem: Option<Vec<u8>>,
        facility: &str,
        window_ms: i64,
        retention: Duration,
        connect_timeout: Duration,
        command_timeout: Duration,
    ) -> Result<Facility, FacilityError> {
        let shown = redact(url);
        let user = url_user(url);
        let unavailable = |source| failed(&shown, &user, source);
        let mut conn = open(url, ca_pem, connect_timeout, command_timeout).map_err(unavailable)?;
        // Load the script now, once per connection, so a claim is one
        // EVALSHA that runs at once (again only after a NOSCRIPT: see
        // `Facility::recv_claims`).
        redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(CLAIM_LUA)
            .query::<String>(&mut conn)
            .map_err(unavailable)?;
        Ok(Facility {
            conn,
            url: shown,
            user,
            facility: facility.to_string(),
            window_ms,
            retention_ms: retention.as_millis() as i64,
            script: Script::new(CLAIM_LUA),
            round_token: 0,
            packed: Vec::new(),
            call_ends: Vec::new(),
            min_replicas: 0,
            replica_timeout: command_timeout,
            on_disk: false,
            fresh: Vec::new(),
            twin_times: Vec::new(),
            replica: false,
            clones: Vec::new(),
            clock: None,
            nodes: None,
            asking: false,
        })
    }
}
