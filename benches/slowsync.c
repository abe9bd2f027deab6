/* An SD card's fsync for benchmarks (docs/benchmarks.md, "SD-card
 * profile"). Preloaded (LD_PRELOAD) into a process, it makes every
 * fsync(2) and fdatasync(2) (the two calls SQLite and Rust's std use to ask
 * for durability) call the real one and then, if that returned sooner,
 * sleep until SCANGATE_FSYNC_DELAY_MS milliseconds (a decimal number) have
 * passed since the call began: each call takes max(real, delay). Unset or
 * 0: the calls only count.
 *
 * Concurrent callers (the daemon's writer and its WAL checkpointer) are
 * queued as on one card, which flushes one thing at a time: a call's delay
 * starts when the previous call's has ended, so it takes its wait for the
 * card plus the delay. SCANGATE_FSYNC_PARALLEL=1: each caller waits only
 * its own delay, as if every call had a card of its own.
 *
 * The counters below are read by benches/serial_ack.rs through dlsym, which
 * is also how it checks that the shim is loaded. Built by that bench:
 *   cc -O2 -shared -fPIC -o slowsync.so slowsync.c -ldl
 * and usable on its own:
 *   LD_PRELOAD=$PWD/slowsync.so SCANGATE_FSYNC_DELAY_MS=10 scangate bench */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <time.h>

/* Calls made, and the time spent inside them (real call + delay, queue
 * included). */
unsigned long scangate_slowsync_calls;
unsigned long scangate_slowsync_ns;
/* Of those, the calls made by the daemon's WAL checkpointer (the thread
 * named "wal-checkpoint", src/store/checkpoint.rs): the rest are, in a
 * running daemon, the outbox writer's commits. */
unsigned long scangate_slowsync_checkpointer_calls;
/* The delay in force, for the bench to print. */
long scangate_slowsync_delay_ns;
/* 1 with SCANGATE_FSYNC_PARALLEL=1 (no queue). */
int scangate_slowsync_parallel;

/* When the card is free again (CLOCK_MONOTONIC ns). */
static long long card_free;

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
    const char *par = getenv("SCANGATE_FSYNC_PARALLEL");
    scangate_slowsync_parallel = par && par[0] == '1';
    real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
}

/* After the real call: sleep out the rest of the delay (from when the card
 * was free, queued), count the call. errno is the real call's. */
static int pad(long long t0, int ret)
{
    int saved = errno;
    long long until = t0 + scangate_slowsync_delay_ns;
    if (!scangate_slowsync_parallel) {
        long long free_at = __atomic_load_n(&card_free, __ATOMIC_RELAXED);
        do {
            until = (free_at > t0 ? free_at : t0) + scangate_slowsync_delay_ns;
        } while (!__atomic_compare_exchange_n(&card_free, &free_at, until, 0,
                                              __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    }
    long long t = now_ns();
    while (t < until) {
        long long left = until - t;
        struct timespec s = {left / 1000000000LL, left % 1000000000LL};
        nanosleep(&s, NULL);
        t = now_ns();
    }
    __atomic_add_fetch(&scangate_slowsync_calls, 1, __ATOMIC_RELAXED);
    char name[16] = {0};
    if (prctl(PR_GET_NAME, name) == 0 && strcmp(name, "wal-checkpoint") == 0)
        __atomic_add_fetch(&scangate_slowsync_checkpointer_calls, 1, __ATOMIC_RELAXED);
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
