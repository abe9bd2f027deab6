//! Capped exponential back-off: the one retry schedule of every stage that
//! waits to try again — a scanner to reopen, the database to take a write,
//! the facility store to answer.

use std::time::Duration;

/// Delays that double from `min` up to `max` with each failure, and start
/// again from `min` after a success.
#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// Starting at `min`, never longer than `max`.
    pub const fn new(min: Duration, max: Duration) -> Backoff {
        Backoff {
            min,
            max,
            next: min,
        }
    }

    /// A failure: the delay to wait now (the one after it doubles).
    pub fn failed(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(self.max);
        now
    }

    /// The delay the next failure waits (for a message that says when the
    /// next attempt is).
    pub fn peek(&self) -> Duration {
        self.next
    }

    /// A success: the next failure waits `min` again.
    pub fn reset(&mut self) {
        self.next = self.min;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_and_a_success_starts_again() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(100), ms(500));
        let delays: Vec<Duration> = (0..5).map(|_| b.failed()).collect();
        assert_eq!(delays, [ms(100), ms(200), ms(400), ms(500), ms(500)]);
        assert_eq!(b.peek(), ms(500));
        b.reset();
        assert_eq!((b.peek(), b.failed()), (ms(100), ms(100)));
        assert_eq!(b.max, ms(500));
    }
}
