//! The state's identity: a UUID written when the database is created, kept
//! in the database (`meta` key `state_id`) and beside it in
//! `<state_dir>/state-id` together with the last anchored audit chain head.
//! A missing, emptied or replaced database is then told apart from a first
//! start: the file says a database was here, and whose it was.
//!
//! The file is small text, rewritten atomically (temporary file, fsync,
//! rename, fsync of the directory):
//!
//! ```text
//! # scangate state identity: do not edit; see `scangate state reset`
//! state_id 0193…
//! created 2026-12-01T14:39:46.123Z
//! head 1234 9f2c…
//! ```

use super::{DB_FILE, StoreError, classify};
use crate::events::Event as _;
use rusqlite::{Connection, OpenFlags};
use std::io::Write;
use std::path::{Path, PathBuf};

/// File name of the identity file inside the state directory.
pub const ID_FILE: &str = "state-id";
/// `meta` key of the identity inside the database.
pub(crate) const META_KEY: &str = "state_id";
/// `meta` key of the audit chain's head (`<seq>:<hash>`): the audit trail
/// keeps it there with every record it appends, and the identity file
/// anchors it outside the database ([`Anchor`]).
pub const AUDIT_HEAD_KEY: &str = "audit_head";
/// `meta` key, in a database made by `state reset`: the identity of the
/// lost state it replaced.
pub(crate) const RESET_FROM_KEY: &str = "reset_from";
/// What `state reset --confirm` takes for a state that lost its database
/// before identities existed (no identity file).
pub const UNIDENTIFIED: &str = "unidentified";

/// An audit chain head: the last record's position and hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Its `seq`.
    pub seq: i64,
    /// Its `hash`.
    pub hash: String,
}

impl std::fmt::Display for Head {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "record {} (hash {})", self.seq, self.hash)
    }
}

impl Head {
    /// Parse the `seq hash` form kept in `meta` and in the identity file.
    pub fn parse(text: &str) -> Option<Head> {
        let (seq, hash) = text.trim().split_once(' ')?;
        let hash = hash.trim();
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Some(Head {
            seq: seq.parse().ok()?,
            hash: hash.to_string(),
        })
    }
}

/// The content of the identity file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateId {
    /// The state's UUID.
    pub id: String,
    /// When it was created (RFC 3339), as known.
    pub created: String,
    /// The last chain head anchored here, if any.
    pub head: Option<Head>,
}

impl StateId {
    /// A new identity, created now.
    pub fn new() -> StateId {
        StateId {
            id: uuid::Uuid::now_v7().to_string(),
            created: crate::capture::clock::rfc3339_ms(chrono::Utc::now().timestamp_millis()),
            head: None,
        }
    }

    fn render(&self) -> String {
        let mut out = format!(
            "# scangate state identity: do not edit; see `scangate state reset`\nstate_id {}\ncreated {}\n",
            self.id, self.created
        );
        if let Some(h) = &self.head {
            out.push_str(&format!("head {} {}\n", h.seq, h.hash));
        }
        out
    }

    fn parse(text: &str) -> Result<StateId, String> {
        let (mut id, mut created, mut head) = (None, String::new(), None);
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (key, value) = line.split_once(' ').unwrap_or((line, ""));
            match key {
                "state_id" if uuid::Uuid::parse_str(value.trim()).is_ok() => {
                    id = Some(value.trim().to_string())
                }
                "created" => created = value.trim().to_string(),
                "head" => {
                    head =
                        Some(Head::parse(value).ok_or_else(|| format!("bad head line {line:?}"))?)
                }
                _ => return Err(format!("unexpected line {line:?}")),
            }
        }
        Ok(StateId {
            id: id.ok_or("no state_id line")?,
            created,
            head,
        })
    }
}

impl Default for StateId {
    fn default() -> Self {
        StateId::new()
    }
}

/// The longest identity file read: a few lines are written there.
const ID_FILE_LIMIT: u64 = 64 * 1024;

/// Read `<state_dir>/state-id`: `None` if there is none.
pub fn read(state_dir: &Path) -> Result<Option<StateId>, StoreError> {
    let path = state_dir.join(ID_FILE);
    let text = match crate::files::read_to_string(&path, ID_FILE_LIMIT) {
        Ok(t) => t,
        Err(crate::files::FileError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            return Ok(None);
        }
        Err(planted @ crate::files::FileError::Unfit { .. }) => {
            return Err(StoreError::Planted(planted));
        }
        Err(crate::files::FileError::Io { source: e, .. }) => {
            let fix = match e.kind() {
                std::io::ErrorKind::PermissionDenied => format!(
                    "let the service user read it (`chown scangate: {}`), or run this command as that user or as root",
                    path.display()
                ),
                _ => "check the disk holding the state directory (`dmesg`)".into(),
            };
            return Err(StoreError::IdFile {
                path,
                detail: e.to_string(),
                fix,
            });
        }
    };
    StateId::parse(&text)
        .map(Some)
        .map_err(|detail| StoreError::IdFile {
            path,
            detail: format!("not as scangate writes it ({detail})"),
            fix: format!(
                "restore it from a backup of this state directory; or move it aside and start scangate, which writes it again from {DB_FILE}'s own identity (the chain head anchored in it is then gone, and `audit verify` can compare the database's end only with the facility store's and the log's anchors)"
            ),
        })
}

/// Write `<state_dir>/state-id` atomically and durably.
pub fn write(state_dir: &Path, id: &StateId) -> Result<(), StoreError> {
    let path = state_dir.join(ID_FILE);
    let tmp = state_dir.join(format!("{ID_FILE}.tmp"));
    let io = |source: std::io::Error| StoreError::IdFileWrite {
        path: path.clone(),
        source,
        free_bytes: super::space::free_bytes(state_dir),
        min_free_mb: None,
    };
    let mut f = crate::files::open(&tmp, crate::files::Access::Replace).map_err(|e| match e {
        crate::files::FileError::Io { source, .. } => io(source),
        planted => StoreError::Planted(planted),
    })?;
    f.write_all(id.render().as_bytes()).map_err(io)?;
    f.sync_all().map_err(io)?;
    drop(f);
    std::fs::rename(&tmp, &path).map_err(io)?;
    std::fs::File::open(state_dir)
        .and_then(|d| d.sync_all())
        .map_err(io)
}

/// What is in the place of the database file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// No file.
    Missing,
    /// A file without any scangate schema (0 bytes, a few bytes, or an
    /// empty SQLite database): its `len` in bytes.
    Empty(u64),
    /// A scangate database, with the identity it holds (none if written
    /// before identities) and its chain head.
    Database {
        id: Option<String>,
        head: Option<Head>,
        /// The identity of the lost state it replaced, if it was made by
        /// `state reset` (`meta` [`RESET_FROM_KEY`]).
        reset_from: Option<String>,
    },
}

impl Found {
    /// How the database file is missing, for a message (`None` if it is there).
    pub(crate) fn lost(&self) -> Option<String> {
        match self {
            Found::Missing => Some("is missing".into()),
            Found::Empty(len) => Some(format!("is empty ({len} bytes, no scangate schema in it)")),
            Found::Database { .. } => None,
        }
    }
}

/// Look at the database file without changing it (read-only connection).
pub(crate) fn inspect(db: &Path) -> Result<Found, StoreError> {
    let dir = db.parent().unwrap_or(db);
    // (A link is not a missing database, nor a leftover to remove.)
    super::refuse_planted(db)?;
    let len = match std::fs::metadata(db) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Found::Missing),
        Err(e) => {
            return Err(StoreError::StateDir {
                dir: db.parent().unwrap_or(db).to_owned(),
                source: e,
            });
        }
    };
    // Shorter than SQLite's header (SQLite would take it for a new
    // database), or zeros only: empty, unless its write-ahead log holds
    // frames, through which SQLite may read a whole database; then SQLite
    // looks.
    let wal_len = std::fs::metadata(dir.join(format!("{DB_FILE}-wal"))).map_or(0, |m| m.len());
    if wal_len <= WAL_HEADER && (len < 100 || zeros_only(db, len)) {
        return Ok(Found::Empty(len));
    }
    let err = |e| classify(db, e);
    let conn = super::connect(db, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(err)?;
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .map_err(err)?;
    if version == 0 && tables == 0 {
        return Ok(Found::Empty(len));
    }
    if version == 0 {
        // Someone else's tables: `Store::open` refuses it as foreign.
        return Ok(Found::Database {
            id: None,
            head: None,
            reset_from: None,
        });
    }
    let meta = |key: &str| super::get_meta(&conn, key).map_err(err);
    Ok(Found::Database {
        id: meta(META_KEY)?,
        head: meta(AUDIT_HEAD_KEY)?.as_deref().and_then(Head::parse),
        reset_from: meta(RESET_FROM_KEY)?,
    })
}

/// The size of a write-ahead log's header: a log no longer than this
/// holds no frame.
const WAL_HEADER: u64 = 32;

/// A small file of zero bytes only: what a power cut can leave of a file
/// whose size reached the disk and whose first page did not. It holds no
/// data (SQLite calls it "not a database").
fn zeros_only(db: &Path, len: u64) -> bool {
    len <= 64 * 1024 && std::fs::read(db).is_ok_and(|bytes| bytes.iter().all(|b| *b == 0))
}

/// Let SQLite roll back a rollback journal left beside the database `db`
/// (`scangate.db-journal`: a crash while an older scangate switched a new
/// database to WAL mode) before it is judged: a read-only look cannot, and
/// would fail with "attempt to write a readonly database". Only the writer,
/// holding the state directory's lock, does this.
pub(crate) fn settle_journal(db: &Path) -> Result<(), StoreError> {
    super::refuse_planted(db)?;
    let journal = db.with_file_name(format!("{DB_FILE}-journal"));
    let len = std::fs::metadata(db).map_or(0, |m| m.len());
    if !journal.exists() || len < 100 || zeros_only(db, len) {
        return Ok(());
    }
    let conn = super::connect(db, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
        r.get::<_, i64>(0)
    })
    .map_err(|e| classify(db, e))?;
    Ok(())
}

/// What the identity check found a state directory to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StateKind {
    /// It never held a database: a first start. The files an unfinished
    /// first start left (none, usually) are to be removed before it.
    NeverStarted(Vec<PathBuf>),
    /// Its database is here: open it.
    Database,
}

/// The identity check every opening makes. A state directory either never
/// held a database (no `state-id`, no database with a schema: at most the
/// leftovers of a start cut short, see `create`) or has one; a database
/// that was lost, emptied or replaced is refused.
pub(crate) fn check(
    state_dir: &Path,
    id_file: Option<&StateId>,
    found: &Found,
) -> Result<StateKind, StoreError> {
    let db = state_dir.join(DB_FILE);
    match (id_file, found) {
        (Some(f), lost) if lost.lost().is_some() => Err(StoreError::Lost {
            db,
            what: lost.lost().unwrap_or_default(),
            evidence: format!(
                "{} says this state directory held the database of state {} (created {}){}",
                state_dir.join(ID_FILE).display(),
                f.id,
                f.created,
                f.head.as_ref().map_or_else(
                    || ", no audit record anchored yet".to_string(),
                    |h| format!(", its audit chain last anchored at {h}")
                )
            ),
            confirm: f.id.clone(),
        }),
        (None, lost) if lost.lost().is_some() => {
            // A database file gone while its write-ahead log or index
            // stayed was deleted: no start of scangate's removes it and
            // leaves them (a database from before state identities).
            let log: Vec<PathBuf> = ["-wal", "-shm"]
                .iter()
                .map(|s| state_dir.join(format!("{DB_FILE}{s}")))
                .filter(|p| *found == Found::Missing && p.exists())
                .collect();
            if !log.is_empty() {
                return Err(StoreError::Lost {
                    db,
                    what: lost.lost().unwrap_or_default(),
                    evidence: format!(
                        "a database was here before (left beside it: {}), written before state identities",
                        log.iter()
                            .map(|p| p.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    confirm: UNIDENTIFIED.into(),
                });
            }
            Ok(StateKind::NeverStarted(super::create::leftovers(state_dir)))
        }
        (
            Some(f),
            Found::Database {
                id: Some(other),
                reset_from,
                ..
            },
        ) if *other != f.id && reset_from.as_deref() != Some(f.id.as_str()) => {
            Err(StoreError::Replaced {
                db,
                id_file: state_dir.join(ID_FILE),
                expected: f.id.clone(),
                found: other.clone(),
            })
        }
        // (A database made by `state reset --confirm <the file's state>`
        // whose start was cut before the file was rewritten takes its
        // place like any other: the file is written from the database.)
        _ => Ok(StateKind::Database),
    }
}

/// Where a state reset stands once the store has done its part
/// ([`begin_reset`]): the audit trail writes the new chain's first record
/// (`audit::reset`).
pub enum ResetStart {
    /// The lost database was moved aside and a new, empty one created; its
    /// identity is not written yet (it goes in with the chain's first
    /// record, [`set_id`]).
    Begun(Box<Begun>),
    /// The state directory's database is there and its own: nothing to reset.
    Intact {
        /// Its identity.
        id: Option<String>,
    },
    /// `--confirm` did not name the lost state.
    WrongConfirm {
        /// What it must be.
        expected: String,
    },
}

/// A reset under way: the new database, open and locked.
pub struct Begun {
    /// The new, empty database, built under a temporary name until
    /// [`finish_reset`] puts it in place.
    pub store: super::Store,
    /// The state directory's lock, held until the reset is done.
    pub lock: nix::fcntl::Flock<std::fs::File>,
    /// The new state's identity.
    pub new: StateId,
    /// The lost state's identity ([`UNIDENTIFIED`] if it had none).
    pub lost_id: String,
    /// The lost state's last anchored chain head.
    pub lost_head: Option<Head>,
    /// Files moved aside (full paths), in place of the database.
    pub moved_aside: Vec<PathBuf>,
}

/// The store's part of `scangate state reset --confirm <id>`: when this
/// state directory lost its database (or it was replaced), move whatever is
/// in its place aside (never deleted) and create a new database. Holds the
/// state directory's lock (the daemon must be stopped).
pub fn begin_reset(state_dir: &Path, confirm: &str) -> Result<ResetStart, StoreError> {
    let lock = super::lock::lock_state_dir(state_dir)?;
    let db = state_dir.join(DB_FILE);
    settle_journal(&db)?;
    let id_file = read(state_dir)?;
    let found = inspect(&db)?;
    if check(state_dir, id_file.as_ref(), &found).is_ok() {
        let id = match found {
            Found::Database {
                id: Some(id),
                head,
                reset_from: Some(from),
            } if id_file.as_ref().is_some_and(|f| f.id == from && f.id != id) => {
                // A reset cut before it rewrote the identity file: finished.
                write(
                    state_dir,
                    &StateId {
                        id: id.clone(),
                        head,
                        ..StateId::new()
                    },
                )?;
                Some(id)
            }
            Found::Database { id, .. } => id,
            _ => None,
        };
        return Ok(ResetStart::Intact { id });
    }
    let lost_id = id_file
        .as_ref()
        .map_or_else(|| UNIDENTIFIED.to_string(), |f| f.id.clone());
    if confirm != lost_id {
        return Ok(ResetStart::WrongConfirm { expected: lost_id });
    }
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let mut moved_aside = Vec::new();
    for suffix in ["", "-journal", "-wal", "-shm"] {
        let from = state_dir.join(format!("{DB_FILE}{suffix}"));
        if from.symlink_metadata().is_ok() {
            let to = state_dir.join(format!("{DB_FILE}.lost-{stamp}{suffix}"));
            std::fs::rename(&from, &to).map_err(|source| StoreError::StateDir {
                dir: state_dir.to_owned(),
                source,
            })?;
            moved_aside.push(to);
        }
    }
    let store = super::create::begin(state_dir)?;
    Ok(ResetStart::Begun(Box::new(Begun {
        store,
        lock,
        new: StateId::new(),
        lost_id,
        lost_head: id_file.and_then(|f| f.head),
        moved_aside,
    })))
}

/// Write the state's identity into its database, inside `tx` (the
/// transaction of the new chain's first record, on a reset), with the
/// identity of the lost state it replaces.
pub fn set_id(tx: &Connection, id: &str, lost_id: &str) -> rusqlite::Result<()> {
    super::put_meta(tx, META_KEY, id)?;
    super::put_meta(tx, RESET_FROM_KEY, lost_id)
}

/// The last step of a state reset, once the new chain's first record is
/// committed: the new database put in place (atomically, see `create`),
/// then the identity file rewritten for it. A crash before the rename
/// leaves the lost state refused as before (the reset can be run again); a
/// crash after it, a database whose `meta` names the state it replaced,
/// which the next start takes as this directory's.
pub fn finish_reset(store: super::Store, state_dir: &Path, id: &StateId) -> Result<(), StoreError> {
    super::create::install(store, state_dir)?;
    write(state_dir, id)
}

/// How often at most the running daemon anchors the chain head outside
/// the database (the identity file, the log); also once at stop.
pub const ANCHOR_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Anchors the audit chain head as it moves: into the identity file and
/// into the log (fields `audit_head_seq`, `audit_head_hash`), so a lost
/// tail of the database (a truncated WAL, a restored older file) is seen
/// by `audit verify`. Reads the head on a read-only connection of its own.
pub struct Anchor {
    conn: Connection,
    state_dir: PathBuf,
    last: Option<Head>,
    state_id: String,
    /// `[outbox] min_free_mb`, named when the file system is full.
    min_free_mb: Option<u64>,
}

impl Anchor {
    /// For the database of `state_dir` (opened by [`super::Store::open`]);
    /// `min_free_mb` is the floor a failure on a full disk names.
    pub fn new(state_dir: &Path, min_free_mb: Option<u64>) -> Result<Anchor, StoreError> {
        let conn = super::connect(&state_dir.join(DB_FILE), OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        let file = read(state_dir)?.ok_or_else(|| StoreError::IdFile {
            path: state_dir.join(ID_FILE),
            detail: "it is missing after the database was opened".into(),
            fix: "start scangate again: it writes the file from the database's identity".into(),
        })?;
        Ok(Anchor {
            conn,
            state_dir: state_dir.to_owned(),
            last: file.head,
            state_id: file.id,
            min_free_mb,
        })
    }

    /// The last head anchored (read at start from the identity file).
    pub fn head(&self) -> Option<&Head> {
        self.last.as_ref()
    }

    /// The state's identity.
    pub fn state_id(&self) -> &str {
        &self.state_id
    }

    /// Anchor the committed head if it moved since the last time; returns it.
    pub fn tick(&mut self) -> Result<Option<Head>, StoreError> {
        let db = self.state_dir.join(DB_FILE);
        let head = super::get_meta(&self.conn, AUDIT_HEAD_KEY)
            .map_err(|e| classify(&db, e))?
            .as_deref()
            .and_then(Head::parse);
        if head.is_none() || head == self.last {
            return Ok(None);
        }
        let mut file = read(&self.state_dir)?.ok_or_else(|| StoreError::IdFile {
            path: self.state_dir.join(ID_FILE),
            detail: "it disappeared while scangate ran".into(),
            fix: "restart scangate: it writes the file again from the database's identity".into(),
        })?;
        file.head = head.clone();
        write(&self.state_dir, &file).map_err(|e| match e {
            StoreError::IdFileWrite {
                path,
                source,
                free_bytes,
                ..
            } => StoreError::IdFileWrite {
                path,
                source,
                free_bytes,
                min_free_mb: self.min_free_mb,
            },
            e => e,
        })?;
        if let Some(h) = &head {
            crate::events::AnchorWritten {
                state_id: &file.id,
                seq: h.seq,
                hash: &h.hash,
            }
            .emit();
        }
        self.last = head.clone();
        Ok(head)
    }
}
