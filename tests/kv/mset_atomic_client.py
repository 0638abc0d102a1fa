#!/usr/bin/python3
"""kv_server's MSET and DEL of several keys are atomic, as Redis's: no reader sees one key written and
another not yet.

   mset_atomic_client.py PORT SECONDS

Two keys on different workers (SHARD.OWNER says where); writer threads MSET both to one value, again
and again, and DEL both now and then; reader threads read both in one transaction (MULTI, GET, GET,
EXEC, which kv_server runs as one multi-key job) and check that they are equal (both absent after a
DEL). Key by key, a reader's transaction can run between an MSET's two parts. Exits 1 on any
violation, or when the readers read too little for the check to mean anything."""
import sys
import threading

import redis
from pace import Pace

port, seconds = int(sys.argv[1]), float(sys.argv[2])
pace = Pace(seconds)
errors = []
reads = [0]
lock = threading.Lock()


def pair_on_two_workers(r):
    first = "ma0"
    owner = r.execute_command("SHARD.OWNER", first)
    for i in range(1, 1000):
        other = "ma%d" % i
        if r.execute_command("SHARD.OWNER", other) != owner:
            return first, other
    sys.exit("mset_atomic_client: no two keys on different workers (is kv_server running 2 workers?)")


def writer(wid, a, b):
    r = redis.Redis(port=port)
    n = 0
    while pace.going(reads[0], 200):
        n += 1
        if n % 16 == 0:
            r.delete(a, b)
        else:
            v = "w%d-%d" % (wid, n)
            r.mset({a: v, b: v})


def reader(a, b):
    r = redis.Redis(port=port)
    while pace.going(reads[0], 200):
        pipe = r.pipeline()  # redis-py's default: MULTI ... EXEC
        va, vb = pipe.get(a).get(b).execute()
        with lock:
            reads[0] += 1
            if va != vb and len(errors) < 5:
                errors.append("a transaction read %r and %r" % (va, vb))


r = redis.Redis(port=port)
a, b = pair_on_two_workers(r)
threads = [threading.Thread(target=writer, args=(i, a, b)) for i in range(3)]
threads += [threading.Thread(target=reader, args=(a, b)) for _ in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
if reads[0] < 200:
    errors.append("only %d reads" % reads[0])
for e in errors:
    print("mset_atomic_client:", e)
print("mset_atomic_client: %d transactions read %s and %s" % (reads[0], a, b))
sys.exit(1 if errors else 0)
