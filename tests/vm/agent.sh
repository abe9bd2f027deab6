#!/bin/bash
# Guest side of tests/vm/run.sh: a command runner on the virtio-serial port
# scangate.ctl. The host writes one line per command,
#   ID TIMEOUT_S BASE64(bash script)
# and gets back one line,
#   ID EXIT_CODE BASE64(stdout and stderr)
# The agent's first line, before any command, is `hello BOOT_ID`.
# so results travel over that channel, never over the console. Started by
# scangate-vmtest.service (tests/vm/image.sh) from the second disk.
port=/dev/virtio-ports/scangate.ctl
while [ ! -e "$port" ]; do sleep 0.2; done
exec 3<>"$port"
# The first line says the agent is up, so the host needs no pings at boot.
printf 'hello %s\n' "$(cat /proc/sys/kernel/random/boot_id)" >&3
while true; do
    # EOF while the host side is not connected: try again.
    if ! read -r id limit b64 <&3; then
        sleep 0.2
        continue
    fi
    [ -n "$id" ] || continue
    script=$(printf '%s' "$b64" | base64 -d)
    out=$(timeout --kill-after=5 "${limit:-120}" bash -c "$script" </dev/null 2>&1)
    rc=$?
    printf '%s %s %s\n' "$id" "$rc" "$(printf '%s' "$out" | base64 -w0)" >&3
done
