#!/usr/bin/env bash
# The arm64 container's root file system: its recipe. tests/nspawn/arm64.sh
# caches what this makes under
# /var/cache/scangate-vm/nspawn-arm64-<sha256 of this file>/rootfs and
# rebuilds it when this file changes. Usage: image.sh OUTDIR.
#
# Debian 12 arm64, minbase with systemd as init and dbus (what
# `systemctl` inside needs), nothing else: no kernel, no initramfs, no udev
# (systemd-nspawn boots it on the host's kernel, every arm64 binary run by
# qemu-aarch64 through binfmt_misc). It has no network when booted: what
# `apt install ./scangate_*_arm64.deb` needs (systemd, libc6) is already
# here. mmdebstrap, not debootstrap: it unpacks each package once, which
# halves the time under emulation (259 s against 501 s here).
set -euo pipefail
out=$1
root=$out/rootfs
rm -rf "$root"
mkdir -p "$out"
mmdebstrap --mode=root --architectures=arm64 --variant=minbase \
    --include=systemd,systemd-sysv,dbus \
    bookworm "$root" http://deb.debian.org/debian

echo scangate-arm64 >"$root/etc/hostname"
# Nothing a container without network or terminals needs; each would only
# slow the boot under emulation.
for u in console-getty.service getty@tty1.service systemd-networkd-wait-online.service \
    apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer \
    fstrim.timer systemd-tmpfiles-clean.timer; do
    ln -sf /dev/null "$root/etc/systemd/system/$u"
done
passwd -R "$root" -d root >/dev/null 2>&1 || chroot "$root" passwd -d root
