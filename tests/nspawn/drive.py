#!/usr/bin/env python3
"""The host side of tests/nspawn/arm64.sh: boots the cached arm64 root file
system with `systemd-nspawn -b` (its systemd and every arm64 binary run by
qemu-aarch64 through binfmt_misc), installs the arm64 .deb in it, starts the
service, sends one scan through a PTY and reads it back from the ledger,
stops the service and powers the container off.

Commands run in the container through nsenter into its init's namespaces
(no systemd-machined on the host: nspawn runs with --register=no). The
scanner is a PTY of the container's own devpts, opened from the host
through /proc/<init>/root/dev/pts/ptmx: the host holds the master side (it
sends the scan and hears the ACK), the daemon opens the slave through a
stable symlink, /dev/scangate/counter-1, as it opens a udev symlink to a
/dev/ttyUSB node.

One line per step in OUT/results.txt (PASS/FAIL, what it saw, seconds);
console.log is the container's console. Exit 0 only if every step passed.
"""
import argparse
import base64
import fcntl
import json
import os
import struct
import subprocess
import sys
import termios
import time

CONF = "/etc/scangate/scangate.toml"
GTIN = "00307773105025"
ACK, NAK = 0x06, 0x15
# termios ioctls (asm-generic): the pts number of a master, and its lock.
TIOCGPTN = 0x80045430
TIOCSPTLCK = 0x40045431
PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

CONFIG = f"""[gateway]
facility = "nspawn-pharmacy"
id = "arm64-gw-1"
state_dir = "/var/lib/scangate"

# A resend after a missed ACK is an echo, not a second pick.
[dedup]
window_ms = 120000

[[scanner]]
name = "counter-1"
kind = "serial"
path = "/dev/scangate/counter-1"
scan_type = "dispense"
ack = true
baud = 9600
"""

# The one change to the shipped unit: the scanner is a PTY (char-pts), not
# a ttyUSB, ttyACM, ttyS or ttyAMA node, so DevicePolicy=closed must let
# it through where it is enforced. (In this container it is not: systemd
# under qemu-user sets up no BPF device filter; the PTY opens without this
# line too.)
DROPIN = "[Service]\nDeviceAllow=char-pts rw\n"


class Failed(Exception):
    pass


def check(cond, why):
    if not cond:
        raise Failed(why)


def label(serial):
    """A DSCSA GS1 DataMatrix label, unique per pick by its serial (as
    tests/vm/drive.py and tests/util/scans.rs::dscsa)."""
    return f"]d201{GTIN}1728123121{serial}\x1d10LOT7A"


class Container:
    def __init__(self, rootfs, inputs, out, boot_timeout):
        self.out = out
        self.console = open(os.path.join(out, "console.log"), "wb")
        cmd = [
            # A scratch copy of the cached tree (arm64.sh makes it). Not
            # --volatile=overlay: on overlayfs `scangate status` cannot
            # match the state directory's lock in /proc/locks (the file's
            # st_dev is the layer's, the lock's the overlay's) and says the
            # daemon is not running.
            "systemd-nspawn", "--quiet", "-b", "-D", rootfs,
            # No systemd-machined or dbus on the host to register with, and
            # no unit of its own to make (PID 1 may not be systemd).
            "--register=no", "--keep-unit",
            "--private-network", "--console=pipe",
            f"--bind-ro={inputs}:/mnt/scangate-test",
            "--machine=scangate-arm64",
        ]
        # The container gets the unified cgroup hierarchy (v2) as Debian 12
        # on a gateway has, whatever the host mounts (this one: hybrid).
        env = dict(os.environ, SYSTEMD_NSPAWN_UNIFIED_HIERARCHY="1")
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=self.console, stderr=subprocess.STDOUT, env=env
        )
        self.leader = None
        self.boot_timeout = boot_timeout

    def find_leader(self, seconds=60):
        """The container's init: the child of nspawn in a PID namespace of
        its own."""
        end = time.monotonic() + seconds
        mine = os.readlink("/proc/self/ns/pid")
        while time.monotonic() < end:
            check(self.proc.poll() is None, f"systemd-nspawn exited {self.proc.returncode} (console.log)")
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open(f"/proc/{pid}/stat") as f:
                        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                    if ppid == self.proc.pid and os.readlink(f"/proc/{pid}/ns/pid") != mine:
                        self.leader = int(pid)
                        return self.leader
                except (OSError, ValueError, IndexError):
                    continue
            time.sleep(0.2)
        raise Failed("no container init found under systemd-nspawn")

    def run(self, script, timeout=120):
        """A shell script in the container as root: (exit code, output)."""
        check(self.proc.poll() is None, f"the container is gone (systemd-nspawn exited {self.proc.returncode})")
        cmd = [
            "nsenter", "-t", str(self.leader), "-m", "-u", "-i", "-n", "-p", "-C", "-r", "-w",
            "/usr/bin/env", "-i", PATH, "LANG=C.UTF-8", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0",
            "/bin/sh", "-c", script,
        ]
        try:
            p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Failed(f"`{script[:100]}` did not finish within {timeout} s")
        return p.returncode, (p.stdout + p.stderr).decode(errors="replace")

    def ok(self, script, timeout=120):
        rc, out = self.run(script, timeout)
        check(rc == 0, f"`{script.strip()[:120]}` exited {rc}: {out.strip()[-600:]}")
        return out

    def prop(self, name, unit="scangate"):
        return self.ok(f"systemctl show -p {name} --value {unit}").strip()


class Pty:
    """A PTY of the container's devpts instance, its master held here."""

    def __init__(self, leader):
        self.fd = os.open(f"/proc/{leader}/root/dev/pts/ptmx", os.O_RDWR | os.O_NOCTTY)
        fcntl.ioctl(self.fd, TIOCSPTLCK, struct.pack("i", 0))
        self.n = struct.unpack("I", fcntl.ioctl(self.fd, TIOCGPTN, struct.pack("I", 0)))[0]
        # The master's side raw too: no echo of the ACK back, no CR mapping.
        attrs = termios.tcgetattr(self.fd)
        attrs[0] = attrs[1] = attrs[3] = 0
        termios.tcsetattr(self.fd, termios.TCSANOW, attrs)
        os.set_blocking(self.fd, False)

    def scan(self, text, seconds):
        """Send one frame (CR suffix) and wait for ACK or NAK; the byte, or
        None at the deadline. Sent again every 10 s (as a scanner does that
        hears nothing: a resend is an echo, never a second pick)."""
        end = time.monotonic() + seconds
        sent = float("-inf")
        while time.monotonic() < end:
            if time.monotonic() - sent > 10:
                os.write(self.fd, (text + "\r").encode())
                sent = time.monotonic()
            try:
                for b in os.read(self.fd, 64):
                    if b in (ACK, NAK):
                        return b
            except BlockingIOError:
                pass
            except OSError:  # EIO: the slave is not open (yet)
                pass
            time.sleep(0.05)
        return None


class Run:
    def __init__(self, c, deb, results):
        self.c = c
        self.deb = deb
        self.results = results
        self.failed = []
        self.pty = None
        self.uuid = None
        self.serial = f"ARM{int(time.time()) % 100000:05d}"

    def step(self, name, fn):
        t0 = time.monotonic()
        try:
            detail = fn() or ""
            ok = True
        except Failed as e:
            ok, detail = False, str(e)
        except Exception as e:  # a harness error is a failed step too
            ok, detail = False, f"{type(e).__name__}: {e}"
        detail = " | ".join(l for l in detail.splitlines() if l.strip())
        line = f"{'PASS' if ok else 'FAIL':4} {name}  {detail} ({time.monotonic() - t0:.1f} s)"
        print(line, flush=True)
        self.results.write(line + "\n")
        self.results.flush()
        if not ok:
            self.failed.append(name)
        return ok

    # -- the steps, in order

    def boot(self):
        self.c.find_leader()
        # "running" or "degraded" (a unit that cannot work in a container);
        # either way the boot is done. Polled: systemctl may not answer
        # until PID 1 has set up its private socket.
        end = time.monotonic() + self.c.boot_timeout
        state = ""
        while time.monotonic() < end:
            rc, out = self.c.run("systemctl is-system-running", timeout=60)
            state = out.strip().splitlines()[-1] if out.strip() else ""
            if state in ("running", "degraded"):
                break
            time.sleep(2)
        check(state in ("running", "degraded"), f"boot not finished within {self.c.boot_timeout} s: {state!r}")
        arch = self.c.ok("uname -m; dpkg --print-architecture; systemctl --version | head -n1").split()
        check("aarch64" in arch and "arm64" in arch, f"not an arm64 userland: {arch}")
        # Under qemu-user systemd cannot set up LoadCredential= (EINVAL at
        # the CREDENTIALS step): the units that have one fail, among them
        # systemd-sysusers, -tmpfiles-setup and -sysctl, and the state is
        # "degraded". (Not so in a native container.)
        failed = self.c.run("systemctl --failed --plain --no-legend")[1].split("\n")
        failed = " ".join(l.split()[0] for l in failed if l.strip())
        return f"systemd {arch[3]} is {state}" + (f" (failed: {failed})" if failed else "")

    def apt_install(self):
        out = self.c.ok(f"cd /mnt/scangate-test && apt-get install -y ./{self.deb} 2>&1", timeout=600)
        check("Setting up scangate" in out, f"apt did not set scangate up: {out[-600:]}")
        self.c.ok("dpkg-query -W -f='${Status}' scangate | grep -qx 'install ok installed'")
        got = self.c.ok(
            "dpkg-query -W -f='${Architecture}\\n' scangate; stat -c '%U:%G %a' " + CONF + "; "
            "systemctl is-enabled scangate || true; id -nG scangate"
        ).split("\n")
        check(got[0] == "arm64", f"package architecture {got[0]!r}")
        check(got[1] == "root:scangate 640", f"{CONF} is {got[1]!r}, not root:scangate 640")
        check(got[2] == "disabled", f"enabled after install: {got[2]!r}")
        check("dialout" in got[3].split(), f"scangate not in dialout: {got[3]!r}")
        return f"apt-get install ./{self.deb}: arm64, config root:scangate 640, unit disabled, user in dialout"

    def enable_now(self):
        self.pty = Pty(self.c.leader)
        dev = f"/dev/pts/{self.pty.n}"
        b64 = base64.b64encode(CONFIG.encode()).decode()
        drop = base64.b64encode(DROPIN.encode()).decode()
        # What udev does for a scanner: its group, its mode, a stable name.
        self.c.ok(
            f"chgrp dialout {dev} && chmod 0660 {dev} && mkdir -p /dev/scangate && "
            f"ln -sfn {dev} /dev/scangate/counter-1 && "
            f"printf '%s' '{b64}' | base64 -d > {CONF} && "
            "mkdir -p /etc/systemd/system/scangate.service.d && "
            f"printf '%s' '{drop}' | base64 -d > /etc/systemd/system/scangate.service.d/pty.conf && "
            "runuser -u scangate -- scangate check-config"
        )
        t0 = time.monotonic()
        self.c.ok("systemctl daemon-reload && systemctl enable --now scangate", timeout=300)
        took = time.monotonic() - t0
        out = self.c.run("systemctl is-active scangate")[1].strip()
        check(out == "active", f"systemctl is-active scangate: {out!r}")
        return f"systemctl enable --now returned after {took:.1f} s; is-active: {out} (scanner on {dev})"

    def ready(self):
        t = self.c.prop("Type")
        check(t == "notify", f"Type={t}: active would not mean READY=1")
        props = self.c.ok("systemctl show -p ActiveState,SubState scangate")
        check("ActiveState=active" in props and "SubState=running" in props, props)
        text = self.c.prop("StatusText")
        check(text, "StatusText is empty (no STATUS= from the daemon)")
        log = self.c.ok("journalctl -b --no-pager -o cat | tail -n 300")
        lines = log.splitlines()
        ready = [i for i, l in enumerate(lines) if l.strip() == "ready"]
        started = [i for i, l in enumerate(lines) if l.startswith("Started scangate.service")]
        check(ready and started and ready[0] < started[0], f"no 'ready' before 'Started scangate.service': {lines[-12:]}")
        return f"Type=notify, active/running; the daemon logged 'ready' before systemd's 'Started'; STATUS={text!r}"

    def hardening(self):
        """What of the unit's sandbox the daemon runs in (informational
        but for NoNewPrivs and the capabilities: systemd under qemu-user
        finds no seccomp, and a container may not get device cgroups)."""
        pid = self.c.prop("MainPID")
        st = dict(
            l.split(":", 1) for l in self.c.ok(f"cat /proc/{pid}/status").splitlines() if ":" in l
        )
        st = {k: v.strip() for k, v in st.items()}
        check(st.get("NoNewPrivs") == "1", f"NoNewPrivs {st.get('NoNewPrivs')}")
        check(int(st.get("CapEff", "1"), 16) == 0, f"CapEff {st.get('CapEff')}")
        user = self.c.ok(f"ps -o user= -p {pid} 2>/dev/null || stat -c %U /proc/{pid}").strip()
        ns = self.c.ok(f"readlink /proc/1/ns/mnt /proc/{pid}/ns/mnt").split()
        init = self.c.ok("grep Seccomp_filters /proc/1/status || true").split()[-1:] or ["?"]
        elf = self.c.ok("od -An -tx1 -j18 -N2 /usr/bin/scangate").split()
        check(elf == ["b7", "00"], f"/usr/bin/scangate's ELF machine is {elf}, not aarch64 (b7)")
        return (
            f"aarch64 ELF; user {user}; NoNewPrivs 1, CapEff 0; own mount namespace: {ns[0] != ns[1]}; "
            f"seccomp filters: {st.get('Seccomp_filters', '?')} (the container's init: {init[0]})"
        )

    def scan(self):
        text = label(self.serial)
        t0 = time.monotonic()
        got = self.pty.scan(text, 120)
        check(got is not None, "no ACK within 120 s")
        check(got == ACK, f"NAK for {text!r}")
        return f"{text!r} + CR sent on the PTY, ACK after {time.monotonic() - t0:.1f} s"

    def in_ledger(self):
        out = self.c.ok(f"runuser -u scangate -- scangate ledger export --config {CONF}")
        lines = [l for l in out.splitlines() if self.serial in l]
        check(len(lines) == 1, f"{self.serial} in the ledger {len(lines)} times: {out[-600:]}")
        self.uuid = json.loads(lines[0])["scan_uuid"]
        return f"scangate ledger export: {lines[0][:160]}"

    def status(self):
        """`scangate status` healthy, with counter-1 connected and its read
        counted (polled: the daemon rewrites its status file every 2 s, so
        right after a start or a scan it may still show the moment before)."""
        t0 = time.monotonic()
        end = t0 + 30
        while True:
            rc, out = self.c.run(f"runuser -u scangate -- scangate status --config {CONF}")
            if rc == 0 and "scanner counter-1: connected" in out and "today 1 read(s)" in out:
                break
            check(time.monotonic() < end, f"scangate status exited {rc} (after 30 s of asking): {out[-600:]}")
            time.sleep(0.5)
        return f"healthy after {time.monotonic() - t0:.1f} s: " + " / ".join(l.strip() for l in out.splitlines()[:3])

    def journal(self):
        """journald has the scan's entry with its fields, and the audit
        trail's copy (polled: journald may be a little behind)."""
        check(self.uuid, "no scan in the ledger to look for")
        end = time.monotonic() + 30
        while True:
            out = self.c.run(f"journalctl -u scangate SCAN_UUID={self.uuid} -o json --no-pager")[1]
            entries = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
            decided = [e for e in entries if e.get("SCANNER") == "counter-1" and e.get("DECISION")]
            audit = self.c.run("journalctl -t scangate-audit -o cat --no-pager | head -n 3")[1].strip()
            if decided and audit:
                return f"SCAN_UUID={self.uuid} SCANNER=counter-1 DECISION={decided[0]['DECISION']}; scangate-audit lines there"
            check(time.monotonic() < end, f"journal: {len(entries)} entries for SCAN_UUID={self.uuid}, audit lines {bool(audit)}")
            time.sleep(1)

    def stop(self):
        self.c.ok("systemctl stop scangate", timeout=120)
        props = self.c.ok("systemctl show -p ActiveState,Result,ExecMainStatus,ExecMainCode scangate")
        check("ActiveState=inactive" in props, props)
        check("ExecMainStatus=0" in props and "Result=success" in props, f"stop was not clean: {props}")
        out = self.c.ok(f"scangate ledger export --config {CONF}")
        check(sum(self.serial in l for l in out.splitlines()) == 1, "the scan is not in the ledger once after the stop")
        return "systemctl stop: exit 0, Result=success, the scan still in the ledger once"

    def poweroff(self):
        self.c.run("systemctl poweroff --no-block")
        try:
            rc = self.c.proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            raise Failed("the container did not power off within 180 s")
        check(rc == 0, f"systemd-nspawn exited {rc}")
        return "powered off, systemd-nspawn exited 0"

    def main(self):
        if not self.step("boot", self.boot):
            return
        for name, fn in [
            ("apt_install", self.apt_install),
            ("enable_now", self.enable_now),
            ("ready", self.ready),
            ("hardening", self.hardening),
            ("scan", self.scan),
            ("in_ledger", self.in_ledger),
            ("status", self.status),
            ("journal", self.journal),
            ("stop", self.stop),
        ]:
            if not self.step(name, fn) and name in ("apt_install", "enable_now"):
                break
        # The container's journal, for people, before it goes.
        try:
            with open(os.path.join(self.c.out, "journal.txt"), "w") as f:
                f.write(self.c.run("journalctl -b --no-pager", timeout=120)[1])
        except Exception:
            pass
        self.step("poweroff", self.poweroff)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rootfs", required=True, help="a scratch copy: the container writes to it")
    ap.add_argument("--inputs", required=True, help="a directory with the .deb, bound read-only")
    ap.add_argument("--deb", required=True, help="the .deb's file name in --inputs")
    ap.add_argument("--out", required=True)
    ap.add_argument("--boot-timeout", type=int, default=300)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    c = Container(a.rootfs, a.inputs, a.out, a.boot_timeout)
    with open(os.path.join(a.out, "results.txt"), "w") as results:
        r = Run(c, a.deb, results)
        try:
            r.main()
        finally:
            if c.proc.poll() is None:
                c.proc.terminate()
                try:
                    c.proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    c.proc.kill()
                    c.proc.wait()
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
