//! Facility time: the one clock every gateway of a facility compares
//! captures on.
//!
//! Each gateway measures the facility Redis's clock against its own boot
//! clock (`CLOCK_BOOTTIME`, which wall-clock steps never move) at every
//! connect and every minute ([`crate::facility::Facility::sample_clock`]).
//! A capture is mapped through the samples of its own boot: its boot stamp
//! plus the sample's `facility − boot` offset. Two gateways reading one pick
//! 20 ms apart thus get facility times 20 ms apart, whatever their wall
//! clocks say — and a wall clock stepped mid-shift changes nothing.
//!
//! The error of a mapping is the sample's own bound (half its round trip)
//! plus how far the boot clock may have drifted since: [`DRIFT_PPM`] of the
//! distance to the nearest sample, or, for a capture with samples on both
//! sides (read during an outage, mapped after it), [`BRACKETED_DRIFT_PPM`]
//! of the distance to the nearer one — the offset is interpolated between
//! them, which cancels a constant frequency error and leaves its variation
//! — whichever of these is tightest.
//!
//! Two samples whose offsets differ by more than their bounds and
//! [`DRIFT_PPM`] of the time between them allow are not one continuous
//! clock: the facility's stepped between them (a failover to a server whose
//! clock differs, or a step of the server's own clock). A capture between
//! them is not interpolated across the step: it is mapped through the
//! tighter of the two alone, the step added to its error (where it fell
//! relative to the step is not known), and [`FacilityClock::learn`] says
//! how far the clock stepped.
//!
//! The samples are kept in `clock_samples` (this module owns the table),
//! written when measured and reloaded at start, so a backlog read before a
//! restart is mapped after it.

use crate::capture::CaptureTime;
use crate::model::{ClockSample, ClockUsed};
use rusqlite::{Connection, params};
use std::collections::HashMap;

/// How fast a boot clock may drift from the facility's, one-sided
/// (parts per million): a free-running crystal is within ±50 ppm; twice
/// that, to be safe.
pub const DRIFT_PPM: f64 = 100.0;

/// The drift assumed between two samples that bracket a capture: only the
/// crystal's change of frequency (temperature) in between, well under
/// 10 ppm indoors.
pub const BRACKETED_DRIFT_PPM: f64 = 10.0;

/// One measurement of the facility clock against a boot clock.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sample {
    /// The boot clock at the measurement, ms.
    boot_ms: i64,
    /// Facility time minus boot clock, ms.
    boot_offset_ms: f64,
    /// The measurement's own error bound, ms.
    bound_ms: f64,
}

/// A capture on facility time.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapped {
    /// Facility time of the capture (Unix ms).
    pub facility_ms: i64,
    /// Facility time minus the gateway's wall stamp of the capture, ms (what
    /// the audit record keeps beside the wall stamp).
    pub offset_ms: i64,
    /// The mapping is within ± this many ms.
    pub error_ms: i64,
    /// Captured after its boot's latest measurement: the next one can map
    /// it closer.
    pub improvable: bool,
}

/// The samples of every boot this gateway measured, in memory.
#[derive(Debug, Default)]
pub struct FacilityClock {
    /// Per boot, in boot-clock order.
    boots: HashMap<String, Vec<Sample>>,
}

impl FacilityClock {
    /// Load the recorded samples.
    pub fn load(conn: &Connection) -> rusqlite::Result<FacilityClock> {
        let mut q = conn.prepare(
            "SELECT boot_id, boot_ms, boot_offset_us, bound_us FROM clock_samples
             ORDER BY boot_id, boot_ms",
        )?;
        let mut clock = FacilityClock::default();
        let rows = q.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                Sample {
                    boot_ms: r.get(1)?,
                    boot_offset_ms: r.get::<_, i64>(2)? as f64 / 1e3,
                    bound_ms: r.get::<_, i64>(3)? as f64 / 1e3,
                },
            ))
        })?;
        for row in rows {
            let (boot, sample) = row?;
            clock.boots.entry(boot).or_default().push(sample);
        }
        Ok(clock)
    }

    /// Keep a new measurement in memory, dropping its boot's samples more
    /// than `keep_ms` of boot clock before it. Returns how far the facility
    /// clock stepped (ms, signed) since the sample before it, if the two
    /// are not one continuous clock (`stepped`).
    pub fn learn(&mut self, sample: &ClockSample, keep_ms: i64) -> Option<f64> {
        let s = Sample {
            boot_ms: sample.boot_ms,
            boot_offset_ms: sample.boot_offset_ms,
            bound_ms: sample.bound_ms,
        };
        let samples = self.boots.entry(sample.boot_id.clone()).or_default();
        let at = samples.partition_point(|o| o.boot_ms < s.boot_ms);
        let step = at
            .checked_sub(1)
            .map(|i| &samples[i])
            .filter(|before| stepped(before, &s).is_some())
            .map(|before| s.boot_offset_ms - before.boot_offset_ms);
        if samples.get(at).is_some_and(|o| o.boot_ms == s.boot_ms) {
            samples[at] = s;
        } else {
            samples.insert(at, s);
        }
        let old = samples.partition_point(|o| o.boot_ms < s.boot_ms - keep_ms);
        samples.drain(..old);
        step
    }

    /// Record a measurement in `clock_samples` (inside the caller's
    /// transaction), dropping samples more than `keep_ms` before it: of its
    /// boot by the boot clock (a wall-clock step changes nothing), of other
    /// boots by the wall clock (older captures are beyond the retention).
    pub fn store(tx: &Connection, sample: &ClockSample, keep_ms: i64) -> rusqlite::Result<()> {
        tx.execute(
            "INSERT OR REPLACE INTO clock_samples
                 (boot_id, boot_ms, boot_offset_us, bound_us, at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                sample.boot_id,
                sample.boot_ms,
                (sample.boot_offset_ms * 1e3).round() as i64,
                (sample.bound_ms * 1e3).ceil() as i64,
                sample.at_ms,
            ],
        )?;
        tx.execute(
            "DELETE FROM clock_samples
             WHERE (boot_id = ?1 AND boot_ms < ?2) OR (boot_id != ?1 AND at_ms < ?3)",
            params![
                sample.boot_id,
                sample.boot_ms - keep_ms,
                sample.at_ms - keep_ms
            ],
        )?;
        Ok(())
    }

    /// Put `time` on facility time for a claim (`now`: the claimer's clock;
    /// `max_error_ms`: `[redis] max_clock_error_ms`). `Err(reason)`: the
    /// scan waits, because a later measurement can still bring its mapping
    /// within the bound — it was captured in this boot after the latest
    /// measurement (an outage: the next one, after it, brackets it) or
    /// before any. A capture no later measurement can bring closer (before
    /// its boot's first measurement, between two, or in an earlier boot)
    /// is claimed on the best time there is — mapped beyond the bound, or
    /// its wall stamp if its boot was never measured — and the note says
    /// so: waiting would hide the pick from the ledger for ever.
    pub fn place(
        &self,
        time: &mut CaptureTime,
        now: &CaptureTime,
        max_error_ms: i64,
    ) -> Result<ClockUsed, String> {
        let mut used = ClockUsed {
            wall_ms: time.utc_ms,
            wall_synced: time.synced,
            mapped: None,
            note: None,
        };
        let this_boot = time.boot_id == now.boot_id;
        match self.map(time) {
            Some(m) if m.error_ms > max_error_ms && this_boot && m.improvable => Err(format!(
                "its capture maps to facility time within ±{} ms only, more than [redis] max_clock_error_ms = {max_error_ms}; it is claimed once the facility clock has been measured again (at the next connect to the facility Redis)",
                m.error_ms
            )),
            Some(m) => {
                if m.error_ms > max_error_ms {
                    used.note = Some(format!(
                        "mapped to facility time within ±{} ms only, more than max_clock_error_ms = {max_error_ms}, and no later measurement of the facility clock can map it closer",
                        m.error_ms
                    ));
                }
                used.mapped = Some((m.offset_ms, m.error_ms));
                time.utc_ms = m.facility_ms;
                time.synced = true;
                Ok(used)
            }
            None if this_boot => Err(
                "the facility clock has not been measured in this boot yet; the scan is claimed once the claimer has measured it (at its next connect to the facility Redis)".into(),
            ),
            None => {
                used.note = Some(
                    "captured in an earlier boot the facility clock was never measured in: claimed on the gateway's wall stamp".into(),
                );
                Ok(used)
            }
        }
    }

    /// `time` on facility time, through the samples of its boot, or `None`
    /// if its boot has none.
    pub fn map(&self, time: &CaptureTime) -> Option<Mapped> {
        let samples = self.boots.get(&time.boot_id).filter(|s| !s.is_empty())?;
        let boot_ms = time.boot_ns as f64 / 1e6;
        let after = samples.partition_point(|s| (s.boot_ms as f64) < boot_ms);
        let distance = |s: &Sample| (boot_ms - s.boot_ms as f64).abs();
        let before = after.checked_sub(1).map(|i| &samples[i]);
        let next = samples.get(after);
        // The tightest of: the sample before alone, the one after alone,
        // and both interpolated (a sample with a wide bound — a slow round
        // trip — is outweighed by a tight one a little further away).
        let alone = |s: &Sample| (s.boot_offset_ms, s.bound_ms + distance(s) * DRIFT_PPM / 1e6);
        let mut best = [before.map(alone), next.map(alone)]
            .into_iter()
            .flatten()
            .min_by(|x, y| x.1.total_cmp(&y.1))?;
        if let (Some(a), Some(b)) = (before, next)
            && b.boot_ms > a.boot_ms
        {
            if let Some(step) = stepped(a, b) {
                // Either side of the step: the one taken may be wrong by it.
                best.1 += step;
            } else {
                let f = (boot_ms - a.boot_ms as f64) / (b.boot_ms - a.boot_ms) as f64;
                let offset = a.boot_offset_ms + f * (b.boot_offset_ms - a.boot_offset_ms);
                let near = distance(a).min(distance(b));
                let error = a.bound_ms.max(b.bound_ms) + near * BRACKETED_DRIFT_PPM / 1e6;
                if error < best.1 {
                    best = (offset, error);
                }
            }
        }
        let (offset, error) = best;
        let facility_ms = (boot_ms + offset).round() as i64;
        Some(Mapped {
            facility_ms,
            offset_ms: facility_ms - time.utc_ms,
            error_ms: error.ceil() as i64,
            improvable: after == samples.len(),
        })
    }
}

/// How far apart (ms) the offsets of samples `a` and `b` (in boot-clock
/// order) are, if more than their bounds and [`DRIFT_PPM`] of the time
/// between them allow: the facility clock stepped between them.
fn stepped(a: &Sample, b: &Sample) -> Option<f64> {
    let apart = (b.boot_offset_ms - a.boot_offset_ms).abs();
    let drift = (b.boot_ms - a.boot_ms).abs() as f64 * DRIFT_PPM / 1e6;
    (apart > a.bound_ms + b.bound_ms + drift).then_some(apart)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(boot_ms: i64, boot_offset_ms: f64, bound_ms: f64) -> ClockSample {
        ClockSample {
            offset_ms: 0.0,
            bound_ms,
            boot_offset_ms,
            boot_id: "b".into(),
            at_ms: 0,
            boot_ms,
        }
    }

    fn at(boot_ms: i64, wall_ms: i64) -> CaptureTime {
        CaptureTime {
            utc_ms: wall_ms,
            boot_ns: boot_ms * 1_000_000,
            boot_id: "b".into(),
            synced: false,
        }
    }

    #[test]
    fn a_capture_is_its_boot_stamp_plus_the_nearest_samples_offset() {
        let mut c = FacilityClock::default();
        assert_eq!(c.map(&at(1_000, 5)), None, "no sample of its boot");
        c.learn(&sample(61_000, 1_000_000.0, 0.5), i64::MAX / 2);
        // 60 s before the sample: 100 ppm of 60 s = 6 ms of drift.
        let m = c.map(&at(1_000, 999_000)).unwrap();
        assert_eq!(m.facility_ms, 1_001_000);
        assert_eq!(m.offset_ms, 2_000, "facility minus the wall stamp");
        assert_eq!(m.error_ms, 7, "0.5 ms bound + 6 ms drift, rounded up");
        let other_boot = CaptureTime {
            boot_id: "a".into(),
            ..at(1_000, 5)
        };
        assert_eq!(c.map(&other_boot), None);
    }

    #[test]
    fn a_capture_between_two_samples_is_interpolated() {
        let mut c = FacilityClock::default();
        c.learn(&sample(100_000, 1_000.0, 1.0), i64::MAX / 2);
        c.learn(&sample(3_700_000, 1_036.0, 2.0), i64::MAX / 2); // 10 ppm fast over an hour
        let m = c.map(&at(1_000_000, 0)).unwrap();
        // A quarter of the way: offset 1009; 900 s from the nearer sample.
        assert_eq!(m.facility_ms, 1_001_009);
        assert_eq!(m.error_ms, 11, "2 ms bound + 10 ppm of 900 s");
    }

    #[test]
    fn a_capture_is_not_interpolated_across_a_step_of_the_facility_clock() {
        let mut c = FacilityClock::default();
        assert_eq!(c.learn(&sample(100_000, 1_000.0, 1.0), i64::MAX / 2), None);
        // An hour later the facility's clock reads 5 s later than it ran:
        // a failover to a server whose clock differs (100 ppm of an hour
        // is 360 ms).
        let step = c.learn(&sample(3_700_000, 6_000.0, 2.0), i64::MAX / 2);
        assert_eq!(step, Some(5_000.0));
        let m = c.map(&at(1_000_000, 0)).unwrap();
        // 900 s after the first: its offset alone (1 ms + 100 ppm of 900 s
        // = 91 ms), not the interpolation (2 250 ms off if the step came
        // late), and the step added to the error.
        assert_eq!(m.facility_ms, 1_001_000);
        assert_eq!(m.error_ms, 5_091);
        assert!(!m.improvable, "no later sample can place it better");
        // Back within the bounds: one clock again.
        assert_eq!(
            c.learn(&sample(3_760_000, 6_001.0, 2.0), i64::MAX / 2),
            None
        );
    }

    #[test]
    fn a_sample_with_a_wide_bound_is_outweighed_by_a_tight_one() {
        let mut c = FacilityClock::default();
        c.learn(&sample(0, 1_000.0, 1.0), i64::MAX / 2);
        c.learn(&sample(10_000, 1_400.0, 500.0), i64::MAX / 2); // a slow round trip
        let m = c.map(&at(1_000, 0)).unwrap();
        assert_eq!(m.facility_ms, 2_000, "the tight sample's offset alone");
        assert_eq!(m.error_ms, 2, "1 ms bound + 100 ppm of 1 s, rounded up");
    }

    #[test]
    fn samples_survive_a_restart_and_are_pruned_by_their_own_boots_clock() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(dir.path()).unwrap();
        let keep = 1_000_000;
        let at = |boot: &str, boot_ms: i64, at_ms: i64| ClockSample {
            boot_id: boot.into(),
            at_ms,
            ..sample(boot_ms, 7.5, 0.4)
        };
        let store_it = |s: &ClockSample| FacilityClock::store(&store.conn, s, keep).unwrap();
        store_it(&at("a", 1_000, 1)); // another boot, long ago by the wall
        store_it(&at("b", 500, 5)); // this boot, beyond keep by its clock
        // This boot, measured on a wall clock since stepped 2 000 000 ms on
        // (1970 → now): recent by its boot clock, kept.
        let before_step = at("b", 1_200_000, 10);
        store_it(&before_step);
        let last = at("b", 1_600_000, 2_000_000);
        store_it(&last);
        let loaded = FacilityClock::load(&store.conn).unwrap();
        let mut learned = FacilityClock::default();
        for s in [at("b", 500, 5), before_step, last] {
            learned.learn(&s, keep);
        }
        assert_eq!(loaded.boots, learned.boots);
        assert_eq!(loaded.boots["b"].len(), 2);
        assert!(!loaded.boots.contains_key("a"));
    }
}
