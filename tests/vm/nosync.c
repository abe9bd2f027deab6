/* The power-cut control's fault (tests/vm/drive.py, powercut_control_*):
 * preloaded into the service (LD_PRELOAD, a systemd drop-in), it makes
 * every way of asking the kernel for durability succeed at once without
 * doing anything, as libeatmydata does. A build of scangate that ACKed
 * before its commit is on the disk behaves so: the control shows that the
 * power-cut checks catch it. No libc: nothing here calls anything, so it
 * loads into any process of any libc version. Built by run.sh:
 *   gcc -O2 -shared -fPIC -nostdlib -o nosync.so nosync.c */

int fsync(int fd)
{
    (void)fd;
    return 0;
}

int fdatasync(int fd)
{
    (void)fd;
    return 0;
}

int syncfs(int fd)
{
    (void)fd;
    return 0;
}

void sync(void)
{
}

int sync_file_range(int fd, long off, long n, unsigned int flags)
{
    (void)fd;
    (void)off;
    (void)n;
    (void)flags;
    return 0;
}

int msync(void *addr, unsigned long len, int flags)
{
    (void)addr;
    (void)len;
    (void)flags;
    return 0;
}
