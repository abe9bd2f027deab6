//! Files the configuration names that other users may read or change: the
//! config file, the Redis password (`password_file` or the systemd
//! credential), a sink's bearer token or basic-auth file, and the CA
//! files. Each is judged by what it is ([`Role`]) from its mode bits
//! ([`too_open`]), and one too open is told — a WARN at the daemon's start
//! and at each reload, a `status` reason, a `warning:` line from
//! `check-config` — naming the file, its mode and the `chown`/`chmod`
//! that fixes it ([`Exposed`]).
//!
//! Told, never refused: the package creates the config `root:scangate
//! 0640`, but it never changes the mode of a file that is there, and an
//! upgrade must not stop a pharmacy's gateway over a mode the site set (or
//! an earlier install left). Refusing would trade a leak that may never be
//! used for scans certainly not taken.
//!
//! Only the mode bits are read (ACLs are not consulted), of the file a
//! link points to; a file that cannot be looked at is not judged here
//! (reading it, `run` and `check-config` say why).

use super::Config;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The group the systemd unit runs scangate in (`Group=` in
/// `systemd/scangate.service`): the group that reads the config and
/// secrets.
pub const SERVICE_GROUP: &str = "scangate";

/// What a file is to scangate, which decides who else may have it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The config file: no secret in it (secrets are in files of their
    /// own), but it says where scans are kept and where the ledger is
    /// sent, and a sink URL's query may carry a key. Readable by its group
    /// (the service's), changed by its owner only.
    Config,
    /// A password, token or `user:password` file: no one but its owner
    /// and its group.
    Secret,
    /// A CA certificate (PEM): public by nature, but a trust anchor:
    /// changed by its owner only.
    TrustAnchor,
}

impl Role {
    /// Why its mode matters, for the warning.
    fn stake(self) -> &'static str {
        match self {
            Role::Config => "the config decides where scans are kept and where the ledger is sent",
            Role::Secret => "it holds a secret scangate authenticates with",
            Role::TrustAnchor => "scangate trusts every server a certificate in it vouches for",
        }
    }
}

/// What `mode` lets others do that a file of `role` must not allow, as
/// words (`every user may read it`); `None` when nothing:
///
/// - a secret: read or written by others (its group may: the service
///   reads it as a member);
/// - the config: read by others, or written by its group or others;
/// - a CA file: written by its group or others.
pub fn too_open(role: Role, mode: u32) -> Option<String> {
    let (group_write, other_read, other_write) =
        (mode & 0o020 != 0, mode & 0o004 != 0, mode & 0o002 != 0);
    let mut may = Vec::new();
    let change = match role {
        Role::TrustAnchor => "replace",
        _ => "change",
    };
    if group_write && role != Role::Secret {
        may.push(format!("its group may {change} it"));
    }
    match (other_read && role != Role::TrustAnchor, other_write) {
        (true, true) => may.push(format!(
            "every user of this machine may read and {change} it"
        )),
        (true, false) => may.push("every user of this machine may read it".into()),
        (false, true) => may.push(format!("every user of this machine may {change} it")),
        (false, false) => {}
    }
    (!may.is_empty()).then(|| may.join(", and "))
}

/// A file the configuration names whose mode is too open for its role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposed {
    /// The file.
    pub path: PathBuf,
    /// What names it: `the config file`, `[redis] password_file`, `the
    /// systemd credential redis-password`, `[[sink]] inv bearer_token_file`.
    pub named_by: String,
    /// What it is.
    pub role: Role,
    /// Its permission bits.
    pub mode: u32,
    /// Who may do what they must not ([`too_open`]).
    pub who: String,
}

impl Exposed {
    /// The command that fixes it: the config and secrets `root:scangate
    /// 0640` (as the package creates the config: the service's group
    /// reads, root changes), a CA file `root:root 0644`.
    pub fn fix(&self) -> String {
        let p = shell_quoted(&self.path);
        match self.role {
            Role::Config | Role::Secret => {
                format!("chown root:{SERVICE_GROUP} {p} && chmod 0640 {p}")
            }
            Role::TrustAnchor => format!("chown root:root {p} && chmod 0644 {p}"),
        }
    }

    /// The whole warning: the file, what names it, its mode, who may do
    /// what, why it matters, and the fix.
    pub fn warning(&self) -> String {
        format!(
            "{} ({}) is mode {:04o}: {}, and {}. Fix: `{}`",
            self.path.display(),
            self.named_by,
            self.mode & 0o7777,
            self.who,
            self.role.stake(),
            self.fix()
        )
    }
}

impl std::fmt::Display for Exposed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.warning())
    }
}

/// The files `cfg` (read from `config_file`) names, each with its role
/// and what names it, in the order a technician meets them: the config
/// file, `[redis]`'s password and CA, each `[[sink]]`'s CA and
/// credentials.
pub fn named_files(cfg: &Config, config_file: Option<&Path>) -> Vec<(PathBuf, Role, String)> {
    let mut files = Vec::new();
    if let Some(p) = config_file {
        files.push((p.to_owned(), Role::Config, "the config file".to_string()));
    }
    if let Some(redis) = &cfg.redis {
        if let Some(p) = redis.password_path() {
            let named_by = match &redis.password_file {
                Some(_) => "[redis] password_file",
                None => "the systemd credential redis-password",
            };
            files.push((p, Role::Secret, named_by.to_string()));
        }
        if let Some(p) = &redis.ca_file {
            files.push((p.clone(), Role::TrustAnchor, "[redis] ca_file".into()));
        }
    }
    for sink in &cfg.sinks {
        let named = |key: &str| format!("[[sink]] {} {key}", sink.name);
        if let Some(p) = &sink.ca_file {
            files.push((p.clone(), Role::TrustAnchor, named("ca_file")));
        }
        if let Some(p) = &sink.bearer_token_file {
            files.push((p.clone(), Role::Secret, named("bearer_token_file")));
        }
        if let Some(p) = &sink.basic_auth_file {
            files.push((p.clone(), Role::Secret, named("basic_auth_file")));
        }
    }
    files
}

/// The files `cfg` names ([`named_files`]) whose mode is too open for
/// their role ([`too_open`]); a file that is not there, or not a regular
/// file, is left to whoever reads it.
pub fn exposed(cfg: &Config, config_file: Option<&Path>) -> Vec<Exposed> {
    named_files(cfg, config_file)
        .into_iter()
        .filter_map(|(path, role, named_by)| {
            let meta = std::fs::metadata(&path).ok().filter(|m| m.is_file())?;
            let mode = meta.mode() & 0o7777;
            let who = too_open(role, mode)?;
            Some(Exposed {
                path,
                named_by,
                role,
                mode,
                who,
            })
        })
        .collect()
}

/// `path` as a shell word: as it is when it holds only characters no
/// shell treats specially, else in single quotes.
fn shell_quoted(path: &Path) -> String {
    let s = path.display().to_string();
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+,:@%=".contains(&b));
    if plain {
        s
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_may_be_its_groups_and_no_one_elses() {
        for quiet in [0o600, 0o640, 0o660, 0o400, 0o440] {
            assert_eq!(too_open(Role::Secret, quiet), None, "{quiet:o}");
        }
        assert_eq!(
            too_open(Role::Secret, 0o644).as_deref(),
            Some("every user of this machine may read it")
        );
        assert_eq!(
            too_open(Role::Secret, 0o602).as_deref(),
            Some("every user of this machine may change it")
        );
        assert_eq!(
            too_open(Role::Secret, 0o666).as_deref(),
            Some("every user of this machine may read and change it")
        );
    }

    #[test]
    fn the_config_may_be_read_by_its_group_and_changed_by_its_owner_only() {
        for quiet in [0o600, 0o640, 0o440, 0o400] {
            assert_eq!(too_open(Role::Config, quiet), None, "{quiet:o}");
        }
        assert_eq!(
            too_open(Role::Config, 0o644).as_deref(),
            Some("every user of this machine may read it")
        );
        assert_eq!(
            too_open(Role::Config, 0o660).as_deref(),
            Some("its group may change it")
        );
        assert_eq!(
            too_open(Role::Config, 0o666).as_deref(),
            Some("its group may change it, and every user of this machine may read and change it")
        );
    }

    #[test]
    fn a_ca_file_may_be_read_by_all_and_replaced_by_its_owner_only() {
        for quiet in [0o644, 0o444, 0o640, 0o600] {
            assert_eq!(too_open(Role::TrustAnchor, quiet), None, "{quiet:o}");
        }
        assert_eq!(
            too_open(Role::TrustAnchor, 0o664).as_deref(),
            Some("its group may replace it")
        );
        assert_eq!(
            too_open(Role::TrustAnchor, 0o646).as_deref(),
            Some("every user of this machine may replace it")
        );
    }

    #[test]
    fn the_warning_names_the_file_its_mode_and_the_fix() {
        let e = Exposed {
            path: PathBuf::from("/etc/scangate/redis password"),
            named_by: "[redis] password_file".into(),
            role: Role::Secret,
            mode: 0o644,
            who: too_open(Role::Secret, 0o644).unwrap(),
        };
        let w = e.warning();
        assert!(
            w.starts_with(
                "/etc/scangate/redis password ([redis] password_file) is mode 0644: every user of this machine may read it"
            ),
            "{w}"
        );
        assert!(
            w.contains("Fix: `chown root:scangate '/etc/scangate/redis password' && chmod 0640 '/etc/scangate/redis password'`"),
            "{w}"
        );
        let ca = Exposed {
            path: PathBuf::from("/etc/ssl/inv-ca.pem"),
            named_by: "[[sink]] inv ca_file".into(),
            role: Role::TrustAnchor,
            mode: 0o666,
            who: too_open(Role::TrustAnchor, 0o666).unwrap(),
        };
        assert_eq!(
            ca.fix(),
            "chown root:root /etc/ssl/inv-ca.pem && chmod 0644 /etc/ssl/inv-ca.pem"
        );
    }

    #[test]
    fn files_on_disk_are_judged_by_their_role() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, mode: u32| {
            let p = dir.path().join(name);
            std::fs::write(&p, "x\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            p
        };
        let cfg_file = file("scangate.toml", 0o640);
        let pw = file("pw", 0o644);
        let ca = file("ca.pem", 0o644);
        let token = file("token", 0o600);
        let text = format!(
            "[redis]\nurl = \"rediss://r/0\"\npassword_file = {:?}\nca_file = {:?}\n\
             [[sink]]\nname = \"inv\"\nurl = \"https://h/\"\nbearer_token_file = {:?}\n",
            pw.to_str().unwrap(),
            ca.to_str().unwrap(),
            token.to_str().unwrap()
        );
        let cfg = Config::parse(&text, None).unwrap();
        let found = exposed(&cfg, Some(&cfg_file));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            (&found[0].path, found[0].role, found[0].named_by.as_str()),
            (&pw, Role::Secret, "[redis] password_file")
        );
        // The control: every one at the package's modes, nothing told.
        std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert_eq!(exposed(&cfg, Some(&cfg_file)), vec![]);
        // A missing file is left to whoever reads it.
        std::fs::remove_file(&token).unwrap();
        assert_eq!(exposed(&cfg, Some(&cfg_file)), vec![]);
        std::fs::set_permissions(&cfg_file, std::fs::Permissions::from_mode(0o664)).unwrap();
        let found = exposed(&cfg, Some(&cfg_file));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].role, Role::Config);
        assert_eq!(
            found[0].who,
            "its group may change it, and every user of this machine may read it"
        );
    }
}
