#!/usr/bin/env python3
"""Make a stitching benchmark in which one node's log starts early: the logs of LATER,
with node FILE's log from EARLIER (a benchmark whose logs end before LATER's begin)
put in front of its own, and the ground truth to match.

usage: early_node_logs.py EARLIER LATER DST FILE
EARLIER and LATER hold logs/ (one file per node) and truth.jsonl ({"file", "line",
"trace"} per line); DST gets logs/ and truth.jsonl.
"""
import json, os, shutil, sys

earlier, later, dst, node = sys.argv[1:5]
os.makedirs(os.path.join(dst, "logs"), exist_ok=True)
for name in os.listdir(os.path.join(later, "logs")):
    shutil.copy(os.path.join(later, "logs", name), os.path.join(dst, "logs", name))
with open(os.path.join(earlier, "logs", node), encoding="utf-8") as f:
    early = f.read()
if early and not early.endswith("\n"):
    early += "\n"
with open(os.path.join(later, "logs", node), encoding="utf-8") as f:
    own = f.read()
with open(os.path.join(dst, "logs", node), "w", encoding="utf-8") as f:
    f.write(early + own)
shift = early.count("\n")
with open(os.path.join(dst, "truth.jsonl"), "w", encoding="utf-8") as out:
    for line in open(os.path.join(earlier, "truth.jsonl"), encoding="utf-8"):
        row = json.loads(line)
        if row["file"] == node:
            out.write(json.dumps(row) + "\n")
    for line in open(os.path.join(later, "truth.jsonl"), encoding="utf-8"):
        row = json.loads(line)
        if row["file"] == node:
            row["line"] += shift
        out.write(json.dumps(row) + "\n")
