#!/usr/bin/env bash
# What a first touch of memory costs on this machine, outside tidelog: the
# figures behind docs/BENCHMARKS.md, HTTP part, "Third session". On VMs
# that hand freed memory back to the host (balloon free-page reporting,
# DAMON), page-cache pages a growing log needs for the first time are far
# slower to fill than pages freed a moment before.
#
#   scripts/bench-first-touch.sh [dir on the disk the benchmarks use]
#
# Default dir: $TIDELOG_BENCH_DIR, else ${TMPDIR:-/tmp}. Needs a C compiler
# (cc). Writes at most 4 GiB there, and removes it. Each step is printed as
# MB/s:
#   1. MADV_POPULATE_READ of a new sparse 512 MiB file (what tidelog's
#      warm-up does), then the same for a second file right after the first
#      one's pages were freed;
#   2. pwrite of 512 MiB into a new file, no warm-up, after 30 s idle;
#   3. anonymous memory: first touch of 512 MiB, a second pass;
#   4. pwrite of 3 GiB, with and without dropping the page cache 256 MiB
#      behind the writer (sync_file_range, then POSIX_FADV_DONTNEED);
#   5. what tidelog's warm-up and writer do, over 4 GiB (fourth session):
#      warm 4 MiB (POSIX_FADV_WILLNEED: single-page folios; or, as before,
#      MADV_POPULATE_READ through a map: large folios), then pwrite it in
#      18 KiB steps (one produce request). Printed as us per 18 KiB for
#      each, over the first 2 GiB and over the rest: the VM keeps a pool of
#      still-backed small free blocks (~1.5 GiB here) that single pages
#      can use and large folios cannot; past it both are equally slow.
set -euo pipefail

dir="${1:-${TIDELOG_BENCH_DIR:-${TMPDIR:-/tmp}}}"
work="$(mktemp -d "$dir/tidelog-first-touch.XXXXXX")"
trap 'rm -rf "$work"' EXIT

cat > "$work/touch.c" <<'EOF'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#define MIB (1ul << 20)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what) { perror(what); exit(1); }

/* MADV_POPULATE_READ over a new sparse file of n bytes, in 4 MiB steps. */
static double populate(const char *path, size_t n, int keep) {
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, n)) die(path);
    char *p = mmap(0, n, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) die("mmap");
    double t = now();
    for (size_t o = 0; o < n; o += 4 * MIB) madvise(p + o, 4 * MIB, MADV_POPULATE_READ);
    double mbs = n / (now() - t) / 1e6;
    munmap(p, n);
    close(fd);
    if (!keep) unlink(path);
    return mbs;
}

/* Step 5: warm 4 MiB, then pwrite it in 18 KiB steps, over n bytes of a
 * preallocated file; single = POSIX_FADV_WILLNEED, else MADV_POPULATE_READ
 * through a map. Prints us per 18 KiB, over the first 2 GiB and the rest. */
static void warm_and_write(const char *path, size_t n, int single) {
    const size_t req = 18 * 1024, half = 2048 * MIB;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || posix_fallocate(fd, 0, n)) die(path);
    char *map = mmap(0, n, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) die("mmap");
    char *buf = malloc(req);
    memset(buf, 7, req);
    double warm[2] = {0, 0}, write[2] = {0, 0};
    size_t count[2] = {0, 0};
    for (size_t o = 0; o < n; o += 4 * MIB) {
        int part = o >= half;
        double t = now();
        if (single) posix_fadvise(fd, o, 4 * MIB, POSIX_FADV_WILLNEED);
        else madvise(map + o, 4 * MIB, MADV_POPULATE_READ);
        warm[part] += now() - t;
        t = now();
        for (size_t k = 0; k + req <= 4 * MIB; k += req, count[part]++)
            if (pwrite(fd, buf, req, o + k) != (ssize_t)req) die("pwrite");
        write[part] += now() - t;
    }
    printf("%s: warm %.1f us, pwrite %.2f us per 18 KiB over the first 2 GiB; %.1f and %.2f us after\n",
           single ? "POSIX_FADV_WILLNEED (single pages)" : "MADV_POPULATE_READ (large folios) ",
           warm[0] / count[0] * 1e6, write[0] / count[0] * 1e6,
           warm[1] / count[1] * 1e6, write[1] / count[1] * 1e6);
    free(buf);
    munmap(map, n);
    close(fd);
    unlink(path);
}

/* pwrite n bytes in 4 MiB steps; with window > 0, drop the page cache that
 * far behind the writer. */
static double write_file(const char *path, size_t n, size_t window) {
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) die(path);
    size_t step = 4 * MIB;
    char *buf = malloc(step);
    memset(buf, 7, step);
    double t = now();
    for (size_t o = 0; o < n; o += step) {
        if (pwrite(fd, buf, step, o) != (ssize_t)step) die("pwrite");
        if (window && o >= window) {
            size_t d = o - window;
            sync_file_range(fd, d, step, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                             SYNC_FILE_RANGE_WAIT_AFTER);
            posix_fadvise(fd, d, step, POSIX_FADV_DONTNEED);
        }
    }
    double mbs = n / (now() - t) / 1e6;
    free(buf);
    close(fd);
    unlink(path);
    return mbs;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s/a", argv[1]);
    snprintf(b, sizeof b, "%s/b", argv[1]);
    size_t n = 512 * MIB;

    double fresh = populate(a, n, 1);
    unlink(a); /* frees its pages: the next file can reuse them at once */
    double reused = populate(b, n, 0);
    printf("populate a new sparse file: fresh memory %.0f MB/s, right after freeing %.0f MB/s\n",
           fresh, reused);

    sleep(30);
    printf("pwrite into a new file after 30 s idle: %.0f MB/s\n", write_file(a, n, 0));

    char *m = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) die("mmap anon");
    double t = now();
    memset(m, 1, n);
    double first = n / (now() - t) / 1e6;
    t = now();
    memset(m, 2, n);
    double second = n / (now() - t) / 1e6;
    munmap(m, n);
    printf("anonymous memory: first touch %.0f MB/s, second pass %.0f MB/s\n", first, second);

    double windowed = write_file(a, 3072 * MIB, 256 * MIB);
    sleep(30);
    double plain = write_file(a, 3072 * MIB, 0);
    printf("pwrite of 3 GiB: page cache dropped 256 MiB behind %.0f MB/s, kept %.0f MB/s\n",
           windowed, plain);

    for (int single = 1; single >= 0; single--) {
        sleep(22);
        warm_and_write(a, 4096 * MIB, single);
    }
    return 0;
}
EOF

cc -O2 -o "$work/touch" "$work/touch.c"
echo "== $(uname -r), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg); data in $dir"
"$work/touch" "$work"
