# Writes one trace of about N spans (a nightly import: chunks of 333 rows, each row an
# INSERT and a cache GET) as OTLP JSON files of 50 000 spans: python3 huge_trace.py N DIR
import json, sys
n_total = int(sys.argv[1]); out = sys.argv[2]
T0 = 1_764_700_000_000_000_000
tid = "00000000000000000000000000abcdef"
spans = []
nid = [0]
def sid():
    nid[0]+=1; return "%016x" % nid[0]
def sp(service, name, parent, start, end, err=False):
    s = {"traceId": tid, "spanId": sid(), "name": name, "startTimeUnixNano": str(start), "endTimeUnixNano": str(end), "kind": 2}
    if parent: s["parentSpanId"] = parent
    if err: s["status"] = {"code": 2, "message": "boom"}
    spans.append((service, s)); return s["spanId"]
root = sp("batch", "nightly import", None, T0, T0 + 600_000_000_000)
chunks = n_total // 1000
for c in range(chunks):
    cs = T0 + c * 500_000_000
    ch = sp("batch", "import chunk", root, cs, cs + 400_000_000)
    for r in range(333):
        rs = cs + r * 1_000_000
        row = sp("worker", "parse row", ch, rs, rs + 900_000)
        sp("db", "INSERT rows", row, rs + 100_000, rs + 800_000, err=(r == 7 and c % 10 == 0))
        sp("cache", "GET key", row, rs + 810_000, rs + 850_000)
    if len(spans) >= n_total: break
# write as OTLP JSON in files of 50k spans
by = 50_000
for k in range(0, len(spans), by):
    part = spans[k:k+by]
    res = {}
    for svc, s in part: res.setdefault(svc, []).append(s)
    doc = {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": svc}}]}, "scopeSpans": [{"spans": ss}]} for svc, ss in res.items()]}
    json.dump(doc, open(f"{out}/part{k//by:04d}.json", "w"))
print(len(spans))
