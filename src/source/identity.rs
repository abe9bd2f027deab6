//! What a scanner says it is: the USB device descriptors of the device it
//! is attached by (a USB serial adapter or CDC-ACM port, a HID
//! interface), as the kernel lists them under `/sys`: vendor and product
//! IDs, the manufacturer and product strings, the serial number and the
//! device release (`bcdDevice`, which scanners set to their firmware's
//! version). Read once per connection from the open device's character
//! device number (`/sys/dev/char/MAJOR:MINOR`, the path every kernel
//! gives), so it names the device actually open, whatever the scanner's
//! configured path leads to later. A device not on USB (an RS-232 port, a
//! PTY) has none: nothing is asked, nothing waits.

use crate::model::Identity;
use std::path::{Path, PathBuf};

/// The identity of the character device `rdev` (`st_rdev` of the open
/// device), read under `sys` (`/sys`); `None` when it is not on USB or
/// the kernel does not say.
pub fn of_char_device(sys: &Path, rdev: u64) -> Option<Identity> {
    let (major, minor) = (libc_major(rdev), libc_minor(rdev));
    let dev = sys.join(format!("dev/char/{major}:{minor}"));
    of_sysfs(&dev.canonicalize().ok()?)
}

/// The identity of the USB device above sysfs directory `dir` (a tty's,
/// a hidraw node's, an interface's).
pub fn of_sysfs(dir: &Path) -> Option<Identity> {
    let usb = usb_device_above(dir)?;
    let text = |name: &str| -> Option<String> {
        let v = std::fs::read_to_string(usb.join(name)).ok()?;
        let v = v.trim();
        (!v.is_empty()).then(|| v.to_string())
    };
    let hex = |name: &str| u16::from_str_radix(&text(name)?, 16).ok();
    Some(Identity {
        vendor_id: hex("idVendor")?,
        product_id: hex("idProduct")?,
        manufacturer: text("manufacturer"),
        product: text("product"),
        serial: text("serial"),
        release: text("bcdDevice").and_then(|b| release(&b)),
    })
}

/// The nearest directory at or above `dir` with an `idVendor`: the USB
/// device.
fn usb_device_above(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .take(12)
        .find(|d| d.join("idVendor").is_file())
        .map(Path::to_path_buf)
}

/// `bcdDevice` (`0102`, binary-coded decimal) as `1.02`.
fn release(bcd: &str) -> Option<String> {
    let n = u16::from_str_radix(bcd, 16).ok()?;
    let (major, minor) = (n >> 8, n & 0xff);
    Some(format!("{major:x}.{minor:02x}"))
}

/// The major number of a Linux `dev_t` (glibc's `gnu_dev_major`).
fn libc_major(dev: u64) -> u64 {
    ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0000_0fff)
}

/// The minor number of a Linux `dev_t` (glibc's `gnu_dev_minor`).
fn libc_minor(dev: u64) -> u64 {
    ((dev >> 12) & 0xffff_ff00) | (dev & 0x0000_00ff)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sysfs tree as the kernel lays out a USB serial adapter: the USB
    /// device, its interface, the tty; `/sys/dev/char/188:0` leads there.
    fn usb_serial(sys: &Path, with_strings: bool) {
        let usb = sys.join("devices/pci0000:00/0000:00:01.2/usb1/1-1");
        let tty = usb.join("1-1:1.0/ttyUSB0/tty/ttyUSB0");
        std::fs::create_dir_all(&tty).unwrap();
        for (name, value) in [
            ("idVendor", "0403\n"),
            ("idProduct", "6001\n"),
            ("bcdDevice", "0600\n"),
        ] {
            std::fs::write(usb.join(name), value).unwrap();
        }
        if with_strings {
            std::fs::write(usb.join("manufacturer"), "FTDI\n").unwrap();
            std::fs::write(usb.join("product"), "FT232R USB UART\n").unwrap();
            std::fs::write(usb.join("serial"), "SCAN1\n").unwrap();
        }
        std::fs::create_dir_all(sys.join("dev/char")).unwrap();
        std::os::unix::fs::symlink(&tty, sys.join("dev/char/188:0")).unwrap();
    }

    #[test]
    fn a_usb_serial_adapter_is_named_by_its_descriptors() {
        let sys = tempfile::tempdir().unwrap();
        usb_serial(sys.path(), true);
        // 188:0 as glibc's makedev packs it.
        let id = of_char_device(sys.path(), 188 << 8).unwrap();
        assert_eq!(
            id,
            Identity {
                vendor_id: 0x0403,
                product_id: 0x6001,
                manufacturer: Some("FTDI".into()),
                product: Some("FT232R USB UART".into()),
                serial: Some("SCAN1".into()),
                release: Some("6.00".into()),
            }
        );
        assert_eq!(
            id.describe(),
            "FTDI FT232R USB UART (0403:6001), serial SCAN1, release 6.00"
        );
        // Another minor: no such device, no identity (a PTY, a port not
        // on USB).
        assert_eq!(of_char_device(sys.path(), (136 << 8) | 3), None);
    }

    #[test]
    fn without_strings_the_ids_name_it_and_a_serial_tells_two_apart() {
        let sys = tempfile::tempdir().unwrap();
        usb_serial(sys.path(), false);
        let id = of_char_device(sys.path(), 188 << 8).unwrap();
        assert_eq!(id.model(), "0403:6001");
        let mut other = id.clone();
        assert!(!id.is_other_device(&other));
        other.serial = Some("SCAN2".into());
        assert!(id.is_other_device(&other));
        other.serial = None;
        other.release = Some("6.01".into());
        assert!(
            !id.is_other_device(&other),
            "a firmware update is the same device"
        );
        assert_eq!(release("0102").as_deref(), Some("1.02"));
        assert_eq!(libc_major(0x0000_0000_0000_bc00), 188);
    }
}
