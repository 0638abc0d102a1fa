#!/usr/bin/env python3
"""crash_sim --csv: stdout is CSV and nothing else, and its numbers agree with each other.

Parses stdout with the csv module in strict mode, checks the header, that every record has four
fields and a number, that the field holding a comma came quoted, that the text and checks went to
stderr, and that the per-node counts add up: sessions before and after sum to the session count,
the crashed node ends with none, and what the others gained is what it lost.

    csv_test.py path/to/crash_sim [crash_sim options...]
"""
import collections
import csv
import io
import math
import subprocess
import sys

failures = 0


def check(ok, what):
    global failures
    print(("ok      " if ok else "FAILED  ") + what)
    failures += not ok


sim = sys.argv[1]
run = subprocess.run([sim, "--csv", *sys.argv[2:]], capture_output=True, timeout=120)
out, err = run.stdout.decode(), run.stderr.decode()
check(run.returncode == 0, f"exit status 0 (got {run.returncode})")
check("OK: every check held" in err and "[ok]" in err, "the text and the checks are on stderr")
check("[ok]" not in out and "crash_sim:" not in out, "nothing but CSV on stdout")
check(out.endswith("\r\n") and "\n" not in out.replace("\r\n", ""), "records end with CRLF (RFC 4180)")

rows = list(csv.reader(io.StringIO(out, newline=""), strict=True))
check(rows[0] == ["table", "row", "measure", "value"], f"header row: {rows[0]}")
records = rows[1:]
check(len(records) > 0 and all(len(r) == 4 for r in records), "every record has 4 fields")
bad = [r for r in records if len(r) == 4 and not math.isfinite(float(r[3]))]
check(not bad, f"every value is a finite number {bad[:3]}")
check('"Maglev table (65,537 entries)"' in out, "a field with a comma is quoted")
check(any(r[1] == "Maglev table (65,537 entries)" for r in records), "and reads back as one field")

value = {(r[0], r[1], r[2]): float(r[3]) for r in records}
check(len(value) == len(records), "no (table, row, measure) is given twice")
nodes = int(value[("run", "cluster", "nodes")])
keys = int(value[("run", "cluster", "sessions")])
crashed = int(value[("run", "cluster", "crashed node")])
per_node = collections.defaultdict(dict)
for (table, row, measure), v in value.items():
    if table == "nodes":
        per_node[row][measure] = v
check(sorted(per_node) == sorted(f"node-{i}" for i in range(nodes)), f"one nodes row for each of the {nodes} nodes")
before = {n: int(m["sessions before"]) for n, m in per_node.items()}
after = {n: int(m["sessions after"]) for n, m in per_node.items()}
check(sum(before.values()) == keys, f"sessions before add up to {keys} (got {sum(before.values())})")
check(sum(after.values()) == keys, f"sessions after add up to {keys} (got {sum(after.values())})")
check(after[f"node-{crashed}"] == 0, f"node-{crashed} (crashed) has no session after")
gained = sum(after[n] - before[n] for n in per_node if n != f"node-{crashed}")
check(all(after[n] >= before[n] for n in per_node if n != f"node-{crashed}"), "no survivor lost a session")
check(gained == before[f"node-{crashed}"], f"the survivors gained what node-{crashed} held ({gained})")
share = sum(m["share of the circle"] for m in per_node.values())
check(abs(share - 1) < 1e-6, f"the shares of the circle add up to 1 ({share})")

crash_row = f"node-{crashed} of {nodes} crashes ({nodes} -> {nodes - 1})"
moved = value[("movement", crash_row, "ring: sessions moved")]
check(moved == before[f"node-{crashed}"], "the ring moved exactly the crashed node's sessions")
check(abs(value[("movement", crash_row, "ring")] * keys - moved) < 0.5, "the ring's moved share is moved / sessions")
check(abs(value[("movement", crash_row, "ideal")] - 1 / nodes) < 1e-9, "ideal is 1/N")
check(value[("movement", crash_row, "hash % N")] > value[("movement", crash_row, "ring")], "hash % N moved more")
check(("replicas", "next 3 points, whoever owns them", "rack of 5") not in value, "a cell that does not apply has no record")
check(value[("live", "sessions disrupted by the crash", "jobs lost")] == 0, "no job lost in the live run")

print("csv_test: " + ("FAILED" if failures else f"ok ({len(records)} records)"))
sys.exit(1 if failures else 0)
