#!/usr/bin/python3
"""kv_server's transactions as redis-py uses them (Debian python3-redis), with its default settings.

   txn_client.py PORT SECONDS

redis-py's default pipeline (transaction=True) wraps its commands in MULTI/EXEC; each result comes
back in order. Then atomicity under churn: writers set pairs of keys that live on different workers
to one value, with an MSET and with two SETs inside MULTI, and delete pairs with a DEL inside MULTI; readers read each
pair in a MULTI and must never see its two keys differ (nor one present and one gone); meanwhile the
admin connection adds, removes and crashes workers. Exits 1 on any violation."""
import sys
import threading

import redis
from churn import churn
from pace import Pace

port, seconds = int(sys.argv[1]), float(sys.argv[2])
r = redis.Redis(port=port)

# The default pipeline: MULTI ... EXEC, results in order, errors in their place.
p = r.pipeline()
p.set("p:a", "1").incr("p:n").get("p:a").mset({"p:b": "2", "p:c": "3"}).mget("p:a", "p:b", "p:c").delete("p:a", "p:b")
got = p.execute()
want = [True, 1, b"1", True, [b"1", b"2", b"3"], 2]
if got != want:
    sys.exit(f"FAIL: default pipeline returned {got!r}, expected {want!r}")
p = r.pipeline()
p.set("p:s", "x").incr("p:s")  # INCR of a non-number: an error in its place, the rest applied
try:
    p.execute()
    sys.exit("FAIL: a pipeline with a failing command raised nothing")
except redis.ResponseError:
    pass
if r.get("p:s") != b"x":
    sys.exit("FAIL: the pipeline's SET before a failing INCR was not applied")
with r.pipeline(transaction=False) as p:
    got = p.set("p:t", "1").get("p:t").execute()
if got != [True, b"1"]:
    sys.exit(f"FAIL: a pipeline without MULTI returned {got!r}")

PAIRS = 50
pace = Pace(seconds)
errors = []
counts = {"writes": 0, "reads": 0, "changes": 0}
lock = threading.Lock()


def writer(n):
    c = redis.Redis(port=port)
    i = 0
    while pace.going(i, 50):
        k = (i * 7 + n) % PAIRS
        a, b = f"pair:{k}:a", f"pair:{k}:b"
        v = f"{n}-{i}"
        if i % 3 == 0:
            c.pipeline().mset({a: v, b: v}).execute()  # an MSET inside MULTI
        elif i % 3 == 1:
            c.pipeline().set(a, v).set(b, v).execute()
        else:
            c.pipeline().delete(a, b).execute()
        i += 1
    with lock:
        counts["writes"] += i


def reader():
    c = redis.Redis(port=port)
    i = 0
    while pace.going(i, 50):
        k = i % PAIRS
        va, vb = c.pipeline().get(f"pair:{k}:a").get(f"pair:{k}:b").execute()
        if va != vb:
            with lock:
                errors.append(f"pair {k}: a={va!r} b={vb!r}")
        i += 1
    with lock:
        counts["reads"] += i


def admin():
    changes = churn(port, pace)
    with lock:
        counts["changes"] += changes


threads = [threading.Thread(target=writer, args=(n,)) for n in range(2)]
threads += [threading.Thread(target=reader) for _ in range(2)]
threads.append(threading.Thread(target=admin))
for t in threads:
    t.start()
for t in threads:
    t.join()
if errors:
    sys.exit(f"FAIL: {len(errors)} reads saw a pair half written, e.g. {errors[:3]}")
if counts["reads"] < 100 or counts["writes"] < 100 or counts["changes"] < 4:
    sys.exit(f"FAIL: too little ran: {counts}")
print(f"txn_client: {counts['writes']} pair writes, {counts['reads']} pair reads in MULTI, "
      f"{counts['changes']} membership changes, no pair seen half written")
