//! ACK latency: a tiny fixed-bucket histogram (no metrics dependency).
//!
//! The ACK latency of a scanner is the time from reading the byte that ended
//! a frame to having written the ACK for it — what an operator waiting for
//! the beep experiences, minus the cable. Buckets are fixed (50 µs … 5 s,
//! roughly 1-2-3-5 steps); percentiles are reported as the upper bound of
//! the bucket they fall in (so "p99 ≤ 2 ms" is exact at bucket edges), the
//! maximum exactly.

use std::fmt;
use std::time::Duration;

/// Bucket upper bounds in microseconds; a last, open bucket holds the rest.
const BOUNDS_US: [u64; 24] = [
    50,
    100,
    200,
    300,
    500,
    750,
    1_000,
    1_500,
    2_000,
    3_000,
    5_000,
    7_500,
    10_000,
    15_000,
    20_000,
    30_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    u64::MAX,
];

/// Counts of latencies per fixed bucket, plus the exact maximum and sum.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Histogram {
    buckets: [u64; BOUNDS_US.len()],
    count: u64,
    sum_us: u64,
    max_us: u64,
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Histogram {
        Histogram::default()
    }

    /// Record one latency.
    pub fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let i = BOUNDS_US.partition_point(|&b| b < us);
        self.buckets[i.min(BOUNDS_US.len() - 1)] += 1;
        self.count += 1;
        self.sum_us = self.sum_us.saturating_add(us);
        self.max_us = self.max_us.max(us);
    }

    /// How many latencies were recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The largest latency recorded.
    pub fn max(&self) -> Duration {
        Duration::from_micros(self.max_us)
    }

    /// Upper bound of the bucket holding quantile `q` (0..=1), capped at the
    /// maximum; zero when empty.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Duration::from_micros(BOUNDS_US[i].min(self.max_us));
            }
        }
        self.max()
    }

    /// Forget everything (start a new reporting interval).
    pub fn reset(&mut self) {
        *self = Histogram::default();
    }
}

impl fmt::Display for Histogram {
    /// `count=N p50<=X p99<=Y max=Z` with times in milliseconds.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        write!(
            f,
            "count={} p50<={:.2}ms p99<={:.2}ms max={:.2}ms",
            self.count,
            ms(self.quantile(0.5)),
            ms(self.quantile(0.99)),
            ms(self.max())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_bucket_upper_bounds_capped_at_max() {
        let mut h = Histogram::new();
        assert_eq!(h.quantile(0.99), Duration::ZERO);
        for _ in 0..98 {
            h.record(Duration::from_micros(400)); // bucket ≤ 500 µs
        }
        h.record(Duration::from_micros(1_800)); // ≤ 2 ms
        h.record(Duration::from_millis(40)); // ≤ 50 ms
        assert_eq!(h.count(), 100);
        assert_eq!(h.quantile(0.5), Duration::from_micros(500));
        assert_eq!(h.quantile(0.99), Duration::from_micros(2_000));
        assert_eq!(h.quantile(1.0), Duration::from_millis(40), "capped at max");
        assert_eq!(h.max(), Duration::from_millis(40));
        assert_eq!(
            h.to_string(),
            "count=100 p50<=0.50ms p99<=2.00ms max=40.00ms"
        );
        h.reset();
        assert_eq!(h.count(), 0);
    }

    #[test]
    fn huge_latencies_land_in_the_open_bucket() {
        let mut h = Histogram::new();
        h.record(Duration::from_secs(3600));
        assert_eq!(h.quantile(0.5), Duration::from_secs(3600));
    }
}
