//! What the facility server is and agrees to: its role, persistence and
//! replicas (`check_server`), the facility's one window and retention
//! (`check_settings`), the scanner names gateways register, and its clock
//! (`sample_clock`, Cristian's method).

use super::error::failed;
use super::{Facility, FacilityError};
use crate::model::{ClockSample, ScannerClone, ServerInfo};

/// Round trips of `TIME` per clock sample; the one with the shortest round
/// trip is kept (Cristian's method).
const CLOCK_ROUND_TRIPS: usize = 5;

/// The value of `name` in an `INFO` reply (`name:value` lines).
fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// Whether a server of `INFO` `redis_version` `version` has `WAITAOF`
/// (7.2 and later; Valkey reports 7.2.4).
fn has_waitaof(version: &str) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (7, 2)
}

impl Facility {
    /// The replicas the primary reports connected now (`INFO replication`
    /// `connected_slaves`).
    pub fn connected_replicas(&mut self) -> Result<u32, FacilityError> {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut self.conn)
            .map_err(|source| self.unavailable(source))?;
        Ok(info_field(&info, "connected_slaves")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0))
    }

    /// Check the server: `maxmemory-policy` must be `noeviction` (an evicted
    /// claim is a double count), and the facility's window and retention,
    /// if a gateway has set them, must be this gateway's. Returns what to log.
    pub fn check_server(&mut self) -> Result<ServerInfo, FacilityError> {
        let get = |conn: &mut redis::Connection, name: &str| -> Result<String, redis::RedisError> {
            let pair: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query(conn)?;
            Ok(pair.get(1).cloned().unwrap_or_default())
        };
        let unavailable = |source| failed(&self.url, &self.user, source);
        let policy = get(&mut self.conn, "maxmemory-policy").map_err(unavailable)?;
        let appendonly = get(&mut self.conn, "appendonly").map_err(unavailable)?;
        let save = get(&mut self.conn, "save").map_err(unavailable)?;
        let info: String = redis::cmd("INFO")
            .arg("server")
            .arg("replication")
            .query(&mut self.conn)
            .map_err(unavailable)?;
        let field = |name| info_field(&info, name).unwrap_or("unknown").to_string();
        let (version, role) = (field("redis_version"), field("role"));
        let connected_replicas = info_field(&info, "connected_slaves")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if policy != "noeviction" {
            return Err(FacilityError::Misconfigured {
                url: self.url.clone(),
                problem: format!(
                    "maxmemory-policy is {policy:?}: Redis may evict a claim under memory pressure, and an evicted claim lets an echo commit a second ledger entry"
                ),
                fix: "set `maxmemory-policy noeviction` in redis.conf (or CONFIG SET maxmemory-policy noeviction) and size maxmemory for the retention horizon".into(),
            });
        }
        self.check_settings()?;
        if has_waitaof(&version) && appendonly == "yes" && role == "master" {
            // Every round will end with WAITAOF (Facility::set_on_disk): an
            // ACL user that may not run it would have every claim refused.
            // With nothing to wait for, it answers at once. (A replica
            // refuses WAITAOF itself; it refuses claims anyway, and the
            // caller tells it by its role.)
            let _: (i64, i64) = redis::cmd("WAITAOF")
                .arg(0)
                .arg(0)
                .arg(0)
                .query(&mut self.conn)
                .map_err(|source| failed(&self.url, &self.user, source))?;
        }
        self.replica = role == "slave";
        Ok(ServerInfo {
            has_waitaof: has_waitaof(&version),
            version,
            maxmemory_policy: policy,
            appendonly,
            save,
            role,
            connected_replicas,
        })
    }

    /// Whether the server runs `WAIT` (`WAIT 0 0` answers at once): some
    /// managed offerings refuse it, and then no replica can confirm a
    /// round.
    pub fn probe_wait(&mut self) -> Result<(), FacilityError> {
        redis::cmd("WAIT")
            .arg(0)
            .arg(0)
            .query::<i64>(&mut self.conn)
            .map(drop)
            .map_err(|source| self.unavailable(source))
    }

    /// CPU seconds the server has used so far (`INFO cpu`): its own process
    /// (all threads), and its children (AOF rewrites, RDB saves). For the
    /// benchmark, which shares the machine's cores with the server.
    pub fn server_cpu(&mut self) -> Result<(f64, f64), FacilityError> {
        let info: String = redis::cmd("INFO")
            .arg("cpu")
            .query(&mut self.conn)
            .map_err(|source| self.unavailable(source))?;
        let field = |name| -> f64 {
            info_field(&info, name)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0)
        };
        Ok((
            field("used_cpu_sys") + field("used_cpu_user"),
            field("used_cpu_sys_children") + field("used_cpu_user_children"),
        ))
    }

    /// The key of the facility's settings (window and retention).
    pub fn settings_key(&self) -> String {
        super::cluster::facility_key(&self.facility, "settings")
    }

    /// The refusal when the facility runs with `window_ms` / `retention_ms`
    /// (as the settings hash holds them; `-` unset) and this gateway with
    /// others.
    pub(super) fn settings_differ(&self, window_ms: &str, retention_ms: &str) -> FacilityError {
        // `-`: a field the hash lacks (someone edited it by hand).
        let hours = |ms: &str| {
            ms.parse::<i64>().map_or_else(
                |_| "(unset)".to_string(),
                |ms| format!("{} h", ms as f64 / 3.6e6),
            )
        };
        FacilityError::SettingsDiffer {
            url: self.url.clone(),
            problem: format!(
                "facility {:?} runs with [dedup] window_ms = {} and retention {} (set by the first gateway that claimed), this gateway with window_ms = {} and retention {}: a scan would be judged by a different rule on each gateway, and one pick could be committed twice. No claim was made; scans wait in the outbox",
                self.facility,
                if window_ms.parse::<i64>().is_ok() {
                    window_ms
                } else {
                    "(unset)"
                },
                hours(retention_ms),
                self.window_ms,
                hours(&self.retention_ms.to_string()),
            ),
            fix: format!(
                "give every gateway of the facility the same [dedup] window_ms and [dedup] retention_hours. To change them for the whole facility: stop every gateway, run `redis-cli -u URL DEL '{}'`, then start them with the new values",
                self.settings_key()
            ),
        }
    }

    /// Measure the facility's clock against this gateway's
    /// ([`ClockSample`]): `CLOCK_ROUND_TRIPS` `TIME` round trips, the
    /// shortest kept.
    pub fn sample_clock(&mut self) -> Result<ClockSample, FacilityError> {
        use crate::capture::clock::{boot_id, boot_ns};
        let wall_us = || chrono::Utc::now().timestamp_micros() as f64;
        // (round trip ns, facility µs, wall µs mid-way, boot ns mid-way)
        let mut best: Option<(i64, f64, f64, f64)> = None;
        for _ in 0..CLOCK_ROUND_TRIPS {
            let (b0, w0) = (boot_ns(), wall_us());
            let (secs, micros): (i64, i64) = redis::cmd("TIME")
                .query(&mut self.conn)
                .map_err(|e| self.unavailable(e))?;
            let (b1, w1) = (boot_ns(), wall_us());
            let rtt = b1 - b0;
            if best.is_none_or(|b| rtt < b.0) {
                let facility_us = secs as f64 * 1e6 + micros as f64;
                best = Some((rtt, facility_us, (w0 + w1) / 2.0, (b0 + b1) as f64 / 2.0));
            }
        }
        let (rtt, facility_us, wall_mid, boot_mid) = best.expect("at least one round trip");
        Ok(ClockSample {
            offset_ms: (facility_us - wall_mid) / 1e3,
            bound_ms: rtt as f64 / 2e6,
            boot_offset_ms: facility_us / 1e3 - boot_mid / 1e6,
            boot_id: boot_id().to_string(),
            at_ms: chrono::Utc::now().timestamp_millis(),
            boot_ms: (boot_mid / 1e6).round() as i64,
        })
    }

    /// Refuse a server whose facility settings differ from this gateway's
    /// (read only: the first claim sets them if none are set).
    pub fn check_settings(&mut self) -> Result<(), FacilityError> {
        let key = self.settings_key();
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(&key).arg("window_ms").arg("retention_ms");
        let agreed: (Option<String>, Option<String>) =
            self.run(&cmd).map_err(|source| self.unavailable(source))?;
        match agreed {
            (None, None) => Ok(()),
            (w, r)
                if w.as_deref() == Some(self.window_ms.to_string().as_str())
                    && r.as_deref() == Some(self.retention_ms.to_string().as_str()) =>
            {
                Ok(())
            }
            (w, r) => {
                Err(self.settings_differ(w.as_deref().unwrap_or("-"), r.as_deref().unwrap_or("-")))
            }
        }
    }

    /// Record which gateway uses each of this gateway's `scanners` (name,
    /// declared `shared`), for the retention horizon (refreshed at every
    /// connect): `scangate:{f}:scanner:<name>` holds `shared`, or
    /// `gateway=<id>` for a gateway's own. Returns the names another gateway
    /// uses as its own too (a cloned config: warned of, the reads still
    /// count on each); refuses a scanner one gateway declares `shared` and
    /// another not.
    pub fn register_scanners(
        &mut self,
        gateway: &str,
        scanners: &[(String, bool)],
    ) -> Result<Vec<ScannerClone>, FacilityError> {
        let mut clones = Vec::new();
        for (name, shared) in scanners {
            let key = self.key("scanner", name);
            let mine = match shared {
                true => "shared".to_string(),
                false => format!("gateway={gateway}"),
            };
            let mut cmd = redis::cmd("SET");
            cmd.arg(&key)
                .arg(&mine)
                .arg("NX")
                .arg("PX")
                .arg(self.retention_ms);
            let set: Option<String> = self.run(&cmd).map_err(|e| self.unavailable(e))?;
            if set.is_some() {
                continue;
            }
            let theirs: Option<String> = self
                .run(redis::cmd("GET").arg(&key))
                .map_err(|e| self.unavailable(e))?;
            let Some(theirs) = theirs else { continue }; // expired meanwhile
            if theirs == mine {
                self.run::<i64>(redis::cmd("PEXPIRE").arg(&key).arg(self.retention_ms))
                    .map_err(|e| self.unavailable(e))?;
                continue;
            }
            match (theirs.strip_prefix("gateway="), shared) {
                (Some(other), false) => clones.push(ScannerClone {
                    scanner: name.clone(),
                    other_gateway: other.to_string(),
                }),
                (Some(other), true) => {
                    return Err(FacilityError::ScannerDiffers {
                        url: self.url.clone(),
                        problem: format!(
                            "scanner {name:?} is `shared` here, but gateway {other:?} uses it as its own (not shared)"
                        ),
                        fix: format!(
                            "if one scanner is heard by both gateways, set shared = true in its [[scanner]] on {other} too; if they are two scanners, rename one (the record expires {} h after {other} last connected)",
                            self.retention_ms / 3_600_000
                        ),
                    });
                }
                (None, _) => {
                    return Err(FacilityError::ScannerDiffers {
                        url: self.url.clone(),
                        problem: format!(
                            "scanner {name:?} is this gateway's own here (not shared), but other gateways of the facility declare it `shared`"
                        ),
                        fix: "if this is the scanner they share, set shared = true in its [[scanner]] here; if it is another scanner, rename it".into(),
                    });
                }
            }
        }
        Ok(clones)
    }
}

#[cfg(test)]
mod tests {
    use super::info_field;

    #[test]
    fn info_fields_are_read_by_exact_name() {
        let info = "# Server\r\nredis_version:7.0.15\r\nredis_version_extra:x\r\n\
                    # Replication\r\nrole:slave\r\n# CPU\r\nused_cpu_sys:1.5\r\n\
                    used_cpu_sys_children:0.25\r\n";
        assert_eq!(info_field(info, "redis_version"), Some("7.0.15"));
        assert_eq!(info_field(info, "role"), Some("slave"));
        // A name that is a prefix of another is not confused with it.
        assert_eq!(info_field(info, "used_cpu_sys"), Some("1.5"));
        assert_eq!(info_field(info, "used_cpu_sys_children"), Some("0.25"));
        assert_eq!(info_field(info, "maxmemory"), None);
    }
}
