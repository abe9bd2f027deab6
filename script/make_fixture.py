#!/usr/bin/env python3
"""Write one upgrade fixture by driving an earlier release's own binary.

Called by script/make-fixtures (read its header first); runnable alone:

    script/make_fixture.py --bin BIN --worktree WT --commit SHA --schema N \
        --mode embedded|facility --out tests/fixtures/states/NAME --scratch DIR

It creates a PTY pair (the slave is the scanner's device), writes the
release's config (scangate.toml, kept in the fixture with @STATE@, @PTY@ and
@PORT@ placeholders), starts `BIN run --config FILE` on a fresh state
directory, sends frames as a scanner would (CR-terminated, ACK/NAK read back
when the release has `ack`), waits for each to be decided (or stored, in
facility mode) by polling a read-only SQLite connection, then stops the
daemon (SIGTERM, embedded) or kills it (SIGKILL, facility), copies the state
directory's files into --out (all but scangate.lock and status.json), and
writes fixture.json from the database as left (read through a scratch copy:
the fixture's files are never opened by SQLite).
"""

import argparse
import datetime
import json
import os
import select
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import tty

ACK = 0x06
NAK = 0x15
GS = "\x1d"
CR = "\r"
TIMEOUT = 30.0  # seconds any awaited event may take
SKIP = {"scangate.lock", "status.json"}  # runtime files, not state

FACILITY = "fixture-pharmacy"
GATEWAY = "fixture-gw"
SCANNER = "counter-1"
WINDOW_MS = 60000


def die(msg):
    sys.stderr.write(f"make_fixture: {msg}\n")
    sys.exit(1)


def log(msg):
    sys.stderr.write(f"  {msg}\n")
    sys.stderr.flush()


# ---------------------------------------------------------------- labels


def gtin_check(body13):
    """GS1 mod-10 check digit of the 13 digits before it."""
    total = sum(int(d) * (3 if i % 2 == 0 else 1) for i, d in enumerate(reversed(body13)))
    return str((10 - total % 10) % 10)


def gtin14(body13):
    return body13 + gtin_check(body13)


# NDC 0777-3105-02 (the suite's GTIN, 00307773105025) and NDC 0002-1433-80.
GTIN_A = gtin14("0030777310502")
GTIN_B = gtin14("0030002143380")
assert GTIN_A == "00307773105025", GTIN_A


def dscsa(gtin, lot, serial, expiry="281231"):
    """A serialised GS1 DataMatrix element string, AIM ]d2."""
    return f"]d201{gtin}17{expiry}10{lot}{GS}21{serial}"


def bad_check_digit(gtin):
    return gtin[:-1] + str((int(gtin[-1]) + 1) % 10)


def embedded_plan():
    """(frame text without terminator, expected decision) in sending order."""
    labels = [
        dscsa(GTIN_A, "LOTA1", "FXSN0001"),
        dscsa(GTIN_A, "LOTA1", "FXSN0002"),
        dscsa(GTIN_B, "LOTB7", "FXSN0003"),
        dscsa(GTIN_B, "LOTB7", "FXSN0004"),
        dscsa(GTIN_A, "LOTA2", "FXSN0005"),
    ]
    last = dscsa(GTIN_B, "LOTB8", "FXSN0006")
    plan = [(l, "committed") for l in labels]
    plan.append((labels[0], "suppressed"))  # operator re-scan
    plan.append((labels[2], "suppressed"))  # a retransmit
    # A DataMatrix whose GTIN check digit is wrong: a misread.
    plan.append((dscsa(bad_check_digit(GTIN_A), "LOTA1", "FXSN0099"), "rejected"))
    plan.append((last, "committed"))
    return plan, last


def facility_labels(tag):
    return [dscsa(GTIN_A, "LOTF1", f"{tag}{i:04d}") for i in (1, 2, 3)]


# ---------------------------------------------------------------- helpers


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def uuid_text(v):
    """A UUID column as text: packed (16 bytes, schema 8/11+) or TEXT."""
    if v is None:
        return None
    if isinstance(v, bytes):
        if len(v) == 16:
            h = v.hex()
            return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        return v.hex()
    return v


def key_text(v):
    """A content key as the 64 hex digits (packed as 32 bytes from schema 11)."""
    if isinstance(v, bytes):
        return v.hex()
    return v


class Pty:
    """A virtual serial scanner: we hold the master, the daemon opens the slave."""

    def __init__(self):
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        self.path = os.ttyname(self.slave)

    def send(self, data: bytes):
        os.write(self.master, data)

    def read_reply(self, timeout):
        r, _, _ = select.select([self.master], [], [], timeout)
        if not r:
            return b""
        try:
            return os.read(self.master, 256)
        except OSError:
            return b""

    def close(self):
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass


class Db:
    """Read-only polling of the live database (never writes, never checkpoints)."""

    def __init__(self, path):
        self.path = path

    def rows(self):
        if not os.path.exists(self.path):
            return None
        try:
            c = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=1)
            try:
                return c.execute("SELECT seq, state FROM scans ORDER BY seq").fetchall()
            finally:
                c.close()
        except sqlite3.Error:
            return None  # not created or not migrated yet


class Daemon:
    def __init__(self, binary, config, logpath, cwd):
        env = {k: v for k, v in os.environ.items()
               if k not in ("SCANGATE_CONFIG", "STATE_DIRECTORY", "JOURNAL_STREAM",
                            "NOTIFY_SOCKET", "CREDENTIALS_DIRECTORY", "RUST_LOG")}
        env["RUST_LOG"] = "info"
        env["NO_COLOR"] = "1"
        self.logpath = logpath
        self.logf = open(logpath, "ab")
        self.proc = subprocess.Popen([binary, "run", "--config", config], cwd=cwd, env=env,
                                     stdin=subprocess.DEVNULL, stdout=self.logf, stderr=self.logf)

    def tail(self, n=25):
        try:
            with open(self.logpath, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
            return "\n".join(lines[-n:])
        except OSError:
            return ""

    def alive(self):
        return self.proc.poll() is None

    def has_open(self, path):
        d = f"/proc/{self.proc.pid}/fd"
        try:
            for fd in os.listdir(d):
                try:
                    if os.readlink(f"{d}/{fd}") == path:
                        return True
                except OSError:
                    pass
        except OSError:
            pass
        return False

    def wait_open(self, path, timeout=TIMEOUT):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if not self.alive():
                return False
            if self.has_open(path):
                return True
            time.sleep(0.02)
        die(f"the daemon did not open {path} within {timeout}s\n{self.tail()}")

    def terminate(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            die(f"the daemon did not exit within {TIMEOUT}s of SIGTERM\n{self.tail()}")
        self.logf.close()
        return rc

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        rc = self.proc.wait(timeout=TIMEOUT)
        self.logf.close()
        return rc


class Redis:
    def __init__(self, port, dir_):
        os.makedirs(dir_, exist_ok=True)
        self.port = port
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", dir_],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + TIMEOUT
        while self.cli("PING") != "PONG":
            if time.time() > deadline:
                die(f"redis-server on port {port} did not answer")
            time.sleep(0.05)

    def cli(self, *args):
        r = subprocess.run(["redis-cli", "-p", str(self.port), *args],
                           capture_output=True, text=True)
        return r.stdout.strip()

    def contents(self):
        keys = sorted(k for k in self.cli("--scan").splitlines() if k)
        out = {}
        for k in keys:
            t = self.cli("TYPE", k)
            entry = {"type": t}
            if t == "stream":
                entry["length"] = int(self.cli("XLEN", k) or 0)
            elif t == "zset":
                entry["length"] = int(self.cli("ZCARD", k) or 0)
            elif t == "hash":
                entry["length"] = int(self.cli("HLEN", k) or 0)
            elif t == "set":
                entry["length"] = int(self.cli("SCARD", k) or 0)
            out[k] = entry
        return out

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=TIMEOUT)


# ---------------------------------------------------------------- config


def config_template(worktree, facility_mode, synced_key=False):
    """The release's config, with placeholders; keys as that release spells them."""
    text = (
        "# Written by script/make-fixtures for an upgrade fixture. Placeholders the\n"
        "# test replaces: @STATE@ (the state directory), @PTY@ (the scanner's PTY)"
        + (", @PORT@ (a Redis port)" if facility_mode else "") + ".\n"
        "[gateway]\n"
        f'facility = "{FACILITY}"\n'
        f'id = "{GATEWAY}"\n'
        'state_dir = "@STATE@"\n'
        "\n[dedup]\n"
        f"window_ms = {WINDOW_MS}\n"
        "retention_hours = 72\n"
        "\n[[scanner]]\n"
        f'name = "{SCANNER}"\n'
        'kind = "serial"\n'
        'path = "@PTY@"\n'
        "baud = 9600\n"
        'scan_type = "dispense"\n'
        "quantity = 1\n"
        "ack = true\n"
    )
    if facility_mode:
        text += (
            "\n[redis]\n"
            'url = "redis://127.0.0.1:@PORT@/"\n'
            "connect_timeout_ms = 300\n"
            "command_timeout_ms = 500\n"
        )
        # Only where a claim must succeed (the redis-server path) on a wall
        # clock NTP may not have synced: releases up to 7247c59 waited for
        # it by default. Later releases refuse the key (exit 2), so a config
        # that does not need it goes without it.
        if synced_key and accepts_require_synced_clock(worktree):
            text += "require_synced_clock = false\n"
    return text


def accepts_require_synced_clock(worktree):
    """Releases up to 7247c59 had require_synced_clock; later ones refuse it."""
    src = os.path.join(worktree, "src", "facility", "config.rs")
    try:
        s = open(src).read()
    except OSError:
        return False
    return "require_synced_clock" in s and "remove require_synced_clock" not in s


def has_key(worktree, key):
    try:
        s = open(os.path.join(worktree, "config", "scangate.toml")).read()
    except OSError:
        return False
    return any(line.lstrip("# ").startswith(f"{key} =") for line in s.splitlines())


# ---------------------------------------------------------------- driving


def send_frame(pty, db, daemon, frame, want_rows, decided, ack, expect_reply):
    """Send one frame; wait for its ACK/NAK and until `want_rows` rows exist
    (all decided if `decided`). Returns the reply bytes."""
    pty.send(frame.encode("utf-8"))
    reply = b""
    deadline = time.time() + TIMEOUT
    if ack:
        while not reply and time.time() < deadline:
            reply += pty.read_reply(0.2)
            if not daemon.alive():
                die(f"the daemon exited\n{daemon.tail()}")
        if not reply:
            die(f"no ACK/NAK for {frame!r} within {TIMEOUT}s\n{daemon.tail()}")
        if expect_reply is not None and reply[:1] != bytes([expect_reply]):
            die(f"for {frame!r} got {reply!r}, expected {bytes([expect_reply])!r}\n{daemon.tail()}")
    while True:
        rows = db.rows()
        if rows is not None and len(rows) >= want_rows:
            if not decided or all(s not in ("pending", "unresolved") for _, s in rows):
                break
        if time.time() > deadline:
            die(f"{frame!r}: the database did not show {want_rows} "
                f"{'decided ' if decided else ''}scans within {TIMEOUT}s (rows: {rows})\n{daemon.tail()}")
        if not daemon.alive():
            die(f"the daemon exited\n{daemon.tail()}")
        time.sleep(0.02)
    # Drain any further reply bytes (none expected) without waiting long.
    if ack:
        reply += pty.read_reply(0.05)
    return reply


def copy_state(state_dir, out):
    copied, skipped = [], []
    for root, dirs, files in os.walk(state_dir):
        rel = os.path.relpath(root, state_dir)
        for f in sorted(files):
            relf = os.path.normpath(os.path.join(rel, f))
            if relf in SKIP:
                skipped.append(relf)
                continue
            dst = os.path.join(out, relf)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(os.path.join(root, f), dst)
            copied.append(relf)
    return sorted(copied), sorted(skipped)


def read_counts(out, scratch, files):
    """Counts and rows, read from a scratch copy of the fixture's files."""
    tmp = os.path.join(scratch, "readback")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    for f in files:
        if f.startswith("scangate.db"):
            shutil.copyfile(os.path.join(out, f), os.path.join(tmp, f))
    c = sqlite3.connect(os.path.join(tmp, "scangate.db"))
    try:
        version = c.execute("PRAGMA user_version").fetchone()[0]
        integrity = c.execute("PRAGMA integrity_check").fetchone()[0]
        by_state = dict(c.execute("SELECT state, count(*) FROM scans GROUP BY state ORDER BY state"))
        rows = c.execute("SELECT seq, scan_uuid, state, content_key, twin_uuid FROM scans "
                         "ORDER BY seq").fetchall()
        ledger = c.execute("SELECT count(*) FROM ledger").fetchone()[0]
        audit = c.execute("SELECT count(*) FROM audit").fetchone()[0]
        ledger_uuids = [uuid_text(r[0]) for r in
                        c.execute("SELECT scan_uuid FROM ledger ORDER BY seq")]
        tables = [r[0] for r in c.execute(
            "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
    finally:
        c.close()
    shutil.rmtree(tmp, ignore_errors=True)
    return {
        "user_version": version,
        "integrity": integrity,
        "scans_by_state": by_state,
        "rows": [(seq, uuid_text(u), s, key_text(k), uuid_text(t)) for seq, u, s, k, t in rows],
        "ledger": ledger,
        "audit": audit,
        "ledger_uuids": ledger_uuids,
        "tables": tables,
    }


def git(worktree, *args):
    return subprocess.run(["git", "-C", worktree, *args], capture_output=True,
                          text=True, check=True).stdout.strip()


def check(states):
    """Open every fixture's database (a scratch copy) and compare it with its
    fixture.json and its name's schema version. Returns the number of problems."""
    import re
    import tempfile
    bad = 0
    for name in sorted(os.listdir(states)):
        d = os.path.join(states, name)
        m = re.match(r"schema-(\d+)-([0-9a-f]+)(-facility)?$", name)
        if not m or not os.path.isdir(d):
            continue
        problems = []
        try:
            fx = json.load(open(os.path.join(d, "fixture.json")))
            files = [f for f in fx["state_files"] if f.startswith("scangate.db")]
            with tempfile.TemporaryDirectory() as tmp:
                got = read_counts(d, tmp, files)
            if got["user_version"] != int(m.group(1)):
                problems.append(f"user_version {got['user_version']}")
            if got["integrity"] != "ok":
                problems.append(f"integrity {got['integrity']}")
            want = fx["counts"]
            for k in ("scans_by_state", "ledger", "audit"):
                if got[k] != want[k]:
                    problems.append(f"{k} {got[k]} != fixture.json {want[k]}")
            if not fx["commit"].startswith(m.group(2)):
                problems.append(f"commit {fx['commit']}")
            for f in fx["state_files"]:
                if not os.path.isfile(os.path.join(d, f)):
                    problems.append(f"missing {f}")
            if not os.path.isfile(os.path.join(d, "scangate.toml")):
                problems.append("missing scangate.toml")
        except Exception as e:  # noqa: BLE001 - report and go on
            problems.append(repr(e))
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        status = "ok" if not problems else "BAD: " + "; ".join(problems)
        print(f"{name}: {status} ({size // 1024} KiB)")
        bad += bool(problems)
    return bad


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        sys.exit(1 if check(sys.argv[2]) else 0)
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--worktree", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--schema", type=int, required=True)
    ap.add_argument("--mode", choices=["embedded", "facility"], required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--why", default="")
    ap.add_argument("--substitutes", default="", help="the listed commit this one stands in for")
    ap.add_argument("--redis-first", action="store_true",
                    help="facility: skip the unreachable-store start, run the redis-server path")
    a = ap.parse_args()

    full = git(a.worktree, "rev-parse", "HEAD")
    if not full.startswith(a.commit):
        die(f"worktree {a.worktree} is at {full}, not {a.commit}")
    commit_date = git(a.worktree, "log", "-1", "--format=%cI", "HEAD")
    version = subprocess.run([a.bin, "--version"], capture_output=True,
                             text=True).stdout.strip()

    scratch = os.path.abspath(a.scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    state = os.path.join(scratch, "state")
    facility_mode = a.mode == "facility"

    template = config_template(a.worktree, facility_mode)
    pty = Pty()
    port = free_port() if facility_mode else None
    cfg = os.path.join(scratch, "scangate.toml")

    def write_cfg(template):
        text = template.replace("@STATE@", state).replace("@PTY@", pty.path)
        if port:
            text = text.replace("@PORT@", str(port))
        with open(cfg, "w") as f:
            f.write(text)

    write_cfg(template)
    db = Db(os.path.join(state, "scangate.db"))
    logpath = os.path.join(scratch, "run.log")

    frames = []  # (raw, expected, reply)
    redis_note = None
    how = None

    if not facility_mode:
        plan, last = embedded_plan()
        d = Daemon(a.bin, cfg, logpath, scratch)
        if not d.wait_open(pty.path):
            die(f"`run` exited ({d.proc.returncode}) before opening the scanner\n{d.tail()}")
        for i, (text, expected) in enumerate(plan):
            raw = text + CR
            want = NAK if expected == "rejected" else ACK
            reply = send_frame(pty, db, d, raw, i + 1, True, True, want)
            frames.append((raw, expected, reply))
        rc = d.terminate()
        if rc != 0:
            die(f"`run` exited {rc} after SIGTERM\n{d.tail()}")
        stop = "SIGTERM, exit 0"
        last_label = last + CR
    else:
        tag = "FXFA"
        # First try: [redis] names a port where nothing listens.
        if a.redis_first:
            started = False
        else:
            d = Daemon(a.bin, cfg, logpath, scratch)
            started = d.wait_open(pty.path)
        if started:
            how = "redis-unreachable"
            for i, text in enumerate(facility_labels(tag)):
                raw = text + CR
                reply = send_frame(pty, db, d, raw, i + 1, False, True, ACK)
                frames.append((raw, "waiting", reply))
            redis_note = {
                "how": ("[redis] url named 127.0.0.1:@PORT@ with a free port where nothing "
                        "listened (connection refused) for the whole run"),
                "held": {},
                "commits_only_in_gateway_ledger": [],
            }
        else:
            # The release refuses to start without its Redis: connect, commit
            # 2 labels, stop redis-server, then 3 labels wait.
            how = "redis-stopped"
            if not a.redis_first:
                log(f"`run` refused to start with Redis unreachable (exit {d.proc.returncode}); "
                    "starting a redis-server")
                d.logf.close()
            shutil.rmtree(state, ignore_errors=True)
            template = config_template(a.worktree, True, synced_key=True)
            write_cfg(template)
            r = Redis(port, os.path.join(scratch, "redis"))
            d = Daemon(a.bin, cfg, logpath, scratch)
            if not d.wait_open(pty.path):
                r.stop()
                die(f"`run` exited ({d.proc.returncode}) with Redis up\n{d.tail()}")
            labels = [dscsa(GTIN_B, "LOTF0", f"FXFC{i:04d}") for i in (1, 2)]
            for i, text in enumerate(labels):
                raw = text + CR
                reply = send_frame(pty, db, d, raw, i + 1, True, True, ACK)
                frames.append((raw, "committed", reply))
            held = r.contents()
            r.stop()
            for i, text in enumerate(facility_labels(tag)):
                raw = text + CR
                reply = send_frame(pty, db, d, raw, len(labels) + i + 1, False, True, ACK)
                frames.append((raw, "waiting", reply))
            redis_note = {
                "how": ("a redis-server on 127.0.0.1:@PORT@ (--save '' --appendonly no) while "
                        "the first 2 labels were committed, then stopped"),
                "held": held,
            }
        # Let the claimer meet the unreachable store at least once, then
        # kill -9: the WAL stays as the crash left it.
        time.sleep(1.5)
        d.kill9()
        stop = "SIGKILL (kill -9)"
        last_label = None

    pty.close()

    # Copy the state directory as the release left it.
    out = os.path.abspath(a.out)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    files, skipped = copy_state(state, out)
    if "scangate.db" not in files:
        die(f"no scangate.db in {state}: {os.listdir(state)}")
    counts = read_counts(out, scratch, files)

    # Checks: the schema version and every frame's fate.
    if counts["user_version"] != a.schema:
        die(f"user_version {counts['user_version']}, expected schema {a.schema}")
    if counts["integrity"] != "ok":
        die(f"integrity_check: {counts['integrity']}")
    rows = counts["rows"]
    if len(rows) != len(frames):
        die(f"{len(rows)} scans in the database for {len(frames)} frames sent: {rows}")
    frame_list = []
    for (raw, expected, reply), (seq, uuid, st, key, twin) in zip(frames, rows):
        # A scan waiting for the facility store is 'pending' until the claimer
        # has tried it, 'unresolved' once a claim failed (both are undecided:
        # the test's Redis must get them). The fixture says which.
        if expected == "waiting":
            if st not in ("pending", "unresolved"):
                die(f"frame {raw!r} is {st}, expected it stored and waiting")
            expected = st
        elif st != expected:
            die(f"frame {raw!r} is {st}, expected {expected}")
        entry = {"raw": raw, "expected": expected, "scan_uuid": uuid, "seq": seq,
                 "content_key": key, "reply": reply.decode("latin-1")}
        if twin:
            entry["twin_uuid"] = twin
        frame_list.append(entry)
    if facility_mode and redis_note is not None and how == "redis-stopped":
        committed = [f["scan_uuid"] for f in frame_list if f["expected"] == "committed"]
        redis_note["commits_only_in_gateway_ledger"] = committed
        redis_note["note"] = ("the test starts an empty Redis: these commits are in the "
                              "gateway's own ledger and audit trail only")

    with open(os.path.join(out, "scangate.toml"), "w") as f:
        f.write(template)

    scanner = {"name": SCANNER, "kind": "serial", "scan_type": "dispense", "quantity": 1,
               "ack": True, "baud": 9600, "terminator": CR}
    if has_key(a.worktree, "shared"):
        scanner["shared"] = False  # the default: the gateway's own scanner
        key_form = "v2: the gateway's own scanner, its id in the key (shared = false, the default)"
    else:
        scanner["shared"] = None  # the release had no `shared`
        key_form = "v1: no gateway in the key (the release had no `shared`)"

    fixture = {
        "commit": full,
        "short": a.commit,
        "commit_date": commit_date,
        "version": version,
        "schema_version": counts["user_version"],
        "mode": a.mode,
        "why": a.why,
        "window_ms": WINDOW_MS,
        "facility": FACILITY,
        "gateway_id": GATEWAY,
        "scanner": scanner,
        "content_key_form": key_form,
        "frames": frame_list,
        "last_label": last_label,
        "counts": {
            "scans_by_state": counts["scans_by_state"],
            "ledger": counts["ledger"],
            "audit": counts["audit"],
        },
        "ledger_scan_uuids": counts["ledger_uuids"],
        "tables": counts["tables"],
        "state_files": files,
        "skipped_files": skipped,
        "stopped_by": stop,
        "run": "scangate run --config scangate.toml (a debug build of the commit)",
        "made_by": "script/make-fixtures",
        "made_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    if a.substitutes:
        fixture["substitutes_for"] = a.substitutes
    if facility_mode:
        waiting = [f["expected"] for f in frame_list if f["expected"] in ("pending", "unresolved")]
        redis_note["waiting"] = (
            f"{len(waiting)} scans stored and ACKed, undecided ({', '.join(sorted(set(waiting)))}): "
            "'pending' = not yet tried by the claimer, 'unresolved' = a claim failed "
            "(the store unreachable) and the scan waits to be claimed again with its UUID. "
            "Nothing of them reached a Redis.")
        fixture["redis"] = redis_note
    # Control bytes as \u escapes (json writes CR as \r); the strings hold no
    # backslash, so the replacement cannot meet an escaped one.
    text = json.dumps(fixture, indent=1, ensure_ascii=True)
    for esc, u in (("\\r", "\\u000d"), ("\\n", "\\u000a"), ("\\t", "\\u0009")):
        text = text.replace(esc, u)
    assert json.loads(text) == fixture
    with open(os.path.join(out, "fixture.json"), "w") as f:
        f.write(text + "\n")
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    print(f"{os.path.basename(out)}: schema {counts['user_version']}, {a.mode}, "
          f"scans {counts['scans_by_state']}, ledger {counts['ledger']}, audit {counts['audit']}, "
          f"files {files}, {size // 1024} KiB", flush=True)
    # The scratch dir (the daemon's log, run.log; the config as run) stays
    # for a look; the next run starts it afresh.


if __name__ == "__main__":
    main()
