#!/usr/bin/env bash
# The VM's disk image: its recipe. tests/vm/run.sh caches what this makes
# under /var/cache/scangate-vm/<arch>-<sha256 of this file>/ and rebuilds it
# when this file changes. Usage: image.sh ARCH OUTDIR (ARCH: amd64 | arm64).
# OUTDIR gets disk.img (raw ext4, the root file system), vmlinuz, initrd.img.
#
# The guest: Debian 12 minbase with a real systemd and udevd, Debian's
# kernel, redis-server (the LoadCredential check), dmsetup (the state
# disk's cuts: drive.py), nothing else. It has no
# network: everything `apt install ./scangate_*.deb` needs (systemd, libc6)
# is already installed. At boot, scangate-vmtest.service mounts the second
# disk (/dev/vdb: the .deb and the agent, made fresh by run.sh) and runs its
# agent, which the host drives over a virtio-serial port.
set -euo pipefail
arch=$1
out=$2
root=$out/rootfs
rm -rf "$root"
mkdir -p "$root"
case $arch in
amd64) kernel=linux-image-amd64 ;;
arm64) kernel=linux-image-arm64 ;;
*)
    echo "image.sh: unknown arch $arch" >&2
    exit 2
    ;;
esac
debootstrap --arch="$arch" --variant=minbase \
    --include=systemd,systemd-sysv,dbus,udev,kmod,procps,dmsetup \
    bookworm "$root" http://deb.debian.org/debian
mount -t proc proc "$root/proc"
trap 'umount "$root/proc" 2>/dev/null || true' EXIT
# No service may start inside the chroot (redis-server would, on the host).
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"
chroot "$root" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "$kernel" redis-server
rm -f "$root/usr/sbin/policy-rc.d"
# A small initramfs: the modules the root disk needs and no others (under
# TCG, unpacking and probing Debian's default one costs 20-100 s a boot).
echo MODULES=list >"$root/etc/initramfs-tools/conf.d/vm.conf"
printf '%s\n' virtio_pci virtio_mmio virtio_blk ext4 >>"$root/etc/initramfs-tools/modules"
chroot "$root" update-initramfs -u -k all
chroot "$root" apt-get clean
umount "$root/proc"
trap - EXIT

echo scangate-vm >"$root/etc/hostname"
echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' >"$root/etc/fstab"
# The console is a log the host keeps for people, not a channel: no getty.
ln -sf /dev/null "$root/etc/systemd/system/serial-getty@ttyS0.service"
ln -sf /dev/null "$root/etc/systemd/system/serial-getty@ttyAMA0.service"
ln -sf /dev/null "$root/etc/systemd/system/getty@tty1.service"
# No network in the guest: nothing should wait for it.
ln -sf /dev/null "$root/etc/systemd/system/systemd-networkd-wait-online.service"
ln -sf /dev/null "$root/etc/systemd/system/apt-daily.timer"
ln -sf /dev/null "$root/etc/systemd/system/apt-daily-upgrade.timer"
passwd -R "$root" -d root >/dev/null 2>&1 || chroot "$root" passwd -d root

cat >"$root/etc/systemd/system/scangate-vmtest.service" <<'EOF'
[Unit]
Description=scangate VM test agent (second disk, driven by the host over virtio-serial)
Requires=dev-vdb.device
After=dev-vdb.device local-fs.target

[Service]
Type=simple
ExecStartPre=/bin/mkdir -p /vmtest
ExecStartPre=/bin/mount /dev/vdb /vmtest
ExecStart=/bin/bash /vmtest/agent.sh
StandardOutput=journal
StandardError=journal

[Install]
WantedBy=multi-user.target
EOF
ln -sf ../scangate-vmtest.service "$root/etc/systemd/system/multi-user.target.wants/scangate-vmtest.service"

cp "$root"/boot/vmlinuz-* "$out/vmlinuz"
cp "$root"/boot/initrd.img-* "$out/initrd.img"
rm -f "$out/disk.img"
mkfs.ext4 -q -L scangate-vm -d "$root" "$out/disk.img" 2G
rm -rf "$root"
