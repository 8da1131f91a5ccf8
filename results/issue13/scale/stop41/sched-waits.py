#!/usr/bin/env python3
"""Where woken threads ran, from a `perf sched record` trace.

    perf sched record -o sched.data -- atomio bench ior-hard --clients 4 \
        --strategies none,bounding-extent --runs 3 --no-verify --no-progress
    perf script -i sched.data -F cpu,time,event,trace > sched.txt
    sched-waits.py sched.txt [comm ...]   (default comms: atomio tokio-rt-worker)

For every wake-up (sched_waking) of a thread of those names that ran within 1 ms, it
classes the wake by whether the CPU it then ran on, and the other CPU, were idle at the
moment of the wake, and prints the count and the wait (wake to switch-in) of each class.
A wake that ran on a busy CPU while the other idled is one a single shared run queue
would have started at once. Two CPUs assumed (this VM).
"""
import bisect
import collections
import re
import sys

LINE = re.compile(r"\[(\d+)\]\s+([\d.]+):\s+(\S+):\s+(.*)")
FIELD = re.compile(r"(\w+)=(\S+)")


def main(path, comms):
    cur = {0: 0, 1: 0}
    runnable = {}
    waits = []
    idle = {0: [], 1: []}
    idle_since = {0: None, 1: None}
    for line in open(path):
        m = LINE.match(line)
        if not m:
            continue
        cpu, t, ev, rest = int(m[1]), float(m[2]), m[3], m[4]
        d = dict(FIELD.findall(rest))
        if ev == "sched:sched_switch":
            prev, nxt = int(d["prev_pid"]), int(d["next_pid"])
            if prev != 0 and d["prev_state"].startswith("R"):
                runnable[prev] = t
            if nxt in runnable:
                waits.append((runnable.pop(nxt), t, cpu, d["next_comm"]))
            if nxt == 0 and cur[cpu] != 0:
                idle_since[cpu] = t
            if nxt != 0 and cur[cpu] == 0 and idle_since[cpu] is not None:
                idle[cpu].append((idle_since[cpu], t))
                idle_since[cpu] = None
            cur[cpu] = nxt
        elif ev == "sched:sched_waking":
            pid = int(d["pid"])
            if pid not in cur.values():
                runnable.setdefault(pid, t)
    starts = {c: [a for a, _ in idle[c]] for c in idle}

    def idle_at(c, t):
        i = bisect.bisect_right(starts[c], t) - 1
        return i >= 0 and idle[c][i][1] > t

    classes = collections.defaultdict(list)
    for woke, ran, c, comm in waits:
        if ran - woke >= 0.001 or comm not in comms:
            continue
        own = "its CPU idle" if idle_at(c, woke) else "its CPU busy"
        other = "other idle" if idle_at(1 - c, woke) else "other busy"
        classes[f"ran where {own}, {other}"].append((ran - woke) * 1e6)
    total = sum(len(v) for v in classes.values())
    print(f"{total} wake-ups of {', '.join(comms)} (waits under 1 ms)")
    print(f"{'class (at the wake)':40s} {'wakes':>6s} {'share':>6s} {'median µs':>10s} {'mean µs':>8s}")
    for k in sorted(classes):
        v = sorted(classes[k])
        print(f"{k:40s} {len(v):6d} {len(v) / total:6.0%} {v[len(v) // 2]:10.1f} {sum(v) / len(v):8.1f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or ["atomio", "tokio-rt-worker"])
