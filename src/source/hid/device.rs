//! The device seam: where reports come from.
//!
//! The source loop ([`super::run_with`]) only knows two small traits:
//! a [`DeviceOpener`] that finds and opens "this scanner", and the
//! [`ReportDevice`] it returns, which reads one report at a time with a
//! timeout. Live, they are [`HidapiOpener`] / [`HidapiDevice`] (hidapi on
//! hidraw, plus the evdev grab for keyboard wedges). In tests they are
//! [`Replay`]: scripted report streams with pauses, unplugs and replugs,
//! because these machines have no USB and no `/dev/uhid`.

use super::config::{HidConfig, HidMode};
use super::devices::{self, Grab, HidCandidate, Matcher};
use crate::events::Event as _;
use crate::source::Scanner;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What went wrong with a device, so the caller can branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceErrorKind {
    /// No matching device is present (not plugged in yet): keep looking.
    NotFound,
    /// The device went away or failed while open: reopen when it is back.
    Disconnected,
    /// Present but unusable (permissions, ambiguous match): keep retrying,
    /// the message says what to fix.
    Unusable,
}

/// A device error with its kind and a message that says what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceError {
    /// The kind.
    pub kind: DeviceErrorKind,
    /// What happened (and what to do).
    pub message: String,
}

impl DeviceError {
    /// An error of `kind`.
    pub fn new(kind: DeviceErrorKind, message: impl Into<String>) -> DeviceError {
        DeviceError {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for DeviceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// An open HID device: one report per read.
pub trait ReportDevice: Send {
    /// Wait up to `timeout` for the next input report (report id first for
    /// numbered reports, as hidraw delivers it). `Ok(None)`: nothing came.
    fn read_report(&mut self, timeout: Duration) -> Result<Option<Vec<u8>>, DeviceError>;
    /// Where it is, for logs (`/dev/hidraw3 (0c2e:0b61, USB port 1-1.3)`).
    fn describe(&self) -> String;
    /// What it says it is: its USB device's descriptors, when it has
    /// them.
    fn identity(&self) -> Option<crate::model::Identity> {
        None
    }
    /// The device's HID report descriptor (what its reports hold, and
    /// which output reports it takes), or why it cannot be read.
    fn report_descriptor(&mut self) -> Result<Vec<u8>, String> {
        Err("this device does not give its report descriptor".into())
    }
    /// Write one output report as hidapi takes it: the report id byte
    /// first, 0 for a device without report ids
    /// ([`PosOutputs::for_hidapi`](crate::feedback::hid_pos::PosOutputs::for_hidapi)).
    fn write_report(&mut self, report: &[u8]) -> Result<(), DeviceError> {
        let _ = report;
        Err(DeviceError::new(
            DeviceErrorKind::Unusable,
            "this device takes no output reports",
        ))
    }
}

/// Finds and opens one configured scanner.
pub trait DeviceOpener: Send {
    /// Open the scanner now, or say why not.
    fn open(&mut self) -> Result<Box<dyn ReportDevice>, DeviceError>;
}

/// The live opener: hidapi (hidraw backend) plus, for keyboard wedges,
/// the EVIOCGRAB of every evdev node of the device.
pub struct HidapiOpener {
    name: String,
    mode: HidMode,
    path: Option<PathBuf>,
    matcher: Matcher,
    grab: bool,
}

impl HidapiOpener {
    /// The opener for a `kind = "hid"` scanner entry.
    pub fn from_config(cfg: &Scanner<HidConfig>) -> HidapiOpener {
        let hid = &cfg.kind;
        HidapiOpener {
            name: cfg.name.clone(),
            mode: hid.mode(),
            path: (!hid.path.as_os_str().is_empty()).then(|| hid.path.clone()),
            matcher: Matcher::of(hid),
            grab: hid.keyboard().is_some_and(|k| k.grab.unwrap_or(true)),
        }
    }

    /// The hidraw node to open: the configured path (a udev symlink is
    /// followed), else the one device the match keys select.
    fn find(&self) -> Result<(PathBuf, String), DeviceError> {
        if let Some(p) = &self.path {
            let node = p.canonicalize().map_err(|e| {
                DeviceError::new(
                    DeviceErrorKind::NotFound,
                    format!("{} is not there ({e})", p.display()),
                )
            })?;
            return Ok((
                node.clone(),
                format!("{} -> {}", p.display(), node.display()),
            ));
        }
        let all =
            devices::enumerate_hid().map_err(|e| DeviceError::new(DeviceErrorKind::Unusable, e))?;
        let found: Vec<&HidCandidate> = all
            .iter()
            .filter(|c| self.matcher.matches(c, self.mode))
            .collect();
        match found.as_slice() {
            [] => Err(DeviceError::new(
                DeviceErrorKind::NotFound,
                format!(
                    "no {} HID device matches {}",
                    self.mode.as_str(),
                    self.matcher.describe()
                ),
            )),
            [one] => Ok((
                one.devnode.clone(),
                format!(
                    "{} ({:04x}:{:04x}{})",
                    one.devnode.display(),
                    one.vendor_id,
                    one.product_id,
                    one.usb_port
                        .as_ref()
                        .map(|p| format!(", USB port {p}"))
                        .unwrap_or_default()
                ),
            )),
            many => Err(DeviceError::new(
                DeviceErrorKind::Unusable,
                format!(
                    "{} HID devices match {} ({}); add serial_number or usb_port to scanner {:?} so it names one (`scangate devices` lists them)",
                    many.len(),
                    self.matcher.describe(),
                    many.iter()
                        .map(|c| c.devnode.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    self.name
                ),
            )),
        }
    }
}

impl DeviceOpener for HidapiOpener {
    fn open(&mut self) -> Result<Box<dyn ReportDevice>, DeviceError> {
        let (node, describe) = self.find()?;
        let api = hidapi::HidApi::new()
            .map_err(|e| DeviceError::new(DeviceErrorKind::Unusable, format!("hidapi: {e}")))?;
        let cpath = std::ffi::CString::new(node.as_os_str().as_encoded_bytes())
            .map_err(|_| DeviceError::new(DeviceErrorKind::Unusable, "device path contains NUL"))?;
        let dev = api.open_path(&cpath).map_err(|e| {
            let kind = if node.exists() {
                DeviceErrorKind::Unusable
            } else {
                DeviceErrorKind::NotFound
            };
            DeviceError::new(
                kind,
                format!(
                    "cannot open {describe}: {e}; check the udev rule (udev/99-scangate.rules) gives the service user access"
                ),
            )
        })?;
        let grab = if self.grab {
            Some(grab_device(&self.name, &node))
        } else {
            None
        };
        Ok(Box::new(HidapiDevice {
            dev,
            node,
            describe,
            buf: vec![0; 4096],
            _grab: grab,
        }))
    }
}

/// Grab every evdev node of the device behind `hidraw` and log the
/// outcome; a failure is logged as an error and scanning goes on.
fn grab_device(scanner: &str, hidraw: &Path) -> Grab {
    let name = hidraw
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nodes = devices::evdev_nodes(Path::new(devices::SYS), &name);
    if nodes.is_empty() {
        crate::events::HidGrab::NoNode {
            scanner,
            device: hidraw,
            name: &name,
        }
        .emit();
        return Grab::default();
    }
    let (grab, failed) = Grab::all(&nodes);
    for (node, why) in &failed {
        crate::events::HidGrab::Failed { scanner, node, why }.emit();
    }
    if !grab.nodes().is_empty() {
        crate::events::HidGrab::Grabbed {
            scanner,
            nodes: &grab.nodes(),
        }
        .emit();
    }
    grab
}

/// An open hidraw device (through hidapi).
pub struct HidapiDevice {
    dev: hidapi::HidDevice,
    /// The hidraw node (its sysfs entry has the report descriptor).
    node: PathBuf,
    describe: String,
    buf: Vec<u8>,
    _grab: Option<Grab>,
}

impl ReportDevice for HidapiDevice {
    fn read_report(&mut self, timeout: Duration) -> Result<Option<Vec<u8>>, DeviceError> {
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        match self.dev.read_timeout(&mut self.buf, ms) {
            Ok(0) => Ok(None),
            Ok(n) => Ok(Some(self.buf[..n].to_vec())),
            Err(e) => Err(DeviceError::new(
                DeviceErrorKind::Disconnected,
                format!("reading {} failed: {e}", self.describe),
            )),
        }
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }

    /// The USB device above its hidraw node in sysfs.
    fn identity(&self) -> Option<crate::model::Identity> {
        let name = self.node.file_name()?;
        let dir = std::path::Path::new("/sys/class/hidraw")
            .join(name)
            .join("device");
        crate::source::identity::of_sysfs(&dir.canonicalize().ok()?)
    }

    /// hidapi's `get_report_descriptor` (the hidraw backend reads sysfs);
    /// else `/sys/class/hidraw/hidrawN/device/report_descriptor` directly.
    fn report_descriptor(&mut self) -> Result<Vec<u8>, String> {
        let mut buf = vec![0u8; crate::feedback::hid_pos::MAX_DESCRIPTOR];
        let hidapi_error = match self.dev.get_report_descriptor(&mut buf) {
            Ok(n) if n > 0 => {
                buf.truncate(n);
                return Ok(buf);
            }
            Ok(_) => "hidapi: an empty report descriptor".to_string(),
            Err(e) => format!("hidapi: {e}"),
        };
        let name = self
            .node
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let sys = Path::new(devices::SYS)
            .join("class/hidraw")
            .join(&name)
            .join("device/report_descriptor");
        std::fs::read(&sys)
            .map_err(|e| format!("{hidapi_error}; {}: {e}", sys.display()))
            .and_then(|d| {
                if d.is_empty() {
                    Err(format!("{hidapi_error}; {} is empty", sys.display()))
                } else {
                    Ok(d)
                }
            })
    }

    fn write_report(&mut self, report: &[u8]) -> Result<(), DeviceError> {
        match self.dev.write(report) {
            Ok(n) if n == report.len() => Ok(()),
            Ok(n) => Err(DeviceError::new(
                DeviceErrorKind::Unusable,
                format!(
                    "writing an output report to {} wrote {n} of {} bytes",
                    self.describe,
                    report.len()
                ),
            )),
            Err(e) => {
                let kind = if self.node.exists() {
                    DeviceErrorKind::Unusable
                } else {
                    DeviceErrorKind::Disconnected
                };
                Err(DeviceError::new(
                    kind,
                    format!("writing an output report to {} failed: {e}", self.describe),
                ))
            }
        }
    }
}

/// One step of a scripted connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The device delivers this report.
    Report(Vec<u8>),
    /// Nothing arrives for this long.
    Pause(Duration),
    /// The device is unplugged (reads fail from now on).
    Unplug,
}

/// Test double: each `open` plays the next scripted connection; when the
/// script is used up, the device is "not plugged in". A connection whose
/// steps run out stays open and silent. Its report descriptor is the one
/// set with [`with_descriptor`](Self::with_descriptor) (none: it cannot be
/// read); the output reports written to it are kept, in order, in
/// [`written`](Self::written).
pub struct Replay {
    connections: VecDeque<Vec<Step>>,
    opened: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    descriptor: Option<Vec<u8>>,
    written: Written,
    fail_writes: usize,
}

/// The output reports written to a [`Replay`] device (shared).
pub type Written = std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>;

impl Replay {
    /// A device that will be plugged in once per entry of `connections`.
    pub fn new(connections: Vec<Vec<Step>>) -> Replay {
        Replay {
            connections: connections.into(),
            opened: Default::default(),
            descriptor: None,
            written: Default::default(),
            fail_writes: 0,
        }
    }

    /// Give the device this report descriptor.
    pub fn with_descriptor(mut self, descriptor: &[u8]) -> Replay {
        self.descriptor = Some(descriptor.to_vec());
        self
    }

    /// Make the first `n` writes of each connection fail (an I/O error
    /// while the device stays plugged in).
    pub fn failing_writes(mut self, n: usize) -> Replay {
        self.fail_writes = n;
        self
    }

    /// Counts successful opens (shared, readable after the opener moved).
    pub fn opened(&self) -> std::sync::Arc<std::sync::atomic::AtomicUsize> {
        self.opened.clone()
    }

    /// The output reports written so far, in hidapi's form (shared).
    pub fn written(&self) -> Written {
        self.written.clone()
    }
}

impl DeviceOpener for Replay {
    fn open(&mut self) -> Result<Box<dyn ReportDevice>, DeviceError> {
        let steps = self
            .connections
            .pop_front()
            .ok_or_else(|| DeviceError::new(DeviceErrorKind::NotFound, "replay: not plugged in"))?;
        let n = self
            .opened
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1;
        Ok(Box::new(ReplayDevice {
            steps: steps.into(),
            n,
            descriptor: self.descriptor.clone(),
            written: self.written.clone(),
            fail_writes: self.fail_writes,
        }))
    }
}

struct ReplayDevice {
    steps: VecDeque<Step>,
    n: usize,
    descriptor: Option<Vec<u8>>,
    written: Written,
    fail_writes: usize,
}

impl ReportDevice for ReplayDevice {
    fn read_report(&mut self, timeout: Duration) -> Result<Option<Vec<u8>>, DeviceError> {
        match self.steps.pop_front() {
            Some(Step::Report(r)) => Ok(Some(r)),
            Some(Step::Pause(d)) => {
                // Sleep at most `timeout`, keep the rest of the pause.
                let slept = d.min(timeout);
                std::thread::sleep(slept);
                if d > slept {
                    self.steps.push_front(Step::Pause(d - slept));
                }
                Ok(None)
            }
            Some(Step::Unplug) => {
                self.steps.push_front(Step::Unplug);
                Err(DeviceError::new(
                    DeviceErrorKind::Disconnected,
                    "replay: unplugged",
                ))
            }
            None => {
                std::thread::sleep(timeout);
                Ok(None)
            }
        }
    }

    fn describe(&self) -> String {
        format!("replay connection #{}", self.n)
    }

    fn report_descriptor(&mut self) -> Result<Vec<u8>, String> {
        self.descriptor
            .clone()
            .ok_or_else(|| "replay: no report descriptor".into())
    }

    fn write_report(&mut self, report: &[u8]) -> Result<(), DeviceError> {
        if self.steps.front() == Some(&Step::Unplug) {
            return Err(DeviceError::new(
                DeviceErrorKind::Disconnected,
                "replay: unplugged",
            ));
        }
        if self.fail_writes > 0 {
            self.fail_writes -= 1;
            return Err(DeviceError::new(
                DeviceErrorKind::Unusable,
                "replay: write failed (I/O error)",
            ));
        }
        self.written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(report.to_vec());
        Ok(())
    }
}
