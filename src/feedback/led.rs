//! The gateway's own indicator: a Linux LED class device
//! (`/sys/class/leds/NAME`: a Pi's ACT LED, a GPIO LED or buzzer) that
//! plays a blink pattern per decision.
//!
//! For scanners with no channel back (keyboard wedges type into the
//! gateway and cannot be told anything) and as well as a scanner's own
//! signal. On [`Led::open`] the LED's trigger (the kernel's own use of it,
//! e.g. `mmc0` disk activity) is set to `none`, and put back on
//! `Led::close` or drop. [`Led::show`] blocks for the length of the
//! pattern: run it on a thread of its own.
//!
//! | told | pattern ([`pattern`]) |
//! |---|---|
//! | committed | one short blink (150 ms) |
//! | echo | nothing |
//! | ambiguous | three quick blinks (120 ms on, 120 ms off) |
//! | rejected | one long blink (1 s) |
//! | waiting | a slow double blink (400 ms on, 400 ms off) |
//! | control | two quick blinks (120 ms on, 120 ms off) |
//! | lapsed | a long blink, then a short one (600 ms, 150 ms) |
//! | expired | three long blinks (600 ms on, 200 ms off) |
//! | expiring | a short blink, then a long one (150 ms, 600 ms) |
//! | recalled | a fast flicker (8 blinks of 60 ms) |
//! | unknown | two long blinks (600 ms on, 300 ms off) |
//! | suspect | a long blink, then a fast flicker (600 ms; 4 blinks of 60 ms) |

use super::Told;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

/// Where the kernel lists LED class devices.
pub const SYSFS_LEDS: &str = "/sys/class/leds";

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const COMMITTED: &[(bool, Duration)] = &[(true, ms(150)), (false, ms(0))];
const AMBIGUOUS: &[(bool, Duration)] = &[
    (true, ms(120)),
    (false, ms(120)),
    (true, ms(120)),
    (false, ms(120)),
    (true, ms(120)),
    (false, ms(0)),
];
const REJECTED: &[(bool, Duration)] = &[(true, ms(1000)), (false, ms(0))];
const CONTROL: &[(bool, Duration)] = &[
    (true, ms(120)),
    (false, ms(120)),
    (true, ms(120)),
    (false, ms(0)),
];
const LAPSED: &[(bool, Duration)] = &[
    (true, ms(600)),
    (false, ms(200)),
    (true, ms(150)),
    (false, ms(0)),
];
const WAITING: &[(bool, Duration)] = &[
    (true, ms(400)),
    (false, ms(400)),
    (true, ms(400)),
    (false, ms(0)),
];

const EXPIRED: &[(bool, Duration)] = &[
    (true, ms(600)),
    (false, ms(200)),
    (true, ms(600)),
    (false, ms(200)),
    (true, ms(600)),
    (false, ms(0)),
];
const EXPIRING: &[(bool, Duration)] = &[
    (true, ms(150)),
    (false, ms(200)),
    (true, ms(600)),
    (false, ms(0)),
];
/// Eight blinks of 60 ms, 60 ms apart.
const RECALLED: &[(bool, Duration)] = &flicker::<16>();
const UNKNOWN: &[(bool, Duration)] = &[
    (true, ms(600)),
    (false, ms(300)),
    (true, ms(600)),
    (false, ms(0)),
];

const SUSPECT: &[(bool, Duration)] = &[
    (true, ms(600)),
    (false, ms(200)),
    (true, ms(60)),
    (false, ms(60)),
    (true, ms(60)),
    (false, ms(60)),
    (true, ms(60)),
    (false, ms(60)),
    (true, ms(60)),
    (false, ms(0)),
];

/// `N` steps alternating on and off, 60 ms each, from on; the last off.
const fn flicker<const N: usize>() -> [(bool, Duration); N] {
    let mut steps = [(false, ms(0)); N];
    let mut i = 0;
    while i < N {
        steps[i] = (i % 2 == 0, ms(60));
        i += 1;
    }
    steps[N - 1] = (false, ms(0));
    steps
}

/// The blink pattern for `told`: (LED on, how long it stays so), in order.
/// Every non-empty pattern ends with the LED off.
pub fn pattern(told: Told) -> &'static [(bool, Duration)] {
    match told {
        Told::Committed => COMMITTED,
        Told::Echo => &[],
        Told::Ambiguous => AMBIGUOUS,
        Told::Rejected => REJECTED,
        Told::Waiting => WAITING,
        Told::Control => CONTROL,
        Told::Lapsed => LAPSED,
        Told::Expired => EXPIRED,
        Told::Expiring => EXPIRING,
        Told::Recalled => RECALLED,
        Told::Unknown => UNKNOWN,
        Told::Suspect => SUSPECT,
    }
}

/// An LED that cannot be used: the file, what went wrong, the fix.
#[derive(Debug)]
pub struct LedError {
    /// The sysfs file.
    pub path: PathBuf,
    /// What went wrong.
    pub problem: String,
    /// What to do about it.
    pub fix: String,
}

impl fmt::Display for LedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}. Fix: {}",
            self.path.display(),
            self.problem,
            self.fix
        )
    }
}

impl std::error::Error for LedError {}

impl LedError {
    fn io(path: &Path, doing: &str, e: &io::Error, name: &str) -> LedError {
        let fix = match e.kind() {
            io::ErrorKind::NotFound => format!(
                "check the name: `ls {SYSFS_LEDS}` lists the LEDs of this gateway (a Pi's is \"ACT\" or \"led0\"), and set `led` to one of them"
            ),
            io::ErrorKind::PermissionDenied => format!(
                "let the scangate user write it, e.g. a udev rule: SUBSYSTEM==\"leds\", KERNEL==\"{name}\", RUN+=\"/bin/chgrp scangate /sys%p/brightness /sys%p/trigger\", RUN+=\"/bin/chmod g+w /sys%p/brightness /sys%p/trigger\" (or, to try it, `chmod a+w` both files as root)"
            ),
            // The unit's ProtectKernelTunables= mounts /sys read-only.
            io::ErrorKind::ReadOnlyFilesystem => format!(
                "/sys is read-only inside scangate.service (ProtectKernelTunables=yes): open this LED's directory with a drop-in, `systemctl edit scangate`, adding the lines \"[Service]\" and \"ReadWritePaths={}\", then `systemctl restart scangate`",
                path.parent().unwrap_or(path).display()
            ),
            _ => "check that the LED driver is loaded (`dmesg`), or choose another LED".to_string(),
        };
        LedError {
            path: path.to_path_buf(),
            problem: format!("cannot {doing}: {e}"),
            fix,
        }
    }
}

/// An LED class device taken over from its kernel trigger.
#[derive(Debug)]
pub struct Led {
    dir: PathBuf,
    name: String,
    max: u32,
    /// The trigger to put back, until it is put back.
    old_trigger: Option<String>,
}

impl Led {
    /// `/sys/class/leds/NAME`.
    pub fn open_sysfs(name: &str) -> Result<Led, LedError> {
        Led::open(Path::new(SYSFS_LEDS), name)
    }

    /// `ROOT/NAME` (`root` is `/sys/class/leds` but for tests): reads
    /// `max_brightness`, remembers `trigger` and sets it to `none`.
    pub fn open(root: &Path, name: &str) -> Result<Led, LedError> {
        let dir = root.join(name);
        let max_path = dir.join("max_brightness");
        let text = fs::read_to_string(&max_path)
            .map_err(|e| LedError::io(&max_path, "read it", &e, name))?;
        let max = text
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|&m| m > 0)
            .ok_or_else(|| LedError {
                path: max_path.clone(),
                problem: format!("{:?} is not a usable maximum brightness", text.trim()),
                fix: "choose another LED: this one cannot be lit".into(),
            })?;
        let trigger_path = dir.join("trigger");
        let triggers = fs::read_to_string(&trigger_path)
            .map_err(|e| LedError::io(&trigger_path, "read it", &e, name))?;
        let old = current_trigger(&triggers);
        fs::write(&trigger_path, "none")
            .map_err(|e| LedError::io(&trigger_path, "set it to none", &e, name))?;
        Ok(Led {
            dir,
            name: name.to_string(),
            max,
            old_trigger: old,
        })
    }

    /// Its `max_brightness`: what "on" writes.
    #[cfg(test)]
    pub fn max_brightness(&self) -> u32 {
        self.max
    }

    /// Play the pattern for `told`, sleeping between steps: blocks for its
    /// length (up to about 1.6 s).
    pub fn show(&self, told: Told) -> Result<(), LedError> {
        self.play(pattern(told), thread::sleep)
    }

    /// Play `steps`: write each brightness, then `wait` its duration.
    pub fn play(
        &self,
        steps: &[(bool, Duration)],
        mut wait: impl FnMut(Duration),
    ) -> Result<(), LedError> {
        let path = self.dir.join("brightness");
        for &(on, how_long) in steps {
            let value = if on { self.max } else { 0 };
            fs::write(&path, value.to_string())
                .map_err(|e| LedError::io(&path, "write it", &e, &self.name))?;
            if !how_long.is_zero() {
                wait(how_long);
            }
        }
        Ok(())
    }

    /// Put the old trigger back (also done on drop, errors ignored there).
    #[cfg(test)]
    pub fn close(mut self) -> Result<(), LedError> {
        self.restore()
    }

    fn restore(&mut self) -> Result<(), LedError> {
        let Some(old) = self.old_trigger.take() else {
            return Ok(());
        };
        let path = self.dir.join("trigger");
        fs::write(&path, &old).map_err(|e| LedError::io(&path, "restore it", &e, &self.name))
    }
}

impl Drop for Led {
    fn drop(&mut self) {
        let _ = self.restore();
    }
}

/// The trigger in force: the `[bracketed]` one of the list the kernel
/// shows (`none [mmc0] timer`), or a lone word.
fn current_trigger(text: &str) -> Option<String> {
    let mut words = text.split_whitespace();
    if let Some(w) = text
        .split_whitespace()
        .find(|w| w.starts_with('[') && w.ends_with(']') && w.len() > 2)
    {
        return Some(w[1..w.len() - 1].to_string());
    }
    match (words.next(), words.next()) {
        (Some(one), None) => Some(one.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// A fake `/sys/class/leds/ACT`.
    fn fake(max: &str, trigger: &str) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("ACT");
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("max_brightness"), max).unwrap();
        fs::write(dir.join("trigger"), trigger).unwrap();
        fs::write(dir.join("brightness"), "0").unwrap();
        root
    }

    fn read(root: &Path, file: &str) -> String {
        fs::read_to_string(root.join("ACT").join(file)).unwrap()
    }

    #[test]
    fn trigger_is_none_while_open_and_restored_on_close() {
        let root = fake("255\n", "none [mmc0] timer heartbeat\n");
        let led = Led::open(root.path(), "ACT").unwrap();
        assert_eq!(led.max_brightness(), 255);
        assert_eq!(read(root.path(), "trigger"), "none");
        led.close().unwrap();
        assert_eq!(read(root.path(), "trigger"), "mmc0");
    }

    #[test]
    fn trigger_is_restored_on_drop() {
        let root = fake("1", "[heartbeat] none");
        drop(Led::open(root.path(), "ACT").unwrap());
        assert_eq!(read(root.path(), "trigger"), "heartbeat");
    }

    #[test]
    fn brightness_is_written_in_order_for_each_pattern() {
        let root = fake("255", "[none]");
        let led = Led::open(root.path(), "ACT").unwrap();
        for told in Told::ALL {
            // At each wait, the value just written; then the final one.
            let seen = RefCell::new(Vec::new());
            let waits = RefCell::new(Vec::new());
            led.play(pattern(told), |d| {
                seen.borrow_mut().push(read(root.path(), "brightness"));
                waits.borrow_mut().push(d);
            })
            .unwrap();
            let want: Vec<String> = pattern(told)
                .iter()
                .filter(|(_, d)| !d.is_zero())
                .map(|&(on, _)| if on { "255" } else { "0" }.to_string())
                .collect();
            assert_eq!(*seen.borrow(), want, "{told}");
            let total: Duration = waits.borrow().iter().sum();
            assert_eq!(total, pattern(told).iter().map(|&(_, d)| d).sum(), "{told}");
            assert_eq!(read(root.path(), "brightness"), "0", "{told} ends off");
        }
    }

    #[test]
    fn a_read_only_sys_names_the_drop_in_that_opens_this_led() {
        let file = Path::new("/sys/class/leds/input0::capslock/trigger");
        let e = io::Error::from(io::ErrorKind::ReadOnlyFilesystem);
        let err = LedError::io(file, "set it to none", &e, "input0::capslock");
        let text = err.to_string();
        assert!(
            text.contains("ReadWritePaths=/sys/class/leds/input0::capslock\""),
            "{text}"
        );
        assert!(text.contains("systemctl edit scangate"), "{text}");
    }

    #[test]
    fn patterns_are_distinct_and_end_off() {
        assert!(pattern(Told::Echo).is_empty());
        for (i, a) in Told::ALL.iter().enumerate() {
            if let Some(&(on, _)) = pattern(*a).last() {
                assert!(!on, "{a} ends off");
            }
            for b in &Told::ALL[i + 1..] {
                assert_ne!(pattern(*a), pattern(*b), "{a} and {b}");
            }
        }
    }

    #[test]
    fn errors_name_the_file_and_the_fix() {
        let root = tempfile::tempdir().unwrap();
        let e = Led::open(root.path(), "nope").unwrap_err();
        assert!(e.path.ends_with("nope/max_brightness"), "{e}");
        assert!(e.fix.contains("ls /sys/class/leds"), "{e}");
        let root = fake("0", "[none]");
        let e = Led::open(root.path(), "ACT").unwrap_err();
        assert!(e.problem.contains("maximum brightness"), "{e}");
        let e = LedError::io(
            Path::new("/sys/class/leds/ACT/trigger"),
            "set it to none",
            &io::Error::from(io::ErrorKind::PermissionDenied),
            "ACT",
        );
        assert!(
            e.to_string()
                .starts_with("/sys/class/leds/ACT/trigger: cannot set it to none")
        );
        assert!(
            e.fix.contains("udev") && e.fix.contains("KERNEL==\"ACT\""),
            "{e}"
        );
    }

    #[test]
    fn the_current_trigger_is_the_bracketed_one() {
        assert_eq!(
            current_trigger("none [mmc0] timer\n").as_deref(),
            Some("mmc0")
        );
        assert_eq!(current_trigger("[none] gpio").as_deref(), Some("none"));
        assert_eq!(current_trigger("none\n").as_deref(), Some("none"));
        assert_eq!(current_trigger("a b").as_deref(), None);
        assert_eq!(current_trigger("").as_deref(), None);
    }
}
