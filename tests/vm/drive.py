#!/usr/bin/env python3
"""Host side of tests/vm/run.sh: boots the guest once, installs the .deb
with apt inside it and runs every check as a named step. First the
previous release's .deb (--prev-deb): installed, its conffile edited, used,
upgraded to this tree's .deb unattended, broken and repaired, rolled back
and upgraded again, purged (Run.run's `upgrade` group); then the checks of
a fresh install.

The guest has no network (-nic none). The host talks to it over three kinds
of channel, none of them the console (which is only kept as a log):
  - virtio-serial port scangate.ctl: the guest agent (agent.sh) runs the
    commands sent to it and answers with exit code and output;
  - QMP: USB devices plugged and unplugged (device_add / device_del);
  - one unix socket per scanner: the host side of a qemu usb-serial device
    (FTDI 0403:6001 in the guest, driven by the kernel's ftdi_sio). The host
    is the scanner: it sends frames (label + CR LF) and reads the ACKs;
  - QMP input-send-event: the host types into qemu usb-kbd keyboards
    (0627:0001, usbhid in the guest), each bound to a display of its own,
    as a keyboard-wedge scanner types;
  - vmhid (tests/vm/vmhid.c) in the guest: a HID POS scanner on /dev/uhid
    the host drives through a FIFO, and a second reader of a keyboard's
    evdev node that counts the key events it sees.

Each check writes one line to the results file: PASS, FAIL, XFAIL (failed,
and named in SCANGATE_VM_EXPECTED_TO_FAIL), XPASS (passed although named
there: take it off that list) or SKIP. Exit status 1 if any check FAILed.
Stdlib only."""

import base64
import hashlib
import fcntl
import json
import os
import re
import select
import socket
import struct
import subprocess
import sys
import termios
import threading
import time

SCALE = float(os.environ.get("SCANGATE_VM_TIME_SCALE", "1"))
EXPECTED_TO_FAIL = set(os.environ.get("SCANGATE_VM_EXPECTED_TO_FAIL", "").split())
# SCANGATE_VM_ONLY=check1,check2: run only these (and the ones every check
# needs: apt_install, enable_now_starts), while working on them. Naming one
# check of the upgrade group (or purge_removes_config_keeps_state) runs the
# whole group, whose steps each need the one before.

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

    def send(self, script, timeout=30):
        """Send a script and do not wait for its answer (the power cut: the
        guest dies running it, and no answer comes)."""
        with self.lock:
            cid = self.next_id
            self.next_id += 1
            b64 = base64.b64encode(script.encode()).decode()
            self.sock.sendall(f"{cid} {int(timeout * SCALE)} {b64}\n".encode())

    def ok(self, script, timeout=120):
        rc, out = self.run(script, timeout)
        check(rc == 0, f"`{script.strip()[:120]}` exited {rc}: {out.strip()[-600:]}")
        return out

    def wait_ready(self, seconds, every=30):
        """Boot: the agent's `hello` line, which it writes once it opened
        its port. A ping (any answer counts) only when nothing came for
        `every` s: an agent that started before the host listened. Answers
        to pings that come later are skipped by `run`, as any line with
        another id is."""
        end = time.monotonic() + seconds
        cid = 0
        while time.monotonic() < end:
            line = self.lines.readline(min(end, time.monotonic() + every))
            if line is None:
                cid -= 1
                self.sock.sendall(f"{cid} 30 {base64.b64encode(b'echo ready').decode()}\n".encode())
                continue
            if line.startswith(b"hello ") or re.match(rb"-\d+ 0 ", line):
                self.answered_at = time.monotonic()
                return True
        return False

    def prop(self, name, unit="scangate"):
        return self.ok(f"systemctl show -p {name} --value {unit}").strip()


class Qmp:
    def __init__(self, path):
        self.sock = connect_unix(path)
        self.lines = Lines(self.sock)
        self.events = []  # QMP events, as they come in (RESET: a guest reboot)
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
            if "event" in msg:
                self.events.append(msg)
            elif "return" in msg:
                return msg["return"]
            if "error" in msg:
                raise CheckFailed(f"QMP {name} {args}: {msg['error']}")


    def pump(self):
        """Take in the events that came (no command needed)."""
        while True:
            line = self.lines.readline(time.monotonic() + 0.01)
            if line is None:
                return
            msg = json.loads(line)
            if "event" in msg:
                self.events.append(msg)


class Scanner:
    """The host side of a usb-serial device: what a scanner sends and hears."""

    def __init__(self, name, path):
        self.name = name
        self.sock = connect_unix(path)
        self.sock.setblocking(False)
        self.acked = []  # serials whose ACK came
        # Cleared while its USB device is unplugged: an unplugged scanner
        # sends nothing (and qemu 7.2 crashes on chardev input that reaches
        # a usb-serial device being deleted: usb_wakeup on a device already
        # off its bus, SIGSEGV). Sends wait for it, under send_lock.
        self.plugged = threading.Event()
        self.plugged.set()
        self.send_lock = threading.Lock()

    def unplugging(self):
        """Stop sending (a scan awaiting its ACK waits on, and is sent again
        once replugged) and wait until qemu has read everything sent."""
        with self.send_lock:
            self.plugged.clear()
        wait_for(f"{self.name}: qemu to read what was sent", lambda: self.unread() == 0, 10, 0.05)

    def unread(self):
        """Bytes sent that qemu has not read yet (SIOCOUTQ)."""
        return struct.unpack("i", fcntl.ioctl(self.sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]

    def drain(self):
        try:
            while self.sock.recv(4096):
                pass
        except BlockingIOError:
            pass

    def scan(self, serial, seconds=30, resend_every=6, stop=None):
        """Send one label and await its ACK, resending as a scanner does
        when none comes (the test config's window makes a resend an echo).
        With `stop` (an Event): False, not ACKed, once it is set."""
        self.drain()
        end = deadline(seconds)
        while time.monotonic() < end:
            if stop is not None and stop.is_set():
                return False
            if not self.plugged.wait(max(0.0, end - time.monotonic())):
                break
            with self.send_lock:
                if not self.plugged.is_set():
                    continue  # (unplugged meanwhile)
                self.sock.sendall((label(serial) + "\r\n").encode())
            resend = min(end, time.monotonic() + resend_every * SCALE)
            while time.monotonic() < resend:
                if stop is not None and stop.is_set():
                    # (An ACK that came already was heard: it counts.)
                    try:
                        got = self.sock.recv(4096)
                    except BlockingIOError:
                        got = b""
                    if ACK in got:
                        self.acked.append(serial)
                        return True
                    return False
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


class Keyboards:
    """The qemu usb-kbd keyboards, typed into with QMP input-send-event as
    a keyboard-wedge scanner types: each is bound to a display of its own
    (run.sh) and an event naming that display reaches that keyboard only.
    A scanner set to a layout sends the keys that type each character in
    that layout; characters here are what DSCSA labels use."""

    # name: (display, layout)
    KEYBOARDS = {"us": ("gpu0", "us"), "de": ("gpu1", "de"), "new": ("gpu2", "us")}
    # Seconds between characters. qemu's HID keyboard queues 16 key events
    # and drops what does not fit; the guest polls it every few ms.
    GAP = 0.1

    def __init__(self, qmp):
        self.qmp = qmp

    @staticmethod
    def keys(ch, layout):
        """(modifiers, key) as qemu QKeyCodes for one character."""
        if ch == "\x1d":
            # GS as Ctrl+]: Ctrl with the key at the US ] position (usage
            # 0x30), in either layout.
            return ["ctrl"], "bracket_right"
        if ch == "\r":
            return [], "ret"
        if ch == "\x1b":
            return [], "esc"
        if ch.isascii() and ch.isdigit():
            return [], ch
        if ch.isascii() and ch.isalpha():
            q = ch.lower()
            if layout == "de" and q in "yz":
                q = "z" if q == "y" else "y"  # QWERTZ
            return (["shift"] if ch.isupper() else []), q
        if ch == "]":
            return (["alt_r"], "9") if layout == "de" else ([], "bracket_right")
        raise ValueError(f"no key for {ch!r} in layout {layout}")

    def type(self, name, text):
        display, layout = self.KEYBOARDS[name]

        def ev(q, down):
            return {"type": "key", "data": {"down": down, "key": {"type": "qcode", "data": q}}}

        for ch in text:
            mods, q = self.keys(ch, layout)
            events = [ev(m, True) for m in mods] + [ev(q, True), ev(q, False)]
            events += [ev(m, False) for m in reversed(mods)]
            self.qmp.cmd("input-send-event", device=display, events=events)
            time.sleep(self.GAP)


def config(scanners, redis=None, extra="", window_ms=120000):
    """The gateway config: serial scanners by name (on /dev/scangate/<name>,
    at 19200 baud: the termios check reads it back), then `extra` (HID
    scanner entries), then [redis]."""
    text = (
        '[gateway]\nfacility = "vm-pharmacy"\nid = "vm-gw-1"\nstate_dir = "/var/lib/scangate"\n\n'
        # A resend after a missed ACK is an echo, not a second pick.
        f"[dedup]\nwindow_ms = {window_ms}\n\n"
    )
    text += serial_scanners(scanners)
    text += extra
    if redis:
        text += f'[redis]\nurl = "{redis}"\n'
    return text


def serial_scanners(names):
    """[[scanner]] entries for serial scanners (see config())."""
    return "".join(
        f'[[scanner]]\nname = "{name}"\nkind = "serial"\npath = "/dev/scangate/{name}"\n'
        'scan_type = "dispense"\nack = true\nbaud = 19200\n\n'
        for name in names
    )


def site_edit(shipped):
    """What a site makes of the config the previous release shipped (its
    conffile): a comment of its own, its facility and gateway id, the
    test's dedup window, and its one scanner in place of the examples;
    every other line as shipped."""
    text = shipped
    for key, value in (("facility", '"vm-pharmacy"'), ("id", '"vm-gw-1"'), ("window_ms", "120000")):
        text, n = re.subn(rf"^{key} = .*$", f"{key} = {value}", text, count=1, flags=re.M)
        check(n == 1, f"the shipped config has no `{key} = ` line to edit")
    cut = text.find("\n[[scanner]]")
    check(cut >= 0, "the shipped config has no [[scanner]] to replace")
    return ("# Edited on site (the VM test, under the previous release): facility,\n"
            "# gateway id, the window and this gateway's one scanner.\n"
            + text[:cut + 1] + serial_scanners(["counter-1"]))


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
    def __init__(self, guest, qmp, scanners, results, deb, out, prev_deb=None, prev_error=""):
        self.g = guest
        self.qmp = qmp
        self.sc = scanners
        self.results = results
        self.deb = deb
        self.prev_deb = prev_deb  # the previous release's .deb (run.sh, prev-deb.sh)
        self.prev_error = prev_error
        self.site_conf = None  # the config as the site edited it under the previous release
        self.failed = []
        self.serial_no = 0
        self.serial_lock = threading.Lock()
        self.out = out
        self.pc_ready = False  # qemu resets the guest on reboot (the power cuts)
        self.pc_reports = 0
        self.kb = Keyboards(qmp)
        self.pos_id = 0
        self.hid_entries = []

    def record(self, status, name, detail=""):
        detail = " | ".join(l for l in detail.splitlines() if l.strip())  # one line per check
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
        with self.serial_lock:  # (scanners stream from threads of their own)
            self.serial_no += 1
            return f"VM{self.serial_no:05d}"

    # -- helpers on the guest

    def main_pid(self):
        return int(self.g.prop("MainPID"))

    def opened(self, name):
        """The daemon (MainPID) holds /dev/scangate/<name> open."""
        return self.holds(f"/dev/scangate/{name}")

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

    def audit_verify(self):
        rc, out = self.g.run(f"runuser -u scangate -- scangate audit verify --config {CONF} 2>&1", timeout=120)
        check(rc == 0, f"`scangate audit verify` exited {rc}: {out.strip()[-400:]}")
        return out.strip().splitlines()[-1] if out.strip() else ""

    def install_rules(self):
        """The README's udev step: the example rules copied to /etc with
        this gateway's scanners (SCAN1..3 on counter-1, counter-2, late)."""
        self.g.ok(
            "cp /usr/lib/udev/rules.d/99-scangate.rules /etc/udev/rules.d/ && "
            f"printf '%s' '{base64.b64encode(RULES.encode()).decode()}' | base64 -d "
            ">> /etc/udev/rules.d/99-scangate.rules && udevadm control --reload && "
            "udevadm trigger --action=add --subsystem-match=tty && udevadm settle"
        )
        wait_for("/dev/scangate/counter-1", lambda: self.g.run("test -c /dev/scangate/counter-1")[0] == 0, 60)

    # -- the upgrade from the previous release, unattended; a broken config
    # at an upgrade; the rollback and the way back; the purge. One group,
    # run before the checks of a fresh install (which the purge makes room
    # for), each step on what the one before left.

    # What dpkg prints when it asks about a conffile (and, with stdin at
    # EOF, its error).
    PROMPT_SIGNS = ("Configuration file '", "(Y/I/N/O/D/Z)", "conffile prompt", "What would you like to do about it")

    def apt(self, args, what, timeout=300):
        """apt-get as a fleet tool runs it: DEBIAN_FRONTEND=noninteractive,
        stdin /dev/null, no terminal (setsid: no controlling tty; the agent
        has none either), bounded by `timeout` so that a question waiting
        for an answer fails the check, not the run. The output (stdout and
        stderr, as apt's log shows them) is kept as <out>/apt-<what>.txt.
        Returns (exit code, output)."""
        limit = int(timeout * SCALE)
        rc, out = self.g.run(
            f"cd /vmtest && DEBIAN_FRONTEND=noninteractive timeout -k 10 {limit} "
            f"setsid -w apt-get {args} </dev/null 2>&1", timeout=timeout + 60)
        with open(os.path.join(self.out, f"apt-{what}.txt"), "w") as f:
            f.write(f"# apt-get {args}: exit {rc}\n{out}")
        check(rc not in (124, 137), f"apt-get {args} did not finish within {limit} s (waiting for an answer?): "
                                   f"{out.strip()[-400:]} (apt-{what}.txt)")
        return rc, out

    def unattended_ok(self, rc, out, what):
        signs = [x for x in self.PROMPT_SIGNS if x in out]
        check(not signs, f"{what}: dpkg asked about a conffile ({', '.join(signs)}): "
                         f"{out[max(0, out.find(signs[0]) - 200):][:600] if signs else ''}")
        check(rc == 0, f"{what}: apt-get exited {rc}: {out.strip()[-600:]}")

    def deb_version(self, deb):
        return self.g.ok(f"dpkg-deb -f /vmtest/{deb} Version").strip()

    def installed_version(self):
        return self.g.ok("dpkg-query -W -f='${Version}' scangate").strip()

    def conf_sum(self):
        return self.g.ok(f"sha256sum {CONF}").split()[0]

    def running(self, version):
        """The service is active, its main process runs /usr/bin/scangate
        as installed now (not a replaced binary: `(deleted)`), and both the
        package and the binary say `version` (a Debian version: its
        upstream part in `scangate --version`). The --version line."""
        wait_for("scangate active", self.active, 90)
        pid = self.main_pid()
        exe = self.g.ok(f"readlink /proc/{pid}/exe").strip()
        check(exe == "/usr/bin/scangate", f"the daemon (pid {pid}) runs {exe!r}: not the installed binary")
        installed = self.installed_version()
        check(installed == version, f"dpkg-query: scangate {installed} installed, not {version}")
        # (`scangate --version`: "scangate 0.2.0 (schema N, commit C, target
        # T)" from 0.2.0 on; 0.1.0 says no schema.)
        line = self.g.ok("scangate --version").strip()
        upstream = version.rsplit("-", 1)[0]
        check(re.match(rf"scangate {re.escape(upstream)}\b", line), f"`scangate --version`: {line!r}, not {upstream}")
        return line

    def prev_apt_install(self):
        check(self.prev_deb, f"no previous release's .deb: {self.prev_error}")
        self.prev_version, self.new_version = self.deb_version(self.prev_deb), self.deb_version(self.deb)
        rc, out = self.apt(f"install -y ./{self.prev_deb}", "prev-install")
        check(rc == 0 and "Setting up scangate" in out, f"apt-get exited {rc}: {out.strip()[-600:]}")
        check(self.installed_version() == self.prev_version, f"installed: {self.installed_version()}")
        conffiles = self.g.ok("dpkg-query -W -f='${Conffiles}' scangate")
        check(CONF in conffiles, f"{CONF} is no conffile of {self.prev_version}: {conffiles!r}")
        return f"{self.prev_deb} with apt-get; {CONF} one of its conffiles"

    def prev_site_setup(self):
        self.site_conf = site_edit(self.g.ok(f"cat {CONF}"))
        self.g.ok(write_file(CONF, self.site_conf))
        verify = self.g.run("dpkg --verify scangate")[1]
        check(re.search(rf"^\S+ c {re.escape(CONF)}$", verify, re.M), f"dpkg --verify does not see {CONF} edited: {verify!r}")
        self.install_rules()
        self.g.ok("systemctl enable --now scangate", timeout=180)
        self.running(self.prev_version)
        self.wait_opened("counter-1")
        for _ in range(5):
            self.sc["counter-1"].scan(self.new_serial())
        n = self.ledger_has_all_acked()
        return f"conffile edited (comment, facility, gateway id, window, scanner), enable --now, {n} scans ACKed and in the ledger"

    def keep_scanning(self, name):
        """`name` scans without pause in a thread of its own, each scan
        resent until ACKed (a scanner does the same across a restart).
        Returns stop(), which ends it and returns the serials ACKed."""
        stop, got, errors = threading.Event(), [], []

        def loop():
            try:
                while not stop.is_set():
                    serial = self.new_serial()
                    if self.sc[name].scan(serial, seconds=240, stop=stop):
                        got.append(serial)
                    time.sleep(0.5)
            except Exception as e:
                errors.append(f"{name}: {e}")

        t = threading.Thread(target=loop, daemon=True)
        t.start()

        def end():
            stop.set()
            t.join()
            check(not errors, f"while scanning: {errors}")
            return got
        return end

    def upgrade_no_prompt(self):
        check(self.site_conf, "the site's setup under the previous release failed")
        self.before_upgrade = {p: self.g.prop(p) for p in ("MainPID", "InvocationID")}
        self.sum_before = self.conf_sum()
        # (For the export before a rollback across a schema change.)
        self.upgraded_at = self.g.ok("date -u +%Y-%m-%dT%H:%M:%S.000Z").strip()
        end = self.keep_scanning("counter-1")
        t0 = time.monotonic()
        try:
            rc, out = self.apt(f"install -y ./{self.deb}", "upgrade")
        finally:
            took = time.monotonic() - t0
            self.during_upgrade = end()
        self.unattended_ok(rc, out, "the upgrade")
        check(f"Setting up scangate ({self.new_version})" in out, f"no 'Setting up scangate ({self.new_version})': {out[-600:]}")
        said = f"scangate: scangate.service restarted, running version {self.new_version}"
        check(said in out, f"postinst did not say {said!r}: {out.strip()[-800:]}")
        check("DID NOT COME BACK" not in out, f"postinst said the service did not come back: {out.strip()[-800:]}")
        return (f"{self.prev_version} -> {self.new_version}: noninteractive, stdin /dev/null, no tty: exit 0 in "
                f"{took:.0f} s, no conffile question; postinst: {said!r}; {len(self.during_upgrade)} scans ACKed "
                "on counter-1 meanwhile")

    def upgrade_kept_config(self):
        after = self.conf_sum()
        check(after == self.sum_before, f"{CONF} changed across the upgrade: sha256 {self.sum_before[:12]} -> {after[:12]}")
        # (The agent's output loses trailing newlines: compared by hash.)
        site = hashlib.sha256(self.site_conf.encode()).hexdigest()
        check(after == site, f"{CONF} is not the file the site wrote (sha256 {site[:12]})")
        mode = self.g.ok(f"stat -c '%U:%G %a' {CONF}").strip()
        check(mode == "root:scangate 640", f"{CONF} is {mode}")
        conffiles = self.g.ok("dpkg-query -W -f='${Conffiles}' scangate").strip()
        check(conffiles.startswith(CONF + " ") and conffiles.endswith(" obsolete"),
              f"dpkg's conffiles of scangate: {conffiles!r} (expected {CONF} as obsolete)")
        left = self.g.ok(f"ls -A /etc/scangate/").split()
        check(left == ["scangate.toml"], f"/etc/scangate/ holds {left}")
        ref = "/usr/share/scangate/scangate.toml.example"
        check(self.g.run(f"test -f {ref}")[0] == 0, f"no {ref}")
        return f"byte for byte (sha256 {after[:12]}), {mode}; dpkg: {conffiles}; the reference in {ref}"

    def upgrade_restarted(self):
        line = self.running(self.new_version)
        now = {p: self.g.prop(p) for p in ("MainPID", "InvocationID")}
        check(now["InvocationID"] != self.before_upgrade["InvocationID"] and now["MainPID"] != self.before_upgrade["MainPID"],
              f"not restarted: {self.before_upgrade} -> {now}")
        check(self.g.prop("UnitFileState") == "enabled", "the unit is no longer enabled")
        return f"restarted (MainPID {self.before_upgrade['MainPID']} -> {now['MainPID']}), /usr/bin/scangate: {line!r}"

    def upgrade_ledger(self):
        self.wait_opened("counter-1")
        for _ in range(3):
            self.sc["counter-1"].scan(self.new_serial())
        n = self.ledger_has_all_acked()
        verified = self.audit_verify()
        return (f"all {n} ACKed scans in the ledger ({len(self.during_upgrade)} of them during the upgrade, "
                f"3 after it); audit verify 0: {verified!r}")

    def upgrade_broken_config(self):
        broken = self.site_conf.replace('id = "vm-gw-1"\n', 'id = "vm-gw-1"\nsite_colour = "blue"\n', 1)
        check(broken != self.site_conf, "no id line to break")
        self.g.ok(write_file(CONF, broken))
        check(self.active(), "scangate is not running before the reinstall")
        rc, out = self.apt(f"install -y --reinstall ./{self.deb}", "broken-config")
        try:
            self.unattended_ok(rc, out, "the reinstall")
            state = self.g.prop("ActiveState")
            check(state == "failed", f"scangate is {state} with the unknown key (want failed)")
            # The message: what failed, the reason (check-config as the
            # service user, naming the key; the journal), the fix.
            for want in ("THE SERVICE DID NOT COME BACK", f"restarted on version {self.new_version}",
                         "NOT taking scans", "REASON: the config is refused",
                         f"check-config --config {CONF}: exit 2", "site_colour",
                         "Its journal since the restart", f"FIX: edit {CONF}", "systemctl restart scangate"):
                check(want in out, f"apt's output lacks {want!r}: {out.strip()[-1500:]}")
            msg = out[out.find("THE SERVICE DID NOT COME BACK"):]
            journal = msg[msg.find("Its journal since the restart"):msg.find("FIX:")]
            check("scangate" in journal.split("\n", 1)[1], f"no journal lines in the message: {journal!r}")
            reason = next((l.strip("# ") for l in msg.splitlines() if "site_colour" in l), "")
            logged = self.g.run("journalctl -t scangate-postinst -o cat --no-pager | tail -n 1")[1].strip()
            check("did not come back" in logged, f"not in the system log (scangate-postinst): {logged!r}")
        finally:
            # The repair, as the message says: the file, then a restart.
            self.g.ok(write_file(CONF, self.site_conf))
            self.g.run("systemctl reset-failed scangate")
            self.g.ok("systemctl restart scangate", timeout=180)
        self.running(self.new_version)
        self.wait_opened("counter-1")
        self.sc["counter-1"].scan(self.new_serial())
        self.ledger_has_all_acked()
        return (f"--reinstall with an unknown key: apt-get exit 0, the unit failed, and apt's output has the message "
                f"(reason {reason!r}, the journal, the fix; full text in apt-broken-config.txt); repaired, restarted, "
                "a scan in the ledger")

    def migration_copy(self):
        """The copy of the database the upgrade's migration kept
        (scangate.db.schema-N.before-<new version>), or None: the upgrade
        changed no schema."""
        upstream = self.new_version.rsplit("-", 1)[0]
        names = self.g.ok("ls -A /var/lib/scangate/").split()
        return next((n for n in names if n.startswith("scangate.db.schema-") and n.endswith(f".before-{upstream}")), None)

    def restore_copy(self, copy):
        """docs/technician.md, "Rolling back", across a schema change: what
        the new release recorded since the upgrade exported, the service
        stopped, the copy the migration kept put in the database's place.
        Returns the export's text."""
        export = "/var/tmp/ledger-since-upgrade.jsonl"
        self.g.ok(f"runuser -u scangate -- scangate ledger export --config {CONF} --since {self.upgraded_at} > {export}")
        self.g.ok("systemctl stop scangate", timeout=180)
        self.g.ok("cd /var/lib/scangate && mv scangate.db scangate.db.after-upgrade && "
                  f"rm -f scangate.db-wal scangate.db-shm && cp {copy} scangate.db && "
                  "chown scangate:scangate scangate.db && chmod 0640 scangate.db")
        return self.g.ok(f"cat {export}")

    def rollback(self):
        before = self.g.prop("InvocationID")
        copy = self.migration_copy()
        exported = self.restore_copy(copy) if copy else None
        rc, out = self.apt(f"install -y --allow-downgrades ./{self.prev_deb}", "rollback")
        self.unattended_ok(rc, out, "the rollback")
        check(self.conf_sum() == self.sum_before, f"{CONF} changed across the rollback")
        if copy:
            # (Stopped for the restore: the previous release's postinst
            # restarts only a running service.)
            self.g.ok("systemctl start scangate", timeout=180)
        try:
            line = self.running(self.prev_version)
        except CheckFailed as e:
            said = self.g.run("journalctl -u scangate -n 15 --no-pager -o cat")[1].strip()
            raise CheckFailed(f"{e}; the previous release on this state: {said[-800:]}")
        check(self.g.prop("InvocationID") != before, "the previous release's postinst did not restart the service")
        given_up = []
        if copy:
            # What the new release recorded since the upgrade is not in the
            # copy: it must be in the export, and is given up here.
            out = self.ledger()
            for sc in self.sc.values():
                lost = [s for s in sc.acked if s not in out]
                missing = [s for s in lost if s not in exported]
                check(not missing, f"ACKed, not in the restored ledger nor in the export since the upgrade: {missing}")
                given_up += lost
                sc.acked = [s for s in sc.acked if s not in lost]
        self.wait_opened("counter-1")
        for _ in range(3):
            self.sc["counter-1"].scan(self.new_serial())
        n = self.ledger_has_all_acked()
        if copy:
            # Until the previous release anchors its own head, its verify
            # reports the records the rollback gave up (the docs say so).
            rc, out = self.g.run(f"runuser -u scangate -- scangate audit verify --config {CONF} 2>&1", timeout=120)
            check(rc == 0 or "state-id" in out, f"`scangate audit verify` exited {rc}: {out.strip()[-400:]}")
            verified = f"exit {rc}: {out.strip().splitlines()[-1] if out.strip() else ''}"
        else:
            verified = "0 (" + self.audit_verify() + ")"
        conffiles = self.g.ok("dpkg-query -W -f='${Conffiles}' scangate").strip()
        how = (f"across the schema change: {copy} restored as docs/technician.md says, the {len(given_up)} scans "
               "recorded since the upgrade in the export and given up" if copy else "on the database the new version used")
        return (f"{self.new_version} -> {self.prev_version} (--allow-downgrades): exit 0, no question, config kept; "
                f"runs {line!r} {how}; all {n} ACKed scans in the ledger, 3 new ones "
                f"too; audit verify {verified}; dpkg tracks the conffile again: {conffiles}")

    def prompt_control(self):
        """The control: what the checks above would see if a release still
        changed a conffile the site edited. The previous release again,
        its conffile tracked and edited (after the rollback), and a copy of
        it whose conffile differs, installed the same unattended way: dpkg
        must ask, fail at EOF, and the check must say so. Then configured
        with --force-confold (the site's file kept) to go on."""
        ver = self.prev_version + "+vmctl1"
        self.g.ok(
            "rm -rf /var/tmp/vmctl && dpkg-deb -R /vmtest/{0} /var/tmp/vmctl && "
            "echo '# changed in a later release' >> /var/tmp/vmctl{1} && "
            "sed -i 's/^Version: .*/Version: {2}/' /var/tmp/vmctl/DEBIAN/control && "
            "dpkg-deb -Zgzip -z1 -b /var/tmp/vmctl /var/tmp/scangate-control.deb >/dev/null && rm -rf /var/tmp/vmctl"
            .format(self.prev_deb, CONF, ver), timeout=300)
        rc, out = self.apt("install -y /var/tmp/scangate-control.deb", "control")
        signs = [x for x in self.PROMPT_SIGNS if x in out]
        check(rc != 0 and signs, f"a changed conffile the site edited: apt-get exited {rc}, no question seen: {out.strip()[-600:]}")
        rc2, out2 = self.g.run("DEBIAN_FRONTEND=noninteractive dpkg --configure --force-confdef --force-confold -a "
                               "</dev/null 2>&1; rm -f /var/tmp/scangate-control.deb " + CONF + ".dpkg-*", timeout=300)
        check(rc2 == 0, f"dpkg --configure --force-confold: exit {rc2}: {out2.strip()[-400:]}")
        check(self.conf_sum() == self.sum_before, f"{CONF} changed by the control")
        check(self.installed_version() == ver, f"installed: {self.installed_version()}")
        return (f"{self.prev_version} -> {ver} (its conffile changed): apt-get exit {rc}, seen: {', '.join(signs)}; "
                "then configured with --force-confold")

    def reupgrade(self):
        before = self.g.prop("InvocationID")
        rc, out = self.apt(f"install -y ./{self.deb}", "reupgrade")
        self.unattended_ok(rc, out, "the upgrade after the rollback")
        check(self.conf_sum() == self.sum_before, f"{CONF} changed across the upgrade")
        line = self.running(self.new_version)
        check(self.g.prop("InvocationID") != before, "not restarted")
        self.wait_opened("counter-1")
        self.sc["counter-1"].scan(self.new_serial())
        n = self.ledger_has_all_acked()
        self.audit_verify()
        return f"exit 0, no question, config kept, {line!r}, all {n} ACKed scans in the ledger, audit verify 0"

    def purge(self):
        rc, out = self.apt("purge -y scangate", "purge")
        if rc != 0:  # (whatever the group left: the fresh install needs a clean box)
            self.g.run("dpkg --purge --force-all scangate", timeout=300)
        self.unattended_ok(rc, out, "the purge")
        got = dict(l.split("=", 1) for l in self.g.ok(
            "echo etc=$(ls -A /etc/scangate 2>/dev/null || echo '(gone)'); "
            "echo db=$(stat -c %s /var/lib/scangate/scangate.db 2>/dev/null || echo '(gone)'); "
            "echo unit=$(ls /usr/lib/systemd/system/scangate.service 2>/dev/null || echo '(gone)'); "
            "echo state=$(systemctl show -p ActiveState --value scangate)").splitlines() if "=" in l)
        check(got["etc"] == "(gone)", f"/etc/scangate after the purge: {got['etc']}")
        check(got["db"] != "(gone)", "the purge removed the state directory's database")
        check(got["unit"] == "(gone)", "the unit file is still there")
        check(got["state"] == "inactive", f"scangate is {got['state']} after the purge")
        return f"the config and /etc/scangate gone, the service stopped, /var/lib/scangate/scangate.db kept ({got['db']} B)"

    # -- the checks of a fresh install, in the order run() calls them

    def apt_install(self):
        out = self.g.ok(f"cd /vmtest && apt-get install -y ./{self.deb} 2>&1", timeout=300)
        check("Setting up scangate" in out, f"apt did not set scangate up: {out[-600:]}")
        self.g.ok("dpkg-query -W -f='${Status}' scangate | grep -qx 'install ok installed'")
        check(f"created {CONF} from /usr/share/scangate/scangate.toml.example" in out,
              f"postinst did not say it created {CONF}: {out[-600:]}")
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
            "dpkg-query -W -f='${Conffiles}' scangate | grep -q . && echo conffile; "
            f"cmp -s {CONF} /usr/share/scangate/scangate.toml.example && echo from-reference"
        ).split("\n")
        check(got[0] == "root:scangate 640", f"{CONF} is {got[0]}, not root:scangate 640")
        check(got[1] == "/usr/sbin/nologin", f"scangate's shell is {got[1]!r}")
        check("dialout" in got[2].split(), f"scangate's groups: {got[2]}")
        check(got[3] == "disabled", f"the unit is {got[3]!r} after install (expected disabled until configured)")
        # No conffile (pkg/deb/postinst: the site's file, never a question
        # at an upgrade); postinst made it from the reference.
        check("conffile" not in got, "the package has conffiles: " + self.g.ok("dpkg-query -W -f='${Conffiles}' scangate"))
        check("from-reference" in got, f"{CONF} is not /usr/share/scangate/scangate.toml.example")
        return f"{got[0]} {CONF} (no conffile; made from the reference by postinst), groups {got[2]}"

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
        self.install_rules()
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

    def identity(self):
        """counter-1's USB serial adapter (qemu's usb-serial: FTDI
        0403:6001, serial SCAN1) says what it is: in `status --json` and
        the text, read by the daemon from the open device's sysfs
        descriptors."""
        def said():
            st = json.loads(self.g.run("scangate status --json")[1])
            return {s["name"]: s for s in st["scanners"]}.get("counter-1", {}).get("identity") or {}
        idn = wait_for("counter-1's identity in status", said, 30)
        check(idn.get("vendor_id") == 0x0403 and idn.get("product_id") == 0x6001 and idn.get("serial") == "SCAN1",
              f"counter-1 (FTDI usb-serial) says it is: {idn!r}")
        out = self.g.run("scangate status")[1]
        check("  is: " in out and "(0403:6001), serial SCAN1" in out, f"status text: {out[:800]}")
        return f"counter-1 is {idn.get('manufacturer')} {idn.get('product')}, serial {idn.get('serial')}, release {idn.get('release')}"

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
        self.qmp.cmd("device_add", driver="usb-serial", id="u3", chardev="c3", serial="SCAN3", bus="xhci.0", port="3")
        self.wait_opened("late")
        self.sc["late"].scan(self.new_serial())
        self.ledger_has_all_acked()
        return "plugged after start (QMP device_add), opened, scan ACKed and in the ledger"

    def unplug_serial(self, name, dev):
        """Pull USB-serial scanner `name` (qemu device `dev`) out."""
        self.sc[name].unplugging()
        self.qmp.cmd("device_del", id=dev)
        wait_for(f"/dev/scangate/{name} gone", lambda: self.g.run(f"test -e /dev/scangate/{name}")[0] != 0, 60)

    def plug_serial(self, name, dev, chardev, serial, port):
        """Plug USB-serial scanner `name` (qemu device `dev` on `chardev`,
        USB serial number `serial`, xhci port `port`) in; it sends again."""
        self.qmp.cmd("device_add", driver="usb-serial", id=dev, chardev=chardev, serial=serial, bus="xhci.0", port=port)
        self.sc[name].plugged.set()

    def replug(self):
        self.unplug_serial("late", "u3")
        check(self.active(), "the service stopped when its scanner was unplugged")
        self.plug_serial("late", "u3", "c3", "SCAN3", "3")
        self.wait_opened("late")
        self.sc["late"].scan(self.new_serial())
        self.sc["counter-1"].scan(self.new_serial())
        self.ledger_has_all_acked()
        return "unplugged (device_del), replugged, reopened, scan ACKed"

    def reload(self):
        self.qmp.cmd("device_add", driver="usb-serial", id="u2", chardev="c2", serial="SCAN2", bus="xhci.0", port="2")
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
        self.g.ok("systemctl stop scangate", timeout=120)
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

    # -- power cuts: the guest's kernel dropped on the floor (sysrq b)
    #
    # `echo b > /proc/sysrq-trigger` reboots at once: nothing is synced or
    # unmounted, the guest's page cache is gone, and the disk keeps what
    # reached it. qemu resets the machine in the same process (QMP set-action
    # reboot=reset while these checks run; run.sh starts it with -no-reboot),
    # so the snapshot overlay on the system disk, and what the guest wrote
    # to it, lives on across the reboot. (What the guest handed to its
    # virtual disk survives even unflushed: the cut loses the kernel's page
    # cache, not a drive's cache.)

    PC_STATE = "/var/lib/scangate"
    # The power cuts' dedup window: a scanner's resend after the reboot
    # (which takes minutes under TCG on a busy host) is still an echo.
    PC_WINDOW_S = 1800
    # What the boots after a cut do without: the HID checks' displays
    # (fbcon drawn under TCG is slow), the Redis check's server, timers.
    PC_MASK = ("redis-server.service e2scrub_reap.service systemd-update-utmp-runlevel.service getty@tty1.service "
               "dpkg-db-backup.timer e2scrub_all.timer fstrim.timer systemd-tmpfiles-clean.timer logrotate.timer man-db.timer")

    def pc_setup(self):
        """Once, before the first cut: counter-1 and counter-2 plugged, a
        config with them alone, a fresh state directory, a persistent
        journal (a failed boot's log stays readable), boots made shorter,
        everything on the disk, and qemu resetting the guest when it
        reboots."""
        if self.pc_ready:
            return
        have = {c["name"] for c in self.qmp.cmd("qom-list", path="/machine/peripheral")}
        if "u2" not in have:
            self.qmp.cmd("device_add", driver="usb-serial", id="u2", chardev="c2", serial="SCAN2", bus="xhci.0", port="2")
        wait_for("/dev/scangate/counter-2", lambda: self.g.run("test -c /dev/scangate/counter-2")[0] == 0, 60)
        self.g.ok(write_file(CONF, config(["counter-1", "counter-2"], window_ms=self.PC_WINDOW_S * 1000)))
        self.g.ok(
            f"for u in {self.PC_MASK}; do systemctl cat $u >/dev/null 2>&1 && systemctl mask -q $u; done; "
            "printf 'blacklist virtio_gpu\\nblacklist bochs\\nblacklist bochs_drm\\n' > /etc/modprobe.d/vm-powercut.conf && "
            "rm -f /etc/systemd/system/scangate.service.d/vm-credential.conf && systemctl daemon-reload && "
            f"systemctl stop scangate && systemctl reset-failed scangate; rm -rf {self.PC_STATE} && "
            "mkdir -p /var/log/journal && systemd-tmpfiles --create --prefix /var/log/journal && journalctl --flush && "
            "systemctl is-enabled scangate && systemctl start scangate && sync", timeout=180)
        self.pc_wait_up("the setup's start")
        self.qmp.cmd("set-action", reboot="reset")
        self.pc_ready = True

    def pc_teardown(self):
        if self.pc_ready:
            self.qmp.cmd("set-action", reboot="shutdown")
            self.pc_ready = False

    def resets(self):
        self.qmp.pump()
        return sum(1 for e in self.qmp.events if e.get("event") == "RESET")

    def boot_id(self):
        return self.g.ok("cat /proc/sys/kernel/random/boot_id").strip()

    def pc_report(self, why):
        """The state directory and the service's journal of this boot,
        kept in the results directory: the detail of a failed cut."""
        _, out = self.g.run(
            f"echo '# {why}'; stat -c '%A %U:%G %s %n' {self.PC_STATE} {self.PC_STATE}/* 2>&1; "
            "systemctl show -p ActiveState,SubState,Result,ExecMainStatus,NRestarts scangate; "
            "journalctl -u scangate -b --no-pager -o short-monotonic | tail -n 40", timeout=60)
        self.pc_reports += 1
        path = os.path.join(self.out, f"powercut-{self.pc_reports}.txt")
        with open(path, "w") as f:
            f.write(out)
        states = re.findall(r"^(ActiveState|SubState|Result|ExecMainStatus|NRestarts)=(.*)$", out, re.M)
        files = re.findall(r"^\S+ \S+ (\d+) (/var/lib/scangate\S*)$", out, re.M)
        return (f"{', '.join(f'{k}={v}' for k, v in states)}; state dir: "
                f"{', '.join(f'{os.path.basename(n)} {s} B' for s, n in files if n != self.PC_STATE) or 'empty'}; "
                f"full report in {os.path.basename(path)}")

    def pc_wait_up(self, after, seconds=150):
        """scangate active (Type=notify: after READY=1) by itself, with
        counter-1 and counter-2 open; the seconds it took. A failed unit,
        or none active in time, is a failure with the state directory's
        listing and the journal."""
        t0 = time.monotonic()
        end = deadline(seconds)
        while True:
            state = self.g.prop("ActiveState")
            if state == "active":
                break
            if state == "failed" or time.monotonic() > end:
                raise CheckFailed(f"after {after}: scangate not active ({state}): {self.pc_report(after)}")
            time.sleep(0.5)
        for name in ("counter-1", "counter-2"):
            self.wait_opened(name, 60)
        return time.monotonic() - t0

    def power_cut(self, script=""):
        """Run `script` and then cut the power, in one command to the agent
        (no answer comes). Returns once qemu reset the machine."""
        resets = self.resets()
        self.g.send(f"{script}\necho b > /proc/sysrq-trigger\n")
        wait_for("qemu to reset the guest (sysrq b)", lambda: self.resets() > resets, 60, 0.05)

    def pc_back(self, what, old_boot):
        """After a cut: the guest booted again, its agent answers, scangate
        came up by itself. Returns (boot seconds, service seconds)."""
        t0 = time.monotonic()
        # When the boot's milestones reach the console (for the figures).
        marks = {"kernel": b"Linux version", "initramfs": b"Run /init", "systemd": b"systemd[1]: systemd 2",
                 "agent unit": b"scangate-vmtest"}
        seen, done = {}, threading.Event()
        path = os.path.join(self.out, "console.log")
        start = os.path.getsize(path)

        def watch():
            while not done.is_set() and len(seen) < len(marks):
                with open(path, "rb") as f:
                    f.seek(start)
                    text = f.read()
                for k, m in marks.items():
                    if k not in seen and m in text:
                        seen[k] = time.monotonic() - t0
                time.sleep(0.2)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            check(self.g.wait_ready(600 * SCALE), f"after {what}: the guest agent did not come back (see console.log)")
        finally:
            done.set()
            watcher.join()
        t_boot = time.monotonic() - t0
        print("  boot: " + ", ".join(f"{k} {v:.0f} s" for k, v in seen.items())
              + f", agent's hello {t_boot:.0f} s", flush=True)
        check(self.boot_id() != old_boot, f"after {what}: the same boot id, no reboot happened")
        check(self.g.prop("UnitFileState") == "enabled", f"after {what}: scangate is not enabled")
        return t_boot, self.pc_wait_up(what)

    def pc_ledger(self, acked, what):
        """The ACKed scans not in the ledger, the scans in it twice, and
        `scangate audit verify`'s exit code and output."""
        counts = {}
        for e in self.entries():
            counts[e.get("serial")] = counts.get(e.get("serial"), 0) + 1
        lost = [s for s in acked if counts.get(s, 0) == 0]
        doubled = sorted(s for s, n in counts.items() if n > 1)
        rc, out = self.g.run(f"runuser -u scangate -- scangate audit verify --config {CONF} 2>&1", timeout=120)
        return lost, doubled, rc, out.strip()

    def pc_stream_and_cut(self, at_acks, script="", what=None, disk_cut=False):
        """counter-1 and counter-2 scan without pause, each in a thread of
        its own (a label, its ACK, the next); once `at_acks` ACKs came in
        all, `script` runs and the power is cut. Then the guest boots
        again, scangate comes up by itself, and each scanner sends the
        label it got no ACK for again, as a scanner does. Returns (the
        ACKed serials, figures).

        With `disk_cut`, the state disk is cut instead (`sd_cut`: its
        writes dropped from that instant, the daemon killed, the disk
        mounted again as after a reboot, the service started): no reboot.
        An ACK that arrives once the cut was asked for counts as none (the
        scan is resent like any unACKed one), since a daemon stopped a
        moment after its disk may still have ACKed a write that was
        dropped; one that came before was sent before the cut."""
        names = ("counter-1", "counter-2")
        stop, cutting = threading.Event(), threading.Event()
        state = {n: {"acked": [], "pending": None, "errors": []} for n in names}

        def stream(name):
            st, sc = state[name], self.sc[name]
            try:
                while not stop.is_set():
                    serial = self.new_serial()
                    st["pending"] = (serial, time.monotonic())
                    if sc.scan(serial, seconds=120, stop=stop):
                        if disk_cut and cutting.is_set():
                            break
                        st["acked"].append(serial)
                        st["pending"] = None
            except Exception as e:
                st["errors"].append(f"{name}: {e}")

        t0 = time.monotonic()
        old_boot = self.boot_id()
        threads = [threading.Thread(target=stream, args=(n,), daemon=True) for n in names]
        for t in threads:
            t.start()
        try:
            wait_for(f"{at_acks} scans ACKed", lambda: sum(len(s["acked"]) for s in state.values()) >= at_acks
                     or any(s["errors"] for s in state.values()), 120, 0.02)
            t_cut = time.monotonic()
            if disk_cut:
                cutting.set()
                self.g.ok(f"{script}\n{self.sd_cut()}", timeout=180)
            else:
                self.power_cut(script)
        finally:
            stop.set()
            for t in threads:
                t.join()
        errors = [e for s in state.values() for e in s["errors"]]
        check(not errors, f"while streaming: {errors}")
        acked = [x for s in state.values() for x in s["acked"]]
        n_acked = len(acked)
        t_reset = time.monotonic()
        if disk_cut:
            t_boot, t_up = 0.0, self.pc_wait_up(what)
        else:
            t_boot, t_up = self.pc_back(what or f"a cut after {n_acked} ACKs", old_boot)
        resent = 0
        for name, st in state.items():
            # Within the dedup window a resend is an echo: one pick,
            # whether or not it was committed before the cut.
            if st["pending"] and time.monotonic() - st["pending"][1] < (self.PC_WINDOW_S - 300) * SCALE:
                self.sc[name].scan(st["pending"][0], seconds=60)
                acked.append(st["pending"][0])
                resent += 1
        print(f"  {'disk' if disk_cut else 'power'} cut: streamed {t_cut - t0:.1f} s, "
              f"{'cut and remounted' if disk_cut else 'reset'} {t_reset - t_cut:.1f} s after the cut was sent, "
              f"agent back {t_boot:.0f} s later, scangate up {t_up:.1f} s after, resends {time.monotonic() - t_reset - t_boot - t_up:.1f} s; "
              f"{n_acked} ACKed", flush=True)
        return acked, {"acked": n_acked, "resent": resent, "boot": t_boot, "up": t_up}

    def pc_check_ledger(self, acked, what):
        lost, doubled, rc, out = self.pc_ledger(acked, what)
        if lost or doubled:
            raise CheckFailed(f"{what}: ACKed but not in the ledger: {lost}; in the ledger twice: {doubled}; "
                              f"{self.pc_report(what)}")
        if rc != 0:
            raise CheckFailed(f"{what}: `scangate audit verify` exited {rc}: {out[-400:]}; {self.pc_report(what)}")

    def powercut_mid_stream(self):
        self.pc_setup()
        acked, figures = [], []
        # The cut comes this many ACKs into the stream (plus what the
        # scanners ACK while the agent runs the cut, a second or two).
        # (Two cuts: a reboot takes 15-35 s under TCG here, minutes on a
        # busy host, and CI's whole run should stay near 30 minutes.)
        for n, at in enumerate((1, 60), 1):
            t0 = time.monotonic()
            got, f = self.pc_stream_and_cut(at)
            acked += got
            self.pc_check_ledger(acked, f"cut {n}")
            figures.append(f"{f['acked']} ACKed + {f['resent']} resent, boot {f['boot']:.0f} s")
            print(f"  cut {n}: {time.monotonic() - t0:.0f} s in all", flush=True)
        return (f"{len(figures)} cuts (sysrq b) mid-stream from 2 ACKing usb-serial scanners; after each reboot "
                f"the unit up by itself, all {len(acked)} ACKed scans in the ledger once, audit verify 0: "
                + "; ".join(figures))

    def cut_files(self):
        """What the state directory held when the last cut came, as the
        cut script wrote it to the console (vmcut: …) just before."""
        with open(os.path.join(self.out, "console.log"), errors="replace") as f:
            lines = [l for l in f if "vmcut:" in l]
        return lines[-1].split("vmcut:", 1)[1].strip() if lines else "?"

    # The state disk of the first-start cuts: a file system of its own on
    # a loop device through dm-flakey, mounted on the state directory.
    # Its writes pass, or, from the cut on, are dropped while reported
    # done (xfstests' common/dmflakey cuts a disk the same way): what it
    # holds then is what it held at that instant, as after a power cut,
    # and no reboot is needed.
    SD_IMG = "/var/tmp/vm-state.img"
    SD_DM = "vmstate"
    SD_PASS = "0 $(blockdev --getsz $loop) flakey $loop 0 180 0"
    SD_DROP = "0 $(blockdev --getsz $loop) flakey $loop 0 0 180 1 drop_writes"

    def sd_loop(self):
        return f"loop=$(losetup -j {self.SD_IMG} | cut -d: -f1 | head -n1)"

    def sd_fresh(self):
        """A guest script: the service stopped, an empty state disk
        mounted on the state directory (as the package leaves a gateway:
        nothing in it)."""
        return (
            "systemctl stop scangate; systemctl reset-failed scangate; "
            f"umount {self.PC_STATE} 2>/dev/null; dmsetup remove {self.SD_DM} 2>/dev/null; "
            f"rm -rf {self.PC_STATE}; mkdir -p {self.PC_STATE} && "
            f"{{ [ -e {self.SD_IMG} ] || {{ modprobe dm_flakey && truncate -s 256M {self.SD_IMG} && losetup -f {self.SD_IMG}; }}; }} && "
            f"{self.sd_loop()} && [ -n \"$loop\" ] && mkfs.ext4 -q -F $loop && "
            f"dmsetup create {self.SD_DM} --table \"{self.SD_PASS}\" && "
            f"mount /dev/mapper/{self.SD_DM} {self.PC_STATE} && rmdir {self.PC_STATE}/lost+found && sync"
        )

    def sd_cut(self):
        """A guest script: the cut (the daemon stopped where it is, every
        write to the state disk dropped from here on, the daemon killed),
        then the disk mounted again (its journal replayed, as at boot) and
        the service started, as a boot would."""
        return (
            "pid=$(systemctl show -p MainPID --value scangate)\n"
            '[ "$pid" = 0 ] || kill -STOP "$pid"\n'
            f"{self.sd_loop()}\n"
            f"dmsetup suspend --nolockfs --noflush {self.SD_DM}\n"
            f"dmsetup load {self.SD_DM} --table \"{self.SD_DROP}\"\n"
            f"dmsetup resume {self.SD_DM}\n"
            "systemctl kill -s KILL scangate; systemctl stop scangate; systemctl reset-failed scangate\n"
            f"umount {self.PC_STATE} && dmsetup remove {self.SD_DM} && "
            f"dmsetup create {self.SD_DM} --table \"{self.SD_PASS}\" && "
            f"mount /dev/mapper/{self.SD_DM} {self.PC_STATE} && systemctl start scangate"
        )

    def sd_teardown(self):
        return (
            "systemctl stop scangate; systemctl reset-failed scangate; "
            f"umount {self.PC_STATE}; dmsetup remove {self.SD_DM}; {self.sd_loop()}; losetup -d $loop; "
            f"rm -f {self.SD_IMG}; rm -rf {self.PC_STATE}; systemctl start scangate; sync"
        )

    def sd_cut_control(self):
        """The disk cut's own control: what was written and synced before
        the cut is there after it; what was written without a sync (still
        in the page cache) is not, as a power cut would lose it."""
        self.g.ok(self.sd_fresh(), timeout=180)
        out = self.g.ok(
            f"echo kept > {self.PC_STATE}/synced && sync {self.PC_STATE}/synced && "
            f"echo lost > {self.PC_STATE}/unsynced\n"
            + self.sd_cut().replace(" && systemctl start scangate", "")
            + f" && cat {self.PC_STATE}/synced && cat {self.PC_STATE}/unsynced 2>/dev/null; true", timeout=180)
        check("kept" in out and "lost" not in out,
              f"the disk cut did not act as a power cut: after it the state disk holds {out.split()} "
              "(want the synced file's 'kept' and not the unsynced file's 'lost')")

    def powercut_first_start(self):
        """Cuts spread over the very first start, anchored on its progress
        (under TCG a time after `systemctl start` hits a different moment
        on every run): an empty state directory (as the package leaves
        it), the service started with the two scanners streaming, and the
        state disk cut (`sd_cut`) as soon as the directory holds k
        entries (k = 1, 2, …: whatever a first start creates, in whatever
        order, temporary files too), after a `sync`: the disk then has
        what a kernel that had just written back every dirty page would
        leave, the worst a cut can leave. After the cut the service
        starts, the scans resent are in the ledger once, a new scan is
        taken, audit verify exits 0, and the state directory is
        scangate's, mode 0750. Every k is tried; the failures are reported
        together. First the disk cut's own control."""
        self.pc_setup()
        self.sd_cut_control()
        # A first start without a cut: what it leaves.
        self.g.ok(f"{self.sd_fresh()} && systemctl start scangate", timeout=180)
        self.pc_wait_up("an uncut first start")
        files = self.g.ok(f"ls -A {self.PC_STATE}").split()
        ok, failed, figures = [], [], []
        try:
            for k in range(1, min(len(files), 5) + 1):
                what = f"a cut at {k} entries in the state directory"
                t0 = time.monotonic()
                self.g.ok(self.sd_fresh(), timeout=180)
                cut = (
                    "systemctl --no-block start scangate\n"
                    f"shopt -s nullglob dotglob; end=$((SECONDS + 60)); f=()\n"
                    f"until [ ${{#f[@]}} -ge {k} ] || [ $SECONDS -ge $end ]; do f=({self.PC_STATE}/*); done\n"
                    'echo "vmcut: ${f[*]##*/}" > /dev/kmsg\n'
                    "sync"
                )
                try:
                    acked, f = self.pc_stream_and_cut(0, cut, what, disk_cut=True)
                    what += f" ({self.cut_files()})"
                    mode = self.g.ok(f"stat -c '%U:%G %a' {self.PC_STATE}").strip()
                    check(mode == "scangate:scangate 750", f"after {what}: {self.PC_STATE} is {mode}")
                    serial = self.new_serial()
                    self.sc["counter-1"].scan(serial)
                    self.pc_check_ledger(acked + [serial], f"after {what}")
                    ok.append(str(k))
                    figures.append(f"{self.cut_files()}: {f['acked']} ACKed, up {f['up']:.0f} s after")
                except CheckFailed as e:
                    failed.append(f"{e} [the cut came with: {self.cut_files()}]")
                print(f"  {what}: {time.monotonic() - t0:.0f} s in all", flush=True)
        finally:
            # Leave the usual state directory for the checks after this one.
            self.g.run(self.sd_teardown(), timeout=180)
        summary = (f"a first start makes {' '.join(files)}; the state disk's cut control held; "
                   f"cuts at 1..{min(len(files), 5)} entries")
        if failed:
            raise CheckFailed(f"{summary}: up after {len(ok)} ({', '.join(ok) or 'none'}), not after {len(failed)}: "
                              + " || ".join(failed))
        return (f"{summary}: each time up after the cut, the resent scans in the ledger once, "
                f"a new scan taken, audit verify 0 ({'; '.join(figures)})")

    def powercut_control_no_fsync(self):
        """The control: the same cut and the same ledger check against a
        fault, fsync made a no-op (nosync.so preloaded into the service,
        as libeatmydata) and the guest's dirty pages kept in its page cache
        (no periodic writeback): ACKed scans must be lost, and the check
        must say so. Passes when it sees the loss."""
        self.pc_setup()
        dropin = "/etc/systemd/system/scangate.service.d/vm-nosync.conf"
        self.g.ok(
            "install -m 0644 /vmtest/nosync.so /usr/local/lib/vm-nosync.so && mkdir -p /etc/systemd/system/scangate.service.d && "
            f"printf '[Service]\\nEnvironment=LD_PRELOAD=/usr/local/lib/vm-nosync.so\\n' > {dropin} && "
            f"systemctl daemon-reload && systemctl stop scangate && systemctl reset-failed scangate; rm -rf {self.PC_STATE} && "
            "systemctl start scangate && sync", timeout=180)
        self.pc_wait_up("the restart with nosync.so")
        pid = self.main_pid()
        check(self.g.run(f"grep -q vm-nosync.so /proc/{pid}/maps")[0] == 0, "nosync.so is not loaded in the daemon")
        # Dirty pages stay in the page cache until the cut (the values are
        # the kernel's; a reboot restores them). No `sync` from here on.
        self.g.ok("sysctl -q vm.dirty_writeback_centisecs=0 vm.dirty_expire_centisecs=360000 "
                  "vm.dirty_background_ratio=80 vm.dirty_ratio=90")
        try:
            acked, f = self.pc_stream_and_cut(20)
            lost, doubled, rc, out = self.pc_ledger(acked, "the control's cut")
        finally:
            self.g.run(f"rm -f {dropin} /usr/local/lib/vm-nosync.so; systemctl daemon-reload; "
                       f"systemctl stop scangate; systemctl reset-failed scangate; rm -rf {self.PC_STATE}; "
                       "systemctl start scangate; sync", timeout=180)
        check(lost, f"fsync a no-op, dirty pages held: no ACKed scan lost ({len(acked)} ACKed): the power-cut "
                    "checks could not catch a build that ACKs before its commit is durable")
        return (f"fsync a no-op (LD_PRELOAD nosync.so), writeback held: {len(lost)} of {f['acked']} scans ACKed "
                f"before the cut lost and reported by the check; audit verify then exits {rc}")

    # -- HID and USB-serial on the guest's kernel

    def holds(self, dev):
        """The daemon (MainPID) holds device node `dev` (a path or udev
        symlink, resolved in the guest) open."""
        rc, _ = self.g.run(
            f"dev=$(readlink -f {dev}) && [ -c \"$dev\" ] && "
            f"pid=$(systemctl show -p MainPID --value scangate) && [ \"$pid\" != 0 ] && "
            f"ls -l /proc/$pid/fd 2>/dev/null | grep -q \" $dev\\$\"",
            timeout=20,
        )
        return rc == 0

    def wait_holds(self, devs, seconds=90):
        for d in devs:
            wait_for(f"the daemon to open {d}", lambda d=d: self.holds(d), seconds, 1)

    def entries(self):
        """The ledger, as dicts (scangate ledger export: JSON lines)."""
        return [json.loads(l) for l in self.ledger().splitlines() if l.startswith("{")]

    def wait_entry(self, serial, seconds=60):
        def find():
            hits = [e for e in self.entries() if e.get("serial") == serial]
            return hits or None
        hits = wait_for(f"{serial} in the ledger", find, seconds, 1)
        check(len(hits) == 1, f"{serial} is in the ledger {len(hits)} times")
        return hits[0]

    def expect_entry(self, serial, scanner, lot, seconds=60):
        """The scan reached the ledger once, from `scanner`, exactly as the
        label was made (GTIN, serial, lot, expiry, AIM id)."""
        e = self.wait_entry(serial, seconds)
        got = {k: e.get(k) for k in ("scanner", "gtin", "serial", "lot", "expiry", "symbology")}
        want = {"scanner": scanner, "gtin": GTIN, "serial": serial, "lot": lot,
                "expiry": "2028-12-31", "symbology": "]d2"}
        check(got == want, f"ledger entry {got}, expected {want}")
        return e

    def usb_hidraw(self, port):
        """The hidraw node of the USB device on `port` (1-4), or None."""
        rc, out = self.g.run(f"ls /sys/bus/usb/devices/{port}/{port}:1.0/*/hidraw/ 2>/dev/null")
        return f"/dev/{out.split()[0]}" if rc == 0 and out.split() else None

    def usb_event(self, port):
        rc, out = self.g.run(f"ls -d /sys/bus/usb/devices/{port}/{port}:1.0/*/input/input*/event* 2>/dev/null")
        check(rc == 0 and out.split(), f"no evdev node for the keyboard on USB port {port}")
        return "/dev/input/" + out.split()[0].rsplit("/", 1)[1]

    def type_label(self, kbd, serial, lot="LOTZY7"):
        """Type a DSCSA label (lot `lot`) and Enter on keyboard `kbd`."""
        text = label(serial).replace("10LOT7A", "10" + lot)
        self.kb.type(kbd, text + "\r")

    def start_watch(self, node):
        """A second reader of evdev `node` (vmhid watch): its log path."""
        log = f"/run/vmhid-watch-{node.rsplit('/', 1)[1]}.log"
        self.g.ok(f"rm -f {log}; setsid /vmtest/vmhid watch {node} {log} </dev/null >/dev/null 2>&1 &")
        wait_for(f"vmhid watching {node}", lambda: "ready" in self.g.run(f"cat {log}")[1], 20, 0.3)
        return log

    def stop_watch(self, log):
        """Stop a watcher (it drains its node first): the key events it saw."""
        self.g.run(f"pkill -TERM -f '^/vmtest/vmhid watch .* {log}$'")
        out = wait_for(f"{log} ended", lambda: (lambda o: o if " end " in o else None)(self.g.run(f"cat {log}")[1]), 20, 0.3)
        return int(re.search(r" end (\d+)", out).group(1))

    def vcs1(self):
        """What tty1 (the console's login prompt) shows."""
        return self.g.run("cat /dev/vcs1 | tr -s ' '")[1]

    def login_prompt(self):
        """A fresh login prompt on tty1: anything typed there is echoed."""
        self.g.ok("systemctl unmask getty@tty1 >/dev/null 2>&1; systemctl restart getty@tty1")
        wait_for("the login prompt on tty1", lambda: "login:" in self.vcs1(), 30, 0.5)

    def pos(self, verb, *args, dev="pos"):
        """A command to the uhid HID POS scanner (vmhid `dev`: its FIFO and
        log are /run/vmhid-<dev>.*); waits for it to be done. Returns the
        guest's monotonic time it was done at."""
        self.pos_id += 1
        cid = self.pos_id
        line = " ".join([verb, str(cid), *args])
        self.g.ok(f"echo '{line}' > /run/vmhid-{dev}.fifo")

        def done():
            for l in self.g.run(f"cat /run/vmhid-{dev}.log")[1].splitlines():
                t, _, rest = l.partition(" ")
                if rest == f"done {cid}":
                    return float(t)
                check(not rest.startswith(f"fail {cid} "), f"vmhid pos: {rest}")
            return None
        return wait_for(f"vmhid pos {verb} {cid}", done, 30, 0.2)

    def pos_events(self, word):
        """Guest monotonic times of the uhid device's `word` events (open, close)."""
        out = self.g.run("cat /run/vmhid-pos.log")[1]
        return [float(l.split(" ", 1)[0]) for l in out.splitlines() if l.endswith(" " + word)]

    def pos_scan(self, data, torn=False, dev="pos"):
        """Send `data` (a label without its AIM id) as one HID POS scan."""
        return self.pos("torn" if torn else "scan", "]d2", data.encode().hex(), dev=dev)

    def audited(self, decision):
        """How many audit records of `decision` the journal has."""
        return len(self.g.run(
            "journalctl -t scangate-audit -o cat --output-fields=RECORD --no-pager"
            f" | grep '\"decision\":\"{decision}\"'")[1].splitlines())

    def pos_outputs(self, dev):
        """The output reports (hex) vmhid `dev` received, in order."""
        out = self.g.run(f"cat /run/vmhid-{dev}.log")[1]
        return [l.split(" ")[2] for l in out.splitlines() if l.split(" ")[1:2] in (["output"], ["set_report"])]

    def hid_config(self, blocks):
        return config(["counter-1"], extra="".join(blocks))

    # -- the checks

    def serial_termios_nak(self):
        self.ensure_running_with(["counter-1"])
        out = self.g.ok("stty -F /dev/scangate/counter-1 -a")
        check("speed 19200 baud" in out, f"the tty is not at the configured 19200 baud: {out[:200]}")
        for flag in ("-icanon", "-echo", "-icrnl", "-opost"):
            check(re.search(rf"(^|\s){re.escape(flag)}(\s|$)", out), f"the tty is not raw ({flag} missing): {out}")
        sc = self.sc["counter-1"]
        good = self.new_serial()
        bad = label(good).replace(GTIN, GTIN[:-1] + "6")  # a misread: bad check digit
        sc.drain()
        sc.sock.sendall((bad + "\r\n").encode())
        end = deadline(30)
        got = b""
        while time.monotonic() < end and not got:
            r, _, _ = select.select([sc.sock], [], [], 0.5)
            if r:
                try:
                    got = sc.sock.recv(16)
                except BlockingIOError:
                    pass
        check(got == bytes([0x15]), f"a misread frame got {got!r} back, not NAK (0x15)")
        sc.scan(good)
        e = self.wait_entry(good)
        bad_in = [x for x in self.entries() if x.get("gtin") == GTIN[:-1] + "6"]
        check(not bad_in, f"the NAKed misread is in the ledger: {bad_in}")
        return f"19200 baud, raw; misread NAKed, its resend ACKed and in the ledger once (seq {e['seq']})"

    def serial_replug_mid_shift(self):
        self.ensure_running_with(["counter-1"])
        sc = self.sc["counter-1"]
        sent = []
        errors = []
        stop = threading.Event()

        def shift():
            try:
                while not stop.is_set():
                    serial = self.new_serial()
                    sent.append(serial)
                    sc.scan(serial, seconds=120)
            except Exception as e:
                errors.append(str(e))

        t = threading.Thread(target=shift)
        t.start()
        try:
            for _ in range(2):
                wait_for("a few scans ACKed", lambda n=len(sc.acked): len(sc.acked) >= n + 3, 60, 0.2)
                self.unplug_serial("counter-1", "u1")
                self.plug_serial("counter-1", "u1", "c1", "SCAN1", "1")
                self.wait_opened("counter-1")
            wait_for("scans ACKed after the replug", lambda n=len(sc.acked): len(sc.acked) >= n + 3, 60, 0.2)
        finally:
            stop.set()
            t.join()
        check(not errors, f"the scanner during the replugs: {errors}")
        counts = {}
        for e in self.entries():
            counts[e.get("serial")] = counts.get(e.get("serial"), 0) + 1
        lost = [s for s in sc.acked if counts.get(s, 0) == 0]
        doubled = [s for s in sent if counts.get(s, 0) > 1]
        check(not lost and not doubled, f"ACKed but lost: {lost}; doubled: {doubled}")
        return f"unplugged and replugged twice mid-shift: {len(sent)} scans sent, all ACKed ones in the ledger once"

    def hid_setup(self):
        """The HID POS scanner appears (uhid), `scangate devices` lists every
        device with its ready config and udev lines, and those lines are
        installed: the two identical keyboards by port, the POS device by
        its HID id."""
        self.g.ok(
            "rm -f /run/vmhid-pos.fifo /run/vmhid-pos.log && mkfifo /run/vmhid-pos.fifo && "
            "(setsid /vmtest/vmhid pos /run/vmhid-pos.fifo /run/vmhid-pos.log 0c2e 0b61 POS0001 "
            "</dev/null >/dev/null 2>&1 &)"
        )
        wait_for("vmhid pos ready", lambda: "ready" in self.g.run("cat /run/vmhid-pos.log")[1], 20, 0.3)
        self.pos("create")
        wait_for("the POS device's hidraw node", lambda: self.g.run(
            "ls /sys/devices/virtual/misc/uhid/*/hidraw/ 2>/dev/null | grep -q hidraw")[0] == 0, 30, 0.3)
        listing = self.g.ok("scangate devices")
        blocks = {}
        for part in re.split(r"\n(?=  /dev/)", listing):
            m = re.match(r"  (/dev/\S+)\s+([0-9a-f]{4}:[0-9a-f]{4})", part)
            if m:
                blocks[m.group(1)] = part
        kbds = {port: self.usb_hidraw(port) for port in ("1-4", "1-5")}
        pos_node = "/dev/" + self.g.ok("ls /sys/devices/virtual/misc/uhid/*/hidraw/").split()[0]
        for port, node in kbds.items():
            b = blocks.get(node, "")
            check("0627:0001" in b and "QEMU USB Keyboard" in b and "serial: SAME0001" in b
                  and f"USB port: {port}" in b and "usage page: 0x0001 usage 0x06" in b
                  and "mode: keyboard" in b, f"{node} (USB port {port}) listed as: {b!r}")
            check(f'usb_port = "{port}"' in b and f'KERNELS=="{port}"' in b,
                  f"two keyboards share VID:PID and serial; {node}'s snippet and rules must name its port {port}: {b!r}")
        b = blocks.get(pos_node, "")
        check("0c2e:0b61" in b and "serial: POS0001" in b and "usage page: 0x008c" in b and "mode: pos" in b
              and 'KERNELS=="0003:0C2E:0B61.*"' in b, f"{pos_node} (uhid HID POS) listed as: {b!r}")
        ftdi = blocks.get(self.g.ok("readlink -f /dev/scangate/counter-1").strip(), "")
        check("0403:6001" in ftdi and "serial: SCAN1" in ftdi, f"the FTDI adapter listed as: {ftdi!r}")

        def entry(node, name, extra):
            b = blocks[node]
            old = re.search(r'name = "(hid-\d+)"', b).group(1)
            cfg = re.search(r"    config:\n((?:      .*\n)+)", b + "\n").group(1)
            rules = re.search(r"    udev:\n((?:      .*\n)+)", b + "\n").group(1)
            cfg = "".join(l[6:] + "\n" for l in cfg.splitlines()).replace(f'"{old}"', f'"{name}"') + extra + "\n"
            rules = "".join(l[6:] + "\n" for l in rules.splitlines()).replace(f"scangate/{old}", f"scangate/{name}")
            return cfg, rules

        parts = [
            entry(kbds["1-4"], "wedge-us", 'layout = "us"\nframe_timeout_ms = 2000\n'),
            entry(kbds["1-5"], "wedge-de", 'layout = "de"\nframe_timeout_ms = 2000\n'),
            entry(pos_node, "pos-1", ""),
        ]
        self.hid_entries = [c for c, _ in parts]
        rules = "".join(r for _, r in parts)
        self.g.ok(
            f"printf '%s' '{base64.b64encode(rules.encode()).decode()}' | base64 -d "
            ">> /etc/udev/rules.d/99-scangate.rules && udevadm control --reload && "
            "udevadm trigger --action=add && udevadm settle"
        )
        for name in ("wedge-us", "wedge-de", "pos-1"):
            wait_for(f"/dev/scangate/{name}", lambda n=name: self.g.run(f"test -c /dev/scangate/{n}")[0] == 0, 30, 0.5)
        self.g.ok(write_file(CONF, self.hid_config(self.hid_entries)))
        self.g.run("systemctl reset-failed scangate")
        self.g.ok("systemctl restart scangate", timeout=180)
        wait_for("scangate active", self.active, 60)
        self.wait_hid_open()
        return f"devices listed; config and udev lines from `scangate devices` in use ({', '.join(kbds.values())}, {pos_node})"

    def wait_hid_open(self):
        nodes = ["/dev/scangate/wedge-us", "/dev/scangate/wedge-de", "/dev/scangate/pos-1"]
        nodes += [self.usb_event(p) for p in ("1-4", "1-5")]
        self.wait_holds(nodes)

    def wedge_layouts(self):
        us, de = self.new_serial(), self.new_serial()
        self.type_label("us", us)
        self.type_label("de", de)
        self.expect_entry(us, "wedge-us", "LOTZY7")
        self.expect_entry(de, "wedge-de", "LOTZY7")
        return (f"typed with QMP input-send-event: {us} (US layout) on USB port 1-4 -> wedge-us, "
                f"{de} (German: ] as AltGr+9, Y/Z swapped, GS as Ctrl+]) on 1-5 -> wedge-de")

    def wedge_no_leak(self):
        self.login_prompt()
        logs = {p: self.start_watch(self.usb_event(p)) for p in ("1-4", "1-5")}
        us, de = self.new_serial(), self.new_serial()
        self.type_label("us", us)
        self.type_label("de", de)
        self.expect_entry(us, "wedge-us", "LOTZY7")
        self.expect_entry(de, "wedge-de", "LOTZY7")
        seen = {p: self.stop_watch(log) for p, log in logs.items()}
        check(all(n == 0 for n in seen.values()), f"key events another reader saw while scangate ran: {seen}")
        screen = self.vcs1()
        check(us not in screen and de not in screen and "LOTZY7" not in screen,
              f"the scans reached tty1: {screen.strip()[-200:]!r}")
        return "scans in the ledger; another evdev reader saw 0 key events; nothing on tty1 (/dev/vcs1)"

    def wedge_replugged_grabbed_again(self):
        self.qmp.cmd("device_del", id="k2")
        wait_for("the second keyboard gone", lambda: not self.usb_hidraw("1-5"), 60, 0.5)
        self.qmp.cmd("device_add", driver="usb-kbd", id="k2", display="gpu1", serial="SAME0001", bus="xhci.0", port="5")
        wait_for("the second keyboard back", lambda: self.usb_hidraw("1-5"), 60, 0.5)
        event = self.usb_event("1-5")
        self.wait_holds(["/dev/scangate/wedge-de", event], 30)
        self.login_prompt()
        log = self.start_watch(event)
        de = self.new_serial()
        self.type_label("de", de)
        self.expect_entry(de, "wedge-de", "LOTZY7")
        n = self.stop_watch(log)
        check(n == 0, f"after the replug another reader of {event} saw {n} key events")
        check(de not in self.vcs1(), "after the replug the scan reached tty1")
        return f"unplugged and replugged (QMP device_del/device_add): reopened, {event} grabbed again, scan in the ledger"

    def wedge_released_on_stop(self):
        self.g.ok("systemctl stop scangate", timeout=120)
        self.login_prompt()
        log = self.start_watch(self.usb_event("1-4"))
        word = f"released{self.new_serial()}"
        self.kb.type("us", word)
        wait_for(f"{word!r} on tty1", lambda: word in self.vcs1(), 30, 0.5)
        n = self.stop_watch(log)
        check(n >= 2 * len(word), f"the evdev reader saw {n} key events for {len(word)} keys typed")
        self.g.ok("systemctl start scangate", timeout=180)
        wait_for("scangate active", self.active, 60)
        self.wait_hid_open()
        return f"after systemctl stop: {word!r} on tty1, {n} key events at the other reader"

    def pos_scans(self):
        short = self.new_serial()
        self.pos_scan(label(short)[3:])
        long_serial = self.new_serial()
        # A long DataMatrix: 3 reports of up to 56 bytes.
        long = f"01{GTIN}1728123121{long_serial}\x1d10LOTLONG{'X' * 12}\x1d240{'R' * 30}\x1d91{'Q' * 60}"
        check(len(long) > 112, "the long label must need three reports")
        self.pos_scan(long)
        self.expect_entry(short, "pos-1", "LOT7A")
        self.expect_entry(long_serial, "pos-1", "LOTLONG" + "X" * 12)
        return f"one-report scan and a {len(long)}-byte scan in 3 reports, both in the ledger"

    def pos_unplug(self):
        torn_serial = self.new_serial()
        torn = f"01{GTIN}1728123121{torn_serial}\x1d10LOTTORN\x1d91{'T' * 60}"
        opens_before = len(self.pos_events("open"))

        def rejected():
            return self.g.run(
                "journalctl -t scangate-audit -o cat --output-fields=RECORD --no-pager"
                " | grep '\"decision\":\"rejected\"'")[1].splitlines()
        rejected_before = len(rejected())
        self.pos_scan(torn, torn=True)
        self.pos("destroy")
        # Rejected as the device went away, or, when destroying it took the
        # guest longer than the 500 ms frame timeout (a loaded host), as
        # the next report not coming first: torn either way, never merged.
        reasons = ("device went away mid-scan", "the next report did not come within")

        def torn_reason():
            new = " ".join(rejected()[rejected_before:])
            return next((r for r in reasons if r in new), None)
        why = wait_for("the torn scan audited as rejected", torn_reason, 30, 0.5)
        created = self.pos("create")
        opened = wait_for("scangate to reopen the re-created device",
                          lambda: [t for t in self.pos_events("open") if t >= created], 30, 0.2)
        reopen = opened[0] - created
        check(len(self.pos_events("open")) > opens_before, "no open after the re-create")
        check(reopen <= 3.0 * SCALE, f"reopened {reopen:.2f} s after the device came back (polling is every 1 s)")
        after = self.new_serial()
        self.pos_scan(label(after)[3:])
        self.expect_entry(after, "pos-1", "LOT7A")
        check(not [e for e in self.entries() if e.get("serial") == torn_serial or "TORN" in (e.get("lot") or "")],
              "the torn scan reached the ledger")
        return f"torn scan rejected ('{why}') and audited, never merged; reopened {reopen:.2f} s after re-create; next scan in the ledger"

    def pos_feedback(self):
        """feedback = { protocol = "hid-pos" } on the guest's kernel: two
        more uhid HID POS scanners, one whose report descriptor has output
        report 3 on page 0x8C (vmhid `outputs`) and one without outputs.
        A committed read, an echo of it and a read that does not decode on
        each: the first gets output report 03 21 (Good Read Beep + Good
        Read LED) and 03 10 (Sound Error Beep), in that order, nothing for
        the echo; the second gets nothing."""
        devs = {"pos-fb": ("0b63", "POSFB001", " outputs"), "pos-plain": ("0b64", "POSPL001", "")}
        rules = ""
        for name, (pid, serial, variant) in devs.items():
            self.g.ok(
                f"rm -f /run/vmhid-{name}.fifo /run/vmhid-{name}.log && mkfifo /run/vmhid-{name}.fifo && "
                f"(setsid /vmtest/vmhid pos /run/vmhid-{name}.fifo /run/vmhid-{name}.log 0c2e {pid} {serial}{variant} "
                "</dev/null >/dev/null 2>&1 &)"
            )
            wait_for(f"vmhid {name} ready", lambda n=name: "ready" in self.g.run(f"cat /run/vmhid-{n}.log")[1], 20, 0.3)
            self.pos("create", dev=name)
            rules += (f'SUBSYSTEM=="hidraw", KERNELS=="0003:0C2E:{pid.upper()}.*", SYMLINK+="scangate/{name}", '
                      'GROUP="scangate", MODE="0660"\n')
        self.g.ok(
            f"printf '%s' '{base64.b64encode(rules.encode()).decode()}' | base64 -d "
            ">> /etc/udev/rules.d/99-scangate.rules && udevadm control --reload && "
            "udevadm trigger --action=add && udevadm settle"
        )
        for name in devs:
            wait_for(f"/dev/scangate/{name}", lambda n=name: self.g.run(f"test -c /dev/scangate/{n}")[0] == 0, 30, 0.5)
        # What the kernel hands the driver: the descriptor vmhid made.
        node = self.g.ok("readlink -f /dev/scangate/pos-fb").strip().rsplit("/", 1)[1]
        rd = self.g.ok(f"od -An -v -tx1 /sys/class/hidraw/{node}/device/report_descriptor").split()
        want = self.g.ok("/vmtest/vmhid descriptor outputs").strip()
        check("".join(rd) == want, f"{node}'s report descriptor {''.join(rd)}, vmhid made {want}")
        entries = [
            f'[[scanner]]\nname = "{name}"\nkind = "hid"\nmode = "pos"\npath = "/dev/scangate/{name}"\n'
            'scan_type = "dispense"\nfeedback = { protocol = "hid-pos" }\n\n'
            for name in devs
        ]
        self.g.ok(write_file(CONF, self.hid_config(self.hid_entries + entries)))
        self.g.run("systemctl reset-failed scangate")
        self.g.ok("systemctl restart scangate", timeout=180)
        wait_for("scangate active", self.active, 60)
        self.wait_holds([f"/dev/scangate/{name}" for name in devs])

        def said(name, text):
            return text in self.g.run(
                f"journalctl -u scangate SCANNER={name} -o cat --no-pager | grep -F '{text}'")[1]
        wait_for("the outputs of pos-fb logged", lambda: said("pos-fb", "sent to the scanner as HID POS output reports"), 30, 0.5)
        wait_for("pos-plain's missing outputs logged", lambda: said(
            "pos-plain", "offers no Bar Code Scanner output usages: nothing can be sent; use led"), 30, 0.5)
        check(self.pos_outputs("pos-fb") == [] and self.pos_outputs("pos-plain") == [],
              "output reports before any read")
        suppressed, rejected = self.audited("suppressed"), self.audited("rejected")
        serials = {}
        for name in ("pos-plain", "pos-fb"):  # the one without outputs first
            serial = self.new_serial()
            serials[name] = serial
            self.pos_scan(label(serial)[3:], dev=name)
            self.expect_entry(serial, name, "LOT7A")   # committed
            self.pos_scan(label(serial)[3:], dev=name)  # an echo of it
            self.pos_scan("not a GS1 element string", dev=name)  # rejected
        wait_for("two echoes and two rejected reads audited",
                 lambda: self.audited("suppressed") >= suppressed + 2 and self.audited("rejected") >= rejected + 2, 60, 0.5)
        # The reports of one scanner are written in decision order: the
        # rejected read's report after the echo's place, so an echo that
        # had one would be between them.
        want = ["0321", "0310"]
        got = wait_for("pos-fb's two output reports", lambda: (
            lambda o: o if len(o) >= len(want) else None)(self.pos_outputs("pos-fb")), 30, 0.3)
        time.sleep(1.0 * SCALE)
        got = self.pos_outputs("pos-fb")
        check(got == want, f"pos-fb received output reports {got}, expected {want} (committed, nothing for the echo, rejected)")
        plain = self.pos_outputs("pos-plain")
        check(plain == [], f"pos-plain (no outputs in its descriptor) received {plain}")
        sent = self.g.run("journalctl -u scangate SCANNER=pos-fb -o cat --no-pager | grep -c 'not told'")[1].strip()
        check(sent in ("", "0"), f"write failures logged for pos-fb: {sent}")
        return (f"UHID_OUTPUT on the device with 0x8C outputs: {' then '.join(got)} for a committed read "
                f"({serials['pos-fb']}), none for its echo, then the rejected read's; the device without: none")

    def ps2_led_states(self, since):
        """The caps lock states the guest's PS/2 keyboard was sent after
        byte `since` of qemu.log: (host seconds, on) for each change.
        qemu logs every LED state the keyboard receives (run.sh: -trace
        ps2_set_ledstate, -msg timestamp=on); caps lock is bit 2."""
        with open(os.path.join(self.out, "qemu.log"), "rb") as f:
            f.seek(since)
            text = f.read().decode(errors="replace")
        states, last = [], None
        for m in re.finditer(r"@(\d+\.\d+):ps2_set_ledstate \S+ ledstate (\d+)", text):
            on = bool(int(m.group(2)) & 4)
            if on != last:
                states.append((float(m.group(1)), on))
                last = on
        return states

    def gateway_led(self):
        """feedback = { led = NAME } on the wedge scanner, NAME the caps
        lock LED of the guest's PS/2 keyboard: a kernel LED class device
        (input-leds), whose every state qemu logs as the keyboard receives
        it. Set up as docs/technician.md says: a udev rule gives group
        scangate the LED's files. First without the drop-in that opens
        /sys to the service (the control: the unit's sandbox makes /sys
        read-only, and the log names the drop-in), then with it. A
        committed read blinks caps lock once, short; its echo not at all;
        a rejected read once, about a second; at the stop the LED's kernel
        trigger is back."""
        listing = self.g.ok("for l in /sys/class/leds/input*::capslock; do "
                            "echo \"${l##*/}|$(cat $l/device/name)\"; done")
        names = [l.split("|")[0] for l in listing.splitlines() if l.endswith("|AT Translated Set 2 keyboard")]
        check(names, f"no caps lock LED of the PS/2 keyboard in /sys/class/leds: {listing!r}")
        led = names[0]
        sysdir = f"/sys/class/leds/{led}"
        trigger = self.g.ok(f"cat {sysdir}/trigger")
        before = re.search(r"\[(\S+)\]", trigger)
        check(before and before.group(1) != "none", f"{led}'s trigger before: {trigger!r}")
        before = before.group(1)
        rule = (f'SUBSYSTEM=="leds", KERNEL=="{led}", RUN+="/bin/chgrp scangate /sys%p/brightness /sys%p/trigger", '
                'RUN+="/bin/chmod g+w /sys%p/brightness /sys%p/trigger"\n')
        self.g.ok(
            f"printf '%s' '{base64.b64encode(rule.encode()).decode()}' | base64 -d "
            "> /etc/udev/rules.d/98-scangate-led.rules && udevadm control --reload && "
            "udevadm trigger --action=add --subsystem-match=leds && udevadm settle"
        )
        owner = self.g.ok(f"stat -c '%G %A' {sysdir}/brightness {sysdir}/trigger").split("\n")
        check(all(o.startswith("scangate -rw-rw") for o in owner if o), f"after the udev rule: {owner}")
        saved = self.g.ok(f"cat {CONF}")
        entries = [e + f'feedback = {{ led = "{led}" }}\n' if 'name = "wedge-us"' in e else e
                   for e in self.hid_entries]
        check(entries != self.hid_entries, "no wedge-us entry to give the LED to")
        self.g.ok(write_file(CONF, self.hid_config(entries)))
        self.g.run("systemctl reset-failed scangate")
        self.g.ok("systemctl restart scangate", timeout=180)
        wait_for("scangate active", self.active, 60)

        def logged(text):
            return text in self.g.run(
                f"journalctl -u scangate SCANNER=wedge-us -o cat --no-pager | grep -F '{text}'")[1]
        # The control: under the unit's sandbox /sys is read-only.
        wait_for("the LED's failure logged with the drop-in that fixes it",
                 lambda: logged(f"ReadWritePaths={sysdir}"), 60, 0.5)
        check(self.g.ok(f"cat {sysdir}/trigger").find(f"[{before}]") >= 0, "the trigger changed without access")
        dropin = "/etc/systemd/system/scangate.service.d/led.conf"
        self.g.ok(f"mkdir -p {os.path.dirname(dropin)} && "
                  f"printf '[Service]\\nReadWritePaths={sysdir}\\n' > {dropin} && systemctl daemon-reload")
        self.g.ok("systemctl restart scangate", timeout=180)
        wait_for("scangate active", self.active, 60)
        wait_for(f"{led} taken from its trigger", lambda: "[none]" in self.g.run(f"cat {sysdir}/trigger")[1], 60, 0.5)
        self.wait_holds(["/dev/scangate/wedge-us"])
        mark = os.path.getsize(os.path.join(self.out, "qemu.log"))
        suppressed, rejected = self.audited("suppressed"), self.audited("rejected")
        serial = self.new_serial()
        self.type_label("us", serial)
        self.expect_entry(serial, "wedge-us", "LOTZY7")
        wait_for("caps lock on and off after the commit",
                 lambda: len(self.ps2_led_states(mark)) >= 2 or None, 30, 0.3)
        self.type_label("us", serial)  # its echo
        wait_for("the echo audited", lambda: self.audited("suppressed") > suppressed, 60, 0.5)
        bad = label(serial).replace("10LOT7A", "10LOTZY7").replace(GTIN, GTIN[:-1] + "6")
        self.kb.type("us", bad + "\r")  # a misread: bad check digit
        wait_for("the misread audited", lambda: self.audited("rejected") > rejected, 60, 0.5)
        wait_for("caps lock's second blink", lambda: len(self.ps2_led_states(mark)) >= 4 or None, 30, 0.3)
        time.sleep(2.0 * SCALE)  # nothing more may come
        states = self.ps2_led_states(mark)
        check([on for _, on in states] == [True, False, True, False],
              f"caps lock states the keyboard received: {states} (want a blink for the commit, none for "
              "the echo, one for the rejected read)")
        short, long = states[1][0] - states[0][0], states[3][0] - states[2][0]
        check(short < 0.6 and long > 0.7 and long > 2 * short,
              f"the commit's blink lasted {short:.2f} s, the rejected read's {long:.2f} s (150 ms and 1 s asked)")
        self.g.ok("systemctl stop scangate", timeout=60)
        after = self.g.ok(f"cat {sysdir}/trigger")
        check(f"[{before}]" in after, f"{led}'s trigger after the stop: {after!r} (was {before})")
        self.g.ok(write_file(CONF, saved))
        self.g.run("systemctl reset-failed scangate")
        self.g.ok("systemctl start scangate", timeout=180)
        wait_for("scangate active", self.active, 60)
        return (f"{led} (PS/2 keyboard, input-leds): read-only /sys logged with the drop-in; with it, qemu saw "
                f"caps lock blink {short:.2f} s for the commit, nothing for the echo, {long:.2f} s for the "
                f"misread; trigger {before} back after the stop")

    def pair(self):
        self.qmp.cmd("device_add", driver="usb-kbd", id="k3", display="gpu2", serial="", bus="xhci.0", port="6")
        wait_for("the third keyboard's hidraw node", lambda: self.usb_hidraw("1-6"), 60, 0.5)
        self.login_prompt()
        event = self.usb_event("1-6")

        def start_pair():
            # In the background in the guest (the agent runs one command
            # at a time, and the test asks it things meanwhile).
            self.g.ok(
                "rm -f /run/pair.out /run/pair.rc; (setsid sh -c "
                f"'scangate pair wedge-new --config {CONF} --scan-type dispense --timeout 90 "
                "> /run/pair.out 2>&1; echo $? > /run/pair.rc' </dev/null >/dev/null 2>&1 &)"
            )
            # pair grabs the keyboards it listens to: type once it holds
            # this one (typed earlier, a scan would reach tty1).
            wait_for(f"scangate pair to grab {event}", lambda: re.search(rf"{event}\b|^ENDED", self.g.run(
                "grep 'scanner grabbed' /run/pair.out; test -e /run/pair.rc && echo ENDED")[1], re.M), 60, 0.3)

        def pair_rc(seconds):
            end = deadline(seconds)
            while time.monotonic() < end:
                got, out = self.g.run("cat /run/pair.rc 2>/dev/null")
                if got == 0 and out.strip():
                    return int(out)
                time.sleep(0.3)
            return None

        # Without access to the new keyboard (not root, no udev rule yet):
        # pair says it cannot read it, at once, and exits 4.
        rc, out = self.g.run(f"runuser -u scangate -- scangate pair wedge-new --config {CONF} --timeout 60 2>&1", 90)
        check(rc == 4 and "cannot read" in out and "Permission denied" in out,
              f"pair without access exited {rc}: {out.strip()[-400:]}")
        # Esc on a keyboard pair listens to cancels (the gateway's own
        # keyboard is grabbed too: Ctrl+C on it would not reach a shell).
        conf_before = self.g.ok(f"cat {CONF}")
        start_pair()
        self.kb.type("new", "\x1b")
        rc = pair_rc(30)
        out = self.g.run("cat /run/pair.out")[1]
        check(rc == 1 and "cancelled (Esc on" in out, f"Esc: pair exited {rc}: {out.strip()[-300:]}")
        check(self.g.ok(f"cat {CONF}") == conf_before, "a cancelled pair changed the config")
        start_pair()
        # Text typed on a keyboard (the gateway's own, grabbed too while
        # pair waits) pairs nothing: pair says so and waits on.
        self.kb.type("new", "notabarcode\r")
        got = wait_for("pair to refuse text that is not a barcode", lambda: self.g.run(
            "grep -h 'did not decode' /run/pair.out; test -e /run/pair.rc && echo ENDED")[1], 30, 0.3)
        check("ENDED" not in got, f"pair ended on typed text: {self.g.run('cat /run/pair.out')[1][-400:]}")
        typed = []
        rc = None
        while rc is None and len(typed) < 10:
            typed.append(self.new_serial())
            self.type_label("new", typed[-1])
            rc = pair_rc(4)
        out = self.g.run("cat /run/pair.out")[1]
        check(rc == 0, f"scangate pair exited {rc}: {out.strip()[-600:]}")
        conf = self.g.ok(f"cat {CONF}")
        check('name = "wedge-new"' in conf and 'usb_port = "1-6"' in conf, f"the paired entry: {conf[-300:]!r}")
        rules = self.g.ok("cat /etc/udev/rules.d/99-scangate.rules")
        check('KERNELS=="1-6", SYMLINK+="scangate/wedge-new"' in rules, f"no udev rule for wedge-new: {rules[-400:]!r}")
        screen = self.vcs1()
        check(not any(s in screen for s in typed + ["notabarcode"]), f"the pairing scans reached tty1: {screen.strip()[-200:]!r}")
        self.g.ok("udevadm control --reload && udevadm trigger && udevadm settle")
        link = self.g.ok("readlink -f /dev/scangate/wedge-new").strip()
        check(link == self.usb_hidraw("1-6"), f"/dev/scangate/wedge-new -> {link}, not the third keyboard's hidraw")
        pid = self.main_pid()
        self.g.ok("systemctl reload scangate", timeout=90)
        self.wait_holds(["/dev/scangate/wedge-new", self.usb_event("1-6")])
        check(self.main_pid() == pid, "the reload restarted the daemon")
        serial = self.new_serial()
        self.type_label("new", serial)
        self.expect_entry(serial, "wedge-new", "LOTZY7")
        return (f"without access: exit 4 at once; Esc cancelled a first pair; typed text refused; paired by a scan (after {len(typed)} label(s)), udev symlink {link}, "
                "reloaded, its scan in the ledger")

    def run(self):
        # The previous release installed and used as a site would, upgraded
        # to this tree's package unattended, broken and repaired, rolled
        # back and upgraded again, purged: (name, check, the rest of the
        # group is skipped if it fails). The purge runs whatever happened
        # (the fresh install after it needs a clean box).
        upgrade = [
            ("prev_release_apt_install", self.prev_apt_install, True),
            ("prev_release_site_edits_and_scans", self.prev_site_setup, True),
            ("upgrade_unattended_no_prompt", self.upgrade_no_prompt, True),
            ("upgrade_kept_edited_config", self.upgrade_kept_config, False),
            ("upgrade_restarted_new_version", self.upgrade_restarted, False),
            ("upgrade_ledger_kept_scans_continue", self.upgrade_ledger, False),
            ("upgrade_broken_config_loud_message", self.upgrade_broken_config, True),
            ("rollback_to_prev_release", self.rollback, True),
            ("conffile_prompt_control", self.prompt_control, True),
            ("reupgrade_after_rollback", self.reupgrade, False),
        ]
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
            ("scanner_identity_from_usb", self.identity, False),
            ("scans_in_ledger", self.in_ledger, False),
            ("journal_fields", self.journal, False),
            ("usb_serial_plugged_after_start", self.hotplug, False),
            ("usb_serial_unplug_replug", self.replug, False),
            ("reload_adds_scanner", self.reload, False),
            ("watchdog_restart", lambda: (self.ensure_running_with(running), self.watchdog())[1], False),
            ("stop_drains_exit0", lambda: (self.ensure_running_with(running), self.stop())[1], False),
            ("usb_serial_termios_and_nak", self.serial_termios_nak, False),
            ("usb_serial_replug_mid_shift", self.serial_replug_mid_shift, False),
            ("hid_devices_listed_and_installed", self.hid_setup, False),
            ("hid_wedge_us_and_de_layouts", self.wedge_layouts, False),
            ("hid_wedge_grabbed_no_leak", self.wedge_no_leak, False),
            ("hid_wedge_replugged_grabbed_again", self.wedge_replugged_grabbed_again, False),
            ("hid_wedge_released_after_stop", self.wedge_released_on_stop, False),
            ("hid_pos_uhid_scans", self.pos_scans, False),
            ("hid_pos_unplug_torn_and_reopen", self.pos_unplug, False),
            ("hid_pos_feedback_output_reports", self.pos_feedback, False),
            ("gateway_led_on_a_kernel_led", self.gateway_led, False),
            ("hid_pair_end_to_end", self.pair, False),
            ("broken_config_exit2_no_restart", self.broken_config, False),
            ("load_credential_redis", self.credential, False),
            # Last: they reboot the guest (what the checks above left
            # running, such as vmhid, is gone after).
            ("powercut_mid_stream", self.powercut_mid_stream, False),
            ("powercut_first_start", self.powercut_first_start, False),
            ("powercut_control_no_fsync", self.powercut_control_no_fsync, False),
        ]
        only = set(filter(None, os.environ.get("SCANGATE_VM_ONLY", "").split(",")))
        try:
            # (SCANGATE_VM_ONLY: the group runs whole when it names one of
            # its checks or the purge, and not at all otherwise.)
            if not only or only & ({n for n, _, _ in upgrade} | {"purge_removes_config_keeps_state"}):
                for name, fn, needed in upgrade:
                    if not self.step(name, fn) and needed:
                        for rest, _, _ in upgrade[[c[0] for c in upgrade].index(name) + 1:]:
                            self.record("SKIP", rest, f"after {name} failed")
                        break
                if not self.step("purge_removes_config_keeps_state", self.purge):
                    # The checks below need a clean box.
                    self.g.run("systemctl stop scangate; dpkg --purge --force-all scangate; rm -rf /etc/scangate", timeout=300)
            for name, fn, needed in checks:
                if only and name not in only and not needed:
                    continue  # (the checks the others need run always)
                if not self.step(name, fn) and needed:
                    for rest, _, _ in checks[[c[0] for c in checks].index(name) + 1:]:
                        self.record("SKIP", rest, f"after {name} failed")
                    return
        finally:
            self.pc_teardown()

def main():
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--qemu", required=True, help="the qemu command line, as a JSON list")
    ap.add_argument("--dir", required=True, help="where the sockets are")
    ap.add_argument("--out", required=True)
    ap.add_argument("--deb", required=True)
    ap.add_argument("--prev-deb", help="the previous release's .deb (on the second disk too)")
    ap.add_argument("--prev-error", default="", help="why there is none")
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
        r = Run(guest, qmp, scanners, results, a.deb, a.out, a.prev_deb, a.prev_error)
        if not guest.wait_ready(600 * SCALE):
            r.record("FAIL", "boot", "the guest agent never answered (see console.log)")
            r.failed.append("boot")
        else:
            r.record("PASS", "boot", f"agent up after {time.monotonic() - t0:.0f} s")
            r.run()
            # Every boot's (the power cuts make the journal persistent).
            rc, journal = guest.run("journalctl --no-pager -o short-monotonic", timeout=120)
            with open(os.path.join(a.out, "guest-journal.txt"), "w") as f:
                f.write(journal)
            try:
                guest.run("systemctl --no-block poweroff", timeout=30)
            except (ConnectionError, CheckFailed):
                # The guest may close the channel (its agent stopped by the
                # poweroff) before the answer is written: that is the
                # poweroff working, not a failed check.
                pass
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
