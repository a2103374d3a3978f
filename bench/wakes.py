#!/usr/bin/env python3
"""Every wake of the post-read workers in a tracefs text trace: its wait
(sched_wakeup -> sched_switch in) grouped by the waker (its name without
numbers), its context (irq or task) and whether it woke the worker on its
own CPU, and by what ran on the worker's CPU meanwhile. The workers: the
kworkers that ran verity_work/decrypt_work (kernel target), or readpath's
fsverity-*/fscrypt-*/kworker-hi-* threads (model). Usage: wakes.py TRACE"""
import collections
import re
import sys

LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+(\S+)\s+([\d.]+):\s+(\w+):\s+(.*)$")
WAKE = re.compile(r"comm=(.*) pid=(\d+) prio=\d+ target_cpu=(\d+)")
SWITCH = re.compile(r"prev_comm=(.*) prev_pid=\d+ .* ==> next_comm=(.*) next_pid=(\d+)")


def short(name):
    return re.sub(r"[-/:.]?\d.*", "", name or "?")


def main(path):
    events, workers = [], set()
    for line in open(path, errors="replace"):
        m = LINE.match(line)
        if not m:
            continue
        comm, pid, cpu, flags, ts, ev, rest = m.groups()
        events.append((float(ts), int(cpu), comm, flags, ev, rest))
        if ev == "workqueue_execute_start" and re.search(r"function (verity|decrypt)_work", rest):
            workers.add(int(pid))
        if ev == "sched_switch":
            s = SWITCH.search(rest)
            if s and re.match(r"(fsverity|fscrypt|kworker-hi)-", s.group(2)):
                workers.add(int(s.group(3)))
    pending, on_cpu = {}, {}
    by_waker, by_target = collections.defaultdict(list), collections.defaultdict(list)
    for ts, cpu, comm, flags, ev, rest in events:
        if ev == "sched_wakeup":
            w = WAKE.search(rest)
            if w and int(w.group(2)) in workers:
                tgt = int(w.group(3))
                ctx = "irq" if ("h" in flags or "s" in flags) else "task"
                pending[int(w.group(2))] = (ts, short(comm), ctx, tgt == cpu, on_cpu.get(tgt))
        elif ev == "sched_switch":
            s = SWITCH.search(rest)
            if not s:
                continue
            on_cpu[cpu] = s.group(2)
            nxt = int(s.group(3))
            if nxt in pending:
                t0, waker, ctx, local, there = pending.pop(nxt)
                us = (ts - t0) * 1e6
                by_waker[(waker, ctx, "own CPU" if local else "other CPU")].append(us)
                by_target[short(there)].append(us)
    waits = [u for v in by_waker.values() for u in v]
    print(f"{len(workers)} workers, {len(waits)} wakes, waited {sum(waits) / 1e3:.1f} ms in all")
    for title, table in (("woken by", by_waker), ("waited behind", by_target)):
        print(f"{title}:")
        for k, v in sorted(table.items(), key=lambda kv: -sum(kv[1]))[:8]:
            label = " ".join(k) if isinstance(k, tuple) else k
            v.sort()
            print(f"  {label:<36} {len(v):5} wakes  mean {sum(v) / len(v):6.0f} us  p50 {v[len(v) // 2]:6.0f} us  {sum(v) / 1e3:7.1f} ms")


if __name__ == "__main__":
    main(sys.argv[1])
