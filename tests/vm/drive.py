#!/usr/bin/env python3
"""Host side of tests/vm/run.sh: boots the guest once, installs the .deb
with apt inside it and runs every check as a named step.

The guest has no network (-nic none). The host talks to it over three kinds
of channel, none of them the console (which is only kept as a log):
  - virtio-serial port scangate.ctl: the guest agent (agent.sh) runs the
    commands sent to it and answers with exit code and output;
  - QMP: USB devices plugged and unplugged (device_add / device_del);
  - one unix socket per scanner: the host side of a qemu usb-serial device
    (FTDI 0403:6001 in the guest, driven by the kernel's ftdi_sio). The host
    is the scanner: it sends frames (label + CR LF) and reads the ACKs.

Each check writes one line to the results file: PASS, FAIL, XFAIL (failed,
and named in SCANGATE_VM_EXPECTED_TO_FAIL), XPASS (passed although named
there: take it off that list) or SKIP. Exit status 1 if any check FAILed.
Stdlib only."""

import base64
import json
import os
import re
import select
import socket
import subprocess
import sys
import threading
import time

SCALE = float(os.environ.get("SCANGATE_VM_TIME_SCALE", "1"))
EXPECTED_TO_FAIL = set(os.environ.get("SCANGATE_VM_EXPECTED_TO_FAIL", "").split())

CONF = "/etc/scangate/scangate.toml"
GTIN = "00307773105025"
ACK = 0x06


def deadline(seconds):
    return time.monotonic() + seconds * SCALE


def label(serial):
    """A DSCSA GS1 DataMatrix label, unique per pick by its serial (as
    tests/util/scans.rs::dscsa)."""
    return f"]d201{GTIN}1728123121{serial}\x1d10LOT7A"


class CheckFailed(Exception):
    pass


def check(cond, why):
    if not cond:
        raise CheckFailed(why)


def wait_for(what, fn, seconds, every=0.5):
    """Poll fn() until it returns something truthy; CheckFailed at the deadline."""
    end = deadline(seconds)
    last = None
    while True:
        last = fn()
        if last:
            return last
        if time.monotonic() > end:
            raise CheckFailed(f"timed out after {seconds * SCALE:.0f} s waiting for {what}")
        time.sleep(every)


class Lines:
    """Line reader on a socket, with deadlines."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def readline(self, end):
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.sock], [], [], min(left, 1.0))
            if r:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise ConnectionError("channel closed")
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line


def connect_unix(path, seconds=30):
    end = time.monotonic() + seconds
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return s
        except OSError:
            s.close()
            if time.monotonic() > end:
                raise
            time.sleep(0.1)


class Guest:
    """The agent on virtio-serial port scangate.ctl."""

    def __init__(self, path):
        self.sock = connect_unix(path)
        self.lines = Lines(self.sock)
        self.next_id = 1
        self.lock = threading.Lock()

    def run(self, script, timeout=120):
        """Run a bash script in the guest as root: (exit code, output)."""
        with self.lock:
            cid = self.next_id
            self.next_id += 1
            limit = int(timeout * SCALE)
            b64 = base64.b64encode(script.encode()).decode()
            self.sock.sendall(f"{cid} {limit} {b64}\n".encode())
            end = time.monotonic() + limit + 30
            while True:
                line = self.lines.readline(end)
                if line is None:
                    raise CheckFailed(f"the guest agent did not answer within {limit + 30} s: {script[:80]!r}")
                parts = line.decode().split(" ", 2)
                if len(parts) >= 2 and parts[0] == str(cid):
                    out = base64.b64decode(parts[2]).decode(errors="replace") if len(parts) == 3 else ""
                    return int(parts[1]), out

    def ok(self, script, timeout=120):
        rc, out = self.run(script, timeout)
        check(rc == 0, f"`{script.strip()[:120]}` exited {rc}: {out.strip()[-600:]}")
        return out

    def wait_ready(self, seconds):
        """Boot: the agent answers a ping once systemd started it (any
        ping: under TCG an answer may come after the next ping was sent)."""
        end = time.monotonic() + seconds
        cid = 0
        while time.monotonic() < end:
            cid -= 1
            self.sock.sendall(f"{cid} 30 {base64.b64encode(b'echo ready').decode()}\n".encode())
            line = self.lines.readline(time.monotonic() + 5)
            if line is not None and re.match(rb"-\d+ 0 ", line):
                # Let the answers to the other pings come in and drop them.
                while self.lines.readline(time.monotonic() + 5) is not None:
                    pass
                return True
        return False

    def prop(self, name, unit="scangate"):
        return self.ok(f"systemctl show -p {name} --value {unit}").strip()


class Qmp:
    def __init__(self, path):
        self.sock = connect_unix(path)
        self.lines = Lines(self.sock)
        self.lines.readline(time.monotonic() + 30)  # greeting
        self.cmd("qmp_capabilities")

    def cmd(self, name, **args):
        self.sock.sendall(json.dumps({"execute": name, "arguments": args}).encode() + b"\n")
        end = time.monotonic() + 60
        while True:
            line = self.lines.readline(end)
            if line is None:
                raise CheckFailed(f"QMP {name}: no answer")
            msg = json.loads(line)
            if "return" in msg:
                return msg["return"]
            if "error" in msg:
                raise CheckFailed(f"QMP {name} {args}: {msg['error']}")


class Scanner:
    """The host side of a usb-serial device: what a scanner sends and hears."""

    def __init__(self, name, path):
        self.name = name
        self.sock = connect_unix(path)
        self.sock.setblocking(False)
        self.acked = []  # serials whose ACK came

    def drain(self):
        try:
            while self.sock.recv(4096):
                pass
        except BlockingIOError:
            pass

    def scan(self, serial, seconds=30, resend_every=6):
        """Send one label and await its ACK, resending as a scanner does
        when none comes (the test config's window makes a resend an echo)."""
        self.drain()
        end = deadline(seconds)
        while time.monotonic() < end:
            self.sock.sendall((label(serial) + "\r\n").encode())
            resend = min(end, time.monotonic() + resend_every * SCALE)
            while time.monotonic() < resend:
                r, _, _ = select.select([self.sock], [], [], 0.2)
                if r:
                    try:
                        got = self.sock.recv(4096)
                    except BlockingIOError:
                        continue
                    if ACK in got:
                        self.acked.append(serial)
                        return True
        raise CheckFailed(f"{self.name}: no ACK for {serial} within {seconds * SCALE:.0f} s")


def config(scanners, redis=None):
    text = (
        '[gateway]\nfacility = "vm-pharmacy"\nid = "vm-gw-1"\nstate_dir = "/var/lib/scangate"\n\n'
        # A resend after a missed ACK is an echo, not a second pick.
        "[dedup]\nwindow_ms = 120000\n\n"
    )
    for name in scanners:
        text += (
            f'[[scanner]]\nname = "{name}"\nkind = "serial"\npath = "/dev/scangate/{name}"\n'
            'scan_type = "dispense"\nack = true\n\n'
        )
    if redis:
        text += f'[redis]\nurl = "{redis}"\n'
    return text


def write_file(path, text):
    """Guest shell: overwrite a file's content (keeps owner and mode)."""
    b64 = base64.b64encode(text.encode()).decode()
    return f"printf '%s' '{b64}' | base64 -d > {path}"


RULES = "".join(
    f'SUBSYSTEM=="tty", ATTRS{{idVendor}}=="0403", ATTRS{{idProduct}}=="6001", '
    f'ATTRS{{serial}}=="{serial}", SYMLINK+="scangate/{name}", GROUP="dialout", MODE="0660"\n'
    for serial, name in [("SCAN1", "counter-1"), ("SCAN2", "counter-2"), ("SCAN3", "late")]
)


class Run:
    def __init__(self, guest, qmp, scanners, results, deb):
        self.g = guest
        self.qmp = qmp
        self.sc = scanners
        self.results = results
        self.deb = deb
        self.failed = []
        self.serial_no = 0

    def record(self, status, name, detail=""):
        line = f"{status:5} {name}" + (f"  {detail}" if detail else "")
        print(line, flush=True)
        self.results.write(line + "\n")
        self.results.flush()

    def step(self, name, fn):
        t0 = time.monotonic()
        try:
            detail = fn() or ""
            ok = True
        except CheckFailed as e:
            ok, detail = False, str(e)
        except Exception as e:  # a harness error is a failed check too
            ok, detail = False, f"{type(e).__name__}: {e}"
        detail = (detail + f" ({time.monotonic() - t0:.1f} s)").strip()
        if ok:
            self.record("XPASS" if name in EXPECTED_TO_FAIL else "PASS", name, detail)
        elif name in EXPECTED_TO_FAIL:
            self.record("XFAIL", name, detail)
        else:
            self.record("FAIL", name, detail)
            self.failed.append(name)
        return ok

    def new_serial(self):
        self.serial_no += 1
        return f"VM{self.serial_no:05d}"

    # -- helpers on the guest

    def main_pid(self):
        return int(self.g.prop("MainPID"))

    def opened(self, name):
        """The daemon (MainPID) holds /dev/scangate/<name> open."""
        rc, _ = self.g.run(
            f"dev=$(readlink -f /dev/scangate/{name}) && [ -c \"$dev\" ] && "
            f"pid=$(systemctl show -p MainPID --value scangate) && [ \"$pid\" != 0 ] && "
            f"ls -l /proc/$pid/fd 2>/dev/null | grep -q \" $dev\\$\"",
            timeout=20,
        )
        return rc == 0

    def wait_opened(self, name, seconds=90):
        wait_for(f"the daemon to open /dev/scangate/{name}", lambda: self.opened(name), seconds, 1)

    def ledger(self):
        return self.g.ok(f"runuser -u scangate -- scangate ledger export --config {CONF}")

    def ledger_has_all_acked(self):
        out = self.ledger()
        acked = [s for sc in self.sc.values() for s in sc.acked]
        missing = [s for s in acked if s not in out]
        check(not missing, f"ACKed but not in the ledger: {missing}")
        return len(acked)

    def active(self):
        return self.g.prop("ActiveState") == "active"

    # -- the checks, in the order run() calls them

    def apt_install(self):
        out = self.g.ok(f"cd /vmtest && apt-get install -y ./{self.deb} 2>&1", timeout=300)
        check("Setting up scangate" in out, f"apt did not set scangate up: {out[-600:]}")
        self.g.ok("dpkg-query -W -f='${Status}' scangate | grep -qx 'install ok installed'")
        return "apt-get install ./" + self.deb

    def package_files(self):
        got = self.g.ok(
            f"stat -c '%U:%G %a' {CONF}; getent passwd scangate | cut -d: -f7; id -nG scangate; "
            "systemctl is-enabled scangate || true; "
            "ls /usr/bin/scangate /usr/lib/systemd/system/scangate.service /usr/lib/sysusers.d/scangate.conf "
            "/usr/lib/udev/rules.d/99-scangate.rules /usr/share/man/man1/scangate.1.gz "
            "/usr/share/man/man1/scangate-run.1.gz /usr/share/bash-completion/completions/scangate "
            "/usr/share/zsh/vendor-completions/_scangate /usr/share/fish/vendor_completions.d/scangate.fish "
            "/usr/share/doc/scangate/README.md >/dev/null; "
            "grep -qx /etc/scangate/scangate.toml /var/lib/dpkg/info/scangate.conffiles && echo conffile"
        ).split("\n")
        check(got[0] == "root:scangate 640", f"{CONF} is {got[0]}, not root:scangate 640")
        check(got[1] == "/usr/sbin/nologin", f"scangate's shell is {got[1]!r}")
        check("dialout" in got[2].split(), f"scangate's groups: {got[2]}")
        check(got[3] == "disabled", f"the unit is {got[3]!r} after install (expected disabled until configured)")
        check("conffile" in got, "scangate.toml is not a conffile")
        return f"{got[0]} {CONF}, groups {got[2]}"

    def config_readable(self):
        out = self.g.ok(f"runuser -u scangate -- scangate check-config --config {CONF}")
        return out.strip()

    def analyze_verify(self):
        rc, out = self.g.run("systemd-analyze verify scangate.service 2>&1")
        check(rc == 0 and "scangate" not in out, f"exit {rc}: {out.strip()[-600:]}")

    def security(self):
        out = self.g.ok("systemd-analyze security --offline=yes --no-pager /usr/lib/systemd/system/scangate.service 2>&1")
        m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", out)
        check(m, f"no exposure level in: {out[-300:]}")
        level = float(m.group(1))
        check(level <= 2.0, f"exposure {level} > 2.0")
        return f"exposure {level}"

    def enable_now(self):
        # The README's steps after apt install: edit the config (and copy
        # the udev rules and put these scanners in), then enable --now.
        self.g.ok(write_file(CONF, config(["counter-1", "late"])))
        self.g.ok(
            "cp /usr/lib/udev/rules.d/99-scangate.rules /etc/udev/rules.d/ && "
            f"printf '%s' '{base64.b64encode(RULES.encode()).decode()}' | base64 -d "
            ">> /etc/udev/rules.d/99-scangate.rules && udevadm control --reload && "
            "udevadm trigger --action=add --subsystem-match=tty && udevadm settle"
        )
        wait_for("/dev/scangate/counter-1", lambda: self.g.run("test -c /dev/scangate/counter-1")[0] == 0, 60)
        self.g.ok("systemctl enable --now scangate", timeout=180)
        wait_for("scangate active", self.active, 60)
        self.wait_opened("counter-1")
        return "active, counter-1 open"

    def ready(self):
        t = self.g.prop("Type")
        check(t == "notify", f"Type={t}: active does not wait for READY=1 (needs Type=notify)")
        check(self.active(), "not active")

    def status_text(self):
        text = self.g.prop("StatusText")
        check(text, "StatusText is empty (no STATUS= from the daemon)")
        out = self.g.run("systemctl status --no-pager scangate")[1]
        check("Status:" in out, f"systemctl status shows no Status: line: {out[:400]}")
        return f"STATUS={text!r}"

    def serial_scans(self):
        for _ in range(5):
            self.sc["counter-1"].scan(self.new_serial())
        return "5 scans ACKed on counter-1 (usb-serial, ftdi_sio)"

    def in_ledger(self):
        n = self.ledger_has_all_acked()
        return f"{n} ACKed scans in `scangate ledger export`"

    def journal(self):
        def fields():
            out = self.g.run("journalctl -u scangate -o json --no-pager | tail -n 400")[1]
            return all(f'"{f}":' in out for f in ("SCANNER", "SCAN_UUID", "DECISION"))

        try:
            wait_for("SCANNER=, SCAN_UUID=, DECISION= in scangate's journal", fields, 20)
        except CheckFailed as e:
            raise CheckFailed(str(e) + " (not all three fields are there)")
        audit = self.g.run("journalctl SYSLOG_IDENTIFIER=scangate-audit -o cat --no-pager | head -n 3")[1]
        check(audit.strip(), "no journal entry with SYSLOG_IDENTIFIER=scangate-audit")

    def hotplug(self):
        check(not self.opened("late"), "late is open before it was plugged in")
        self.qmp.cmd("device_add", driver="usb-serial", id="u3", chardev="c3", serial="SCAN3", bus="xhci.0")
        self.wait_opened("late")
        self.sc["late"].scan(self.new_serial())
        self.ledger_has_all_acked()
        return "plugged after start (QMP device_add), opened, scan ACKed and in the ledger"

    def replug(self):
        self.qmp.cmd("device_del", id="u3")
        wait_for("/dev/scangate/late gone", lambda: self.g.run("test -e /dev/scangate/late")[0] != 0, 60)
        check(self.active(), "the service stopped when its scanner was unplugged")
        self.qmp.cmd("device_add", driver="usb-serial", id="u3", chardev="c3", serial="SCAN3", bus="xhci.0")
        self.wait_opened("late")
        self.sc["late"].scan(self.new_serial())
        self.sc["counter-1"].scan(self.new_serial())
        self.ledger_has_all_acked()
        return "unplugged (device_del), replugged, reopened, scan ACKed"

    def reload(self):
        self.qmp.cmd("device_add", driver="usb-serial", id="u2", chardev="c2", serial="SCAN2", bus="xhci.0")
        wait_for("/dev/scangate/counter-2", lambda: self.g.run("test -c /dev/scangate/counter-2")[0] == 0, 60)
        self.g.ok(write_file(CONF, config(["counter-1", "late", "counter-2"])))
        pid = self.main_pid()
        # counter-1 keeps scanning while the reload happens.
        errors = []
        stop = threading.Event()

        def keep_scanning():
            try:
                while not stop.is_set():
                    self.sc["counter-1"].scan(self.new_serial(), seconds=30)
                    time.sleep(0.3)
            except Exception as e:
                errors.append(str(e))

        t = threading.Thread(target=keep_scanning)
        t.start()
        try:
            time.sleep(1)
            rc, out = self.g.run("systemctl reload scangate 2>&1", timeout=90)
            check(rc == 0, f"systemctl reload exited {rc}: {out.strip()}")
            self.wait_opened("counter-2", 60)
            self.sc["counter-2"].scan(self.new_serial())
        finally:
            stop.set()
            t.join()
        check(not errors, f"counter-1 during the reload: {errors}")
        check(self.main_pid() == pid, "the reload restarted the daemon (MainPID changed)")
        self.ledger_has_all_acked()
        return "counter-2 added by reload; counter-1 ACKed throughout"

    def watchdog(self):
        wd = self.g.prop("WatchdogUSec")
        check(wd not in ("0", "infinity", ""), f"WatchdogUSec={wd}: no WatchdogSec= in the unit")
        for _ in range(3):
            self.sc["counter-1"].scan(self.new_serial())
        pid = self.main_pid()
        restarts = int(self.g.prop("NRestarts"))
        self.g.ok(f"kill -STOP {pid}")
        try:
            wait_for(
                "the watchdog to restart the stopped daemon",
                lambda: self.main_pid() not in (pid, 0) and self.active(),
                180,
                2,
            )
        finally:
            self.g.run(f"kill -CONT {pid} 2>/dev/null")
        check(int(self.g.prop("NRestarts")) > restarts, "NRestarts did not grow")
        self.wait_opened("counter-1")
        self.sc["counter-1"].scan(self.new_serial())
        n = self.ledger_has_all_acked()
        return f"restarted by the watchdog ({wd}); all {n} ACKed scans in the ledger"

    def ensure_running_with(self, scanners):
        """Between checks: the service runs the config with these scanners."""
        self.g.ok(write_file(CONF, config(scanners)))
        self.g.run("systemctl reset-failed scangate")
        self.g.ok("systemctl restart scangate", timeout=180)
        wait_for("scangate active", self.active, 60)
        self.wait_opened("counter-1")

    def stop(self):
        self.sc["counter-1"].scan(self.new_serial())
        self.g.ok("systemctl stop scangate", timeout=120)
        res, code, status = (self.g.prop(p) for p in ("Result", "ExecMainCode", "ExecMainStatus"))
        check(res == "success" and code == "1" and status == "0",
              f"Result={res} ExecMainCode={code} ExecMainStatus={status} (want success, exited, 0)")
        n = self.ledger_has_all_acked()
        return f"exit 0, all {n} ACKed scans in the ledger"

    def broken_config(self):
        self.g.ok(write_file(CONF, config(["counter-1"]) + "\n[gateway2]\nbogus = 1\n"))
        rc, out = self.g.run(f"runuser -u scangate -- scangate check-config --config {CONF} 2>&1")
        check(rc == 2, f"check-config exited {rc}: {out}")
        self.g.run("systemctl start scangate", timeout=120)
        wait_for("scangate failed", lambda: self.g.prop("ActiveState") == "failed", 60)
        main, pre = self.g.prop("ExecMainStatus"), self.g.prop("ExecStartPre")
        check(main == "2" or "status=2" in pre, f"ExecMainStatus={main}, ExecStartPre: {pre} (want exit 2)")
        m = re.fullmatch(r"(\d+)s", self.g.prop("RestartUSec"))
        restart_s = max(2.0, float(m.group(1)) if m else 2.0)
        # An absence: watched for three restart intervals.
        time.sleep(3 * restart_s + 2)
        state, n = self.g.prop("ActiveState"), self.g.prop("NRestarts")
        check(state == "failed" and n == "0", f"ActiveState={state} NRestarts={n}: a restart loop")
        self.g.run("systemctl reset-failed scangate")
        return f"exit 2, failed, NRestarts=0 after {3 * restart_s + 2:.0f} s"

    def credential(self):
        pw = "vm-facility-secret-7"
        self.g.ok("systemctl is-active redis-server || systemctl start redis-server", timeout=60)
        self.g.ok(
            "redis-cli CONFIG SET maxmemory-policy noeviction && "
            f"redis-cli CONFIG SET requirepass {pw} && "
            f"umask 077 && printf '%s' {pw} > /etc/scangate/redis-password && "
            "mkdir -p /etc/systemd/system/scangate.service.d && "
            "printf '[Service]\\nLoadCredential=redis-password:/etc/scangate/redis-password\\n' "
            "> /etc/systemd/system/scangate.service.d/vm-credential.conf && "
            "systemctl daemon-reload && systemctl stop scangate && rm -rf /var/lib/scangate"
        )
        rc, out = self.g.run("redis-cli ping 2>&1")
        check("NOAUTH" in out, f"redis answers without the password: {out}")
        self.g.ok(write_file(CONF, config(["counter-1"], redis="redis://127.0.0.1:6379/0")))
        self.g.ok("systemctl reset-failed scangate; systemctl start scangate", timeout=180)
        wait_for("scangate active", self.active, 60)
        self.wait_opened("counter-1")
        serial = self.new_serial()
        self.sc["counter-1"].scan(serial)
        # The facility ledger is Redis's stream; read it with the credential too.
        export = (
            "systemd-run --wait --pipe --quiet -p User=scangate "
            "-p LoadCredential=redis-password:/etc/scangate/redis-password "
            f"/usr/bin/scangate ledger export --config {CONF}"
        )
        wait_for(f"{serial} in the facility ledger (Redis)", lambda: serial in self.g.run(export)[1], 60, 2)
        return "password from LoadCredential=; claimed in the guest's Redis"

    def run(self):
        # (name, check, the checks after it are skipped if it fails)
        running = ["counter-1", "late", "counter-2"]
        checks = [
            ("apt_install", self.apt_install, True),
            ("package_files", self.package_files, False),
            ("config_readable_by_service_user", self.config_readable, False),
            ("systemd_analyze_verify", self.analyze_verify, False),
            ("systemd_analyze_security", self.security, False),
            ("enable_now_starts", self.enable_now, True),
            ("ready_before_active", self.ready, False),
            ("status_text", self.status_text, False),
            ("serial_scans_acked", self.serial_scans, False),
            ("scans_in_ledger", self.in_ledger, False),
            ("journal_fields", self.journal, False),
            ("usb_serial_plugged_after_start", self.hotplug, False),
            ("usb_serial_unplug_replug", self.replug, False),
            ("reload_adds_scanner", self.reload, False),
            ("watchdog_restart", lambda: (self.ensure_running_with(running), self.watchdog())[1], False),
            ("stop_drains_exit0", lambda: (self.ensure_running_with(running), self.stop())[1], False),
            ("broken_config_exit2_no_restart", self.broken_config, False),
            ("load_credential_redis", self.credential, False),
        ]
        for name, fn, needed in checks:
            if not self.step(name, fn) and needed:
                for rest, _, _ in checks[[c[0] for c in checks].index(name) + 1:]:
                    self.record("SKIP", rest, f"after {name} failed")
                return

def main():
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--qemu", required=True, help="the qemu command line, as a JSON list")
    ap.add_argument("--dir", required=True, help="where the sockets are")
    ap.add_argument("--out", required=True)
    ap.add_argument("--deb", required=True)
    a = ap.parse_args()
    qemu_cmd = json.loads(a.qemu)
    os.makedirs(a.out, exist_ok=True)
    results = open(os.path.join(a.out, "results.txt"), "w")
    t0 = time.monotonic()
    vm = subprocess.Popen(qemu_cmd, stdin=subprocess.DEVNULL,
                          stdout=open(os.path.join(a.out, "qemu.log"), "w"), stderr=subprocess.STDOUT)
    failed = True
    try:
        qmp = Qmp(os.path.join(a.dir, "qmp.sock"))
        scanners = {
            "counter-1": Scanner("counter-1", os.path.join(a.dir, "s1.sock")),
            "counter-2": Scanner("counter-2", os.path.join(a.dir, "s2.sock")),
            "late": Scanner("late", os.path.join(a.dir, "s3.sock")),
        }
        guest = Guest(os.path.join(a.dir, "ctl.sock"))
        r = Run(guest, qmp, scanners, results, a.deb)
        if not guest.wait_ready(600 * SCALE):
            r.record("FAIL", "boot", "the guest agent never answered (see console.log)")
            r.failed.append("boot")
        else:
            r.record("PASS", "boot", f"agent up after {time.monotonic() - t0:.0f} s")
            r.run()
            rc, journal = guest.run("journalctl -b --no-pager -o short-monotonic", timeout=60)
            with open(os.path.join(a.out, "guest-journal.txt"), "w") as f:
                f.write(journal)
            guest.run("systemctl --no-block poweroff", timeout=30)
        failed = bool(r.failed)
        try:
            vm.wait(timeout=120 * SCALE)
        except subprocess.TimeoutExpired:
            pass
    finally:
        if vm.poll() is None:
            vm.kill()
            vm.wait()
    print(f"VM run: {time.monotonic() - t0:.0f} s", flush=True)
    results.write(f"# VM run: {time.monotonic() - t0:.0f} s\n")
    results.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
