//! Finding HID scanners: enumeration (hidapi), the sysfs facts hidapi does
//! not give (USB port path, evdev nodes, serial ttys), matching a
//! `[[scanner]]` entry to a device, and the evdev grab that keeps a
//! keyboard-wedge scanner from typing into the console.
//!
//! Every sysfs walk takes the sysfs root as a parameter (`/sys` live), so
//! tests run it on a fake tree in a temporary directory. The walks never
//! follow symlinks below the device (sysfs is full of cycles).

use super::config::{HidConfig, HidMode};
use std::path::{Path, PathBuf};

/// The live sysfs root.
pub const SYS: &str = "/sys";
/// HID usage page of POS bar code scanners.
pub const USAGE_PAGE_POS: u16 = 0x8C;
/// Generic Desktop page (keyboards are usage 0x06 on it).
pub const USAGE_PAGE_DESKTOP: u16 = 0x01;
/// Keyboard usage on the Generic Desktop page.
pub const USAGE_KEYBOARD: u16 = 0x06;

/// One HID interface (hidraw node) that could be a scanner.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HidCandidate {
    /// `/dev/hidrawN`.
    pub devnode: PathBuf,
    /// USB vendor id.
    pub vendor_id: u16,
    /// USB product id.
    pub product_id: u16,
    /// Manufacturer string.
    pub manufacturer: Option<String>,
    /// Product string.
    pub product: Option<String>,
    /// USB serial number string.
    pub serial_number: Option<String>,
    /// USB port path (`1-1.3`): the physical port, stable across replugs.
    /// None for a HID device with no USB device above it (Bluetooth, uhid).
    pub usb_port: Option<String>,
    /// The kernel's HID id, `BBBB:VVVV:PPPP` (bus, vendor, product: the
    /// HID device's sysfs name without its instance number), which udev
    /// can match for any bus.
    pub hid_id: Option<String>,
    /// Top-level usage page of the report descriptor.
    pub usage_page: u16,
    /// Top-level usage.
    pub usage: u16,
}

impl HidCandidate {
    /// The mode scangate would read it in, if it looks like a scanner.
    pub fn mode(&self) -> Option<HidMode> {
        mode_for(self.usage_page, self.usage)
    }
}

/// HID POS for usage page 0x8C, keyboard wedge for a keyboard collection.
pub fn mode_for(usage_page: u16, usage: u16) -> Option<HidMode> {
    match (usage_page, usage) {
        (USAGE_PAGE_POS, _) => Some(HidMode::Pos),
        (USAGE_PAGE_DESKTOP, USAGE_KEYBOARD) => Some(HidMode::Keyboard),
        _ => None,
    }
}

/// Which device a `[[scanner]]` entry means: every set field must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Matcher {
    /// USB vendor id.
    pub vendor_id: Option<u16>,
    /// USB product id.
    pub product_id: Option<u16>,
    /// USB serial number string (exact).
    pub serial_number: Option<String>,
    /// USB port path (exact, e.g. `1-1.3`).
    pub usb_port: Option<String>,
}

impl Matcher {
    /// The match keys of a `kind = "hid"` entry.
    pub fn of(hid: &HidConfig) -> Matcher {
        Matcher {
            vendor_id: hid.vendor_id,
            product_id: hid.product_id,
            serial_number: hid.serial_number.clone(),
            usb_port: hid.usb_port.clone(),
        }
    }

    /// Whether `c` is this scanner (also in the right mode).
    pub fn matches(&self, c: &HidCandidate, mode: HidMode) -> bool {
        c.mode() == Some(mode)
            && self.vendor_id.is_none_or(|v| v == c.vendor_id)
            && self.product_id.is_none_or(|p| p == c.product_id)
            && self
                .serial_number
                .as_ref()
                .is_none_or(|s| c.serial_number.as_ref() == Some(s))
            && self
                .usb_port
                .as_ref()
                .is_none_or(|p| c.usb_port.as_ref() == Some(p))
    }

    /// `vid:pid serial port` for messages.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        match (self.vendor_id, self.product_id) {
            (Some(v), Some(p)) => parts.push(format!("{v:04x}:{p:04x}")),
            (Some(v), None) => parts.push(format!("vendor {v:04x}")),
            (None, Some(p)) => parts.push(format!("product {p:04x}")),
            (None, None) => {}
        }
        if let Some(s) = &self.serial_number {
            parts.push(format!("serial {s:?}"));
        }
        if let Some(p) = &self.usb_port {
            parts.push(format!("USB port {p}"));
        }
        parts.join(", ")
    }
}

/// Every HID interface hidapi sees, one per hidraw node (the first
/// top-level collection of each), with its USB port path from sysfs.
pub fn enumerate_hid() -> Result<Vec<HidCandidate>, String> {
    let api = hidapi::HidApi::new().map_err(|e| format!("cannot enumerate HID devices: {e}"))?;
    let mut out: Vec<HidCandidate> = Vec::new();
    for d in api.device_list() {
        let devnode = PathBuf::from(d.path().to_string_lossy().into_owned());
        // One hidraw node may list several top-level collections; prefer
        // the one scangate can read.
        let hidraw = devnode
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let cand = HidCandidate {
            usb_port: usb_port_of(Path::new(SYS), &hidraw),
            hid_id: hid_id_of(Path::new(SYS), &hidraw),
            devnode,
            vendor_id: d.vendor_id(),
            product_id: d.product_id(),
            manufacturer: d
                .manufacturer_string()
                .map(str::to_owned)
                .filter(|s| !s.is_empty()),
            product: d
                .product_string()
                .map(str::to_owned)
                .filter(|s| !s.is_empty()),
            serial_number: d
                .serial_number()
                .map(str::to_owned)
                .filter(|s| !s.is_empty()),
            usage_page: d.usage_page(),
            usage: d.usage(),
        };
        match out.iter_mut().find(|c| c.devnode == cand.devnode) {
            Some(prev) if prev.mode().is_none() && cand.mode().is_some() => *prev = cand,
            Some(_) => {}
            None => out.push(cand),
        }
    }
    out.sort_by(|a, b| a.devnode.cmp(&b.devnode));
    Ok(out)
}

/// The USB device directory (the one with `idVendor`) above a sysfs path.
fn usb_device_dir(start: &Path) -> Option<PathBuf> {
    let mut dir = start.canonicalize().ok()?;
    loop {
        if dir.join("idVendor").is_file() {
            return Some(dir);
        }
        if !dir.pop() {
            return None;
        }
    }
}

/// The HID device directory of `hidrawN`
/// (`…/<usb port>:<cfg>.<if>/<bus>:<vid>:<pid>.<n>`).
fn hid_device_dir(sys: &Path, hidraw: &str) -> Option<PathBuf> {
    let node = sys.join("class/hidraw").join(hidraw).canonicalize().ok()?;
    // …/<hid device>/hidraw/hidrawN
    Some(node.parent()?.parent()?.to_owned())
}

/// The HID id (`0003:0C2E:0B61`) of `hidrawN`, from the name of its HID
/// device in sysfs under `sys` (`0003:0C2E:0B61.0004`).
pub fn hid_id_of(sys: &Path, hidraw: &str) -> Option<String> {
    let dir = hid_device_dir(sys, hidraw)?;
    let name = dir.file_name()?.to_string_lossy().into_owned();
    let (id, _instance) = name.rsplit_once('.')?;
    (id.len() == 14 && id.split(':').count() == 3).then(|| id.to_owned())
}

/// The USB port path (`1-1.3`) of `hidrawN`, from sysfs under `sys`.
pub fn usb_port_of(sys: &Path, hidraw: &str) -> Option<String> {
    let usb = usb_device_dir(&hid_device_dir(sys, hidraw)?)?;
    Some(usb.file_name()?.to_string_lossy().into_owned())
}

/// The evdev nodes (`/dev/input/eventN`) of the whole USB device that
/// `hidrawN` belongs to: every interface, because some scanners create two
/// event nodes and only one of them types.
pub fn evdev_nodes(sys: &Path, hidraw: &str) -> Vec<PathBuf> {
    let Some(hid) = hid_device_dir(sys, hidraw) else {
        return Vec::new();
    };
    let root = usb_device_dir(&hid).unwrap_or(hid);
    let mut found = Vec::new();
    walk_events(&root, 0, &mut found);
    found.sort();
    found.dedup();
    found
        .into_iter()
        .map(|n| PathBuf::from("/dev/input").join(n))
        .collect()
}

fn walk_events(dir: &Path, depth: usize, found: &mut Vec<String>) {
    if depth > 8 {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        if !ft.is_dir() {
            continue; // symlinks (subsystem, driver, …) are never followed
        }
        let name = e.file_name().to_string_lossy().into_owned();
        let parent_is_input = dir
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("input"));
        if parent_is_input
            && name
                .strip_prefix("event")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        {
            found.push(name);
            continue;
        }
        walk_events(&e.path(), depth + 1, found);
    }
}

/// A serial (tty) device that could be a scanner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SerialCandidate {
    /// `/dev/ttyACM0`, `/dev/ttyUSB0`.
    pub devnode: PathBuf,
    /// USB vendor id, if it is a USB device.
    pub vendor_id: Option<u16>,
    /// USB product id.
    pub product_id: Option<u16>,
    /// Manufacturer string.
    pub manufacturer: Option<String>,
    /// Product string.
    pub product: Option<String>,
    /// USB serial number.
    pub serial_number: Option<String>,
    /// USB port path.
    pub usb_port: Option<String>,
}

fn read_attr(dir: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(name))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn read_hex(dir: &Path, name: &str) -> Option<u16> {
    u16::from_str_radix(&read_attr(dir, name)?, 16).ok()
}

/// USB serial adapters and CDC-ACM devices (`ttyUSB*`, `ttyACM*`) under `sys`.
pub fn serial_candidates(sys: &Path) -> Vec<SerialCandidate> {
    let Ok(rd) = std::fs::read_dir(sys.join("class/tty")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("ttyUSB") || name.starts_with("ttyACM")) {
            continue;
        }
        let usb = usb_device_dir(&e.path());
        let get = |f: fn(&Path) -> Option<String>| usb.as_deref().and_then(f);
        out.push(SerialCandidate {
            devnode: PathBuf::from("/dev").join(&name),
            vendor_id: usb.as_deref().and_then(|d| read_hex(d, "idVendor")),
            product_id: usb.as_deref().and_then(|d| read_hex(d, "idProduct")),
            manufacturer: get(|d| read_attr(d, "manufacturer")),
            product: get(|d| read_attr(d, "product")),
            serial_number: get(|d| read_attr(d, "serial")),
            usb_port: usb
                .as_deref()
                .and_then(|d| d.file_name())
                .map(|n| n.to_string_lossy().into_owned()),
        });
    }
    out.sort_by(|a, b| a.devnode.cmp(&b.devnode));
    out
}

mod ioctl {
    // EVIOCGRAB = _IOW('E', 0x90, int); the int is passed by value.
    nix::ioctl_write_int!(eviocgrab, b'E', 0x90);
}
use ioctl::eviocgrab;

/// Exclusive hold on a keyboard-wedge scanner's evdev nodes (EVIOCGRAB):
/// while held, its keystrokes reach no console, login prompt or desktop.
/// Released (and the nodes closed) on drop.
#[derive(Debug, Default)]
pub struct Grab {
    held: Vec<(PathBuf, std::fs::File)>,
}

impl Grab {
    /// Grab every node; returns the hold and the nodes that could not be
    /// grabbed, with the reason.
    pub fn all(nodes: &[PathBuf]) -> (Grab, Vec<(PathBuf, String)>) {
        use std::os::fd::AsRawFd;
        let mut grab = Grab::default();
        let mut failed = Vec::new();
        for n in nodes {
            let file = match std::fs::File::open(n) {
                Ok(f) => f,
                Err(e) => {
                    failed.push((n.clone(), e.to_string()));
                    continue;
                }
            };
            // SAFETY: EVIOCGRAB takes an int by value on an open evdev fd.
            match unsafe { eviocgrab(file.as_raw_fd(), 1) } {
                Ok(_) => grab.held.push((n.clone(), file)),
                Err(e) => failed.push((n.clone(), e.desc().to_string())),
            }
        }
        (grab, failed)
    }

    /// The nodes held.
    pub fn nodes(&self) -> Vec<&Path> {
        self.held.iter().map(|(p, _)| p.as_path()).collect()
    }
}

impl Drop for Grab {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        for (_, f) in &self.held {
            // SAFETY: as above; closing the fd would release it too.
            let _ = unsafe { eviocgrab(f.as_raw_fd(), 0) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A fake sysfs: one scanner on USB port 1-1.3 with two HID interfaces
    /// (keyboard with two event nodes, and POS), plus a CDC-ACM tty.
    fn fake_sys() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let sys = t.path();
        let usb = sys.join("devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1.3");
        fs::create_dir_all(&usb).unwrap();
        fs::write(usb.join("idVendor"), "0c2e\n").unwrap();
        fs::write(usb.join("idProduct"), "0b61\n").unwrap();
        fs::write(usb.join("serial"), "19123B4567\n").unwrap();
        fs::write(usb.join("product"), "Xenon 1950g\n").unwrap();
        let kbd = usb.join("1-1.3:1.0/0003:0C2E:0B61.0001");
        fs::create_dir_all(kbd.join("hidraw/hidraw0")).unwrap();
        fs::create_dir_all(kbd.join("input/input5/event3")).unwrap();
        fs::create_dir_all(kbd.join("input/input6/event7")).unwrap();
        fs::create_dir_all(kbd.join("input/input5/mouse0")).unwrap();
        let pos = usb.join("1-1.3:1.1/0003:0C2E:0B61.0002");
        fs::create_dir_all(pos.join("hidraw/hidraw1")).unwrap();
        // A symlink cycle like sysfs's `subsystem` links: must not be followed.
        std::os::unix::fs::symlink(sys.join("devices"), kbd.join("subsystem")).unwrap();
        let tty = usb.join("1-1.3:1.2/tty/ttyACM0");
        fs::create_dir_all(&tty).unwrap();
        fs::create_dir_all(sys.join("class/hidraw")).unwrap();
        fs::create_dir_all(sys.join("class/tty")).unwrap();
        std::os::unix::fs::symlink(kbd.join("hidraw/hidraw0"), sys.join("class/hidraw/hidraw0"))
            .unwrap();
        std::os::unix::fs::symlink(pos.join("hidraw/hidraw1"), sys.join("class/hidraw/hidraw1"))
            .unwrap();
        std::os::unix::fs::symlink(&tty, sys.join("class/tty/ttyACM0")).unwrap();
        // A HID device with no USB device above it (uhid, as Bluetooth).
        let virt = sys.join("devices/virtual/misc/uhid/0003:0C2E:0B61.0009");
        fs::create_dir_all(virt.join("hidraw/hidraw2")).unwrap();
        std::os::unix::fs::symlink(
            virt.join("hidraw/hidraw2"),
            sys.join("class/hidraw/hidraw2"),
        )
        .unwrap();
        fs::create_dir_all(sys.join("devices/virtual/tty/tty0")).unwrap();
        std::os::unix::fs::symlink(
            sys.join("devices/virtual/tty/tty0"),
            sys.join("class/tty/tty0"),
        )
        .unwrap();
        t
    }

    #[test]
    fn sysfs_walk_finds_port_and_every_event_node_of_the_usb_device() {
        let t = fake_sys();
        assert_eq!(usb_port_of(t.path(), "hidraw0").as_deref(), Some("1-1.3"));
        assert_eq!(usb_port_of(t.path(), "hidraw1").as_deref(), Some("1-1.3"));
        assert_eq!(usb_port_of(t.path(), "hidraw9"), None);
        assert_eq!(usb_port_of(t.path(), "hidraw2"), None, "not a USB device");
        for (node, id) in [("hidraw0", "0003:0C2E:0B61"), ("hidraw2", "0003:0C2E:0B61")] {
            assert_eq!(hid_id_of(t.path(), node).as_deref(), Some(id), "{node}");
        }
        assert_eq!(hid_id_of(t.path(), "hidraw9"), None);
        let want = vec![
            PathBuf::from("/dev/input/event3"),
            PathBuf::from("/dev/input/event7"),
        ];
        assert_eq!(evdev_nodes(t.path(), "hidraw0"), want);
        // From the POS interface too: the whole physical device.
        assert_eq!(evdev_nodes(t.path(), "hidraw1"), want);
        assert!(evdev_nodes(t.path(), "hidraw9").is_empty());
    }

    #[test]
    fn serial_candidates_from_sysfs() {
        let t = fake_sys();
        let s = serial_candidates(t.path());
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!(s[0].devnode, PathBuf::from("/dev/ttyACM0"));
        assert_eq!(
            (s[0].vendor_id, s[0].product_id),
            (Some(0x0c2e), Some(0x0b61))
        );
        assert_eq!(s[0].serial_number.as_deref(), Some("19123B4567"));
        assert_eq!(s[0].usb_port.as_deref(), Some("1-1.3"));
        assert!(serial_candidates(&t.path().join("nothing")).is_empty());
    }

    #[test]
    fn matching_distinguishes_identical_scanners() {
        let a = HidCandidate {
            devnode: "/dev/hidraw0".into(),
            vendor_id: 0x0c2e,
            product_id: 0x0b61,
            serial_number: Some("A1".into()),
            usb_port: Some("1-1.2".into()),
            usage_page: USAGE_PAGE_POS,
            usage: 2,
            ..Default::default()
        };
        let b = HidCandidate {
            devnode: "/dev/hidraw1".into(),
            serial_number: Some("B2".into()),
            usb_port: Some("1-1.3".into()),
            ..a.clone()
        };
        let by_model = Matcher {
            vendor_id: Some(0x0c2e),
            product_id: Some(0x0b61),
            ..Default::default()
        };
        assert!(by_model.matches(&a, HidMode::Pos) && by_model.matches(&b, HidMode::Pos));
        assert!(!by_model.matches(&a, HidMode::Keyboard));
        let by_serial = Matcher {
            serial_number: Some("B2".into()),
            ..by_model.clone()
        };
        assert!(!by_serial.matches(&a, HidMode::Pos) && by_serial.matches(&b, HidMode::Pos));
        let by_port = Matcher {
            usb_port: Some("1-1.2".into()),
            ..by_model.clone()
        };
        assert!(by_port.matches(&a, HidMode::Pos) && !by_port.matches(&b, HidMode::Pos));
        assert_eq!(by_port.describe(), "0c2e:0b61, USB port 1-1.2");
    }

    #[test]
    fn grabbing_a_node_that_is_not_there_reports_it() {
        let (grab, failed) = Grab::all(&[PathBuf::from("/nonexistent/event0")]);
        assert!(grab.nodes().is_empty());
        assert_eq!(failed.len(), 1);
    }
}
