//! [`EchoWindow`]: how far apart in capture time two reads of one label
//! may be and still be one physical pick (`[dedup] window_ms`, or a scan's
//! own narrower window: a double-fire window, a declared repeat).

use std::fmt;

/// An echo window: a span of capture time, in whole milliseconds, within
/// which a second read of a label is an echo of a committed first one.
/// A type of its own so that it is never mistaken for the other
/// millisecond counts that travel beside it (capture times, clock bounds,
/// retention).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EchoWindow(i64);

impl EchoWindow {
    /// A window of `ms` milliseconds.
    pub const fn from_ms(ms: i64) -> EchoWindow {
        EchoWindow(ms)
    }

    /// Its length in milliseconds.
    pub const fn ms(self) -> i64 {
        self.0
    }

    /// The window a scan carrying `own` (a narrower window of its own, if
    /// any) is judged by under this one: `own`, never wider than this
    /// window and never narrower than `floor`; this window if it has none.
    pub fn for_scan(self, own: Option<EchoWindow>, floor: EchoWindow) -> EchoWindow {
        own.map_or(self, |w| w.max(floor).min(self))
    }
}

impl fmt::Display for EchoWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ms", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::EchoWindow;

    #[test]
    fn a_scans_own_window_is_kept_between_the_floor_and_the_gateways() {
        let gateway = EchoWindow::from_ms(3000);
        let floor = EchoWindow::from_ms(500);
        assert_eq!(gateway.for_scan(None, floor), gateway);
        assert_eq!(
            gateway.for_scan(Some(EchoWindow::from_ms(250)), floor),
            floor
        );
        let own = EchoWindow::from_ms(800);
        assert_eq!(gateway.for_scan(Some(own), floor), own);
        assert_eq!(
            gateway.for_scan(Some(EchoWindow::from_ms(9000)), floor),
            gateway
        );
        assert_eq!(gateway.to_string(), "3000 ms");
    }
}
