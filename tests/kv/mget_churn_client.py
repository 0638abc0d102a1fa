#!/usr/bin/python3
"""kv_server's MGET and EXISTS of a few keys run a job a worker (the keys each worker owns, grouped
when the command comes in): under membership changes, keys moving between that grouping and the
job, every value still reads back as written.

   mget_churn_client.py PORT SECONDS

Writes 300 keys, then reader threads MGET and EXISTS random sets of 2 to 40 of them (kv_server groups
up to 64) while a control thread adds a worker, places a key on it and removes it, again and again.
Exits 1 on any wrong value or count, or when too few reads or changes overlapped for the check to
mean anything."""
import random
import sys
import threading

import redis
from pace import Pace

port, seconds = int(sys.argv[1]), float(sys.argv[2])
pace = Pace(seconds)
N = 300
errors = []
reads = [0] * 3
changes = [0]


def reader(t):
    r = redis.Redis(port=port)
    rnd = random.Random(t)
    while pace.going(reads[t], 200) and not errors:
        ks = [rnd.randrange(N) for _ in range(rnd.randrange(2, 41))]
        names = ["mc%d" % k for k in ks]
        for k, v in zip(ks, r.mget(names)):
            if v != ("v%d" % k).encode():
                errors.append("MGET: mc%d read %r" % (k, v))
        n = r.exists(*names)
        if n != len(names):
            errors.append("EXISTS of %d present keys: %d" % (len(names), n))
        reads[t] += 1


def control():
    r = redis.Redis(port=port)
    rnd = random.Random(99)
    i = 0
    while pace.going(changes[0], 20) and not errors:
        name = "mcx%d" % i
        i += 1
        r.execute_command("SHARD.ADD", name)
        r.execute_command("SHARD.PLACE", "mc%d" % rnd.randrange(N), name)
        r.execute_command("SHARD.REMOVE", name)
        changes[0] += 3


setup = redis.Redis(port=port)
for k in range(N):
    setup.set("mc%d" % k, "v%d" % k)
threads = [threading.Thread(target=reader, args=(t,)) for t in range(3)] + [threading.Thread(target=control)]
for th in threads:
    th.start()
for th in threads:
    th.join()
print("mget churn: %d reads, %d membership changes, %d errors" % (sum(reads), changes[0], len(errors)))
for e in errors[:5]:
    print("  " + e)
sys.exit(1 if errors or min(reads) < 200 or changes[0] < 20 else 0)
