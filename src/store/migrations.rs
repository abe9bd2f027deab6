//! The database's migrations: the SQL that takes a scangate database from
//! one schema version to the next, in order, each run once in its own
//! transaction (`schema.rs` applies them). A file of its own because it
//! only grows: every release that changes the schema appends one, and a
//! shipped one is never edited (the upgrade fixtures under
//! `tests/fixtures/states/` hold a database each earlier release wrote).

/// Schema migrations, applied in order; `PRAGMA user_version` counts them.
/// Never edit a shipped migration: append a new one.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: the spine.
    r#"
    CREATE TABLE scans (
        seq           INTEGER PRIMARY KEY,
        scan_uuid     TEXT    NOT NULL UNIQUE,
        scanner       TEXT    NOT NULL,
        scan_type     TEXT    NOT NULL,
        quantity      INTEGER NOT NULL,
        captured_ms   INTEGER NOT NULL,
        boot_id       TEXT    NOT NULL,
        boot_ns       INTEGER NOT NULL,
        clock_synced  INTEGER NOT NULL,
        raw           BLOB    NOT NULL,
        symbology     TEXT,
        gtin          TEXT,
        ndc10         TEXT,
        lot           TEXT,
        serial        TEXT,
        expiry        TEXT,
        content_key   TEXT,
        reject_reason TEXT,
        state         TEXT    NOT NULL DEFAULT 'pending'
                      CHECK (state IN ('pending','unresolved','committed','suppressed','rejected')),
        twin_uuid     TEXT,
        decided_ms    INTEGER
    );
    -- Partial: only undecided rows are indexed, so the index stays tiny.
    -- Queries must say `state = 'pending'` literally for SQLite to use it.
    CREATE INDEX scans_pending ON scans (captured_ms, boot_ns, scan_uuid)
        WHERE state = 'pending';
    -- Echoes by the committed scan they name (for `audit trace`).
    CREATE INDEX scans_twin ON scans (twin_uuid) WHERE twin_uuid IS NOT NULL;
    CREATE TABLE ledger (
        seq           INTEGER PRIMARY KEY,
        scan_uuid     TEXT    NOT NULL UNIQUE,
        gateway       TEXT    NOT NULL,
        scanner       TEXT    NOT NULL,
        captured_ms   INTEGER NOT NULL,
        boot_id       TEXT    NOT NULL,
        boot_ns       INTEGER NOT NULL,
        clock_synced  INTEGER NOT NULL,
        scan_type     TEXT    NOT NULL,
        quantity      INTEGER NOT NULL,
        gtin          TEXT,
        ndc10         TEXT,
        lot           TEXT,
        serial        TEXT,
        expiry        TEXT,
        symbology     TEXT    NOT NULL,
        content_key   TEXT    NOT NULL,
        key_prefix    INTEGER NOT NULL
    );
    -- The exact index: (8-byte content-key prefix, wall time). Content keys
    -- are uniformly random, so every insert lands on a random index page; a
    -- small key keeps the index in the page cache, and the time column keeps
    -- a lookup for a often re-dispensed label from reading all its history.
    CREATE INDEX ledger_key ON ledger (key_prefix, captured_ms);
    -- Per boot, the range of (wall clock - boot clock) of committed rows:
    -- how far the wall clock was stepped (see gate/clock_steps.rs).
    CREATE TABLE boot_offsets (
        boot_id       TEXT PRIMARY KEY,
        min_offset    INTEGER NOT NULL,
        max_offset    INTEGER NOT NULL
    );
    CREATE INDEX ledger_time ON ledger (captured_ms);
    CREATE TABLE audit (
        seq           INTEGER PRIMARY KEY,
        scan_uuid     TEXT    NOT NULL,
        content_key   TEXT,
        record        TEXT    NOT NULL,
        prev_hash     TEXT    NOT NULL,
        hash          TEXT    NOT NULL
    );
    CREATE INDEX audit_scan ON audit (scan_uuid);
    CREATE TABLE meta (
        key           TEXT PRIMARY KEY,
        value         TEXT NOT NULL
    );
    "#,
    // 2: the facility store's backlog (scans waiting for Redis), by capture time.
    r#"
    CREATE INDEX scans_unresolved ON scans (captured_ms, boot_ns, scan_uuid)
        WHERE state = 'unresolved';
    "#,
    // 3: the exact index, time bucket first. `ledger_key` led with the random
    // content-key prefix, so every commit wrote one random index page (~8 KB
    // of WAL and checkpoint writes per scan, most of the I/O of a replay).
    // Led by a ~8 s bucket of the time it is searched by, inserts land on
    // the few pages of the current bucket; a lookup seeks one or two buckets.
    // Same-boot twins are found on the boot clock (`ledger_boot`, 2^33 ns
    // buckets), others on the wall clock (`ledger_wall`, 2^13 ms buckets).
    // Queries must repeat the bucket expressions exactly.
    r#"
    CREATE INDEX ledger_wall ON ledger (captured_ms >> 13, key_prefix, captured_ms);
    CREATE INDEX ledger_boot ON ledger (boot_id, boot_ns >> 33, key_prefix, boot_ns);
    DROP INDEX ledger_key;
    "#,
    // 4: backlog scans stamped on a wall clock the kernel did not call
    // synchronised (no trusted place in capture order), by content key: a new scan with the same key
    // must not be claimed ahead of them (`FacilityGate::pick`: a scan is held back behind them).
    // Tiny: only such scans are in it.
    r#"
    CREATE INDEX scans_unsynced ON scans (content_key)
        WHERE state = 'unresolved' AND clock_synced = 0;
    "#,
    // 5: the facility clock as measured against each boot's clock
    // (claimer/facility_time.rs): captures are mapped to facility time through
    // them, also after a restart.
    r#"
    CREATE TABLE clock_samples (
        boot_id        TEXT    NOT NULL,
        boot_ms        INTEGER NOT NULL,
        boot_offset_us INTEGER NOT NULL,
        bound_us       INTEGER NOT NULL,
        at_ms          INTEGER NOT NULL,
        PRIMARY KEY (boot_id, boot_ms)
    ) WITHOUT ROWID;
    "#,
    // 6: retention (audit/archive/): the archives `audit prune` verified
    // against this database and pruned by, owned by the audit stage.
    r#"
    CREATE TABLE audit_archives (
        content_sha256 TEXT    PRIMARY KEY,
        first_seq      INTEGER NOT NULL,
        last_seq       INTEGER NOT NULL,
        prev_hash      TEXT    NOT NULL,
        last_hash      TEXT    NOT NULL,
        records        INTEGER NOT NULL,
        ledger_entries INTEGER NOT NULL,
        until          TEXT    NOT NULL,
        file           TEXT    NOT NULL,
        registered_ms  INTEGER NOT NULL
    );
    "#,
    // 7: unserialised labels and the operator. A scan carries
    // how it is judged, fixed at its read so a replay judges it as live:
    // its own echo window (`window_ms`, NULL: the gateway's), the policy
    // its scanner applied to a label without a serial (`unserialised`),
    // whether its scanner may be resending an unacknowledged frame
    // (`resend`), a control label read (`control`; `control_end` once a
    // read followed it or it lapsed), a read the operator declared with
    // one (`declared`, `declared_by` the control's scan), and, once
    // suppressed, whether that echo was ambiguous. A control
    // read's state is `control`, which the old CHECK refused: the table
    // is rebuilt (SQLite cannot alter a CHECK) without it — `ScanState`
    // refuses an unknown state on every read, and the CHECK made SQLite
    // build a throw-away index on every INSERT and UPDATE of a scan.
    r#"
    CREATE TABLE scans_v7 (
        seq           INTEGER PRIMARY KEY,
        scan_uuid     TEXT    NOT NULL UNIQUE,
        scanner       TEXT    NOT NULL,
        scan_type     TEXT    NOT NULL,
        quantity      INTEGER NOT NULL,
        captured_ms   INTEGER NOT NULL,
        boot_id       TEXT    NOT NULL,
        boot_ns       INTEGER NOT NULL,
        clock_synced  INTEGER NOT NULL,
        raw           BLOB    NOT NULL,
        symbology     TEXT,
        gtin          TEXT,
        ndc10         TEXT,
        lot           TEXT,
        serial        TEXT,
        expiry        TEXT,
        content_key   TEXT,
        reject_reason TEXT,
        state         TEXT    NOT NULL DEFAULT 'pending',
        twin_uuid     TEXT,
        decided_ms    INTEGER,
        window_ms     INTEGER,
        unserialised  TEXT,
        resend        INTEGER NOT NULL DEFAULT 0,
        control       TEXT,
        declared      TEXT,
        declared_by   TEXT,
        control_end   TEXT,
        ambiguous     INTEGER
    );
    INSERT INTO scans_v7 (seq, scan_uuid, scanner, scan_type, quantity,
        captured_ms, boot_id, boot_ns, clock_synced, raw, symbology, gtin,
        ndc10, lot, serial, expiry, content_key, reject_reason, state,
        twin_uuid, decided_ms)
    SELECT seq, scan_uuid, scanner, scan_type, quantity, captured_ms,
        boot_id, boot_ns, clock_synced, raw, symbology, gtin, ndc10, lot,
        serial, expiry, content_key, reject_reason, state, twin_uuid,
        decided_ms
    FROM scans;
    DROP TABLE scans;
    ALTER TABLE scans_v7 RENAME TO scans;
    CREATE INDEX scans_pending ON scans (captured_ms, boot_ns, scan_uuid)
        WHERE state = 'pending';
    CREATE INDEX scans_twin ON scans (twin_uuid) WHERE twin_uuid IS NOT NULL;
    CREATE INDEX scans_unresolved ON scans (captured_ms, boot_ns, scan_uuid)
        WHERE state = 'unresolved';
    CREATE INDEX scans_unsynced ON scans (content_key)
        WHERE state = 'unresolved' AND clock_synced = 0;
    -- Control reads not yet followed by a read nor lapsed: tiny.
    CREATE INDEX scans_control_open ON scans (scanner, captured_ms)
        WHERE state = 'control' AND control_end IS NULL;
    "#,
    // 8: lean rows. Identifiers and hashes as the bytes they
    // are (store/packed.rs): a canonical UUID as a 16-byte BLOB, a 64-digit
    // lowercase hex key or hash as a 32-byte BLOB, any other text kept as
    // it was, so everything reads back as written. The ledger and the
    // audit trail are rebuilt in place (SQLite cannot change a column's
    // type), in this migration's one transaction.
    // The audit trail drops what repeats its record or its neighbour:
    // `content_key` (in the record; rows where the column differed from
    // the record are kept in `audit_unmatched_keys`, so `audit verify`
    // still names them), and `prev_hash` where it is the previous row's
    // `hash` (NULL: "the hash of the row before"; a value is kept only
    // where it says something: the first row after a prune, and any row
    // that does not link). New records are stored packed
    // (audit/stored.rs); the chain still hashes their canonical JSON.
    // `key_prefix` becomes the key's first 4 bytes (was 8: `>> 32` keeps
    // the top 4 as a signed integer, as `ledger::key_prefix` makes it):
    // 4 bytes less in the row and in each exact index.
    // Indexes, and the queries each serves (EXPLAIN QUERY PLAN: the
    // tests in store/schema.rs and ledger.rs):
    // - ledger's `scan_uuid` UNIQUE: an entry by scan (`ledger::has_entry`,
    //   `scan_of`, `entry_for_scan`, `prune_entry`, trace and verify).
    // - `ledger_wall`, `ledger_boot`: the exact lookup (`ledger::find_twin`).
    // - `ledger_time`: entries by capture time (`ledger::keys_since`, the
    //   Bloom filter rebuilt at every start: without it every start reads
    //   the whole ledger). (`scans_since` and `for_each` ask for ledger
    //   order, `ORDER BY seq`: SQLite walks the table rather than sort.)
    // - `audit_scan`: a scan's records (`audit::records_for_scan`: trace,
    //   `verify_ledger`, conflicts, prune's dedup horizon).
    r#"
    CREATE TABLE ledger_v8 (
        seq           INTEGER PRIMARY KEY,
        scan_uuid     BLOB    NOT NULL UNIQUE,
        gateway       TEXT    NOT NULL,
        scanner       TEXT    NOT NULL,
        captured_ms   INTEGER NOT NULL,
        boot_id       BLOB    NOT NULL,
        boot_ns       INTEGER NOT NULL,
        clock_synced  INTEGER NOT NULL,
        scan_type     TEXT    NOT NULL,
        quantity      INTEGER NOT NULL,
        gtin          TEXT,
        ndc10         TEXT,
        lot           TEXT,
        serial        TEXT,
        expiry        TEXT,
        symbology     TEXT    NOT NULL,
        content_key   BLOB    NOT NULL,
        key_prefix    INTEGER NOT NULL
    );
    INSERT INTO ledger_v8
    SELECT seq, CASE WHEN scan_uuid GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]' THEN unhex(replace(scan_uuid, '-', '')) WHEN length(scan_uuid) = 64 AND scan_uuid NOT GLOB '*[^0-9a-f]*' THEN unhex(scan_uuid) ELSE scan_uuid END, gateway, scanner, captured_ms, CASE WHEN boot_id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]' THEN unhex(replace(boot_id, '-', '')) WHEN length(boot_id) = 64 AND boot_id NOT GLOB '*[^0-9a-f]*' THEN unhex(boot_id) ELSE boot_id END,
        boot_ns, clock_synced, scan_type, quantity, gtin, ndc10, lot, serial,
        expiry, symbology, CASE WHEN content_key GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]' THEN unhex(replace(content_key, '-', '')) WHEN length(content_key) = 64 AND content_key NOT GLOB '*[^0-9a-f]*' THEN unhex(content_key) ELSE content_key END, key_prefix >> 32
    FROM ledger ORDER BY seq;
    DROP TABLE ledger;
    ALTER TABLE ledger_v8 RENAME TO ledger;
    CREATE INDEX ledger_wall ON ledger (captured_ms >> 13, key_prefix, captured_ms);
    CREATE INDEX ledger_boot ON ledger (boot_id, boot_ns >> 33, key_prefix, boot_ns);
    CREATE INDEX ledger_time ON ledger (captured_ms);
    CREATE TABLE audit_unmatched_keys (
        seq           INTEGER PRIMARY KEY,
        content_key   TEXT
    );
    INSERT INTO audit_unmatched_keys
    SELECT seq, content_key FROM audit
    WHERE json_valid(record) AND (record ->> '$.content_key') IS NOT content_key;
    CREATE TABLE audit_v8 (
        seq           INTEGER PRIMARY KEY,
        scan_uuid     BLOB    NOT NULL,
        record        BLOB    NOT NULL,
        prev_hash     BLOB,
        hash          BLOB    NOT NULL
    );
    INSERT INTO audit_v8 (seq, scan_uuid, record, prev_hash, hash)
    SELECT seq, CASE WHEN scan_uuid GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]' THEN unhex(replace(scan_uuid, '-', '')) WHEN length(scan_uuid) = 64 AND scan_uuid NOT GLOB '*[^0-9a-f]*' THEN unhex(scan_uuid) ELSE scan_uuid END, record,
        CASE WHEN prev_hash IS coalesce(lag(hash) OVER (ORDER BY seq),
                CASE WHEN seq = 1 THEN '0000000000000000000000000000000000000000000000000000000000000000' END)
            THEN NULL ELSE CASE WHEN prev_hash GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]' THEN unhex(replace(prev_hash, '-', '')) WHEN length(prev_hash) = 64 AND prev_hash NOT GLOB '*[^0-9a-f]*' THEN unhex(prev_hash) ELSE prev_hash END END,
        CASE WHEN hash GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]' THEN unhex(replace(hash, '-', '')) WHEN length(hash) = 64 AND hash NOT GLOB '*[^0-9a-f]*' THEN unhex(hash) ELSE hash END
    FROM audit ORDER BY seq;
    DROP TABLE audit;
    ALTER TABLE audit_v8 RENAME TO audit;
    CREATE INDEX audit_scan ON audit (scan_uuid);
    "#,
    // 9: ledger consumers (ledger/cursor.rs): each one's durable cursor,
    // the last entry it acknowledged (`acked_seq`, and its scan so that a
    // ledger whose positions started again after a prune is noticed).
    // Written by `ledger export --follow --consumer` beside the daemon,
    // one tiny row per consumer; `audit prune` keeps what they owe.
    r#"
    CREATE TABLE ledger_consumers (
        name          TEXT    PRIMARY KEY,
        acked_seq     INTEGER NOT NULL DEFAULT 0,
        acked_uuid    TEXT,
        acked_ms      INTEGER,
        registered_ms INTEGER NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 10: each `[[sink]]`'s held batch (sink/held.rs): the exact body and
    // `Idempotency-Key` of the batch it POSTs, stored before the first
    // POST so that every retry (also after a restart) sends the same;
    // removed with the cursor's move after a 2xx. One row per sink.
    r#"
    CREATE TABLE sink_batches (
        sink             TEXT    PRIMARY KEY,
        first_seq        INTEGER NOT NULL,
        last_seq         INTEGER NOT NULL,
        last_uuid        TEXT    NOT NULL,
        entries          INTEGER NOT NULL,
        key              TEXT    NOT NULL,
        format           TEXT    NOT NULL,
        body             BLOB    NOT NULL,
        held_ms          INTEGER NOT NULL,
        attempts         INTEGER NOT NULL DEFAULT 0,
        last_kind        TEXT,
        last_error       TEXT,
        last_attempt_ms  INTEGER,
        failing_since_ms INTEGER,
        blocked          INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID;
    "#,
    // 11: lean outbox rows. The `scans` table's identifiers
    // packed as migration 8 packed the ledger's (store/packed.rs): the
    // scan's and its twin's UUIDs, the boot id and the control read a
    // declared read names as 16 bytes, the content key as 32 (~110 B a
    // row less, and 20 B in its UNIQUE index). Canonical UUIDs sort as
    // their bytes do, so the open states' indexes keep capture order.
    // `ledger_time` goes: the Bloom filter's rebuild at start
    // (`ledger::keys_since`) reads the same range through `ledger_wall`,
    // whose first column is the time's 8 s bucket — one b-tree fewer for
    // every commit to write.
    r#"
    CREATE TABLE scans_v11 (
        seq           INTEGER PRIMARY KEY,
        scan_uuid     BLOB    NOT NULL UNIQUE,
        scanner       TEXT    NOT NULL,
        scan_type     TEXT    NOT NULL,
        quantity      INTEGER NOT NULL,
        captured_ms   INTEGER NOT NULL,
        boot_id       BLOB    NOT NULL,
        boot_ns       INTEGER NOT NULL,
        clock_synced  INTEGER NOT NULL,
        raw           BLOB    NOT NULL,
        symbology     TEXT,
        gtin          TEXT,
        ndc10         TEXT,
        lot           TEXT,
        serial        TEXT,
        expiry        TEXT,
        content_key   BLOB,
        reject_reason TEXT,
        state         TEXT    NOT NULL DEFAULT 'pending',
        twin_uuid     BLOB,
        decided_ms    INTEGER,
        window_ms     INTEGER,
        unserialised  TEXT,
        resend        INTEGER NOT NULL DEFAULT 0,
        control       TEXT,
        declared      TEXT,
        declared_by   BLOB,
        control_end   TEXT,
        ambiguous     INTEGER
    );
    INSERT INTO scans_v11
    SELECT seq,
        CASE WHEN scan_uuid GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]' THEN unhex(replace(scan_uuid, '-', '')) WHEN length(scan_uuid) = 64 AND scan_uuid NOT GLOB '*[^0-9a-f]*' THEN unhex(scan_uuid) ELSE scan_uuid END,
        scanner,
        scan_type,
        quantity,
        captured_ms,
        CASE WHEN boot_id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]' THEN unhex(replace(boot_id, '-', '')) WHEN length(boot_id) = 64 AND boot_id NOT GLOB '*[^0-9a-f]*' THEN unhex(boot_id) ELSE boot_id END,
        boot_ns,
        clock_synced,
        raw,
        symbology,
        gtin,
        ndc10,
        lot,
        serial,
        expiry,
        CASE WHEN content_key GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]' THEN unhex(replace(content_key, '-', '')) WHEN length(content_key) = 64 AND content_key NOT GLOB '*[^0-9a-f]*' THEN unhex(content_key) ELSE content_key END,
        reject_reason,
        state,
        CASE WHEN twin_uuid GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]' THEN unhex(replace(twin_uuid, '-', '')) WHEN length(twin_uuid) = 64 AND twin_uuid NOT GLOB '*[^0-9a-f]*' THEN unhex(twin_uuid) ELSE twin_uuid END,
        decided_ms,
        window_ms,
        unserialised,
        resend,
        control,
        declared,
        CASE WHEN declared_by GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]' THEN unhex(replace(declared_by, '-', '')) WHEN length(declared_by) = 64 AND declared_by NOT GLOB '*[^0-9a-f]*' THEN unhex(declared_by) ELSE declared_by END,
        control_end,
        ambiguous
    FROM scans ORDER BY seq;
    DROP TABLE scans;
    ALTER TABLE scans_v11 RENAME TO scans;
    CREATE INDEX scans_pending ON scans (captured_ms, boot_ns, scan_uuid)
        WHERE state = 'pending';
    CREATE INDEX scans_twin ON scans (twin_uuid) WHERE twin_uuid IS NOT NULL;
    CREATE INDEX scans_unresolved ON scans (captured_ms, boot_ns, scan_uuid)
        WHERE state = 'unresolved';
    CREATE INDEX scans_unsynced ON scans (content_key)
        WHERE state = 'unresolved' AND clock_synced = 0;
    CREATE INDEX scans_control_open ON scans (scanner, captured_ms)
        WHERE state = 'control' AND control_end IS NULL;
    DROP INDEX ledger_time;
    "#,
    // 12: what the checks at the counter found, kept with each ledger
    // entry: the item's DEA schedule and its alerts (a JSON array). Adding
    // a column rewrites no row, whatever the ledger's size; entries
    // committed before have neither. And the alerts staff have not yet
    // acknowledged (checks/open.rs): no index but its key, as an alert
    // is written far more often than an ACKNOWLEDGE reads them.
    r#"
    ALTER TABLE ledger ADD COLUMN dea_schedule TEXT;
    ALTER TABLE ledger ADD COLUMN alerts TEXT;
    CREATE TABLE alerts_open (
        scan_uuid BLOB    PRIMARY KEY,
        scanner   TEXT    NOT NULL,
        kind      TEXT    NOT NULL,
        at_ms     INTEGER NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 13: the first `receive` read of each serialised item (GTIN +
    // serial), to tell a second one (checks/received.rs), pruned by its
    // time after `[checks] serial_retention_days`.
    r#"
    CREATE TABLE serials_received (
        gtin      TEXT    NOT NULL,
        serial    TEXT    NOT NULL,
        at_ms     INTEGER NOT NULL,
        gateway   TEXT    NOT NULL,
        scanner   TEXT    NOT NULL,
        scan_uuid BLOB    NOT NULL,
        PRIMARY KEY (gtin, serial)
    ) WITHOUT ROWID;
    CREATE INDEX serials_received_at ON serials_received (at_ms);
    "#,
];

// The schema version the build declares is the number of migrations.
const _: () = assert!(MIGRATIONS.len() as i64 == crate::build::SCHEMA_VERSION);
