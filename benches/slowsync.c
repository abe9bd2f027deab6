/* An SD card's fsync for benchmarks (docs/benchmarks.md, "SD-card
 * profile"). Preloaded (LD_PRELOAD) into a process, it makes every
 * fsync(2) and fdatasync(2) (the two calls SQLite and Rust's std use to ask
 * for durability) call the real one and then, if that returned sooner,
 * sleep until SCANGATE_FSYNC_DELAY_MS milliseconds (a decimal number) have
 * passed since the call began: each call takes max(real, delay). Unset or
 * 0: the calls only count. Concurrent callers each wait their own delay
 * (they are not queued behind one another as on one card).
 *
 * The counters below are read by benches/serial_ack.rs through dlsym, which
 * is also how it checks that the shim is loaded. Built by that bench:
 *   cc -O2 -shared -fPIC -o slowsync.so slowsync.c -ldl
 * and usable on its own:
 *   LD_PRELOAD=$PWD/slowsync.so SCANGATE_FSYNC_DELAY_MS=10 scangate bench */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <time.h>

/* Calls made, and the time spent inside them (real call + delay). */
unsigned long scangate_slowsync_calls;
unsigned long scangate_slowsync_ns;
/* The delay in force, for the bench to print. */
long scangate_slowsync_delay_ns;

static int (*real_fsync)(int);
static int (*real_fdatasync)(int);

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

__attribute__((constructor)) static void slowsync_init(void)
{
    const char *ms = getenv("SCANGATE_FSYNC_DELAY_MS");
    double d = ms ? strtod(ms, NULL) : 0.0;
    scangate_slowsync_delay_ns = d > 0 ? (long)(d * 1e6) : 0;
    real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
}

/* After the real call: sleep out the rest of the delay, count the call.
 * errno is the real call's. */
static int pad(long long t0, int ret)
{
    int saved = errno;
    long long until = t0 + scangate_slowsync_delay_ns;
    long long t = now_ns();
    while (t < until) {
        long long left = until - t;
        struct timespec s = {left / 1000000000LL, left % 1000000000LL};
        nanosleep(&s, NULL);
        t = now_ns();
    }
    __atomic_add_fetch(&scangate_slowsync_calls, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&scangate_slowsync_ns, (unsigned long)(t - t0), __ATOMIC_RELAXED);
    errno = saved;
    return ret;
}

int fsync(int fd)
{
    if (!real_fsync)
        slowsync_init();
    long long t0 = now_ns();
    return pad(t0, real_fsync(fd));
}

int fdatasync(int fd)
{
    if (!real_fdatasync)
        slowsync_init();
    long long t0 = now_ns();
    return pad(t0, real_fdatasync(fd));
}
