#!/usr/bin/env bash
# The VM test (issues 18 and 19): the amd64 .deb built from this tree,
# installed with `apt install` in a Debian 12 guest under a real systemd and
# udevd, its scanners on the guest's kernel: qemu usb-serial adapters
# (ftdi_sio) and usb-kbd keyboards (usbhid) the host drives over QMP and
# chardev sockets, and a HID POS scanner on /dev/uhid (vmhid.c). First the
# previous release's .deb (built from git by prev-deb.sh, cached) is
# installed, edited and used as a site would, and upgraded to this tree's
# unattended, rolled back and upgraded again, then purged; the other checks
# run on a fresh install after that. One boot per run;
# SCANGATE_VM_ONLY=check,… runs some checks (drive.py).
#
#   tests/vm/run.sh            # .ci/run calls it after the other steps
#
# The guest's disk image (tests/vm/image.sh is its recipe) is cached under
# /var/cache/scangate-vm/amd64-<sha256 of the recipe>/ and rebuilt when the
# recipe changes; the guest boots it with snapshot=on, so it stays clean.
# Results: $SCANGATE_VM_OUT (default target/vm/)results.txt, one line per
# check (drive.py says what the words mean), beside console.log (the
# guest's console, for people), guest-journal.txt and qemu.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=tests/vm
# amd64 (CI) or arm64 (SCANGATE_VM_ARCH=arm64: the arm64 .deb in an arm64
# guest, qemu-system-aarch64 -M virt; its image needs binfmt qemu-aarch64
# on the host to be built, and every step is several times slower).
arch=${SCANGATE_VM_ARCH:-amd64}

# The earlier release upgraded from by the checks: the commit
# tests/fixtures/package-upgraded-from names (why that one: said there),
# or SCANGATE_VM_PREV. (A full hash: its cached .deb is found by it even
# in a clone that lacks the commit.)
prev_commit=${SCANGATE_VM_PREV:-$(grep -v '^#' tests/fixtures/package-upgraded-from | awk 'NF { print $1; exit }')}

# Checks known to fail, by name (they run and report XFAIL while they fail;
# XPASS when one passes: delete it here then). None today.
EXPECTED_TO_FAIL=()

out=${SCANGATE_VM_OUT:-target/vm}
mkdir -p "$out"
t_start=$(date +%s)

need=()
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v qemu-system-x86_64 >/dev/null 2>&1 || need+=(qemu-system-x86)
[ "$arch" = amd64 ] || command -v qemu-system-aarch64 >/dev/null 2>&1 || need+=(qemu-system-arm)
command -v mkfs.ext4 >/dev/null 2>&1 || need+=(e2fsprogs)
command -v python3 >/dev/null 2>&1 || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update
    # Debian's qemu packages must all be of one version. A machine that came
    # with a newer qemu-utils (these came with bookworm-backports' 10.x)
    # cannot take bookworm's qemu-system (7.2, which the checks are verified
    # on): apt refuses ("qemu-utils : Breaks: qemu-system-common"). So
    # qemu-utils goes to the qemu-system candidate's version with it.
    for p in "${need[@]}"; do
        case $p in qemu-system-*) ;; *) continue ;; esac
        want=$(apt-cache policy "$p" | awk '/Candidate:/ { print $2 }')
        have=$(dpkg-query -W -f='${Version}' qemu-utils 2>/dev/null || true)
        if [ -n "$have" ] && [ -n "$want" ] && [ "$have" != "$want" ]; then
            need+=("qemu-utils=$want")
        fi
        break
    done
    DEBIAN_FRONTEND=noninteractive apt-get install -y --allow-downgrades --no-install-recommends "${need[@]}"
fi
command -v cargo-deb >/dev/null 2>&1 || cargo install --locked cargo-deb --version 3.8.0

# 1. The package, from this tree (or SCANGATE_VM_DEB, one built already).
case ${SCANGATE_VM_DEB:+given}$arch in
given*)
    deb=$SCANGATE_VM_DEB
    ;;
amd64)
    cargo deb --locked
    deb=$(ls -t target/debian/scangate_*_amd64.deb | head -n1)
    ;;
arm64)
    cargo deb --locked --target aarch64-unknown-linux-gnu
    deb=$(ls -t target/aarch64-unknown-linux-gnu/debian/scangate_*_arm64.deb | head -n1)
    ;;
*)
    echo "SCANGATE_VM_ARCH must be amd64 or arm64" >&2
    exit 2
    ;;
esac
echo "package: $deb"
# The previous release's (a failure to build it fails the upgrade checks,
# not the others: drive.py says why, from the log).
prev_deb=
prev_error=
if prev_deb=$(bash "$here/prev-deb.sh" "$prev_commit" "$arch" 2>"$out/prev-deb.log" | tail -n1) && [ -n "$prev_deb" ]; then
    echo "previous release: $prev_deb"
else
    prev_deb=
    prev_error="tests/vm/prev-deb.sh $prev_commit $arch failed: $(tail -n 3 "$out/prev-deb.log" | tr '\n' ' ')"
    echo "$prev_error" >&2
fi

# 2. The guest's image, cached by its recipe's hash.
hash=$(sha256sum "$here/image.sh" | cut -c1-16)
cache_root=${SCANGATE_VM_CACHE:-/var/cache/scangate-vm}
cache=$cache_root/$arch-$hash
if [ ! -e "$cache/complete" ]; then
    echo "building the guest image (recipe $hash) in $cache"
    rm -rf "$cache.tmp"
    mkdir -p "$cache.tmp"
    bash "$here/image.sh" "$arch" "$cache.tmp"
    touch "$cache.tmp/complete"
    rm -rf "$cache"
    mv "$cache.tmp" "$cache"
    # Older recipes' images are not needed any more.
    for old in "$cache_root/$arch"-*; do
        [ "$old" = "$cache" ] || rm -rf "$old"
    done
else
    echo "guest image: $cache (cached)"
fi

# 3. The second disk: the .deb, the guest agent, vmhid (the guest's HID
# helper: an evdev reader and a uhid HID POS scanner; built static here, the
# guest has no compiler) and nosync.so (the power-cut control's fault: fsync
# a no-op), fresh each run.
work=$(mktemp -d /tmp/sgvm.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/inputs"
cp "$deb" "$work/inputs/"
[ -z "$prev_deb" ] || cp "$prev_deb" "$work/inputs/"
cp "$here/agent.sh" "$work/inputs/agent.sh"
case $arch in
amd64) guest_cc=gcc ;;
arm64) guest_cc=aarch64-linux-gnu-gcc ;;
esac
"$guest_cc" -O2 -static -Wall -Wextra -Werror -o "$work/inputs/vmhid" "$here/vmhid.c"
"$guest_cc" -O2 -shared -fPIC -nostdlib -Wall -Wextra -Werror -o "$work/inputs/nosync.so" "$here/nosync.c"
mkfs.ext4 -q -L vmtest -d "$work/inputs" "$work/inputs.img" 128M

# 4. Boot once and run every check. TCG: KVM is not usable on these
# machines. No network. The chardevs c2 and c3 have no device yet: drive.py
# plugs them in with QMP device_add during the checks.
# USB ports are pinned (xhci with 8 USB 2 ports: guest paths 1-1 … 1-8):
# usb-serial SCAN1 on 1, SCAN2 and SCAN3 hot-plugged on 2 and 3; two
# identical keyboards (qemu usb-kbd 0627:0001, the same serial string) on 4
# and 5, and a third hot-plugged on 6 for `scangate pair`. QMP
# input-send-event types into one keyboard only when it is bound to a
# display of its own and the event names that display, so each keyboard
# has one (gpu0..gpu2; no display backend: -display none).
case $arch in
# amd64 also logs every LED state its PS/2 keyboard receives, with the
# host's time: the gateway LED check drives that keyboard's caps lock LED.
# (-M virt has no PS/2 keyboard: that check is expected to fail on arm64.)
amd64)
    machine=(qemu-system-x86_64 -accel tcg -trace ps2_set_ledstate -msg timestamp=on)
    console=ttyS0
    ;;
arm64)
    machine=(qemu-system-aarch64 -M virt -cpu max -accel tcg)
    console=ttyAMA0
    EXPECTED_TO_FAIL+=(gateway_led_on_a_kernel_led)
    ;;
esac
qemu=(
    "${machine[@]}" -m 1024 -smp 2 -nodefaults -no-reboot
    -display none -serial "file:$out/console.log" -nic none
    -kernel "$cache/vmlinuz" -initrd "$cache/initrd.img"
    -append "root=/dev/vda rw console=$console panic=-1"
    -drive "file=$cache/disk.img,format=raw,if=virtio,snapshot=on"
    -drive "file=$work/inputs.img,format=raw,if=virtio"
    -qmp "unix:$work/qmp.sock,server=on,wait=off"
    -device virtio-serial-pci
    -chardev "socket,id=ctl,path=$work/ctl.sock,server=on,wait=off"
    -device virtserialport,chardev=ctl,name=scangate.ctl
    -device virtio-gpu-pci,id=gpu0
    -device secondary-vga,id=gpu1
    -device secondary-vga,id=gpu2
    -device qemu-xhci,id=xhci,p2=8,p3=8
    -chardev "socket,id=c1,path=$work/s1.sock,server=on,wait=off"
    -chardev "socket,id=c2,path=$work/s2.sock,server=on,wait=off"
    -chardev "socket,id=c3,path=$work/s3.sock,server=on,wait=off"
    -device usb-serial,id=u1,chardev=c1,serial=SCAN1,bus=xhci.0,port=1
    -device usb-kbd,id=k1,display=gpu0,serial=SAME0001,bus=xhci.0,port=4
    -device usb-kbd,id=k2,display=gpu1,serial=SAME0001,bus=xhci.0,port=5
)
qemu_json=$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "${qemu[@]}")
rc=0
SCANGATE_VM_EXPECTED_TO_FAIL="${EXPECTED_TO_FAIL[*]}" \
    python3 "$here/drive.py" --qemu "$qemu_json" --dir "$work" --out "$out" \
    --deb "$(basename "$deb")" ${prev_deb:+--prev-deb "$(basename "$prev_deb")"} \
    --prev-error "$prev_error" || rc=$?
echo "VM step: $(($(date +%s) - t_start)) s in all (results: $out/results.txt)"
exit $rc
