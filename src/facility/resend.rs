//! A claim round whose first call was refused with a reply that proves it
//! did not run — `NOSCRIPT`, or in a Redis Cluster `MOVED`, `ASK`,
//! `TRYAGAIN` — sent again, whole, where the refusal says; only if none of
//! its later calls ran either (docs/design.md, "The claim" and "Redis
//! Cluster").

use super::cluster::{Redirect, redirect, try_again_pause};
use super::{CLAIM_LUA, Facility, FacilityError, Sent};
use crate::events::Event as _;
use redis::{RedisError, Value};

/// `ASKING`, as written to the connection.
const ASKING: &[u8] = b"*1\r\n$6\r\nASKING\r\n";

/// Whether `e`, a call's refusal, proves that the call did not run: the
/// script was missing, or a cluster node redirected it before running it.
fn did_not_run(e: &RedisError) -> bool {
    e.code() == Some("NOSCRIPT") || redirect(e).is_some()
}

impl Facility {
    /// Whether a round whose first call was refused with `e` may be sent
    /// again ([`Facility::resend_round`]): a `NOSCRIPT`, or a redirect in a
    /// cluster.
    pub(super) fn may_resend(&self, e: &RedisError) -> bool {
        e.code() == Some("NOSCRIPT") || (self.in_cluster() && redirect(e).is_some())
    }

    /// The connection the round in flight was sent on: the facility's, or
    /// after an `ASK` the node it named.
    pub(super) fn round_conn(&mut self) -> &mut redis::Connection {
        match (self.asking, &mut self.nodes) {
            (true, Some(nodes)) => nodes.asked_conn().unwrap_or(&mut self.conn),
            _ => &mut self.conn,
        }
    }

    /// The next call's reply (after an `ASK`, its `ASKING`'s first).
    pub(super) fn call_reply(&mut self) -> Result<Value, RedisError> {
        if self.asking {
            self.reply_raw()?;
        }
        self.reply_raw()
    }

    /// The `later`th reply owed after a call, of which the first
    /// `later_calls` are calls' (the rest WAIT's and WAITAOF's).
    pub(super) fn owed_reply(
        &mut self,
        later: usize,
        later_calls: usize,
    ) -> Result<Value, RedisError> {
        match later < later_calls {
            true => self.call_reply(),
            false => self.reply_raw(),
        }
    }

    /// The round's first call was refused with `refused`, which proves it
    /// did not run (the `attempt`th resend of the round): send the whole
    /// round again, within the round, so a flushed script cache or a moved
    /// slot costs a round trip, not a failed round —
    ///
    /// - `NOSCRIPT` (another client's `SCRIPT FLUSH`, a node that never had
    ///   it; scripts are loaded once per connection, at connect): the
    ///   script loaded on the node that refused, and the round there;
    /// - `MOVED` (the slot is another primary's for good: a resharding
    ///   done, a failover): that node becomes the facility's connection
    ///   (the script loaded at connect), and the round goes there;
    /// - `ASK` (the slot is migrating and the keys are there): the round to
    ///   the node named, `ASKING` before each call, its replies read there;
    /// - `TRYAGAIN` (migrating, the call's keys split between the nodes):
    ///   the round again to the facility's node after a pause.
    ///
    /// Nothing of the round ran, so this is the round sent again — if none
    /// of the later calls ran either: every reply still owed is read first,
    /// and if a later call ran (answered, or refused by the script itself)
    /// the round fails. Only for the first call (`recv_claims` fails the
    /// round on a later one): a refusal after calls that ran may mean a
    /// failover behind a proxy that kept the connection, or a slot that
    /// moved under the round, and the calls that ran ran on the old node;
    /// their decisions may be lost with it, and a resent `WAIT` would
    /// confirm nothing of them (a pick committed twice was shown so,
    /// `facility_script`). Failed, the round is retried by UUID on a fresh
    /// connection, as any failed round.
    pub(super) fn resend_round(
        &mut self,
        sent: &Sent,
        refused: RedisError,
        attempt: u32,
    ) -> Result<(), FacilityError> {
        let later_calls = sent.calls - 1;
        let mut ran_out_of_order = false;
        for later in 0..self.owed_after(sent, 0) {
            match self.owed_reply(later, later_calls) {
                // No server reply at all: the connection failed.
                Err(e) if e.code().is_none() => return Err(self.unavailable(e)),
                Err(e) if did_not_run(&e) => {}
                // WAIT's and WAITAOF's: asked again with the resent calls.
                _ if later >= later_calls => {}
                // A later call answered (or refused by the script itself).
                _ => ran_out_of_order = true,
            }
        }
        if ran_out_of_order {
            return Err(self.unavailable(refused));
        }
        let mut again = Vec::with_capacity(self.packed.len() + CLAIM_LUA.len() + 64);
        let reload = redirect(&refused).is_none();
        match redirect(&refused) {
            // NOSCRIPT: on the node that refused it.
            None => redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(CLAIM_LUA)
                .write_packed_command(&mut again),
            Some(Redirect::Moved(addr)) => {
                self.asking = false;
                self.follow_moved(&addr, refused)
                    .map_err(|e| self.unavailable(e))?;
            }
            Some(Redirect::Ask(addr)) => {
                if let Err(e) = self.asked(&addr, refused) {
                    return Err(self.unavailable(e));
                }
                self.asking = true;
            }
            Some(Redirect::TryAgain) => {
                self.asking = false;
                std::thread::sleep(try_again_pause(attempt));
            }
        }
        self.write_round(&mut again);
        let written = self.round_conn().send_packed_command(&again);
        written.map_err(|source| self.unavailable(source))?;
        if reload {
            let loaded = self.reply_raw().map_err(|e| self.unavailable(e))?;
            if redis::from_redis_value::<String>(loaded.clone())
                .ok()
                .as_deref()
                != Some(self.script.get_hash())
            {
                return Err(FacilityError::Protocol {
                    url: self.url.clone(),
                    reply: format!("{loaded:?} where SCRIPT LOAD's answer was due"),
                });
            }
            crate::events::ScriptReloaded { redis: &self.url }.emit();
        }
        Ok(())
    }

    /// The round as last written, appended to `out`: after an `ASK`,
    /// `ASKING` before each call (it lets only the next command in).
    fn write_round(&self, out: &mut Vec<u8>) {
        if !self.asking {
            out.extend_from_slice(&self.packed);
            return;
        }
        let mut start = 0;
        for &end in &self.call_ends {
            out.extend_from_slice(ASKING);
            out.extend_from_slice(&self.packed[start..end]);
            start = end;
        }
        out.extend_from_slice(&self.packed[start..]);
    }
}
