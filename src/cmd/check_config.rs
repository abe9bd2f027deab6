//! `scangate check-config`: beyond parsing and resolving the configuration
//! as `run` does ([`crate::config::Settings::load`], which reads the
//! `[redis]` password and CA files), what can be checked of what it names
//! before the daemon starts. Offline: the files the config names that
//! others may read or change ([`crate::config::exposure`], a warning); the
//! state directory ([`state_dir`]) is one a directory can be made at
//! ([`reachable_state_dir`]: no link loop, no link to nothing, no path too
//! long) and is writable by the service user. With `--online`
//! ([`facility`], [`scanner_paths`]): the facility Redis (credentials,
//! eviction policy, persistence, version, clock offset) and the scanners'
//! device paths (a serial scanner's a terminal).
//!
//! A technician runs `check-config` as the service user (`runuser -u
//! scangate`; the unit does not run it: an `ExecStartPre` exiting 2 is
//! restarted, `RestartPreventExitStatus=` heeds the main process only), so
//! writability is checked as the user running it; run as root, it is
//! checked as [`SERVICE_USER`] by the directory's owner, group and mode
//! bits (ACLs are not consulted) and a problem is a warning, since root
//! itself could write there.

use super::{Failure, resolve};
use crate::cli::args::ConfigArg;
use crate::config::{Config, RedisSettings, ScannerKind, Settings};
use crate::exit::Exit;
use crate::facility::FacilityError;
use crate::model::{ClockSample, ServerInfo};
use crate::store::StoreError;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// `scangate check-config [--online]`: the configuration resolved as `run`
/// resolves it (an unreadable secret fails here too), and the state
/// directory ([`state_dir`]); with `online`, the facility Redis
/// ([`facility`]) and the scanners' paths ([`scanner_paths`]) too.
pub fn run(arg: &ConfigArg, online: bool) -> Result<Exit, Failure> {
    let settings = resolve(arg)?;
    let cfg = &settings.config;
    match arg.path() {
        Some(p) => println!("config file: {}", p.display()),
        None => println!(
            "config file: none (no --config, no SCANGATE_CONFIG, no {}): built-in defaults",
            crate::config::DEFAULT_PATH
        ),
    }
    println!(
        "configuration OK: facility {}, gateway {}, {} scanner(s), window {} ms, state in {}",
        cfg.gateway.facility,
        cfg.gateway.id,
        cfg.scanners.len(),
        cfg.dedup.window_ms,
        cfg.state_dir().display()
    );
    for old in &cfg.carried {
        println!("warning: {}", old.warning(arg.path().as_deref()));
    }
    // Others may read or change a file the config names: told, as `run`
    // and `status` tell it; not refused (it would stop a gateway over a
    // mode the package did not set).
    for exposed in crate::config::exposure::exposed(cfg, arg.path().as_deref()) {
        println!("warning: {}", exposed.warning());
    }
    if let Some(warning) = cfg.metrics.exposure_warning() {
        println!("warning: {warning}");
    }
    for s in &cfg.sinks {
        println!(
            "sink {}: {} to {}, {} entries per POST, timeout {} ms, {}, CA: {}",
            s.name,
            s.format.as_str(),
            s.shown_url(),
            s.batch,
            s.timeout_ms,
            match (&s.bearer_token_file, &s.basic_auth_file) {
                (Some(p), _) => format!("bearer token from {} (read)", p.display()),
                (None, Some(p)) => format!("basic auth from {} (read)", p.display()),
                (None, None) => "no Authorization".to_string(),
            },
            s.ca_file.as_ref().map_or_else(
                || "the system's trust store".to_string(),
                |p| format!("{} (read)", p.display())
            )
        );
    }
    for line in state_dir(&cfg.state_dir())? {
        println!("{line}");
    }
    Ok(match online {
        true => check_online(&settings)?,
        false => Exit::Ok,
    })
}

/// `check-config --online`: the facility Redis (a refusal is an error,
/// exit 2; unreachable: exit 1) and the scanners' device paths (exit 1 if
/// one is not usable), each on a line of its own.
fn check_online(settings: &Settings) -> Result<Exit, Failure> {
    let cfg = &settings.config;
    let mut ok = true;
    if let Some(redis) = &settings.redis {
        ok &= print_facility(cfg, redis)?;
    }
    ok &= print_scanner_paths(cfg);
    Ok(if ok { Exit::Ok } else { Exit::CheckFailed })
}

/// Check the facility Redis ([`facility`]) and print what was found; false
/// if it cannot be reached or its clock cannot be measured closely enough.
fn print_facility(cfg: &Config, redis: &RedisSettings) -> Result<bool, Failure> {
    let found = match facility(cfg, redis) {
        Err(e) if e.needs_technician() => return Err(Failure::Facility(e)),
        Err(e) => {
            println!(
                "facility Redis NOT reachable: {e}. Fix: check that it runs and [redis] url (or sentinels), and the network between"
            );
            return Ok(false);
        }
        Ok(found) => found,
    };
    let i = &found.info;
    println!(
        "facility Redis {}: OK, Redis {} ({}), user {:?} accepted, maxmemory-policy {}, appendonly {}, save {:?}, {} replica(s) connected",
        found.server,
        i.version,
        i.role,
        redis.config.username.as_deref().unwrap_or("default"),
        i.maxmemory_policy,
        i.appendonly,
        i.save,
        i.connected_replicas
    );
    if i.appendonly != "yes" {
        println!(
            "WARNING: facility Redis has appendonly off: a Redis crash can lose recent claims. Fix: `appendonly yes` in redis.conf"
        );
    }
    if i.role == "slave" {
        println!(
            "WARNING: facility Redis is a read-only replica: it refuses claims. Fix: point [redis] url at the primary"
        );
    }
    let backend = super::confirmation::Backend {
        info: i,
        wait: found.wait.clone(),
        slot: found.slot,
        ack: redis.config.min_replicas_ack,
    };
    for line in super::confirmation::report(&backend) {
        println!("{line}");
    }
    let c = &found.clock;
    let side = if c.offset_ms < 0.0 {
        "ahead of"
    } else {
        "behind"
    };
    println!(
        "clock offset: this gateway's wall clock is {:.3} s {side} the facility Redis's (± {:.1} ms)",
        c.offset_ms.abs() / 1e3,
        c.bound_ms
    );
    let max = redis.config.max_clock_error_ms as f64;
    if c.bound_ms > max {
        println!(
            "clock NOT measurable within [redis] max_clock_error_ms ({max} ms): the round trip alone allows ± {:.1} ms, so scans would wait. Fix: a faster network path to the Redis, or raise max_clock_error_ms (at most a quarter of [dedup] window_ms)",
            c.bound_ms
        );
        return Ok(false);
    }
    Ok(true)
}

/// Check each scanner's path ([`scanner_paths`]) and print what was found;
/// false if one is not usable.
fn print_scanner_paths(cfg: &Config) -> bool {
    let mut ok = true;
    for p in scanner_paths(cfg) {
        match &p.found {
            PathFound::Usable => println!("scanner {}: {} OK", p.scanner, p.path.display()),
            PathFound::Matched => println!(
                "scanner {}: found by its match keys when it runs, no path to check (`scangate devices` lists what is attached)",
                p.scanner
            ),
            PathFound::Unusable(problem) => {
                ok = false;
                println!(
                    "scanner {}: {} NOT usable: {problem}",
                    p.scanner,
                    p.path.display()
                );
            }
        }
    }
    ok
}

/// The user the systemd unit runs scangate as (`User=` in
/// `systemd/scangate.service`).
pub const SERVICE_USER: &str = "scangate";

/// A user's ids, as `/etc/passwd` and `/etc/group` have them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserIds {
    /// The user id.
    pub uid: u32,
    /// The primary group and every group listing the user as a member.
    pub groups: Vec<u32>,
}

/// The ids of `name` from `passwd` and `group` (the files' text), if the
/// user exists.
pub fn user_ids(name: &str, passwd: &str, group: &str) -> Option<UserIds> {
    let (uid, gid) = passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 4 && f[0] == name).then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))?
    })?;
    let mut groups = vec![gid];
    groups.extend(group.lines().filter_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 4 && f[3].split(',').any(|m| m == name))
            .then(|| f[2].parse::<u32>().ok())
            .flatten()
    }));
    Some(UserIds { uid, groups })
}

/// Whether `user` may create files in a directory of owner `uid`, group
/// `gid` and `mode`, by its mode bits (write and search).
pub fn may_write(user: &UserIds, uid: u32, gid: u32, mode: u32) -> bool {
    let bits = if user.uid == uid {
        mode >> 6
    } else if user.groups.contains(&gid) {
        mode >> 3
    } else {
        mode
    };
    bits & 0o3 == 0o3
}

/// The state directory is writable by the service user (or, if it does
/// not exist yet, its nearest existing parent, where `run` creates it; a
/// parent it cannot write is a warning, not an error: systemd's
/// `StateDirectory=` creates the directory when the service starts).
/// Returns the lines to print (a warning among them when run as root and
/// [`SERVICE_USER`] could not write there); an error as `run` would
/// report it.
pub fn state_dir(dir: &Path) -> Result<Vec<String>, StoreError> {
    let refused = |source: std::io::Error| StoreError::StateDir {
        dir: dir.to_owned(),
        source,
    };
    let (absolute, existing) = reachable_state_dir(dir)?;
    let meta = std::fs::metadata(&existing).map_err(refused)?;
    if !meta.is_dir() {
        return Err(refused(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            format!("{} is not a directory", existing.display()),
        )));
    }
    let place = if existing == absolute {
        format!("state directory {}", dir.display())
    } else {
        format!(
            "state directory {} (does not exist yet: `run` creates it in {})",
            dir.display(),
            existing.display()
        )
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        let writable = nix::unistd::access(
            &existing,
            nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK,
        );
        if let Err(e) = writable
            && existing != absolute
        {
            // Not there yet, and this user cannot create it: under systemd
            // the unit's StateDirectory= creates it, as the service user's,
            // when the service starts (a technician runs check-config as
            // that user right after installing the package, before that).
            return Ok(vec![format!(
                "WARNING: {place}: this user (uid {euid}) cannot create it there ({e}). Under systemd that is expected: the unit's StateDirectory= creates it for the service user at start. Elsewhere `run` fails with exit 3 until it is created writable for this user (mkdir, chown), or [gateway] state_dir names another place"
            )]);
        }
        writable.map_err(|e| {
            refused(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "{} is not writable by this user (uid {}): {e}",
                    existing.display(),
                    euid
                ),
            ))
        })?;
        return Ok(vec![format!("{place}: writable by this user")]);
    }
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let Some(user) = user_ids(SERVICE_USER, &read("/etc/passwd"), &read("/etc/group")) else {
        return Ok(vec![format!(
            "{place}: running as root; the systemd unit runs scangate as user {SERVICE_USER}, which does not exist here (installing the package creates it: docs/technician.md, \"Install\"), so it was not checked as that user"
        )]);
    };
    Ok(vec![
        if may_write(&user, meta.uid(), meta.gid(), meta.mode()) {
            format!(
                "{place}: writable by user {SERVICE_USER} (uid {}), which the systemd unit runs as (running as root: checked by owner, group and mode bits)",
                user.uid
            )
        } else {
            format!(
                "WARNING: {place}: NOT writable by user {SERVICE_USER} (uid {}), which the systemd unit runs as: {} is owned by uid {} gid {}, mode {:o} (ACLs not consulted). Fix: `chown {SERVICE_USER}: {}`, or let systemd create it (StateDirectory=)",
                user.uid,
                existing.display(),
                meta.uid(),
                meta.gid(),
                meta.mode() & 0o7777,
                existing.display()
            )
        },
    ])
}

/// The state directory `dir` made absolute, and the nearest of it and its
/// parents that exists (where `run` creates what is missing), or why no
/// directory can ever be made there, as `run` would fail on it: a path
/// too long for the kernel (the configured `state_dir` is refused for that
/// already, `$STATE_DIRECTORY` or the working directory may make it so), a
/// symbolic link loop (`ELOOP`), a link to nothing (`mkdir` fails on it
/// with "File exists"), a parent this user may not look into. `run`
/// checks the same before it opens the database.
pub fn reachable_state_dir(dir: &Path) -> Result<(PathBuf, PathBuf), StoreError> {
    let refused = |source: std::io::Error| StoreError::StateDir {
        dir: dir.to_owned(),
        source,
    };
    let absolute = std::path::absolute(dir).map_err(refused)?;
    if let Some(problem) = crate::config::state_dir_problem(&absolute) {
        return Err(refused(std::io::Error::new(
            std::io::ErrorKind::InvalidFilename,
            problem,
        )));
    }
    for p in absolute.ancestors() {
        match std::fs::metadata(p) {
            Ok(_) => return Ok((absolute.clone(), p.to_owned())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Ok(link) = std::fs::read_link(p) {
                    return Err(refused(std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!(
                            "{} is a symbolic link to {}, which does not exist (no directory can be created through it)",
                            p.display(),
                            link.display()
                        ),
                    )));
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(refused(std::io::Error::new(
                    e.kind(),
                    format!(
                        "a symbolic link in {} leads back to itself, a link loop ({e}; `namei -l {}` shows which link)",
                        p.display(),
                        p.display()
                    ),
                )));
            }
            Err(e) => {
                return Err(refused(std::io::Error::new(
                    e.kind(),
                    format!("{}: {e}", p.display()),
                )));
            }
        }
    }
    Ok((absolute, PathBuf::from("/")))
}

/// What `check-config --online` found in the facility Redis: the server
/// and a clock sample.
pub struct FacilityFound {
    /// The server as checked (no credentials).
    pub server: String,
    /// Its facts.
    pub info: ServerInfo,
    /// This gateway's clock against it.
    pub clock: ClockSample,
    /// Whether it answers `WAIT` (else what it said).
    pub wait: Result<(), String>,
    /// In a Redis Cluster, the facility's slot.
    pub slot: Option<u16>,
}

/// Connect to the facility Redis as `run` does (credentials, TLS), check
/// it as the claimer does at start ([`crate::facility::Facility::check_server`]: eviction
/// policy, the facility's window and retention) and measure its clock.
/// Writes nothing there.
pub fn facility(cfg: &Config, redis: &RedisSettings) -> Result<FacilityFound, FacilityError> {
    let mut f = super::connect(cfg, redis)?;
    let info = f.check_server()?;
    let clock = f.sample_clock()?;
    let wait = match info.role.as_str() {
        // A replica refuses WAIT from anyone; it is warned of above.
        "slave" => Ok(()),
        _ => f.probe_wait().map_err(|e| e.to_string()),
    };
    Ok(FacilityFound {
        server: f.server().to_string(),
        info,
        clock,
        wait,
        slot: f
            .in_cluster()
            .then(|| crate::facility::cluster::facility_slot(&cfg.gateway.facility)),
    })
}

/// A scanner's device path as `check-config --online` found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathCheck {
    /// The scanner's name.
    pub scanner: String,
    /// Its configured `path`.
    pub path: PathBuf,
    /// What was found.
    pub found: PathFound,
}

/// What [`scanner_paths`] found at a scanner's `path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathFound {
    /// There, a character device this user may read and write (for a
    /// serial scanner, a terminal).
    Usable,
    /// Not a path to check: a HID scanner found by its match keys.
    Matched,
    /// What is wrong and what to do.
    Unusable(String),
}

/// Whether each scanner's `path` is there, a character device (for a
/// serial scanner a terminal: [`device_kinds`]), and readable and
/// writable by this user (nothing is opened: opening a serial port can
/// reset a scanner).
pub fn scanner_paths(cfg: &Config) -> Vec<PathCheck> {
    cfg.scanners
        .iter()
        .map(|s| {
            let (path, serial) = match &s.kind {
                ScannerKind::Serial(c) => (c.path.clone(), true),
                ScannerKind::Hid(h) => (h.path.clone(), false),
            };
            let problem = match std::fs::metadata(&path) {
                _ if path.as_os_str().is_empty() => {
                    return PathCheck {
                        scanner: s.name.clone(),
                        path,
                        found: PathFound::Matched,
                    };
                }
                Err(e) => Some(format!(
                    "{e}. Fix: plug the scanner in and check its udev rule (udev/99-scangate.rules) or the path; `scangate devices` lists what is attached"
                )),
                Ok(m) if !m.file_type().is_char_device() => Some(
                    "not a character device. Fix: name the device node (e.g. /dev/ttyUSB0 or the udev rule's /dev/scangate/NAME link)".into(),
                ),
                Ok(m) => match serial.then(|| not_a_terminal(m.rdev())).flatten() {
                    Some(kinds) => Some(format!(
                        "not a terminal, so not a serial port: the kernel calls device {}:{} {kinds}. Fix: name the scanner's serial device (e.g. /dev/ttyUSB0, /dev/ttyACM0, or the udev rule's /dev/scangate/NAME link; `scangate devices` lists what is attached)",
                        nix::sys::stat::major(m.rdev()),
                        nix::sys::stat::minor(m.rdev())
                    )),
                    None => nix::unistd::access(
                        &path,
                        nix::unistd::AccessFlags::R_OK | nix::unistd::AccessFlags::W_OK,
                    )
                    .err()
                    .map(|e| {
                        format!(
                            "{e} for this user. Fix: the udev rule gives it to group dialout (serial) or scangate (HID); add the service user to that group"
                        )
                    }),
                },
            };
            PathCheck {
                scanner: s.name.clone(),
                path,
                found: problem.map_or(PathFound::Usable, PathFound::Unusable),
            }
        })
        .collect()
}

/// What the kernel calls the character device `rdev`: its class in sysfs
/// (`/sys/dev/char/MAJOR:MINOR/subsystem`: `tty`, `mem`, `hidraw`, …),
/// else the drivers `/proc/devices` lists for its major number (a PTY's
/// `/dev/pts/N` has no sysfs entry: `pts`). Empty when neither says.
pub fn device_kinds(rdev: u64) -> Vec<String> {
    let (major, minor) = (nix::sys::stat::major(rdev), nix::sys::stat::minor(rdev));
    if let Ok(class) = std::fs::read_link(format!("/sys/dev/char/{major}:{minor}/subsystem"))
        && let Some(name) = class.file_name()
    {
        return vec![name.to_string_lossy().into_owned()];
    }
    let listed = std::fs::read_to_string("/proc/devices").unwrap_or_default();
    char_drivers(&listed, major)
}

/// The drivers `/proc/devices` (its text) lists for character major
/// number `major`.
fn char_drivers(proc_devices: &str, major: u64) -> Vec<String> {
    proc_devices
        .lines()
        .skip_while(|l| !l.starts_with("Character devices:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty() && !l.starts_with("Block devices:"))
        .filter_map(|l| l.trim().split_once(' '))
        .filter(|(n, _)| n.parse() == Ok(major))
        .map(|(_, name)| name.trim().to_string())
        .collect()
}

/// Whether a device the kernel calls `kind` ([`device_kinds`]) is a
/// terminal: a serial port, a USB serial adapter or CDC-ACM scanner, a
/// PTY.
fn is_terminal_kind(kind: &str) -> bool {
    kind.starts_with("tty")
        || kind.starts_with("/dev/tty")
        || matches!(
            kind,
            "pts" | "ptm" | "/dev/ptmx" | "/dev/console" | "/dev/vc/0"
        )
}

/// What the character device `rdev` is, quoted, when the kernel says it
/// is something other than a terminal; `None` for a terminal, or when
/// the kernel does not say (then nothing is refused).
fn not_a_terminal(rdev: u64) -> Option<String> {
    let kinds = device_kinds(rdev);
    if kinds.is_empty() || kinds.iter().any(|k| is_terminal_kind(k)) {
        return None;
    }
    Some(
        kinds
            .iter()
            .map(|k| format!("{k:?}"))
            .collect::<Vec<_>>()
            .join(" or "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_and_their_groups_are_read_from_passwd_and_group() {
        let passwd =
            "root:x:0:0::/root:/bin/sh\nscangate:x:998:997::/var/lib/scangate:/usr/sbin/nologin\n";
        let group = "dialout:x:20:scangate,pi\nscangate:x:997:\nadm:x:4:pi\n";
        let ids = user_ids("scangate", passwd, group).unwrap();
        assert_eq!(ids.uid, 998);
        assert_eq!(ids.groups, vec![997, 20]);
        assert_eq!(user_ids("nobody", passwd, group), None);
    }

    #[test]
    fn scanner_paths_are_usable_missing_or_not_a_path_to_check() {
        let pty = crate::pty::VirtualScanner::new().unwrap();
        let text = format!(
            "[[scanner]]\nname = \"a\"\nkind = \"serial\"\npath = {:?}\nscan_type = \"dispense\"\n\
             [[scanner]]\nname = \"b\"\nkind = \"serial\"\npath = \"/nonexistent/ttyUSB9\"\nscan_type = \"dispense\"\n\
             [[scanner]]\nname = \"c\"\nkind = \"hid\"\nmode = \"pos\"\nvendor_id = 3118\nscan_type = \"dispense\"\n\
             [[scanner]]\nname = \"d\"\nkind = \"serial\"\npath = \"/dev/null\"\nscan_type = \"dispense\"\n",
            pty.path().to_str().unwrap()
        );
        let cfg = Config::parse(&text, None).unwrap();
        let found: Vec<PathFound> = scanner_paths(&cfg).into_iter().map(|p| p.found).collect();
        assert_eq!(found[0], PathFound::Usable);
        // A character device, but no terminal: no serial scanner is there.
        assert!(
            matches!(&found[3], PathFound::Unusable(why) if why.contains("not a terminal") && why.contains("\"mem\"") && why.contains("Fix:")),
            "{:?}",
            found[3]
        );
        assert!(
            matches!(&found[1], PathFound::Unusable(why) if why.contains("No such file") && why.contains("Fix:")),
            "{:?}",
            found[1]
        );
        assert_eq!(found[2], PathFound::Matched);
    }

    #[test]
    fn terminals_are_told_from_other_devices_by_the_kernels_names() {
        let proc_devices = "Character devices:\n  1 mem\n  4 /dev/vc/0\n  4 tty\n  4 ttyS\n  5 /dev/tty\n136 pts\n166 ttyACM\n188 ttyUSB\n245 hidraw\n\nBlock devices:\n  7 loop\n";
        assert_eq!(char_drivers(proc_devices, 4), ["/dev/vc/0", "tty", "ttyS"]);
        assert_eq!(char_drivers(proc_devices, 7), Vec::<String>::new());
        for (major, terminal) in [
            (1, false),
            (4, true),
            (5, true),
            (136, true),
            (166, true),
            (188, true),
            (245, false),
        ] {
            let kinds = char_drivers(proc_devices, major);
            assert_eq!(
                kinds.iter().any(|k| is_terminal_kind(k)),
                terminal,
                "{major}: {kinds:?}"
            );
        }
        // sysfs classes.
        assert!(is_terminal_kind("tty"));
        assert!(
            !is_terminal_kind("mem") && !is_terminal_kind("hidraw") && !is_terminal_kind("input")
        );
        // /dev/zero on this machine; a PTY (no sysfs entry: /proc/devices).
        use std::os::unix::fs::MetadataExt;
        let zero = std::fs::metadata("/dev/zero").unwrap().rdev();
        assert_eq!(not_a_terminal(zero).as_deref(), Some("\"mem\""));
        let pty = crate::pty::VirtualScanner::new().unwrap();
        let rdev = std::fs::metadata(pty.path()).unwrap().rdev();
        assert_eq!(not_a_terminal(rdev), None, "{:?}", device_kinds(rdev));
    }

    #[test]
    fn write_permission_comes_from_the_matching_class_of_mode_bits() {
        let u = UserIds {
            uid: 998,
            groups: vec![997],
        };
        assert!(may_write(&u, 998, 0, 0o700));
        assert!(!may_write(&u, 998, 997, 0o570)); // the owner class decides
        assert!(may_write(&u, 0, 997, 0o770));
        assert!(!may_write(&u, 0, 997, 0o750));
        assert!(!may_write(&u, 0, 0, 0o755));
        assert!(may_write(&u, 0, 0, 0o1777));
    }
}
