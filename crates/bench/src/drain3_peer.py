# The peer of `causeway-bench templates`: Drain3 (github.com/logpai/Drain3, the Drain
# implementation its authors' group maintains), mining the same messages.
#
# Usage: python3 drain3_peer.py MESSAGES MODE
#   MESSAGES  one message per line (headers already taken off)
#   MODE      "default": Drain3's own configuration (depth 4, similarity 0.4, no masks);
#             "masked": paths with a query string, numbers, hex, IPv4 and UUIDs masked
#             and `= ? & @ , : [ ] { } ( )` split off, as Causeway's tokens are typed
#             and split
# Prints a JSON object: each line's cluster id, the clusters, and the mining seconds.
import json
import sys
import time

from drain3 import TemplateMiner
from drain3.masking import MaskingInstruction
from drain3.template_miner_config import TemplateMinerConfig


def config(mode):
    c = TemplateMinerConfig()
    c.profiling_enabled = False
    if mode == "masked":
        c.drain_extra_delimiters = ["=", "?", "&", "@", ",", ":", "[", "]", "{", "}", "(", ")"]
        c.masking_instructions = [
            # First, so that a URL's query is not split at its delimiters.
            MaskingInstruction(r"(?<![\w/])/[^\s\"'\])}>|/][^\s\"'\])}>|]*\?[^\s\"'\])}>|]*", "PATH"),
            MaskingInstruction(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", "UUID"),
            MaskingInstruction(r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}", "IP"),
            MaskingInstruction(r"\b0[xX][0-9a-fA-F]+\b", "HEX"),
            MaskingInstruction(r"(?<![A-Za-z_])-?\d+(\.\d+)?(?![A-Za-z_])", "NUM"),
        ]
    elif mode != "default":
        sys.exit(f"unknown mode {mode!r}: default or masked")
    return c


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: drain3_peer.py MESSAGES default|masked")
    with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
        messages = f.read().split("\n")
    if messages and messages[-1] == "":
        messages.pop()
    miner = TemplateMiner(config=config(sys.argv[2]))
    start = time.perf_counter()
    clusters = [miner.add_log_message(m)["cluster_id"] for m in messages]
    seconds = time.perf_counter() - start
    json.dump(
        {
            "clusters": clusters,
            "templates": len(miner.drain.clusters),
            "seconds": seconds,
        },
        sys.stdout,
    )


main()
