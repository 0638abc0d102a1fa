#!/usr/bin/python3
"""kv_server's EXEC, pipelined hard, under churn: every reply in request order, none lost.

   txn_order_client.py PORT SECONDS

Each orderer thread pipelines, on a raw socket, batches of transactions over keys of its own spread
over the workers (MULTI, INCRs, a repeated key, PING, ECHO, an MSET with a key twice, a GET, EXEC)
with plain commands between them, and checks every reply byte for byte: the EXEC array header, then
each queued command's reply in its place, the counters at the values the thread alone can predict.
Movers transfer between shared accounts (MULTI DECRBY a x, INCRBY b x, EXEC; an atomic MSET of the
sums' halves is not needed) while an auditor reads every account in one MULTI: the sum stays 0.
Quitters send a pipeline of transactions (MULTI INCR x INCR y EXEC) and reset the connection
without reading: each of their transactions runs whole or not at all (x == y at the end). An admin
connection adds, removes and crashes workers (SHARD.ADD, SHARD.REMOVE, SHARD.CRASH) meanwhile.
Exits 1 on any violation."""
import socket
import struct
import sys
import threading
import time

from pace import Pace
from wire import command

port, seconds = int(sys.argv[1]), float(sys.argv[2])
pace = Pace(seconds)
errors = []
counts = {"txns": 0, "moves": 0, "audits": 0, "quits": 0, "changes": 0}
lock = threading.Lock()
ACCOUNTS = 12


class Conn:
    def __init__(self):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.settimeout(30)
        self.buf = b""

    def _fill(self):
        data = self.s.recv(1 << 16)
        if not data:
            raise EOFError("the server closed the connection")
        self.buf += data

    def line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exactly(self, n):
        while len(self.buf) < n:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def reply(self):
        """One reply, as a Python value: bytes for + (as b'+OK'), ints, None, lists, ('err', text)."""
        line = self.line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return line
        if t == b"-":
            return ("err", rest)
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self.exactly(n + 2)[:-2]
        if t == b"*":
            return [self.reply() for _ in range(int(rest))]
        raise ValueError("bad reply %r" % line)


def fail(msg):
    with lock:
        errors.append(msg)


def orderer(n):
    c = Conn()
    keys = ["o:%d:%d" % (n, j) for j in range(6)]  # over several workers
    count = {k: 0 for k in keys}
    plain = 0
    t = 0
    while pace.going(t, 16) and not errors:
        out, want = [], []
        for b in range(8):
            tag = "%d-%d" % (n, t)
            a, b2, c3 = keys[t % 6], keys[(t + 1) % 6], keys[(t + 3) % 6]
            cmds = [("INCR", a), ("INCR", b2), ("INCR", a), ("PING",), ("ECHO", tag),
                    ("MSET", c3 + ":v", tag, a + ":v", "x", c3 + ":v", tag + "!"), ("GET", c3 + ":v"), ("INCR", c3)]
            out.append(command("MULTI"))
            want.append(b"+OK")
            exec_want = []
            for cmd in cmds:
                out.append(command(*cmd))
                want.append(b"+QUEUED")
            count[a] += 1
            exec_want.append(count[a])
            count[b2] += 1
            exec_want.append(count[b2])
            count[a] += 1
            exec_want += [count[a], b"+PONG", tag.encode(), b"+OK", (tag + "!").encode()]
            count[c3] += 1
            exec_want.append(count[c3])
            out.append(command("EXEC"))
            want.append(exec_want)
            plain += 1
            out.append(command("INCR", "o:%d:plain" % n))  # a plain command between transactions
            want.append(plain)
            t += 1
        c.s.sendall(b"".join(out))
        for i, w in enumerate(want):
            try:
                got = c.reply()
            except Exception as e:  # noqa: BLE001 - a lost reply shows as a timeout or a close
                fail("orderer %d: reply %d of a batch: %r (expected %r)" % (n, i, e, w))
                return
            if got != w:
                fail("orderer %d: reply %d of a batch is %r, expected %r" % (n, i, got, w))
                return
        with lock:
            counts["txns"] += 8


def mover(n):
    c = Conn()
    i = 0
    while pace.going(i, 10) and not errors:
        a, b = (i * 5 + n) % ACCOUNTS, (i * 7 + n + 1) % ACCOUNTS
        if a == b:
            b = (b + 1) % ACCOUNTS
        x = 1 + i % 17
        c.s.sendall(command("MULTI") + command("DECRBY", "acct:%d" % a, x) + command("INCRBY", "acct:%d" % b, x) +
                    command("EXEC"))
        got = [c.reply() for _ in range(4)]
        if got[0] != b"+OK" or got[1:3] != [b"+QUEUED"] * 2 or not isinstance(got[3], list) or len(got[3]) != 2:
            fail("mover %d: %r" % (n, got))
            return
        i += 1
    with lock:
        counts["moves"] += i


def auditor():
    c = Conn()
    i = 0
    while pace.going(i, 5) and not errors:
        req = command("MULTI") + b"".join(command("GET", "acct:%d" % a) for a in range(ACCOUNTS)) + command("EXEC")
        c.s.sendall(req)
        got = [c.reply() for _ in range(ACCOUNTS + 2)]
        vals = got[-1]
        if not isinstance(vals, list) or len(vals) != ACCOUNTS:
            fail("auditor: EXEC answered %r" % (vals,))
            return
        total = sum(int(v) for v in vals if v is not None)
        if total != 0:
            fail("auditor: the accounts sum to %d in one MULTI: a transfer half applied" % total)
            return
        i += 1
    with lock:
        counts["audits"] += i


def quitter(n):
    i = 0
    while pace.going(i, 0) and not errors:
        c = Conn()
        batch = b"".join(command("MULTI") + command("INCR", "q:%d:x" % n) + command("INCR", "q:%d:y" % n) +
                         command("EXEC") for _ in range(50))
        c.s.sendall(batch)
        if i % 2:
            c.line()  # some replies read, then gone
        c.s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.s.close()  # a reset, with the replies unread
        i += 1
    with lock:
        counts["quits"] += i


def admin():
    c = Conn()
    i = 0
    while pace.going(2 * i, 4) and not errors:
        name = "o%d" % i
        for cmd in (("SHARD.ADD", name), ("SHARD.REMOVE", name) if i % 2 else ("SHARD.CRASH", name)):
            c.s.sendall(command(*cmd))
            got = c.reply()
            if got != b"+OK":
                fail("admin: %r answered %r" % (cmd, got))
                return
        i += 1
        time.sleep(0.02)  # the pace of the churn, not synchronisation
    with lock:
        counts["changes"] += 2 * i


threads = [threading.Thread(target=orderer, args=(n,)) for n in range(3)]
threads += [threading.Thread(target=mover, args=(n,)) for n in range(2)]
threads += [threading.Thread(target=auditor), threading.Thread(target=admin)]
threads += [threading.Thread(target=quitter, args=(n,)) for n in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
if not errors:
    # What the quitters sent ran whole or not at all: each pair of counters agrees.
    c = Conn()
    for n in range(2):
        c.s.sendall(command("MULTI") + command("GET", "q:%d:x" % n) + command("GET", "q:%d:y" % n) + command("EXEC"))
        got = [c.reply() for _ in range(4)][-1]
        if got[0] != got[1]:
            fail("quitter %d: x=%r y=%r: a transaction of a reset connection ran in part" % (n, got[0], got[1]))
    c.s.sendall(command("PING"))
    if c.reply() != b"+PONG":
        fail("no PONG at the end")
if errors:
    sys.exit("FAIL: %d violations, e.g. %s" % (len(errors), errors[:3]))
if counts["txns"] < 40 or counts["moves"] < 20 or counts["audits"] < 5 or counts["changes"] < 4:
    sys.exit("FAIL: too little ran: %r" % counts)
print("txn_order_client: %(txns)d pipelined transactions in order, %(moves)d transfers, %(audits)d audits "
      "summing to 0, %(quits)d connections reset mid-EXEC, %(changes)d membership changes" % counts)
