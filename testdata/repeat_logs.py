#!/usr/bin/env python3
"""Make longer logs from a stitching benchmark's logs: COPIES copies one after another,
each shifted in time by the logs' span and with its numbers of 6 or more digits changed
(so that request ids do not recur across copies), and the ground truth to match.

usage: repeat_logs.py SRC DST COPIES
SRC holds logs/ (one file per node, lines starting with an RFC 3339 UTC timestamp) and
truth.jsonl ({"file", "line", "trace"} per line); DST gets the same, COPIES times longer.
"""
import datetime, json, os, re, sys

src, dst, copies = sys.argv[1], sys.argv[2], int(sys.argv[3])
STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d+)Z")
LONG = re.compile(r"\b\d{6,}\b")


def stamp(line):
    m = STAMP.match(line)
    if not m:
        return None
    t = datetime.datetime.fromisoformat(m.group(1)).replace(tzinfo=datetime.timezone.utc)
    return t.timestamp() * 1e6 + int(m.group(2).ljust(6, "0")[:6]), m


files = sorted(os.listdir(os.path.join(src, "logs")))
texts = {f: open(os.path.join(src, "logs", f), encoding="utf-8").read().splitlines() for f in files}
times = [s[0] for lines in texts.values() for s in map(stamp, lines) if s]
span_us = int(max(times) - min(times)) + 1_000_000
os.makedirs(os.path.join(dst, "logs"), exist_ok=True)
lengths = {f: len(lines) for f, lines in texts.items()}
for f, lines in texts.items():
    with open(os.path.join(dst, "logs", f), "w", encoding="utf-8") as out:
        for c in range(copies):
            for line in lines:
                s = stamp(line)
                if s is None or c == 0:
                    out.write(line + "\n")
                    continue
                us, m = s
                t = datetime.datetime.fromtimestamp((us + c * span_us) / 1e6, datetime.timezone.utc)
                rest = LONG.sub(lambda n: str(int(n.group()) + c * 7_919), line[m.end():])
                out.write(t.strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z" + rest + "\n")
with open(os.path.join(dst, "truth.jsonl"), "w") as out:
    truth = [json.loads(l) for l in open(os.path.join(src, "truth.jsonl"))]
    for c in range(copies):
        for d in truth:
            d2 = dict(d, line=d["line"] + c * lengths[d["file"]], trace=f'{d["trace"]}-{c}')
            out.write(json.dumps(d2) + "\n")
