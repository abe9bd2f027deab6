#!/usr/bin/env python3
"""Helper of benches/migration.sh (docs/benchmarks.md): a schema-1 state
with N reads, and one timed first start of the current release on it.

  migration_state.py make FIXTURE_DB OUT_DB --reads N [--span-hours H]
  migration_state.py run --bin BIN --template DB --work DIR [--fsync-delay-ms D --shim SO]

`make` copies the schema-1 fixture's database (9 scans, 6 ledger entries,
9 audit records) and replicates its rows with SQL, block after block of
nine reads in the fixture's pattern (5 committed, 2 echoes of the 1st and
3rd, 1 rejected, 1 committed: 2/3 committed, 2/9 suppressed, 1/9
rejected), every column taken from the fixture row it copies except:
scan_uuid (a new UUIDv7, text, as the release wrote them, its time the
capture's), captured_ms (spread evenly over the last --span-hours before
now, in seq order), decided_ms, boot_id/boot_ns (a boot a day, each in
boot_offsets), the serial (unique per label; an echo reads its twin's
label), raw (the template's with that serial), content_key (random per
committed read, an echo's that of its twin), twin_uuid. Each committed read
has its ledger entry (key_prefix from its key as the release computed it),
each read its audit record (the record JSON as the release wrote it; the
chain's hashes are computed as the release chains them, but the content
keys are random, so `audit verify` will not accept the synthetic rows: it
does not matter for timing a migration, which reads none of it). Rows are
written in batches of a few blocks, each batch's scans, ledger entries and
audit records in turn, so the tables' pages interleave in the file as a
gateway's writes leave them. PRAGMA user_version stays 1 and the file
stays in WAL mode, checkpointed (a lone scangate.db, as a stopped release
leaves it).

`run` copies the template into a new state directory (fsynced, then
dropped from the page cache: a cold first start), writes a config naming
it, starts `BIN run --config CFG --log-format json` (with the slowsync
shim preloaded when --fsync-delay-ms > 0), and stamps every stderr line
and sd_notify message (its own NOTIFY_SOCKET) on arrival, sampling the
state directory's allocated bytes (du) every 0.5 s. Once "database
migrated" is logged it waits for READY=1 (at most --ready-timeout s),
sends SIGTERM, waits for the exit, and prints one JSON line of figures.
"""
import argparse
import hashlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
import uuid

BLOCK = 9  # reads in the fixture's pattern


def rfc3339_ms(col):
    return (f"(strftime('%Y-%m-%dT%H:%M:%S', ({col}) / 1000, 'unixepoch')"
            f" || printf('.%03dZ', ({col}) % 1000))")


def key_prefix_sql(col):
    """The first 8 bytes of the hex key `col` as a signed 64-bit integer
    (the release's ledger::key_prefix), in SQL."""
    digit = lambda j: f"(instr('0123456789abcdef', substr({col}, {j}, 1)) - 1)"
    top = f"({digit(1)} - CASE WHEN {digit(1)} >= 8 THEN 16 ELSE 0 END) * {16 ** 15}"
    rest = " + ".join(f"{digit(j)} * {16 ** (16 - j)}" for j in range(2, 17))
    return f"({top} + {rest})"


def make(args):
    fixture, out = args.fixture_db, args.out_db
    n = args.reads - BLOCK  # the fixture's 9 reads, then the synthetic ones
    tmp = out + ".tmp"
    for p in (tmp, tmp + "-wal", tmp + "-shm"):
        if os.path.exists(p):
            os.remove(p)
    shutil.copyfile(fixture, tmp)
    c = sqlite3.connect(tmp, isolation_level=None)
    c.execute("PRAGMA synchronous = OFF")
    c.execute("PRAGMA cache_size = -65536")
    assert c.execute("PRAGMA user_version").fetchone()[0] == 1, "not a schema-1 database"
    assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    t_count = c.execute("SELECT count(*) FROM scans").fetchone()[0]
    assert t_count == BLOCK, f"the fixture has {t_count} scans, not {BLOCK}"
    pattern = [r[0] for r in c.execute("SELECT state FROM scans ORDER BY seq")]
    assert pattern == ["committed"] * 5 + ["suppressed"] * 2 + ["rejected", "committed"], pattern
    # Echo at position k (0-based) reads the label of position twin[k].
    twins = dict(c.execute(
        "SELECT e.seq - 1, t.seq - 1 FROM scans e JOIN scans t ON t.scan_uuid = e.twin_uuid"))
    assert twins == {5: 0, 6: 2}, twins
    # The release's chain, to check we compute it as it did.
    prev = "0" * 64
    for rec, ph, h in c.execute("SELECT record, prev_hash, hash FROM audit ORDER BY seq"):
        assert ph == prev and hashlib.sha256((prev + "\n" + rec).encode()).hexdigest() == h
        prev = h
    gateway = c.execute("SELECT gateway FROM ledger LIMIT 1").fetchone()[0]
    base = c.execute("SELECT max(seq) FROM scans").fetchone()[0]  # 9
    # The record JSON as the release wrote it: check on the fixture's own rows.
    record_sql = lambda s: f"""json_object('seq', {s}.seq, 'at', {rfc3339_ms(f'{s}.decided_ms')},
        'gateway', '{gateway}', 'scanner', {s}.scanner, 'scan_uuid', {s}.scan_uuid,
        'captured_at', {rfc3339_ms(f'{s}.captured_ms')},
        'clock_synced', json(CASE WHEN {s}.clock_synced THEN 'true' ELSE 'false' END),
        'decision', {s}.state, 'content_key', {s}.content_key, 'twin_uuid', {s}.twin_uuid,
        'reason', {s}.reject_reason, 'raw_len', length({s}.raw))"""
    bad = c.execute(f"SELECT count(*) FROM scans s JOIN audit a ON a.seq = s.seq "
                    f"WHERE {record_sql('s')} IS NOT a.record").fetchone()[0]
    assert bad == 0, f"{bad} fixture records differ from the SQL that makes them"
    bad = c.execute(f"SELECT count(*) FROM ledger WHERE {key_prefix_sql('content_key')} "
                    f"IS NOT key_prefix").fetchone()[0]
    assert bad == 0, "key_prefix SQL differs from the fixture's"

    state = {"prev": prev}

    def chain(record):
        h = hashlib.sha256((state["prev"] + "\n" + record).encode()).hexdigest()
        out = state["prev"] + h
        state["prev"] = h
        return out

    c.create_function("chain", 1, chain)
    end_ms = int(time.time() * 1000) if args.end_ms is None else args.end_ms
    span_ms = int(args.span_hours * 3600 * 1000)
    start_ms = end_ms - span_ms
    # A boot a day: its id (UUIDv4 text, as /proc/sys/kernel/random/boot_id)
    # and its wall - boot clock offset (booted 30 s before its first read).
    c.execute("CREATE TEMP TABLE boots (b INTEGER PRIMARY KEY, boot_id TEXT, offset_ms INTEGER)")
    day = 86_400_000
    for b in range((span_ms - 1) // day + 1):
        off = start_ms + b * day - 30_000
        c.execute("INSERT INTO temp.boots VALUES (?, ?, ?)", (b, str(uuid.uuid4()), off))
        c.execute("INSERT INTO boot_offsets VALUES ((SELECT boot_id FROM temp.boots WHERE b = ?), ?, ?)",
                  (b, off, off))
    # Read i (0-based, seq base+1+i): template row i % 9 + 1; its label L is
    # its own index, or its twin's for an echo.
    ms = f"({start_ms} + (r.i * {span_ms}) / {n})"
    label = "(r.i - CASE r.i % 9 WHEN 5 THEN 5 WHEN 6 THEN 4 ELSE 0 END)"
    serial = f"printf('X%07X', {label})"
    insert_scans = f"""
    WITH RECURSIVE r(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM r WHERE i + 1 < ?2),
    g AS MATERIALIZED (
        SELECT r.i AS i, {ms} AS ms, lower(hex(randomblob(10))) AS h,
               lower(hex(randomblob(32))) AS key, {serial} AS serial
        FROM r)
    INSERT INTO scans (seq, scan_uuid, scanner, scan_type, quantity, captured_ms, boot_id,
        boot_ns, clock_synced, raw, symbology, gtin, ndc10, lot, serial, expiry, content_key,
        reject_reason, state, twin_uuid, decided_ms)
    SELECT {base} + 1 + g.i,
        printf('%08x-%04x-7%s-%x%s-%s', g.ms >> 16, g.ms & 65535, substr(g.h, 1, 3),
               8 + (unicode(substr(g.h, 4, 1)) % 4), substr(g.h, 5, 3), substr(g.h, 8, 12)),
        t.scanner, t.scan_type, t.quantity, g.ms, b.boot_id,
        (g.ms - b.offset_ms) * 1000000 + (g.i * 7919) % 1000000, t.clock_synced,
        CAST(substr(CAST(t.raw AS TEXT), 1, length(t.raw) - 8) || g.serial AS BLOB),
        t.symbology, t.gtin, t.ndc10, t.lot,
        CASE WHEN t.serial IS NULL THEN NULL ELSE g.serial END, t.expiry,
        CASE t.state WHEN 'committed' THEN g.key ELSE NULL END,
        t.reject_reason, t.state, NULL, g.ms + g.i % 2
    FROM g JOIN main.scans t ON t.seq = g.i % 9 + 1
    JOIN temp.boots b ON b.b = (g.ms - {start_ms}) / {day}
    ORDER BY g.i
    """
    twin_of = f"(SELECT {{col}} FROM scans w WHERE w.seq = scans.seq - CASE (scans.seq - {base} - 1) % 9 WHEN 5 THEN 5 ELSE 4 END)"
    fix_echoes = f"""
    UPDATE scans SET twin_uuid = {twin_of.format(col='scan_uuid')},
                     content_key = {twin_of.format(col='content_key')}
    WHERE seq BETWEEN ?1 AND ?2 AND state = 'suppressed'
    """
    insert_ledger = f"""
    INSERT INTO ledger (scan_uuid, gateway, scanner, captured_ms, boot_id, boot_ns, clock_synced,
        scan_type, quantity, gtin, ndc10, lot, serial, expiry, symbology, content_key, key_prefix)
    SELECT scan_uuid, '{gateway}', scanner, captured_ms, boot_id, boot_ns, clock_synced,
        scan_type, quantity, gtin, ndc10, lot, serial, expiry, symbology, content_key,
        {key_prefix_sql('content_key')}
    FROM scans WHERE seq BETWEEN ?1 AND ?2 AND state = 'committed' ORDER BY seq
    """
    insert_audit = f"""
    WITH a AS MATERIALIZED (
        SELECT s.seq AS seq, s.scan_uuid AS scan_uuid, s.content_key AS content_key,
               {record_sql('s')} AS record
        FROM scans s WHERE s.seq BETWEEN ?1 AND ?2 ORDER BY s.seq),
    h AS MATERIALIZED (SELECT seq, scan_uuid, content_key, record, chain(record) AS ph FROM a ORDER BY seq)
    INSERT INTO audit (seq, scan_uuid, content_key, record, prev_hash, hash)
    SELECT seq, scan_uuid, content_key, record, substr(ph, 1, 64), substr(ph, 65) FROM h ORDER BY seq
    """
    batch = BLOCK * args.blocks_per_batch
    t0 = time.monotonic()
    c.execute("BEGIN")
    for lo in range(0, n, batch):
        hi = min(n, lo + batch)
        c.execute(insert_scans, (lo, hi))
        c.execute(fix_echoes, (base + 1 + lo, base + hi))
        c.execute(insert_ledger, (base + 1 + lo, base + hi))
        c.execute(insert_audit, (base + 1 + lo, base + hi))
        if (lo // batch) % 500 == 499:
            c.execute("COMMIT")
            c.execute("BEGIN")
            print(f"  {hi} of {n} reads, {time.monotonic() - t0:.0f} s", file=sys.stderr)
    c.execute("COMMIT")
    seq, h = c.execute("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1").fetchone()
    assert h == state["prev"]
    c.execute("UPDATE meta SET value = ? WHERE key = 'audit_head'", (f"{seq} {h}",))
    # Checks: the ratios, one ledger entry per committed read, echoes name
    # a committed twin with their key.
    counts = dict(c.execute("SELECT state, count(*) FROM scans GROUP BY state"))
    ledger = c.execute("SELECT count(*) FROM ledger").fetchone()[0]
    audit = c.execute("SELECT count(*) FROM audit").fetchone()[0]
    assert ledger == counts["committed"] and audit == sum(counts.values())
    bad = c.execute("""SELECT count(*) FROM scans e LEFT JOIN scans t ON t.scan_uuid = e.twin_uuid
        WHERE e.state = 'suppressed' AND (t.state IS NOT 'committed' OR t.content_key IS NOT e.content_key
        OR t.serial IS NOT e.serial)""").fetchone()[0]
    assert bad == 0, f"{bad} echoes without their twin"
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()
    for p in (tmp + "-wal", tmp + "-shm"):
        if os.path.exists(p):
            os.remove(p)
    os.replace(tmp, out)
    with open(out + ".json", "w") as f:
        json.dump({"reads": args.reads, "synthetic_reads": n, "scans_by_state": counts,
                   "ledger": ledger, "audit": audit, "start_ms": start_ms, "end_ms": end_ms,
                   "bytes": os.path.getsize(out), "made_at": time.time(),
                   "made_in_s": round(time.monotonic() - t0, 1)}, f)
    print(f"made {out}: {sum(counts.values())} scans {counts}, {ledger} ledger entries, "
          f"{audit} audit records, {os.path.getsize(out)} bytes, {time.monotonic() - t0:.0f} s",
          file=sys.stderr)


def allocated(d):
    """Allocated bytes under d (as du -B1), and each file's apparent size."""
    total, files = 0, {}
    try:
        for e in os.scandir(d):
            try:
                st = e.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            total += st.st_blocks * 512
            files[e.name] = st.st_size
    except FileNotFoundError:
        pass
    return total, files


def run(args):
    work = args.work
    state = os.path.join(work, "state")
    shutil.rmtree(state, ignore_errors=True)
    os.makedirs(state)
    db = os.path.join(state, "scangate.db")
    shutil.copyfile(args.template, db)
    fd = os.open(db, os.O_RDONLY)
    os.fsync(fd)
    if not args.warm:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    before = os.path.getsize(db)
    cfg = os.path.join(work, "scangate.toml")
    with open(cfg, "w") as f:
        f.write(f'[gateway]\nfacility = "fixture-pharmacy"\nid = "fixture-gw"\nstate_dir = "{state}"\n\n'
                f'[dedup]\nwindow_ms = 60000\nretention_hours = 72\n')
    sock_path = os.path.join(work, "notify.sock")
    if os.path.exists(sock_path):
        os.remove(sock_path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(0.2)
    env = dict(os.environ, NOTIFY_SOCKET=sock_path)
    env.pop("JOURNAL_STREAM", None)
    if args.fsync_delay_ms > 0:
        env["LD_PRELOAD"] = args.shim
        env["SCANGATE_FSYNC_DELAY_MS"] = str(args.fsync_delay_ms)
    log_path = os.path.join(work, "daemon.log")
    log = open(log_path, "w")
    events = []  # (t, kind, payload)
    lock = threading.Lock()
    done = threading.Event()
    migrated = threading.Event()
    ready = threading.Event()
    t0 = time.monotonic()
    proc = subprocess.Popen([args.bin, "--log-format", "json", "run", "--config", cfg],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)

    def read_stderr():
        for raw in proc.stderr:
            t = time.monotonic() - t0
            line = raw.decode("utf-8", "replace")
            log.write(f"{t:10.3f} {line}")
            try:
                ev = json.loads(line)
            except ValueError:
                ev = {"message": line.strip()}
            with lock:
                events.append((t, "log", ev))
            if str(ev.get("message", "")).startswith("database migrated"):
                migrated.set()

    def read_notify():
        while not done.is_set():
            try:
                msg = sock.recv(4096).decode("utf-8", "replace")
            except socket.timeout:
                continue
            t = time.monotonic() - t0
            with lock:
                events.append((t, "notify", msg))
            if "READY=1" in msg.split("\n"):
                ready.set()

    samples = []
    io = {}  # the daemon's /proc/PID/io: the last sample, and the first after "database migrated"

    def read_io():
        try:
            with open(f"/proc/{proc.pid}/io") as f:
                return {k: int(v) for k, v in (l.split(": ") for l in f)}
        except (OSError, ValueError):
            return None

    def sample():
        while not done.is_set():
            t = time.monotonic() - t0
            total, files = allocated(state)
            samples.append((t, total, files))
            now = read_io()
            if now and proc.poll() is None:
                io["last"] = now
                if migrated.is_set() and "migrated" not in io:
                    io["migrated"] = now
            done.wait(0.5)

    threads = [threading.Thread(target=f, daemon=True) for f in (read_stderr, read_notify, sample)]
    for th in threads:
        th.start()
    deadline = t0 + args.timeout
    while not migrated.is_set() and proc.poll() is None and time.monotonic() < deadline:
        migrated.wait(0.2)
    t_migrated_seen = time.monotonic() - t0 if migrated.is_set() else None
    if migrated.is_set():
        ready.wait(args.ready_timeout)
    t_term = time.monotonic() - t0
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(args.stop_timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    t_exit = time.monotonic() - t0
    done.set()
    for th in threads:
        th.join(5)
    log.close()
    sock.close()
    os.remove(sock_path)

    def first(pred):
        with lock:
            for t, kind, ev in events:
                if kind == "log" and pred(str(ev.get("message", ""))):
                    return t, ev
        return None, None

    t_migrating, _ = first(lambda m: m.startswith("migrating the database from schema"))
    t_kept, ev_kept = first(lambda m: m.startswith("the database as it was before the migration"))
    t_nocopy, _ = first(lambda m: m.startswith("no copy of the database is kept"))
    t_done, ev_done = first(lambda m: m.startswith("database migrated"))
    t_ready = next((t for t, k, m in events if k == "notify" and "READY=1" in m.split("\n")), None)
    with lock:
        progress = [(t, ev.get("step"), ev.get("elapsed_s")) for t, k, ev in events
                    if k == "log" and str(ev.get("message", "")).startswith("migrating: schema")]
        errors = [ev.get("message") for t, k, ev in events
                  if k == "log" and ev.get("level") in ("ERROR", "WARN")]
    peak = max(samples, key=lambda s: s[1]) if samples else (None, 0, {})
    total_after, files_after = allocated(state)
    copies = [f for f in files_after if f.startswith("scangate.db.schema-")]
    meta = {}
    if os.path.exists(args.template + ".json"):
        with open(args.template + ".json") as f:
            meta = json.load(f)
    r = {
        "label": args.label,
        "reads": meta.get("reads"),
        "fsync_delay_ms": args.fsync_delay_ms,
        "rc": rc,
        "db_before_bytes": before,
        "t_migrating_line_s": t_migrating,   # process start -> "migrating" (page check, identity, count)
        "copy_s": (t_kept - t_migrating) if t_kept and t_migrating else None,
        "migrations_s": (t_done - (t_kept or t_nocopy or t_migrating)) if t_done else None,
        "logged_total_s": (ev_done.get("elapsed_ms") / 1000) if ev_done else None,
        "t_migrated_line_s": t_done,
        "t_ready_s": t_ready,
        "t_exit_s": t_exit,
        "stop_s": t_exit - t_term,
        "copy_bytes": ev_kept.get("bytes") if ev_kept else None,
        "no_copy": t_nocopy is not None,
        "peak_du_bytes": peak[1],
        "peak_at_s": peak[0],
        "peak_files": peak[2],
        "after_files": files_after,
        "after_du_bytes": total_after,
        "progress": progress,
        # Bytes the daemon read from / caused to be written to the disk
        # (/proc/PID/io read_bytes, write_bytes; sampled every 0.5 s).
        "io_at_migrated": {k: io["migrated"][k] for k in ("read_bytes", "write_bytes")} if "migrated" in io else None,
        "io_last": {k: io["last"][k] for k in ("read_bytes", "write_bytes")} if "last" in io else None,
        "warnings": errors[:10],
        "log": log_path,
    }
    # The file after the daemon stopped: pages and free pages.
    try:
        c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        r["after_pages"], r["after_free_pages"], r["after_user_version"] = (
            c.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_count", "freelist_count", "user_version"))
        c.close()
    except sqlite3.Error as e:
        r["after_error"] = str(e)
    if not args.keep:
        for f in copies:
            os.remove(os.path.join(state, f))
    print(json.dumps(r))


def summary(args):
    rows = [json.loads(l) for l in open(args.results) if l.strip()]
    mib = lambda b: f"{b / 2**20:.0f}" if b is not None else "-"
    f1 = lambda x: f"{x:.1f}" if x is not None else "-"
    print("| run | profile | reads | migrating line at s | copy s | migrations s | logged total s | READY at s | "
          "db before MiB | copy MiB | db after MiB (free) | peak du MiB | rc |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        prof = "plain" if r["fsync_delay_ms"] == 0 else f"fsync {r['fsync_delay_ms']} ms"
        after = r["after_files"].get("scangate.db")
        free = (r.get("after_free_pages") or 0) * 4096
        print(f"| {r.get('label', '')} | {prof} | {r.get('reads')} | {f1(r['t_migrating_line_s'])} | "
              f"{f1(r['copy_s'])} | {f1(r['migrations_s'])} | {f1(r['logged_total_s'])} | "
              f"{f1(r['t_ready_s'])} | {mib(r['db_before_bytes'])} | {mib(r['copy_bytes'])} | "
              f"{mib(after)} ({mib(free)}) | {mib(r['peak_du_bytes'])} | {r['rc']} |")
    groups = {}
    for r in rows:
        groups.setdefault((r.get("reads"), r["fsync_delay_ms"]), []).append(r)
    print()
    print("| reads | profile | runs | logged total s min / median / max | copy s | migrations s | per million reads (median total) |")
    print("|---|---|---|---|---|---|---|")
    for (n, d), rs in sorted(groups.items()):
        def mmm(k):
            v = [r[k] for r in rs if r[k] is not None]
            return "/".join(f"{x:.1f}" for x in (min(v), statistics.median(v), max(v))) if v else "-"
        med = statistics.median(r["logged_total_s"] for r in rs if r["logged_total_s"] is not None)
        prof = "plain" if d == 0 else f"fsync {d} ms"
        print(f"| {n} | {prof} | {len(rs)} | {mmm('logged_total_s')} | {mmm('copy_s')} | "
              f"{mmm('migrations_s')} | {med / n * 1e6:.1f} s |")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("fixture_db")
    m.add_argument("out_db")
    m.add_argument("--reads", type=int, required=True, help="reads in all, the fixture's 9 included")
    m.add_argument("--span-hours", type=float, default=72)
    m.add_argument("--end-ms", type=int)
    m.add_argument("--blocks-per-batch", type=int, default=4)
    r = sub.add_parser("run")
    r.add_argument("--bin", required=True)
    r.add_argument("--template", required=True)
    r.add_argument("--work", required=True)
    r.add_argument("--fsync-delay-ms", type=float, default=0)
    r.add_argument("--shim")
    r.add_argument("--label", default="")
    r.add_argument("--warm", action="store_true", help="leave the copied database in the page cache")
    r.add_argument("--keep", action="store_true", help="keep the copy the migration made")
    r.add_argument("--timeout", type=float, default=3600)
    r.add_argument("--ready-timeout", type=float, default=300)
    r.add_argument("--stop-timeout", type=float, default=120)
    s = sub.add_parser("summary")
    s.add_argument("results")
    a = p.parse_args()
    {"make": make, "run": run, "summary": summary}[a.cmd](a)


if __name__ == "__main__":
    main()
