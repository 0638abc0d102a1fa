#!/usr/bin/env python3
"""Connections reset while others keep every round of the server's loops full.

    conn_churn_client.py PORT SECONDS

A loop's round ends once its events have brought 64 commands or more (net.c's ROUND_COMMANDS) and
keeps the events it has not handled for the next round; a connection whose event is kept may die in
between (its client reset it while its commands were still running, and a completion then finds it
done) and be freed. Eight connections pipeline INCRs of a counter of their own, 256 at a time, so
that rounds end with events kept; meanwhile, for SECONDS, eight threads connect, send 300 INCRs of a
shared counter, wait for the first reply to arrive and close with a reset (SO_LINGER 0), the rest
of their replies unread, again and again.

Checks: every pipelining connection gets 1, 2, 3, ... in order, one reply an INCR; once the reset
connections are gone (connected_clients, asked on one connection held throughout, is back to what
it was), the shared counter holds every INCR sent to it (the server runs what it received before a
reset, as redis-server does). A freed connection touched again shows under AddressSanitizer (the
sanitizer build runs this too). Exits 1 on a failure.
"""
import socket
import struct
import sys
import threading
import time

from wire import command, fail

PIPELINERS = 8
DEPTH = 256
RESET_INCRS = 300
RESETTERS = 8


def read_line(f):
    line = f.readline()
    if not line.endswith(b"\r\n"):
        raise EOFError("connection closed mid-reply")
    return line[:-2]


class Observer:
    """One connection held throughout: INFO and GET on it do not change connected_clients."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.f = self.s.makefile("rb")

    def ask(self, *args):
        self.s.sendall(command(*args))
        line = read_line(self.f)
        if line[:1] == b"$":
            n = int(line[1:])
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if line[:1] == b"-":
            fail("error reply: " + line.decode())
        return line[1:]

    def clients(self):
        for line in self.ask(b"INFO", b"clients").decode().splitlines():
            if line.startswith("connected_clients:"):
                return int(line.split(":", 1)[1])
        fail("INFO has no connected_clients")


def pipeliner(port, index, stop, errors, counts):
    key = b"churn:pipe:%d" % index
    batch = command(b"INCR", key) * DEPTH
    expect = 0
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
            f = s.makefile("rb")
            while not stop.is_set():
                s.sendall(batch)
                for _ in range(DEPTH):
                    expect += 1
                    line = read_line(f)
                    if line != b":%d" % expect:
                        errors.append("pipeliner %d: reply %r where :%d was due" % (index, line, expect))
                        return
    except (OSError, EOFError) as e:
        errors.append("pipeliner %d: %s" % (index, e))
    counts[index] = expect


def resetter(port, deadline, errors, resets):
    burst = command(b"INCR", b"churn:reset") * RESET_INCRS
    while time.monotonic() < deadline:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(burst)
            s.recv(1, socket.MSG_PEEK)  # its commands are running: the reset comes with replies owed
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()  # a reset: nothing read, replies owed
            resets.append(1)
        except OSError as e:
            errors.append("resetter: %s" % e)
            return


def main():
    port, seconds = int(sys.argv[1]), float(sys.argv[2])
    obs = Observer(port)
    obs.ask(b"DEL", b"churn:reset", *[b"churn:pipe:%d" % i for i in range(PIPELINERS)])
    before = obs.clients()
    stop, errors, counts, resets = threading.Event(), [], [0] * PIPELINERS, []
    deadline = time.monotonic() + seconds
    pipes = [threading.Thread(target=pipeliner, args=(port, i, stop, errors, counts)) for i in range(PIPELINERS)]
    resetters = [threading.Thread(target=resetter, args=(port, deadline, errors, resets)) for _ in range(RESETTERS)]
    for t in pipes + resetters:
        t.start()
    for t in resetters:
        t.join()
    stop.set()
    for t in pipes:
        t.join()
    if errors:
        fail("; ".join(errors[:5]))
    # The reset connections go once what they sent has run: ask until they have (bounded).
    for _ in range(600):
        after = obs.clients()
        if after <= before:
            break
        time.sleep(0.05)
    else:
        fail("connected_clients stayed at %d (%d before): reset connections were not freed" % (after, before))
    for i in range(PIPELINERS):
        got = int(obs.ask(b"GET", b"churn:pipe:%d" % i))
        if got != counts[i]:
            fail("pipeliner %d: the counter holds %d, %d INCRs were answered" % (i, got, counts[i]))
    shared = int(obs.ask(b"GET", b"churn:reset") or 0)
    sent = len(resets) * RESET_INCRS
    if shared != sent:
        fail("the shared counter holds %d, %d INCRs were sent to it" % (shared, sent))
    print("conn churn: %d resets beside %d pipelining connections (%d INCRs answered in order); "
          "the shared counter %d of %d sent" % (len(resets), PIPELINERS, sum(counts), shared, sent))


if __name__ == "__main__":
    main()
