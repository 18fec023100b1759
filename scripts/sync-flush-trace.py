#!/usr/bin/env python3
"""Summarise a perf trace of the tidelog-sync-flush thread (see
sync-flush-trace.sh): msyncs, their sleeps and wake-ups, block requests.

usage: sync-flush-trace.py PERF_SCRIPT_TXT FLUSHER_TID APPENDS SECONDS [CHECKPOINT_TID]
"""
import collections
import re
import sys

EVENT = re.compile(r"\s*(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)")
REQUEST = re.compile(r"\S+ (\S+) (\d+) \(\S*\) (\d+) \+ (\d+)")


def quantile(sorted_values, q):
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * q))]


def main():
    path, tid, appends, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    checkpointer = int(sys.argv[5]) if len(sys.argv) > 5 else None
    checkpoint_syncs = []
    checkpoint_open = None
    msyncs = []
    cur = None
    last_exit = None
    gaps = []
    for line in open(path):
        m = EVENT.match(line)
        if not m:
            continue
        ev_tid, t, event, rest = int(m.group(1)), float(m.group(2)), m.group(3), m.group(4)
        if ev_tid == checkpointer and event.startswith("syscalls:sys_enter_"):
            checkpoint_open = t
            continue
        if ev_tid == checkpointer and event.startswith("syscalls:sys_exit_"):
            if checkpoint_open is not None:
                checkpoint_syncs.append((checkpoint_open, t))
            checkpoint_open = None
            continue
        if event == "syscalls:sys_enter_msync" and ev_tid == tid:
            length = re.search(r"len: (0x[0-9a-f]+)", rest)
            cur = {"t0": t, "len": int(length.group(1), 16) if length else 0,
                   "waits": [], "requests": collections.Counter(), "meta_sectors": []}
            if last_exit is not None:
                gaps.append(t - last_exit)
        elif event == "syscalls:sys_exit_msync" and ev_tid == tid and cur:
            cur["t1"] = t
            msyncs.append(cur)
            last_exit = t
            cur = None
        elif cur is None:
            continue
        elif event == "sched:sched_switch" and f"prev_pid={tid} " in rest:
            if "prev_state=R" not in rest:
                cur["slept"] = t
        elif event == "sched:sched_wakeup":
            cur["woken"] = t
        elif event == "sched:sched_switch" and f"next_pid={tid} " in rest and "slept" in cur:
            woken = cur.pop("woken", t)
            cur["waits"].append((woken - cur.pop("slept"), t - woken))
        elif event == "block:block_rq_issue" and ev_tid == tid:
            r = REQUEST.search(rest)
            if not r:
                continue
            rwbs, nbytes, sector = r.group(1), int(r.group(2)), int(r.group(3))
            if "M" in rwbs:
                cur["requests"]["WSM (metadata)"] += 1
                cur["meta_sectors"].append(sector)
            elif rwbs.startswith("W") and nbytes <= cur["len"] + 2 * 4096:
                cur["requests"]["WS (data)"] += 1
            else:
                cur["requests"]["other (dispatched for others)"] += 1
    n = len(msyncs)
    if n == 0:
        print("no msync by the flusher in the window (was the produce phase running?)")
        return
    d = sorted(m["t1"] - m["t0"] for m in msyncs)
    print(f"msyncs: {n} in {seconds:.0f} s ({n / seconds:.0f}/s); produce requests per msync: {appends / n:.1f}")
    print("msync duration: mean %.3f, p50 %.3f, p90 %.3f, p99 %.3f ms; gap between msyncs: mean %.3f ms"
          % (sum(d) / n * 1e3, quantile(d, .5) * 1e3, quantile(d, .9) * 1e3, quantile(d, .99) * 1e3,
             (sum(gaps) / len(gaps) * 1e3) if gaps else 0.0))
    waits = [w for m in msyncs for w in m["waits"]]
    device = sorted(w[0] for w in waits)
    cpu = sorted(w[1] for w in waits)
    if waits:
        print("sleeps per msync: %.2f; each: device (sleep to wake-up) mean %.3f, p50 %.3f ms; "
              "CPU (wake-up to running) mean %.3f, p50 %.3f, p90 %.3f ms"
              % (len(waits) / n, sum(device) / len(device) * 1e3, quantile(device, .5) * 1e3,
                 sum(cpu) / len(cpu) * 1e3, quantile(cpu, .5) * 1e3, quantile(cpu, .9) * 1e3))
    total = collections.Counter()
    for m in msyncs:
        total.update(m["requests"])
    print("block requests per msync: " + ", ".join(f"{k} {v / n:.2f}" for k, v in sorted(total.items())))
    with_meta = [m["t1"] - m["t0"] for m in msyncs if m["meta_sectors"]]
    without = [m["t1"] - m["t0"] for m in msyncs if not m["meta_sectors"]]
    if with_meta and without:
        print("msync duration with a metadata write: mean %.3f ms (%d); without: mean %.3f ms (%d)"
              % (sum(with_meta) / len(with_meta) * 1e3, len(with_meta),
                 sum(without) / len(without) * 1e3, len(without)))
    if checkpointer is not None:
        overlapped = [m["t1"] - m["t0"] for m in msyncs
                      if any(a < m["t1"] and b > m["t0"] for a, b in checkpoint_syncs)]
        alone = sorted(m["t1"] - m["t0"] for m in msyncs
                       if not any(a < m["t1"] and b > m["t0"] for a, b in checkpoint_syncs))
        busy = sum(b - a for a, b in checkpoint_syncs)
        print("checkpoint thread: %d sync calls, %.1f ms in them (%.1f %% of the window)"
              % (len(checkpoint_syncs), busy * 1e3, busy / seconds * 100))
        if overlapped and alone:
            overlapped.sort()
            print("msyncs overlapping one: %d, mean %.3f, p90 %.3f ms; the others: %d, mean %.3f, p90 %.3f ms"
                  % (len(overlapped), sum(overlapped) / len(overlapped) * 1e3, quantile(overlapped, .9) * 1e3,
                     len(alone), sum(alone) / len(alone) * 1e3, quantile(alone, .9) * 1e3))
    meta = collections.Counter(s for m in msyncs for s in m["meta_sectors"])
    if meta:
        sector, count = meta.most_common(1)[0]
        print(f"metadata writes: {sum(meta.values())}, {count} of them to sector {sector} "
              f"(one block written again and again: the inode table block)")


if __name__ == "__main__":
    main()
