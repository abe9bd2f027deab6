#!/usr/bin/env bash
# The arm64 package under a real systemd: the arm64 .deb
# installed with `apt install` in a Debian 12 arm64 root file system booted
# with `systemd-nspawn -b`, its systemd 252 and every arm64 binary run by
# qemu-aarch64 through binfmt_misc on the host's kernel (no arm64 kernel or
# initramfs to build). Checks, in one boot (drive.py): the boot; `apt
# install` (arm64, the config's owner and mode, the unit disabled, the user
# in dialout); `systemctl enable --now` and is-active, which Type=notify
# gives only after READY=1, and STATUS=; the daemon's user, NoNewPrivs, no
# capabilities; a scan through a PTY ACKed and once in `scangate ledger
# export`; `scangate status` healthy; the journal fields; `systemctl stop`
# exiting 0; the poweroff. Timings per step; PASS or FAIL at the end.
#
#   tests/nspawn/arm64.sh               # builds what it lacks: the .deb, the root file system
#   tests/nspawn/arm64.sh --if-cached   # only if the root file system is cached (CI); else SKIPPED
#
# SCANGATE_ARM64_DEB: an arm64 .deb built already (CI passes the one it
# made). The root file system (tests/nspawn/image.sh is its recipe) is
# cached under /var/cache/scangate-vm/nspawn-arm64-<sha256 of the
# recipe>/ and rebuilt when the recipe changes; the container boots a
# scratch copy of it, so it stays clean. Results:
# $SCANGATE_ARM64_OUT (default target/nspawn-arm64/)results.txt, one line
# per step, beside console.log and journal.txt (the container's).
set -euo pipefail
cd "$(dirname "$0")/../.."
here=tests/nspawn
if_cached=0
[ "${1:-}" = --if-cached ] && if_cached=1
out=${SCANGATE_ARM64_OUT:-target/nspawn-arm64}
mkdir -p "$out"
t0=$(date +%s)
lap=$t0
timing() {
    local now
    now=$(date +%s)
    echo "timing: $1 $((now - lap)) s"
    lap=$now
}

hash=$(sha256sum "$here/image.sh" | cut -c1-16)
cache_root=${SCANGATE_VM_CACHE:-/var/cache/scangate-vm}
# (Not arm64-<hash>: tests/vm/run.sh removes every $arch-* but its own.)
cache=$cache_root/nspawn-arm64-$hash
if [ "$if_cached" = 1 ] && [ ! -e "$cache/complete" ]; then
    echo "arm64 nspawn test SKIPPED: no cached root file system in $cache" \
        "(tests/nspawn/arm64.sh builds it: docs/testing.md)"
    exit 0
fi

need=()
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
command -v arch-test >/dev/null 2>&1 || need+=(arch-test)  # mmdebstrap's check of a foreign architecture
command -v systemd-nspawn >/dev/null 2>&1 || need+=(systemd-container)
command -v qemu-aarch64-static >/dev/null 2>&1 || need+=(qemu-user-static)
command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
command -v python3 >/dev/null 2>&1 || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"
fi

# binfmt_misc: qemu-aarch64 with the F flag (the interpreter opened when it
# is registered, so it runs inside the container's mount namespace, where
# no qemu binary is).
if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
fi
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    cat /usr/lib/binfmt.d/qemu-aarch64.conf >/proc/sys/fs/binfmt_misc/register
fi
if ! grep -q '^flags:.*F' /proc/sys/fs/binfmt_misc/qemu-aarch64; then
    echo "binfmt_misc's qemu-aarch64 lacks the F flag: the container could not run arm64 binaries" >&2
    exit 1
fi

# 1. The package: SCANGATE_ARM64_DEB, or built as .ci/run builds it.
if [ -n "${SCANGATE_ARM64_DEB:-}" ]; then
    deb=$SCANGATE_ARM64_DEB
else
    command -v cargo-deb >/dev/null 2>&1 || cargo install --locked cargo-deb --version 3.8.0
    cargo build --locked --target aarch64-unknown-linux-gnu
    cargo deb --locked --no-build --profile dev --target aarch64-unknown-linux-gnu
    deb=$(ls -t target/aarch64-unknown-linux-gnu/debian/scangate_*_arm64.deb | head -n1)
fi
echo "package: $deb"
timing package

# 2. The root file system, cached by its recipe's hash.
if [ ! -e "$cache/complete" ]; then
    echo "building the arm64 root file system (recipe $hash) in $cache"
    rm -rf "$cache.tmp"
    mkdir -p "$cache.tmp"
    bash "$here/image.sh" "$cache.tmp"
    touch "$cache.tmp/complete"
    rm -rf "$cache"
    mv "$cache.tmp" "$cache"
    # Older recipes' trees are not needed any more.
    for old in "$cache_root"/nspawn-arm64-*; do
        [ "$old" = "$cache" ] || rm -rf "$old"
    done
    timing "root file system (built)"
else
    echo "root file system: $cache (cached)"
fi

# 3. A scratch copy of the tree; boot it once and run every step.
work=$(mktemp -d /tmp/sgnspawn.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/inputs"
cp "$deb" "$work/inputs/"
cp -a --reflink=auto "$cache/rootfs" "$work/rootfs"
timing "scratch copy"
rc=0
python3 "$here/drive.py" --rootfs "$work/rootfs" --inputs "$work/inputs" \
    --deb "$(basename "$deb")" --out "$out" || rc=$?
timing "boot and checks"
echo "arm64 nspawn test: $([ "$rc" = 0 ] && echo PASS || echo FAIL)," \
    "$(($(date +%s) - t0)) s in all (results: $out/results.txt)"
exit $rc
