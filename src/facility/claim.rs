//! Claim rounds: a batch of scans sent as pipelined `EVALSHA` calls of the
//! claim script (`send_claims`), their decisions read back
//! (`recv_claims`), each checked against what the round asked.

use super::cluster::MAX_REDIRECTS;
use super::{Facility, FacilityError};
use crate::model::{Claim, Outcome};
use redis::Value;

/// Scans decided by one script call. Redis runs nothing else while a script
/// runs, so this bounds how long one gateway's batch can hold up others
/// (~2 ms at ~15 µs a scan); larger batches are pipelined calls.
const CLAIMS_PER_CALL: usize = 128;

/// The claim script (`claim.lua`; loaded once per connection, at connect,
/// and again only after a `NOSCRIPT`; called with EVALSHA).
pub const CLAIM_LUA: &str = include_str!("claim.lua");

/// Claims written to the connection whose answers are still to be read
/// ([`Facility::send_claims`], [`Facility::recv_claims`]).
#[must_use = "the answers must be read before the connection is used again"]
pub struct Sent {
    pub(super) calls: usize,
    claims: usize,
    /// The round's token ([`Facility::send_claims_checked`]), which each of
    /// its calls answers first.
    token: String,
}

impl Facility {
    /// Claim scans in one round trip (script calls of up to
    /// 128 scans each, pipelined), in the given order — the
    /// caller passes them in capture order. Retrying a batch after a lost
    /// reply is safe: each scan's first decision is returned again.
    pub fn claim_batch(&mut self, claims: &[Claim]) -> Result<Vec<Outcome>, FacilityError> {
        self.claim_batch_checked(claims, &[])
    }

    /// [`Facility::claim_batch`] checked against `markers` (see
    /// [`Facility::send_claims_checked`]).
    pub fn claim_batch_checked(
        &mut self,
        claims: &[Claim],
        markers: &[String],
    ) -> Result<Vec<Outcome>, FacilityError> {
        let sent = self.send_claims_checked(claims, markers)?;
        self.recv_claims(sent)
    }

    /// Whether the server holds the decision of `scan_uuid` (a probe of the
    /// marker between claims: an idle gateway notices a loss too).
    pub fn has_decision(&mut self, scan_uuid: &str) -> Result<bool, FacilityError> {
        let key = self.key("scan", scan_uuid);
        let found: Option<String> = self
            .run(redis::cmd("GET").arg(&key))
            .map_err(|e| self.unavailable(e))?;
        Ok(found.is_some())
    }

    /// The first half of [`Facility::claim_batch`]: write the claims to the
    /// connection without waiting for the answer, so the caller can do other
    /// work (write the previous round's verdicts) while Redis runs them.
    /// Redis runs a connection's commands in the order sent, so a later
    /// batch is claimed after this one.
    pub fn send_claims(&mut self, claims: &[Claim]) -> Result<Sent, FacilityError> {
        self.send_claims_checked(claims, &[])
    }

    /// [`Facility::send_claims`], each call first checking that the
    /// server has the decision of every one of `markers` (this gateway's
    /// latest recorded commits, `claimer::markers`): if one is missing,
    /// it refuses with [`FacilityError::Lost`] naming it, nothing changed.
    pub fn send_claims_checked(
        &mut self,
        claims: &[Claim],
        markers: &[String],
    ) -> Result<Sent, FacilityError> {
        self.round_token += 1;
        let token = self.round_token.to_string();
        // One buffer for every round of the connection, kept until the
        // round is answered: resent from it after a NOSCRIPT.
        let mut packed = std::mem::take(&mut self.packed);
        packed.clear();
        self.call_ends.clear();
        self.asking = false;
        let mut calls = 0;
        let joined = markers.join(" ");
        let mut rest = claims;
        while let Some(head) = rest.first() {
            // One call: up to CLAIMS_PER_CALL claims with the same field names
            // (the script takes the names once).
            let same = rest
                .iter()
                .take(CLAIMS_PER_CALL)
                .take_while(|c| {
                    c.fields
                        .iter()
                        .map(|f| f.0)
                        .eq(head.fields.iter().map(|f| f.0))
                })
                .count();
            let (chunk, after) = rest.split_at(same);
            rest = after;
            if calls > 0 {
                self.call_ends.push(packed.len());
            }
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(self.script.get_hash())
                .arg(2 * chunk.len() + 2 + markers.len());
            for c in chunk {
                cmd.arg(self.key("scan", c.scan_uuid))
                    .arg(self.key("seen", c.content_key));
            }
            for m in markers {
                cmd.arg(self.key("scan", m));
            }
            cmd.arg(self.settings_key())
                .arg(self.ledger_key())
                .arg(self.window_ms)
                .arg(self.retention_ms)
                .arg(head.fields.len())
                .arg(&joined)
                .arg(&token);
            for (name, _) in &head.fields {
                cmd.arg(*name);
            }
            for c in chunk {
                cmd.arg(c.scan_uuid)
                    .arg(c.captured_ms)
                    .arg(c.window_ms.unwrap_or(self.window_ms));
                for (_, value) in &c.fields {
                    cmd.arg(value);
                }
            }
            cmd.write_packed_command(&mut packed);
            calls += 1;
        }
        if calls > 0 {
            self.call_ends.push(packed.len());
        }
        if calls > 0 && self.min_replicas > 0 {
            redis::cmd("WAIT")
                .arg(self.min_replicas)
                .arg(self.replica_timeout.as_millis() as u64)
                .write_packed_command(&mut packed);
        }
        if calls > 0 && self.on_disk {
            // After WAIT, so the two waits overlap: the fsync runs while
            // the replicas confirm.
            redis::cmd("WAITAOF")
                .arg(1)
                .arg(0)
                .arg(self.replica_timeout.as_millis() as u64)
                .write_packed_command(&mut packed);
        }
        let written = if calls > 0 {
            self.conn.send_packed_command(&packed)
        } else {
            Ok(())
        };
        self.packed = packed;
        written.map_err(|source| self.unavailable(source))?;
        Ok(Sent {
            calls,
            claims: claims.len(),
            token,
        })
    }

    /// The second half of [`Facility::claim_batch`]: read the answers to
    /// `sent`, one decision per claim in the order sent. Any error (a broken
    /// connection, a timeout, a server error) fails the whole round; the
    /// connection may still owe replies, so drop it and connect again (the
    /// claimer does), and the claims are retried by UUID. A `NOSCRIPT`
    /// (another client flushed the script cache, or a failover to a server
    /// that never had it) is the exception: see `Facility::resend_round`.
    pub fn recv_claims(&mut self, sent: Sent) -> Result<Vec<Outcome>, FacilityError> {
        self.fresh.clear();
        self.twin_times.clear();
        if sent.calls == 0 {
            return Ok(Vec::new());
        }
        let mut outcomes = Vec::with_capacity(sent.claims);
        let mut fresh = Vec::with_capacity(sent.claims);
        let mut twin_times = Vec::with_capacity(sent.claims);
        let mut resent = 0;
        let mut call = 0;
        while call < sent.calls {
            let reply = match self.call_reply() {
                // Only at the round's first call: see `resend_round`.
                Err(e) if call == 0 && resent < MAX_REDIRECTS && self.may_resend(&e) => {
                    self.resend_round(&sent, e, resent)?;
                    resent += 1;
                    continue;
                }
                Err(e) => Err(self.classify(e)),
                Ok(v) => Ok(v),
            };
            let reply = match reply {
                Err(lost @ FacilityError::Lost { .. }) => {
                    // Every later call of the round refuses too; read their
                    // replies (and WAIT's and WAITAOF's), so the connection
                    // can go on — unless it failed meanwhile: then that
                    // failure, and the claimer drops the connection.
                    for later in 0..self.owed_after(&sent, call) {
                        let owed = self.owed_reply(later, sent.calls - call - 1);
                        match owed.map_err(|e| self.classify(e)) {
                            Ok(_) | Err(FacilityError::Lost { .. }) => {}
                            Err(e) => return Err(e),
                        }
                    }
                    return Err(lost);
                }
                other => other?,
            };
            call += 1;
            // Each call answers the round's token first: anything else is a
            // reply owed to an earlier command that failed (a connection
            // out of step), whose decisions must never be taken for this
            // round's.
            let items = match reply {
                Value::Array(items)
                    if items.first().is_some_and(
                        |t| matches!(t, Value::BulkString(b) if b == sent.token.as_bytes()),
                    ) =>
                {
                    items
                }
                other => {
                    return Err(FacilityError::Protocol {
                        url: self.url.clone(),
                        reply: format!(
                            "{other:?} where the answer to round {} was due",
                            sent.token
                        ),
                    });
                }
            };
            for v in items.into_iter().skip(1) {
                let (outcome, made, twin_ms) = self.outcome(v)?;
                outcomes.push(outcome);
                fresh.push(made);
                twin_times.push(twin_ms);
            }
        }
        let acked = if self.min_replicas > 0 {
            let reply = self.reply()?;
            Some(redis::from_redis_value::<i64>(reply).map_err(|e| self.unavailable(e.into()))?)
        } else {
            None
        };
        let on_disk = if self.on_disk {
            let reply = self.reply()?;
            let (local, _replicas) = redis::from_redis_value::<(i64, i64)>(reply)
                .map_err(|e| self.unavailable(e.into()))?;
            local >= 1
        } else {
            true
        };
        if outcomes.len() != sent.claims {
            return Err(FacilityError::Protocol {
                url: self.url.clone(),
                reply: format!("{} decisions for {} claims", outcomes.len(), sent.claims),
            });
        }
        if let Some(acked) = acked
            && acked < i64::from(self.min_replicas)
        {
            return Err(FacilityError::Unconfirmed {
                url: self.url.clone(),
                acked,
                wanted: self.min_replicas,
            });
        }
        if !on_disk {
            return Err(FacilityError::NotOnDisk {
                url: self.url.clone(),
            });
        }
        self.fresh = fresh;
        self.twin_times = twin_times;
        Ok(outcomes)
    }

    /// The replies the round still owes after call `call`'s: the later
    /// calls', WAIT's and WAITAOF's.
    pub(super) fn owed_after(&self, sent: &Sent, call: usize) -> usize {
        sent.calls - call - 1 + usize::from(self.min_replicas > 0) + usize::from(self.on_disk)
    }

    /// The next reply on the connection, a server error as an error.
    fn reply(&mut self) -> Result<Value, FacilityError> {
        self.reply_raw().map_err(|e| self.classify(e))
    }

    /// The next reply on the connection the round was sent on (after an
    /// `ASK`, the node it named), a server error as redis-rs's.
    pub(super) fn reply_raw(&mut self) -> Result<Value, redis::RedisError> {
        self.round_conn()
            .recv_response()
            .and_then(|v| v.extract_error())
    }

    /// What a failed reply means to the claimer.
    pub(super) fn classify(&self, source: redis::RedisError) -> FacilityError {
        match source.code() {
            // The script fails at its first write, before it changed
            // anything (Redis checks memory there, not later).
            Some("OOM") => FacilityError::Full {
                url: self.url.clone(),
                detail: source.detail().unwrap_or("OOM").trim().to_string(),
            },
            Some("READONLY") => FacilityError::ReadOnly {
                url: self.url.clone(),
            },
            Some("SCANGATE_LOST") => FacilityError::Lost {
                url: self.url.clone(),
                marker: source.detail().unwrap_or_default().trim().to_string(),
            },
            Some("SCANGATE_SETTINGS") => {
                let detail = source.detail().unwrap_or_default();
                let mut agreed = detail.split_whitespace();
                self.settings_differ(agreed.next().unwrap_or("-"), agreed.next().unwrap_or("-"))
            }
            _ => self.unavailable(source),
        }
    }

    /// A claim's answer, whether this call made the decision (`false`:
    /// answered again from an earlier call's, "=" in front), and an echo's
    /// twin's capture time when the script said it (not for a twin the
    /// seen set no longer holds).
    fn outcome(&self, v: Value) -> Result<(Outcome, bool, Option<i64>), FacilityError> {
        let text = match &v {
            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            Value::SimpleString(s) => s.clone(),
            other => format!("{other:?}"),
        };
        let (decided, fresh) = match text.strip_prefix('=') {
            Some(earlier) => (earlier, false),
            None => (text.as_str(), true),
        };
        if decided == "committed" {
            return Ok((Outcome::Committed, fresh, None));
        }
        if let Some(echo) = decided.strip_prefix("suppressed ") {
            let (twin, twin_ms) = match echo.split_once(' ') {
                Some((twin, ms)) => (twin, ms.parse().ok()),
                None => (echo, None),
            };
            return Ok((
                Outcome::Suppressed {
                    twin: twin.to_string(),
                },
                fresh,
                twin_ms,
            ));
        }
        Err(FacilityError::Protocol {
            url: self.url.clone(),
            reply: text,
        })
    }

    /// For each claim the last round [`Facility::recv_claims`] answered,
    /// in order: whether that round made its decision (`false`: answered
    /// again from an earlier round's — a retry after a lost reply — which
    /// has that round's place in the store's history, and whose key
    /// expires as that round set it). Empty after a round that failed.
    pub fn fresh(&self) -> &[bool] {
        &self.fresh
    }

    /// For each claim the last round answered, in order: an echo's twin's
    /// capture time (facility time, Unix ms) as the facility store holds
    /// it; `None` for a commit, and for an echo the store did not say it of
    /// (its twin since pruned). Empty after a round that failed.
    pub fn twin_times(&self) -> &[Option<i64>] {
        &self.twin_times
    }
}
