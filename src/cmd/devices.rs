//! `scangate devices` and `scangate pair NAME`: find scanners, and pair one
//! by scanning with it.
//!
//! `devices` lists every HID interface (hidraw) and every USB serial tty
//! with VID:PID, manufacturer / product strings, serial number, USB port
//! path, HID usage page and the mode scangate would read it in, and for
//! each a ready `[[scanner]]` snippet and a udev rule line. With nothing
//! plugged in it says so (exit 0).
//!
//! `pair NAME --config FILE` opens every HID scanner interface not already
//! claimed by a `[[scanner]]` of FILE, waits for the next scan on any of
//! them that decodes (a technician pairs by scanning a product's barcode;
//! text typed on a keyboard pairs nothing), then appends the
//! scanner's entry to FILE (checked to parse first) and its udev rules to
//! `--rules` (default `/etc/udev/rules.d/99-scangate.rules`). Serial
//! scanners are paired by hand from the `devices` snippet.
//!
//! While `pair` waits, every keyboard it listens to is grabbed (the test
//! scan types nowhere), the gateway's own too: Esc on one cancels.
//!
//! Exit codes: 0 ok; 1 `pair` saw no scan before `--timeout`, or was
//! cancelled; 2 usage or
//! configuration error; 4 enumeration, reading every candidate, or a file
//! could not be written.

use super::Failure;
use crate::config::{Config, HidMode};
use crate::exit::Exit;
use crate::source::hid::device::{DeviceOpener, HidapiOpener};
use crate::source::hid::devices::{self, HidCandidate, SerialCandidate};
use crate::source::hid::{HidDecoder, READ_SLICE, keyboard};
use std::path::Path;
use std::time::{Duration, Instant};

/// Arguments of `scangate devices` and `scangate pair` (defined with the
/// other clap definitions).
pub use crate::cli::args::{DevicesArgs, PairArgs};

/// What tells a HID candidate apart from the other interfaces plugged in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Keys<'a> {
    /// Its serial number, when it has one.
    serial: Option<&'a str>,
    /// Its USB port path, when it has no serial number or shares it with
    /// another interface of the same VID:PID and mode (cheap scanners
    /// often all report one serial): two identical scanners are then told
    /// apart by the port they are plugged into.
    port: Option<&'a str>,
}

fn keys<'a>(c: &'a HidCandidate, all: &[HidCandidate]) -> Keys<'a> {
    let shared = all.iter().any(|o| {
        o.devnode != c.devnode
            && (o.vendor_id, o.product_id) == (c.vendor_id, c.product_id)
            && o.mode() == c.mode()
            && o.serial_number == c.serial_number
    });
    let serial = c.serial_number.as_deref();
    Keys {
        serial,
        port: (serial.is_none() || shared)
            .then_some(c.usb_port.as_deref())
            .flatten(),
    }
}

/// The `[[scanner]]` entry for HID candidate `c` (`name` as given), with
/// the match keys that select it among `all` the interfaces plugged in.
pub fn hid_snippet(name: &str, c: &HidCandidate, all: &[HidCandidate], scan_type: &str) -> String {
    let mode = c.mode().unwrap_or(HidMode::Pos);
    let mut s = format!(
        "[[scanner]]\nname = {name:?}\nkind = \"hid\"\nmode = \"{}\"\nvendor_id = 0x{:04x}\nproduct_id = 0x{:04x}\n",
        mode.as_str(),
        c.vendor_id,
        c.product_id
    );
    let k = keys(c, all);
    if let Some(sn) = k.serial {
        s += &format!("serial_number = {sn:?}\n");
    }
    if let Some(port) = k.port {
        s += &format!("usb_port = {port:?}\n");
    }
    s += &format!("scan_type = {scan_type:?}\n");
    s
}

fn usb_match(vid: u16, pid: u16, serial: Option<&str>, port: Option<&str>) -> String {
    // (udev: ATTRS and KERNELS must all match one device above the node:
    // the USB device, whose kernel name is its port path.)
    let mut m = format!("ATTRS{{idVendor}}==\"{vid:04x}\", ATTRS{{idProduct}}==\"{pid:04x}\"");
    if let Some(sn) = serial {
        m += &format!(", ATTRS{{serial}}==\"{sn}\"");
    }
    if let Some(p) = port {
        m += &format!(", KERNELS==\"{p}\"");
    }
    m
}

/// udev rule lines for HID candidate `c` among `all`: the hidraw node
/// (stable name, access for the service), and for a keyboard wedge its
/// event nodes (access, so the daemon can grab them). A HID device with no
/// USB device above it (Bluetooth, uhid) has no USB attributes to match:
/// its rule matches the kernel's HID id (`0005:0C2E:0B61.*`).
pub fn hid_udev_rules(name: &str, c: &HidCandidate, all: &[HidCandidate]) -> Vec<String> {
    let m = match (&c.usb_port, &c.hid_id) {
        (None, Some(id)) => format!("KERNELS==\"{id}.*\""),
        _ => {
            let k = keys(c, all);
            usb_match(c.vendor_id, c.product_id, k.serial, k.port)
        }
    };
    let mut rules = vec![format!(
        "SUBSYSTEM==\"hidraw\", {m}, SYMLINK+=\"scangate/{name}\", GROUP=\"scangate\", MODE=\"0660\""
    )];
    if c.mode() == Some(HidMode::Keyboard) {
        rules.push(format!(
            "SUBSYSTEM==\"input\", KERNEL==\"event*\", {m}, GROUP=\"scangate\", MODE=\"0660\""
        ));
    }
    rules
}

/// The `[[scanner]]` entry for a serial candidate.
pub fn serial_snippet(name: &str, scan_type: &str) -> String {
    format!(
        "[[scanner]]\nname = {name:?}\nkind = \"serial\"\npath = \"/dev/scangate/{name}\"\nscan_type = {scan_type:?}\n"
    )
}

/// The udev rule for a serial candidate.
pub fn serial_udev_rule(name: &str, c: &SerialCandidate) -> Option<String> {
    let serial = c.serial_number.as_deref();
    let m = usb_match(
        c.vendor_id?,
        c.product_id?,
        serial,
        serial.is_none().then_some(c.usb_port.as_deref()).flatten(),
    );
    Some(format!(
        "SUBSYSTEM==\"tty\", {m}, SYMLINK+=\"scangate/{name}\", GROUP=\"dialout\", MODE=\"0660\""
    ))
}

fn opt(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or("-")
}

/// Render the `devices` listing.
pub fn render(hid: &[HidCandidate], serial: &[SerialCandidate]) -> String {
    let mut out = String::new();
    out += &format!("HID devices ({}):\n", hid.len());
    if hid.is_empty() {
        out += "  none found (no USB HID device is plugged in, or /dev/hidraw* is not readable)\n";
    }
    for (i, c) in hid.iter().enumerate() {
        let mode = match c.mode() {
            Some(m) => format!("{} (scanner)", m.as_str()),
            None => "not a scanner interface (no keyboard or 0x8C collection)".into(),
        };
        out += &format!(
            "\n  {}  {:04x}:{:04x}  {} / {}\n    serial: {}   USB port: {}   usage page: 0x{:04x} usage 0x{:02x}   mode: {mode}\n",
            c.devnode.display(),
            c.vendor_id,
            c.product_id,
            opt(&c.manufacturer),
            opt(&c.product),
            opt(&c.serial_number),
            opt(&c.usb_port),
            c.usage_page,
            c.usage
        );
        if c.mode().is_some() {
            let name = format!("hid-{i}");
            out += "    config:\n";
            for l in hid_snippet(&name, c, hid, "dispense").lines() {
                out += &format!("      {l}\n");
            }
            out += "    udev:\n";
            for r in hid_udev_rules(&name, c, hid) {
                out += &format!("      {r}\n");
            }
        }
    }
    out += &format!("\nSerial devices ({}):\n", serial.len());
    if serial.is_empty() {
        out += "  none found (no /dev/ttyUSB* or /dev/ttyACM*)\n";
    }
    for (i, c) in serial.iter().enumerate() {
        let name = format!("serial-{i}");
        let vp = match (c.vendor_id, c.product_id) {
            (Some(v), Some(p)) => format!("{v:04x}:{p:04x}"),
            _ => "-".into(),
        };
        out += &format!(
            "\n  {}  {vp}  {} / {}\n    serial: {}   USB port: {}   mode: serial\n    config:\n",
            c.devnode.display(),
            opt(&c.manufacturer),
            opt(&c.product),
            opt(&c.serial_number),
            opt(&c.usb_port)
        );
        for l in serial_snippet(&name, "dispense").lines() {
            out += &format!("      {l}\n");
        }
        if let Some(r) = serial_udev_rule(&name, c) {
            out += &format!("    udev:\n      {r}\n");
        }
    }
    out
}

/// `scangate devices`; returns the exit code.
pub fn run(_args: &DevicesArgs) -> Result<Exit, Failure> {
    let hid = devices::enumerate_hid().map_err(|e| Failure::Runtime(e.to_string()))?;
    let serial = devices::serial_candidates(Path::new(devices::SYS));
    print!("{}", render(&hid, &serial));
    Ok(Exit::Ok)
}

/// Append `text` to `path` (creating it), with a blank line before.
fn append(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    write!(f, "\n{text}")
}

/// Check that `config` plus `snippet` is a valid configuration, then
/// append the snippet. Nothing is written if it would not parse.
pub fn add_entry(config: &Path, snippet: &str) -> Result<(), String> {
    let current = Config::read_text(config)
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    Config::parse(&format!("{current}\n{snippet}"), Some(config))
        .map_err(|e| format!("the new entry would not be valid: {e}"))?;
    append(config, snippet).map_err(|e| format!("cannot write {}: {e}", config.display()))
}

/// `scangate pair`; returns the exit code.
pub fn pair(args: &PairArgs) -> Result<Exit, Failure> {
    let existing = existing_config(args)?;
    if crate::config::ScanType::parse(&args.scan_type).is_none() {
        return Err(Failure::Usage(
            "--scan-type must be receive, dispense, waste, return or adjust".into(),
        ));
    }
    let all = devices::enumerate_hid().map_err(|e| Failure::Runtime(e.to_string()))?;
    let unpaired: Vec<HidCandidate> = all
        .iter()
        .filter(|c| {
            let Some(mode) = c.mode() else { return false };
            !existing
                .scanners
                .iter()
                .filter_map(|s| s.as_hid())
                .any(|h| h.mode() == mode && devices::Matcher::of(h).matches(c, mode))
        })
        .cloned()
        .collect();
    if unpaired.is_empty() {
        eprintln!(
            "scangate: no unpaired HID scanner is plugged in (`scangate devices` lists what is there); plug one in and run pair again"
        );
        return Ok(Exit::CheckFailed);
    }
    eprintln!(
        "waiting up to {} s for a scan on any of {} unpaired HID scanner interface(s): scan a product's barcode with the scanner to pair it (Esc on a keyboard cancels: keyboards are grabbed meanwhile)",
        args.timeout,
        unpaired.len()
    );
    let c = match wait_for_scan(&unpaired, Duration::from_secs(args.timeout)) {
        Waited::Scan(c) => c,
        Waited::Cancelled(c) => {
            eprintln!(
                "scangate: cancelled (Esc on {}); nothing was written",
                c.devnode.display()
            );
            return Ok(Exit::CheckFailed);
        }
        Waited::TimedOut => {
            eprintln!(
                "scangate: no scan within {} s; nothing was written",
                args.timeout
            );
            return Ok(Exit::CheckFailed);
        }
        Waited::AllFailed => {
            return Err(Failure::Runtime(
                "none of the scanner interfaces could be read (above: why); nothing was written. Run pair as root, or check that the device is still plugged in".into(),
            ));
        }
    };
    write_pairing(args, &c, &all)?;
    Ok(Exit::Ok)
}

/// The configuration `pair` adds to (empty if there is no file yet); a
/// usage error if it already has a scanner of that name.
fn existing_config(args: &PairArgs) -> Result<Config, Failure> {
    let existing = match Config::read_text(&args.config)? {
        Some(t) => Config::parse(&t, Some(&args.config))?,
        None => Config::default(),
    };
    if existing.scanners.iter().any(|s| s.name == args.name) {
        return Err(Failure::Usage(format!(
            "{} already has a scanner named {:?}; choose another NAME",
            args.config.display(),
            args.name
        )));
    }
    Ok(existing)
}

/// Append the paired scanner `c`'s entry to the config and its udev rules
/// to `--rules`, and say so.
fn write_pairing(args: &PairArgs, c: &HidCandidate, all: &[HidCandidate]) -> Result<(), Failure> {
    let snippet = hid_snippet(&args.name, c, all, &args.scan_type);
    add_entry(&args.config, &snippet).map_err(Failure::Runtime)?;
    let rules = hid_udev_rules(&args.name, c, all).join("\n") + "\n";
    if let Err(e) = append(&args.rules, &rules) {
        return Err(Failure::Runtime(format!(
            "the config entry was written, but {} could not be: {e}; add these lines by hand:\n{rules}",
            args.rules.display()
        )));
    }
    println!(
        "paired {} ({:04x}:{:04x}, {}) as {:?}:\n{snippet}\nudev rules appended to {}; run: udevadm control --reload && udevadm trigger",
        c.devnode.display(),
        c.vendor_id,
        c.product_id,
        c.mode().map(HidMode::as_str).unwrap_or("?"),
        args.name,
        args.rules.display()
    );
    Ok(())
}

/// What a pairing reader thread heard.
enum Heard {
    /// A read: it decodes, or why not.
    Read(usize, Result<(), String>),
    /// Esc pressed on a keyboard: the technician cancels.
    Cancel(usize),
    /// The interface could not be opened or read (why): its thread ended.
    Failed(usize, String),
}

/// How the wait for a pairing scan ended.
enum Waited {
    /// This candidate sent a scan that decodes.
    Scan(HidCandidate),
    /// Esc on this keyboard.
    Cancelled(HidCandidate),
    /// Nothing within the timeout.
    TimedOut,
    /// Every interface failed (each was named on stderr).
    AllFailed,
}

/// Read every candidate on its own thread until one yields a scan that
/// decodes as a barcode. A read that does not decode (text typed on the
/// gateway's own keyboard, which pairing grabs too, or a barcode scangate
/// cannot read) pairs nothing: it is named on stderr (its reason only,
/// never its data) and the wait goes on. Esc on any keyboard listened to
/// cancels (the gateway's own keyboard is grabbed: Ctrl+C on it would not
/// reach the terminal).
fn wait_for_scan(cands: &[HidCandidate], timeout: Duration) -> Waited {
    let (tx, rx) = std::sync::mpsc::channel::<Heard>();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for (i, c) in cands.iter().enumerate() {
        let tx = tx.clone();
        let stop = stop.clone();
        let mode = c.mode().unwrap_or(HidMode::Pos);
        let mut cfg = crate::config::Scanner::hid("pairing", mode, crate::config::ScanType::Adjust);
        cfg.kind.path = c.devnode.clone();
        // Pairing must not swallow a keyboard's keys for longer than needed,
        // but the technician's test scan should not type anywhere either.
        let _ = std::thread::Builder::new()
            .name(format!("pair-{i}"))
            .spawn(move || {
                let mut dev = match HidapiOpener::from_config(&cfg).open() {
                    Ok(dev) => dev,
                    Err(e) => {
                        let _ = tx.send(Heard::Failed(i, e.to_string()));
                        return;
                    }
                };
                let mut decoder = HidDecoder::from_config(&cfg);
                let mut raws = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    match dev.read_report(READ_SLICE) {
                        Ok(Some(r)) => {
                            let escape = mode == HidMode::Keyboard
                                && keyboard::split_report(&r)
                                    .is_ok_and(|(_, keys)| keys.contains(&keyboard::USAGE_ESCAPE));
                            if escape {
                                let _ = tx.send(Heard::Cancel(i));
                                return;
                            }
                            decoder.push(&r, Instant::now(), &mut raws);
                        }
                        Ok(None) => decoder.expire(Instant::now(), &mut raws),
                        Err(e) => {
                            let _ = tx.send(Heard::Failed(i, e.to_string()));
                            return;
                        }
                    }
                    let year = crate::capture::CaptureTime::now().year();
                    for raw in raws.drain(..) {
                        let decoded = raw.decode(year).map(|_| ()).map_err(|e| e.to_string());
                        if tx.send(Heard::Read(i, decoded)).is_err() {
                            return;
                        }
                    }
                }
            });
    }
    drop(tx);
    let deadline = Instant::now() + timeout;
    let waited = loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Heard::Read(i, Ok(()))) => break Waited::Scan(cands[i].clone()),
            Ok(Heard::Read(i, Err(why))) => eprintln!(
                "a read on {} did not decode ({why}): nothing paired; scan a product's barcode (GS1 DataMatrix, UPC/EAN) with the new scanner",
                cands[i].devnode.display()
            ),
            Ok(Heard::Cancel(i)) => break Waited::Cancelled(cands[i].clone()),
            Ok(Heard::Failed(i, why)) => eprintln!(
                "scangate: cannot read {} while pairing: {why}",
                cands[i].devnode.display()
            ),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break Waited::AllFailed,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => break Waited::TimedOut,
        }
    };
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    waited
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kbd() -> HidCandidate {
        HidCandidate {
            devnode: "/dev/hidraw2".into(),
            vendor_id: 0x0c2e,
            product_id: 0x0b61,
            manufacturer: Some("Honeywell".into()),
            product: Some("Xenon".into()),
            serial_number: None,
            usb_port: Some("1-1.3".into()),
            hid_id: Some("0003:0C2E:0B61".into()),
            usage_page: devices::USAGE_PAGE_DESKTOP,
            usage: devices::USAGE_KEYBOARD,
        }
    }

    #[test]
    fn snippets_parse_and_rules_match_by_port_without_serial() {
        let c = kbd();
        let snippet = hid_snippet("counter-2", &c, &[], "dispense");
        let cfg = Config::parse(&snippet, None).unwrap();
        let s = cfg.scanners[0].as_hid().unwrap();
        assert_eq!(s.mode(), HidMode::Keyboard);
        assert_eq!((s.vendor_id, s.product_id), (Some(0x0c2e), Some(0x0b61)));
        assert_eq!(s.usb_port.as_deref(), Some("1-1.3"));
        let rules = hid_udev_rules("counter-2", &c, &[]);
        assert_eq!(rules.len(), 2, "hidraw + event nodes for a keyboard wedge");
        assert!(rules[0].contains("KERNELS==\"1-1.3\""), "{rules:?}");
        assert!(
            rules[0].contains("SYMLINK+=\"scangate/counter-2\""),
            "{rules:?}"
        );
        assert!(rules[1].starts_with("SUBSYSTEM==\"input\""), "{rules:?}");
        let pos = HidCandidate {
            serial_number: Some("SN1".into()),
            usage_page: devices::USAGE_PAGE_POS,
            usage: 2,
            ..c
        };
        let snippet = hid_snippet("rx", &pos, &[], "receive");
        assert!(snippet.contains("serial_number = \"SN1\""), "{snippet}");
        assert!(!snippet.contains("usb_port"), "{snippet}");
        Config::parse(&snippet, None).unwrap();
        assert_eq!(hid_udev_rules("rx", &pos, &[]).len(), 1);
        Config::parse(&serial_snippet("s", "dispense"), None).unwrap();
    }

    #[test]
    fn identical_scanners_sharing_a_serial_are_told_apart_by_port() {
        let a = HidCandidate {
            serial_number: Some("00000000".into()),
            ..kbd()
        };
        let b = HidCandidate {
            devnode: "/dev/hidraw5".into(),
            usb_port: Some("1-1.4".into()),
            ..a.clone()
        };
        let all = [a.clone(), b.clone()];
        for (c, port) in [(&a, "1-1.3"), (&b, "1-1.4")] {
            let snippet = hid_snippet("x", c, &all, "dispense");
            assert!(
                snippet.contains(&format!("usb_port = \"{port}\"")),
                "{snippet}"
            );
            let cfg = Config::parse(&snippet, None).unwrap();
            let m = devices::Matcher::of(cfg.scanners[0].as_hid().unwrap());
            let hits: Vec<_> = all
                .iter()
                .filter(|o| m.matches(o, HidMode::Keyboard))
                .collect();
            assert_eq!(hits, vec![c], "{snippet}");
            for r in hid_udev_rules("x", c, &all) {
                assert!(r.contains(&format!("KERNELS==\"{port}\"")), "{r}");
                assert!(r.contains("ATTRS{serial}==\"00000000\""), "{r}");
            }
        }
        // One of them alone: its serial is enough.
        let alone = hid_snippet("x", &a, std::slice::from_ref(&a), "dispense");
        assert!(!alone.contains("usb_port"), "{alone}");
    }

    #[test]
    fn a_hid_device_without_usb_parent_is_matched_by_its_hid_id() {
        let bt = HidCandidate {
            usb_port: None,
            hid_id: Some("0005:0C2E:0B61".into()),
            serial_number: Some("SN1".into()),
            usage_page: devices::USAGE_PAGE_POS,
            usage: 2,
            ..kbd()
        };
        let rules = hid_udev_rules("bt", &bt, &[]);
        assert_eq!(
            rules,
            vec!["SUBSYSTEM==\"hidraw\", KERNELS==\"0005:0C2E:0B61.*\", SYMLINK+=\"scangate/bt\", GROUP=\"scangate\", MODE=\"0660\"".to_string()]
        );
    }

    #[test]
    fn listing_with_no_devices_says_so() {
        let text = render(&[], &[]);
        assert!(text.contains("HID devices (0):\n  none found"), "{text}");
        assert!(text.contains("Serial devices (0):\n  none found"), "{text}");
        let text = render(&[kbd()], &[]);
        assert!(text.contains("mode: keyboard (scanner)"), "{text}");
        assert!(text.contains("kind = \"hid\""), "{text}");
    }

    #[test]
    fn add_entry_refuses_an_entry_that_would_not_parse() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("scangate.toml");
        let snippet = hid_snippet("a", &kbd(), &[], "dispense");
        add_entry(&cfg, &snippet).unwrap();
        // The same name again: invalid, the file is unchanged.
        let before = std::fs::read_to_string(&cfg).unwrap();
        assert!(
            add_entry(&cfg, &snippet)
                .unwrap_err()
                .contains("used twice")
        );
        assert_eq!(std::fs::read_to_string(&cfg).unwrap(), before);
    }
}
