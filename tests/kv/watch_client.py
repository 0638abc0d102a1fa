#!/usr/bin/python3
"""kv_server's WATCH as redis-py uses it (Debian python3-redis), then under churn.

   watch_client.py PORT SECONDS

First what Redis promises, one case at a time, with a second connection doing the writes: an EXEC
after a write of a watched key (by another client, by this one, a DEL, a create of a key watched
while missing, an expiry by its timer and by a read that finds it due, a FLUSHALL) runs nothing and
answers null (redis-py raises WatchError); reads of it (GET, EXISTS, TTL, MGET, a *STORE of it into
another key), its own WATCH again and writes of other keys do not abort; EXEC, DISCARD and UNWATCH end
every watch; WATCH inside MULTI and more keys than a connection may watch are refused. Then the optimistic lock it is for: threads
move amounts between accounts with redis-py's transaction() (WATCH, GET, MULTI, SET, EXEC, again on
WatchError) and add to counters the same way, while the admin connection adds, removes and crashes
workers: the total is conserved and every counter holds exactly the increments that succeeded (a
write that a watch missed loses one); and two threads each claim one side of a pair only while both
sides are free, watching both but writing one, which no reader may ever see both claimed (the write
skew a watched key not held while its EXEC runs would let through). Also: a watched key whose time
has come aborts before its timer deletes it; an aborted EXEC runs none of its commands, those of no
key neither; INFO's total_watched_keys comes back to 0 once every watch has ended, a closed
connection's too, also one reset or closed with its EXEC in flight; a client that never reads its
watched EXECs' replies holds up no one else. Exits 1 on any violation."""
import socket
import struct
import sys
import threading
import time

import redis
from churn import churn
from pace import Pace
from wire import command

port, seconds = int(sys.argv[1]), float(sys.argv[2])
r = redis.Redis(port=port)
other = redis.Redis(port=port)


def exec_after(watch, between, queued=(("SET", "w:out", "ran"),), setup=None):
    """WATCH watch, run between() on the other connection, then MULTI queued EXEC: the EXEC's
    result, or None when it was aborted."""
    r.delete("w:out")
    if setup:
        setup()
    p = r.pipeline()
    p.watch(*watch)
    between()
    p.multi()
    for cmd in queued:
        p.execute_command(*cmd)
    try:
        return p.execute()
    except redis.WatchError:
        if r.get("w:out") is not None:
            sys.exit("FAIL: an aborted EXEC ran its commands")
        return None
    finally:
        p.reset()


def case(name, got, want):
    if got != want:
        sys.exit(f"FAIL: {name}: EXEC gave {got!r}, expected {want!r}")


def at_once(*cmds):
    """cmds sent in one write on a connection of their own (redis-py's pipelines send WATCH alone),
    then their answers."""
    conn = redis.Connection(port=port)
    try:
        conn.send_packed_command([b"".join(command(*c) for c in cmds)])
        return [conn.read_response() for _ in cmds]
    finally:
        conn.disconnect()


def nothing():
    pass


r.flushall()
r.set("w:a", "1")
case("no write in between", exec_after(["w:a"], nothing), [True])
case("a write by another client", exec_after(["w:a"], lambda: other.set("w:a", "2")), None)
case("a write of this connection's own before MULTI", exec_after(["w:a"], lambda: r.set("w:a", "3")), None)
case("an INCR", exec_after(["w:a"], lambda: other.incr("w:a")), None)
case("a DEL", exec_after(["w:a"], lambda: other.delete("w:a")), None)
case("a key watched while missing, then made", exec_after(["w:missing"], lambda: other.set("w:missing", "1")), None)
case("a key still missing", exec_after(["w:nothere"], nothing), [True])
case("reads of the key (GET, EXISTS, TTL, MGET, TYPE)",
     exec_after(["w:a"], lambda: (other.get("w:a"), other.exists("w:a"), other.ttl("w:a"), other.mget("w:a", "w:b"),
                                  other.type("w:a"))), [True])
case("writes of other keys", exec_after(["w:a"], lambda: [other.set(f"w:other{i}", i) for i in range(50)]), [True])
case("a key of several watched on several workers written",
     exec_after([f"w:k{i}" for i in range(20)], lambda: other.set("w:k13", "x")), None)
case("a watched key written inside the transaction itself", exec_after(["w:a"], nothing, (("SET", "w:a", "9"),)),
     [True])


def expired_after_watch(then):
    """EXEC after a watched key expired: with its time to live a little longer each try until the
    WATCH saw the key alive (a WATCH that finds it already expired watches a missing key, which its
    expiry then does not change, as in Redis; under a sanitizer on a busy machine 50 ms were not
    always enough to reach the WATCH: CI saw the EXEC run). then(ms) runs once the key was seen alive
    after the WATCH, and must outlast the key."""
    for ms in (50, 200, 1000, 5000):
        alive = []
        got = exec_after(["w:e"], lambda: (alive.append(other.pttl("w:e") > 0), alive[0] and then(ms)),
                         setup=lambda: r.set("w:e", "1", px=ms))
        if alive[0]:
            return got
    sys.exit("FAIL: a key of 5 s to live had expired before its WATCH was answered")


case("a watched key that expired (its timer ran)", expired_after_watch(lambda ms: time.sleep(ms / 1000 + 0.25)),
     None)
case("a watched key that expired (a read found it due)",
     expired_after_watch(lambda ms: (time.sleep(ms / 1000 + 0.05), other.get("w:e"))), None)
case("a FLUSHALL", exec_after(["w:a"], lambda: other.flushall()), None)
case("a RENAME onto the key", exec_after(["w:a"], lambda: (other.set("w:src", "1"), other.rename("w:src", "w:a"))),
     None)
case("a RENAME of the key away", exec_after(["w:a"], lambda: other.rename("w:a", "w:away"),
                                            setup=lambda: r.set("w:a", "1")), None)


def read_everything():
    other.hset("w:h", "f", "1")
    other.sadd("w:s", "m")
    other.rpush("w:l", "x")
    other.zadd("w:z", {"m": 1})
    return exec_after(["w:h", "w:s", "w:l", "w:z"], lambda: (
        other.hget("w:h", "f"), other.hgetall("w:h"), other.hmget("w:h", "f", "g"), other.hlen("w:h"),
        other.hexists("w:h", "f"), other.sismember("w:s", "m"), other.smembers("w:s"), other.scard("w:s"),
        other.sinter("w:s", "w:s2"), other.sunion("w:s", "w:s2"), other.sdiff("w:s", "w:s2"),
        other.lrange("w:l", 0, -1), other.llen("w:l"), other.lindex("w:l", 0), other.zscore("w:z", "m"),
        other.zrange("w:z", 0, -1), other.zcard("w:z"), other.zrank("w:z", "m"),
        other.zrangebyscore("w:z", 0, 2), other.ttl("w:h"), other.pttl("w:s"), other.type("w:l"),
        other.strlen("w:h2"), other.execute_command("SHARD.OWNER", "w:z")))


case("reads of hashes, sets, lists and sorted sets", read_everything(), [True])


def stores(dst):
    other.sadd("w:s", "m", "n")
    other.sadd("w:s2", "n")
    return exec_after(["w:s", "w:s2"], lambda: (
        other.sinterstore(dst, "w:s", "w:s2"), other.sunionstore(dst, "w:s", "w:s2"),
        other.sdiffstore(dst, "w:s", "w:s2")))


# As Redis counts them: a *STORE writes its destination, and only reads its sets.
case("a *STORE reading the watched sets", stores("w:dst"), [True])
case("a *STORE onto a watched set", stores("w:s2"), None)


def refused(f):
    try:
        f()
    except redis.ResponseError:
        return
    sys.exit("FAIL: a command expected to fail (a wrong type, a syntax error) did not")


def set_a(**kw):
    return lambda: r.set("w:a", "1", **kw)


# A write that changed nothing is no write, as Redis signals a key modified only when it changed it:
# a client spinning on SET NX of a lock must not abort, every time, the EXEC that is to release it.
for name, watched, between, setup, want in (
        ("a SET NX of the key, there already", "w:a", lambda: other.set("w:a", "2", nx=True), set_a(), [True]),
        ("a SET NX of the key, missing (it sets it)", "w:m", lambda: other.set("w:m", "2", nx=True), nothing, None),
        ("a SET XX of the key, missing", "w:m", lambda: other.set("w:m", "2", xx=True), nothing, [True]),
        ("a SETNX of the key, there already", "w:a", lambda: other.setnx("w:a", "2"), set_a(), [True]),
        ("a SET with a syntax error", "w:a", lambda: refused(lambda: other.execute_command("SET", "w:a", "2", "BAD")),
         set_a(), [True]),
        ("an HSETNX of a field there already", "w:h", lambda: other.hsetnx("w:h", "f", "2"),
         lambda: r.hset("w:h", "f", "1"), [True]),
        ("an HSETNX of a new field", "w:h", lambda: other.hsetnx("w:h", "g", "2"), lambda: r.hset("w:h", "f", "1"),
         None),
        ("a PERSIST of the key without a time to live", "w:a", lambda: other.persist("w:a"), set_a(), [True]),
        ("a PERSIST of the key with one", "w:a", lambda: other.persist("w:a"), set_a(ex=100), None),
        ("an EXPIRE XX of the key without a time to live", "w:a", lambda: other.expire("w:a", 100, xx=True), set_a(),
         [True]),
        ("an EXPIRE of a missing key", "w:m", lambda: other.expire("w:m", 100), nothing, [True]),
        ("a GETEX without options", "w:a", lambda: other.getex("w:a"), set_a(), [True]),
        ("a GETEX PERSIST of the key without a time to live", "w:a", lambda: other.getex("w:a", persist=True),
         set_a(), [True]),
        ("a GETEX PERSIST of the key with one", "w:a", lambda: other.getex("w:a", persist=True), set_a(ex=100),
         None),
        ("a GETDEL of a missing key", "w:m", lambda: other.getdel("w:m"), nothing, [True]),
        ("a DEL of a missing key (and another's)", "w:m", lambda: other.delete("w:m", "w:a"), set_a(), [True]),
        ("an HDEL, SREM and ZREM of members not there", ("w:h", "w:s", "w:z"),
         lambda: (other.hdel("w:h", "x"), other.srem("w:s", "x"), other.zrem("w:z", "x")),
         lambda: (r.hset("w:h", "f", "1"), r.sadd("w:s", "m"), r.zadd("w:z", {"m": 1})), [True]),
        ("an SREM of a member there", "w:s", lambda: other.srem("w:s", "m"), lambda: r.sadd("w:s", "m", "n"), None),
        ("an LPOP and RPOP of a missing key", "w:m", lambda: (other.lpop("w:m"), other.rpop("w:m", 2)), nothing,
         [True]),
        ("an LPUSHX and RPUSHX of a missing key", "w:m", lambda: (other.lpushx("w:m", "x"), other.rpushx("w:m", "y")),
         nothing, [True]),
        ("an LREM that removed nothing", "w:l", lambda: other.lrem("w:l", 0, "zz"), lambda: r.rpush("w:l", "a", "b"),
         [True]),
        ("an LREM that removed one", "w:l", lambda: other.lrem("w:l", 0, "a"), lambda: r.rpush("w:l", "a", "b"), None),
        ("a ZPOPMIN and ZPOPMAX of a missing key", "w:m", lambda: (other.zpopmin("w:m"), other.zpopmax("w:m", 2)),
         nothing, [True]),
        ("an LPUSH onto the key, a string (WRONGTYPE)", "w:a", lambda: refused(lambda: other.lpush("w:a", "x")),
         set_a(), [True])):
    r.delete("w:a", "w:m", "w:h", "w:s", "w:z", "w:l")
    case(name, exec_after(list(watched) if isinstance(watched, tuple) else [watched], between, setup=setup), want)
# A watched key whose time has come aborts, though its timer has not run yet: EXEC is sent 0.2 ms past
# the key's deadline (set before the SET's reply), many times, and its GET may never see it gone. A
# try whose key had already expired when WATCHed (a slow server: then it was not there to watch, and
# the EXEC rightly runs) tells nothing: the GET after WATCH says which.
ran_gone = alive = 0
for i in range(200):
    key = f"w:ttl{i}"
    r.set(key, "v", px=10)
    t0 = time.monotonic()
    p = r.pipeline()
    p.watch(key)
    seen = p.get(key) is not None
    while time.monotonic() < t0 + 0.0102:
        pass
    p.multi()
    p.get(key)
    try:
        ran_gone += seen and p.execute() == [None]
    except redis.WatchError:
        pass
    finally:
        p.reset()
    alive += seen
if ran_gone:
    sys.exit(f"FAIL: {ran_gone} EXECs of {alive} ran with their watched key expired since it was watched")
if alive < 20:
    sys.exit(f"FAIL: only {alive} keys of 200 were still there when watched 10 ms before their deadline")

# An aborted EXEC runs nothing, its commands that touch no key neither; one that runs, runs them, and
# the connection's next commands come after them.
r.client_setname("before")
case("an aborted EXEC's CLIENT SETNAME", exec_after(["w:a"], lambda: other.set("w:a", "5"),
                                                   (("CLIENT", "SETNAME", "after"), ("SET", "w:out", "x"))), None)
if r.client_getname() != "before":
    sys.exit(f"FAIL: an aborted EXEC's CLIENT SETNAME ran: the name is {r.client_getname()!r}")
got = at_once(("WATCH", "w:a"), ("MULTI",), ("CLIENT", "SETNAME", "inside"), ("PING",), ("EXEC",),
              ("CLIENT", "GETNAME"))
case("a watched EXEC's PING, and a CLIENT GETNAME after it", got[-2:], [[b"OK", b"PONG"], b"inside"])


# Sent at once, not waiting for WATCH's answer: the WATCH reads the key after the SET before it,
# and the SET after it, of this connection, aborts.
got = at_once(("SET", "w:p", "1"), ("WATCH", "w:p"), ("MULTI",), ("SET", "w:out", "x"), ("EXEC",))
case("pipelined: a SET, then WATCH, MULTI, EXEC", got[-1], [b"OK"])
got = at_once(("WATCH", "w:p"), ("SET", "w:p", "2"), ("MULTI",), ("SET", "w:out", "x"), ("EXEC",))
case("pipelined: WATCH, then a SET, MULTI, EXEC", got[-1], None)


def plain_exec():
    """MULTI, a SET, EXEC, with no WATCH of its own: what an earlier watch left."""
    r.execute_command("MULTI")
    r.execute_command("SET", "w:out", "y")
    return r.execute_command("EXEC")


# Every watch ends with EXEC, DISCARD and UNWATCH: a write after it aborts nothing.
r.set("w:a", "1")
r.execute_command("WATCH", "w:a")
r.execute_command("MULTI")
if r.execute_command("EXEC") != []:
    sys.exit("FAIL: an EXEC of nothing did not answer an empty array")
other.set("w:a", "2")
case("after an EXEC", plain_exec(), [b"OK"])
r.execute_command("WATCH", "w:a")
r.execute_command("MULTI")
r.execute_command("DISCARD")
other.set("w:a", "3")
case("after a DISCARD", plain_exec(), [b"OK"])
r.execute_command("WATCH", "w:a")
if r.execute_command("UNWATCH") not in (b"OK", True):
    sys.exit("FAIL: UNWATCH did not answer OK")
other.set("w:a", "4")
case("after an UNWATCH", plain_exec(), [b"OK"])
case("UNWATCH queued inside MULTI", exec_after(["w:a"], nothing, (("UNWATCH",), ("SET", "w:out", "x"))),
     [True, True])
try:
    r.execute_command("MULTI")
    r.execute_command("WATCH", "w:a")
    sys.exit("FAIL: WATCH inside MULTI was taken")
except redis.ResponseError as e:
    if "WATCH inside MULTI is not allowed" not in str(e):
        sys.exit(f"FAIL: WATCH inside MULTI refused with {e}")
finally:
    r.execute_command("DISCARD")
try:
    r.execute_command("WATCH", *[f"w:many{i}" for i in range(1025)])
    sys.exit("FAIL: a WATCH of 1025 keys was taken")
except redis.ResponseError as e:
    if "at most 1024 keys" not in str(e):
        sys.exit(f"FAIL: a WATCH of 1025 keys refused with {e}")
r.execute_command("WATCH", *[f"w:many{i}" for i in range(1000)])
r.execute_command("MULTI")
r.execute_command("MSET", *[x for i in range(30) for x in (f"w:m{i}", i)])
try:
    r.execute_command("EXEC")
    sys.exit("FAIL: an EXEC of 30 keys watching 1000 was taken")
except redis.ResponseError as e:
    if not isinstance(e, redis.exceptions.ExecAbortError) or "watched" not in str(e):
        sys.exit(f"FAIL: an EXEC of 30 keys watching 1000 refused with {e}")
other.set("w:many5", "x")
case("after a refused EXEC", plain_exec(), [b"OK"])



def watched_keys():
    return int(other.info("clients")["total_watched_keys"])


def wait_gone(clients):
    """Until the server holds no more than clients connections: the ones closed are gone, with what
    they sent run (the server sees a close when it next reads the socket: a bounded poll)."""
    deadline = time.monotonic() + 60
    while int(other.info("clients")["connected_clients"]) > clients and time.monotonic() < deadline:
        time.sleep(0.01)
    if int(other.info("clients")["connected_clients"]) > clients:
        sys.exit("FAIL: closed connections still held 60 s later")


# Every watch above has ended, and one of a connection that closes ends with it.
if watched_keys() != 0:
    sys.exit(f"FAIL: INFO counts {watched_keys()} keys watched when no connection watches any")
clients = int(other.info("clients")["connected_clients"])
closing = redis.Redis(port=port)
closing.execute_command("WATCH", "w:c1", "w:c2", "w:c3")
if watched_keys() != 3:
    sys.exit(f"FAIL: INFO counts {watched_keys()} keys watched, not 3")
closing.connection_pool.disconnect()
wait_gone(clients)
if watched_keys() != 0:
    sys.exit(f"FAIL: a connection that closed while watching leaves {watched_keys()} keys watched")

# Connections gone with their EXEC in flight: watched keys, a command of no key held back until the
# check, some reset, some closed, none reading; and one that never reads its replies while it sends
# on. The server goes on serving the others, and no watch outlives its connection.
big = "v" * 100000
r.set("w:big", big)
for i in range(200):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(command("WATCH", "w:a", f"w:gone{i}") + command("MULTI") + command("PING") +
              command("GET", "w:big") + command("SET", f"w:gone{i}", i) + command("EXEC"))
    if i % 2:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset
    s.close()
    if i % 50 == 0:
        other.set("w:a", i)  # some of those EXECs abort
mute = socket.create_connection(("127.0.0.1", port))
mute.sendall(b"".join(command("WATCH", "w:a") + command("MULTI") + command("PING") + command("GET", "w:big") +
                      command("EXEC") for _ in range(300)))
if other.ping() is not True or other.get("w:a") is None:
    sys.exit("FAIL: the server stopped answering beside a client that never reads")
mute.close()
# A connection that went still runs what it sent (one transaction at a time here: each holds the
# parsing until its check), then lets its watches go.
wait_gone(clients)
if watched_keys() != 0:
    sys.exit(f"FAIL: connections gone with their EXECs in flight leave {watched_keys()} keys watched")

# The optimistic lock under churn.
ACCOUNTS, COUNTERS, START = 8, 4, 1000
for i in range(ACCOUNTS):
    r.set(f"wacct:{i}", START)
for i in range(COUNTERS):
    r.set(f"wctr:{i}", 0)
pace = Pace(seconds)
errors = []
counts = {"moves": 0, "incrs": 0, "claims": 0, "retries": 0, "changes": 0}
done_incrs = [0] * COUNTERS
lock = threading.Lock()


def mover(n):
    c = redis.Redis(port=port)
    i = retries = 0
    while pace.going(i, 20):
        a, b = (i * 5 + n) % ACCOUNTS, (i * 3 + n + 1) % ACCOUNTS
        if a == b:
            b = (b + 1) % ACCOUNTS
        amount = 1 + i % 7

        def move(p):
            nonlocal retries
            retries += 1
            va, vb = int(p.get(f"wacct:{a}")), int(p.get(f"wacct:{b}"))
            p.multi()
            p.set(f"wacct:{a}", va - amount)
            p.set(f"wacct:{b}", vb + amount)

        c.transaction(move, f"wacct:{a}", f"wacct:{b}")
        retries -= 1
        i += 1
    with lock:
        counts["moves"] += i
        counts["retries"] += retries


def incrementer(n):
    c = redis.Redis(port=port)
    i = retries = 0
    while pace.going(i, 20):
        k = (i + n) % COUNTERS

        def add(p):
            nonlocal retries
            retries += 1
            v = int(p.get(f"wctr:{k}"))
            p.multi()
            p.set(f"wctr:{k}", v + 1)

        c.transaction(add, f"wctr:{k}")
        retries -= 1
        with lock:
            done_incrs[k] += 1
        i += 1
    with lock:
        counts["incrs"] += i
        counts["retries"] += retries


PAIRS = 4
padding = {side: {f"pad:{side}:{i}": i for i in range(300)} for side in "xy"}


def claimer(side):
    """Write skew, which WATCH prevents: claims its side of a pair only while neither side is
    claimed, watching both but writing one. Were a watched key not held while the EXEC runs, the two
    claimers could each see the pair free and both claim it."""
    c = redis.Redis(port=port)
    i = made = 0
    while pace.going(i, 20):
        k = i % PAIRS
        claimed = False

        def claim(p):
            nonlocal claimed
            claimed = p.get(f"ws:{k}:x") == b"0" and p.get(f"ws:{k}:y") == b"0"
            if claimed:
                p.multi()
                p.mset(padding[side])  # keys on every worker: steps that take a while, here and there
                p.set(f"ws:{k}:{side}", 1)

        c.transaction(claim, f"ws:{k}:x", f"ws:{k}:y")
        made += claimed  # the last call's, whose EXEC ran
        i += 1
    with lock:
        counts["claims"] += made


def freer():
    c = redis.Redis(port=port)
    i = 0
    while pace.going(i, 20):
        k = i % PAIRS
        x, y = c.pipeline().get(f"ws:{k}:x").get(f"ws:{k}:y").execute()  # in one MULTI
        if x == b"1" and y == b"1":
            with lock:
                errors.append(f"pair {k} claimed by both sides")
        c.pipeline().set(f"ws:{k}:x", 0).set(f"ws:{k}:y", 0).execute()
        i += 1


for k in range(PAIRS):
    r.mset({f"ws:{k}:x": 0, f"ws:{k}:y": 0})


def admin():
    changes = churn(port, pace)
    with lock:
        counts["changes"] += changes


threads = [threading.Thread(target=mover, args=(n,)) for n in range(3)]
threads += [threading.Thread(target=incrementer, args=(n,)) for n in range(3)]
threads += [threading.Thread(target=claimer, args=(side,)) for side in "xy"]
threads.append(threading.Thread(target=freer))
threads.append(threading.Thread(target=admin))
for t in threads:
    t.start()
for t in threads:
    t.join()
if errors:
    sys.exit(f"FAIL: {len(errors)} pairs claimed by both sides (write skew), e.g. {errors[:3]}")
if watched_keys() != 0:
    sys.exit(f"FAIL: INFO counts {watched_keys()} keys watched after every transaction ended")
total = sum(int(r.get(f"wacct:{i}")) for i in range(ACCOUNTS))
if total != ACCOUNTS * START:
    sys.exit(f"FAIL: the accounts hold {total}, not {ACCOUNTS * START}: a move ran over a write its watch missed")
got = [int(r.get(f"wctr:{k}")) for k in range(COUNTERS)]
if got != done_incrs:
    sys.exit(f"FAIL: the counters hold {got}, the increments that succeeded were {done_incrs}")
if counts["moves"] < 50 or counts["incrs"] < 50 or counts["claims"] < 10 or counts["changes"] < 4 or \
        counts["retries"] < 1:
    sys.exit(f"FAIL: too little ran, or nothing ever retried: {counts}")
print(f"watch_client: every case as Redis; {counts['moves']} moves and {counts['incrs']} increments by WATCH "
      f"({counts['retries']} retried after a write in between), {counts['claims']} claims of pairs, under "
      f"{counts['changes']} membership changes: total conserved, no increment lost, no pair claimed twice")
