#!/usr/bin/env python3
"""Reads a readpath trace with Perfetto's own schema (the `perfetto`
package's perfetto_trace_pb2) and prints, as JSON, what tests/trace.rs
checks against the run's own counts: per process (a run, or a compare's
variant) its work-item slices by name, other slices, counter values and
markers; and across the file every way it could be malformed for
Perfetto's importer (an event on a track never described, a slice end
without its begin, two items overlapping on one CPU lane, a flow that
starts or ends unmatched, a queued instant on another CPU than its item
names).

Exit status 3 when the package is absent (the test skips, or fails under
CI), 1 when the file does not parse as a Trace."""

import json
import sys
from collections import Counter, defaultdict

try:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
except ImportError as e:  # pragma: no cover
    print(f"no perfetto package: {e}", file=sys.stderr)
    sys.exit(3)

BEGIN, END, INSTANT, COUNTER = 1, 2, 3, 4
ITEMS = {"decrypt", "verify", "decrypt+verify"}


def main(path):
    trace = pb.Trace()
    with open(path, "rb") as f:
        data = f.read()
    trace.ParseFromString(data)
    tracks = {}
    parent = {}
    process_of = {}
    names = {}
    problems = Counter()
    events = defaultdict(list)
    order = 0
    # Interned names (one sequence): event names and argument names by
    # number, each given once.
    event_names, arg_names = {}, {}
    for p in trace.packet:
        if p.HasField("interned_data"):
            for table, listed in ((event_names, p.interned_data.event_names),
                                  (arg_names, p.interned_data.debug_annotation_names)):
                for n in listed:
                    if n.iid in table:
                        problems["a name interned twice"] += 1
                    table[n.iid] = n.name
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            if d.uuid in tracks:
                problems["track described twice"] += 1
            tracks[d.uuid] = d
            if d.HasField("process"):
                process_of[d.uuid] = d.process.process_name
            if d.HasField("parent_uuid"):
                parent[d.uuid] = d.parent_uuid
            names[d.uuid] = d.name or d.thread.thread_name or d.process.process_name
        if p.HasField("track_event"):
            e = p.track_event
            if e.track_uuid not in tracks:
                problems["event on a track not described before it"] += 1
            if e.HasField("name_iid"):
                if e.name_iid not in event_names:
                    problems["an event name's number interned after it or never"] += 1
                if not p.sequence_flags & 2:
                    problems["an interned name in a packet without SEQ_NEEDS_INCREMENTAL_STATE"] += 1
                e.name = event_names.get(e.name_iid, "")
            for a in e.debug_annotations:
                if a.HasField("name_iid"):
                    if a.name_iid not in arg_names:
                        problems["an argument name's number interned after it or never"] += 1
                    a.name = arg_names.get(a.name_iid, "")
            events[e.track_uuid].append((p.timestamp, order, e))
            order += 1
    out = {"bytes": len(data), "packets": len(trace.packet), "processes": {}, "notes": []}

    def proc(uuid):
        while uuid in parent:
            uuid = parent[uuid]
        return process_of.get(uuid)

    flows_from = {}
    flows_to = {}
    for uuid, evs in events.items():
        evs.sort(key=lambda x: (x[0], x[1]))
        pname = proc(uuid)
        track = names.get(uuid, "")
        if pname is None:
            if track == "readpath":
                out["notes"] += [e.name for _, _, e in evs if e.type == INSTANT]
                continue
            problems["track outside every process"] += 1
            continue
        pr = out["processes"].setdefault(
            pname,
            {"items": Counter(), "other": Counter(), "counters": Counter(), "markers": [],
             "cpu_tracks": [], "threads": []},
        )
        d = tracks[uuid]
        if track.startswith("CPU "):
            pr["cpu_tracks"].append(track)
        if d.HasField("thread"):
            pr["threads"].append(d.thread.thread_name)
        depth = 0
        for ts, _, e in evs:
            if e.type == BEGIN:
                depth += 1
                if track.startswith("CPU ") and depth > 1:
                    problems["two items overlap on one CPU lane"] += 1
                if e.name in ITEMS:
                    pr["items"][e.name] += 1
                    args = {a.name: a.int_value for a in e.debug_annotations}
                    for f in e.terminating_flow_ids:
                        if f in flows_to:
                            problems["a flow ends twice"] += 1
                        flows_to[f] = (args.get("queued_cpu"), pname)
                    if not track.startswith("CPU "):
                        problems["an item off the CPU tracks"] += 1
                else:
                    pr["other"][e.name.split(" ")[0]] += 1
            elif e.type == END:
                depth -= 1
                if depth < 0:
                    problems["a slice ends that never began"] += 1
                    depth = 0
            elif e.type == INSTANT:
                if e.name == "queued":
                    for f in e.flow_ids:
                        if f in flows_from:
                            problems["a flow starts twice"] += 1
                        cpu = int(track.split(" ")[1]) if track.startswith("CPU ") else None
                        flows_from[f] = (cpu, pname)
                elif track == "markers":
                    pr["markers"].append(e.name)
            elif e.type == COUNTER:
                pr["counters"][track] += 1
        if depth != 0:
            problems["a slice never ends"] += depth
    for f, (cpu, pname) in flows_to.items():
        if f not in flows_from:
            problems["a flow ends without its start"] += 1
        elif flows_from[f] != (cpu, pname):
            problems["a queued instant on another CPU than its item names"] += 1
    problems["a flow starts and never ends"] += len(set(flows_from) - set(flows_to))
    out["flows"] = len(flows_to)
    out["problems"] = {k: v for k, v in problems.items() if v}
    for pr in out["processes"].values():
        pr["items_total"] = sum(pr["items"].values())
        pr["cpu_tracks"].sort()
        pr["threads"].sort()
    print(json.dumps(out, sort_keys=True, default=dict))


if __name__ == "__main__":
    main(sys.argv[1])
