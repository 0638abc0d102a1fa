#!/usr/bin/env python3
"""A client that sends MULTI and then command after command, reading every +QUEUED, and never EXEC.

    multi_flood_client.py PORT SERVER_PID MB MAX_GROWTH_MB

After MULTI it queues ECHOs and SETs of a 256 KB value (reading each reply as it goes, so the server
is never held back by unread replies) until MB megabytes of commands are sent. A connection's memory
is bounded (examples/kv/net.c's header): the server's peak resident size (VmHWM) may grow by at most
MAX_GROWTH_MB however many commands a transaction queues; a command the server will not queue is
refused, and EXEC then answers EXECABORT. Then DISCARD or EXEC ends it, and the connection still
works. Exits 1 on a failure.
"""
import socket
import sys
import time

from wire import command, fail

VALUE = bytes(range(256)) * 1024  # 256 KiB


def vm_kb(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    fail("no %s in /proc/%d/status" % (field, pid))


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.settimeout(20)
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            data = self.s.recv(65536)
            if not data:
                fail("the server closed the connection")
            self.buf += data
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def call(self, *args):
        self.s.sendall(command(*args))
        return self.line()


def main():
    port, pid, mb, max_growth_mb = (int(a) for a in sys.argv[1:5])
    c = Conn(port)
    if c.call(b"PING") != b"+PONG":
        fail("PING")
    base = vm_kb(pid, "VmHWM")
    if c.call(b"MULTI") != b"+OK":
        fail("MULTI was not answered +OK")
    sent = queued = refused = 0
    start = time.monotonic()
    while sent < mb << 20:
        if time.monotonic() - start > 120:
            fail("the flood took over 120 s")
        req = (command(b"ECHO", VALUE) if queued % 2 else command(b"SET", b"flood%d" % (queued % 7), VALUE))
        c.s.sendall(req)
        sent += len(req)
        reply = c.line()
        if reply == b"+QUEUED":
            queued += 1
        elif reply.startswith(b"-"):
            refused += 1
        else:
            fail("a command in MULTI was answered %r" % reply[:80])
    growth_mb = (vm_kb(pid, "VmHWM") - base) / 1024
    print("multi flood: %d MB sent in MULTI, %d commands queued, %d refused; server peak RSS +%.1f MB "
          "(limit %d MB)" % (mb, queued, refused, growth_mb, max_growth_mb))
    if growth_mb >= max_growth_mb:
        fail("a client queueing %d MB of commands in MULTI grew the server by %.0f MB (peak); at most "
             "%d MB allowed" % (mb, growth_mb, max_growth_mb))
    end = c.call(b"EXEC")
    if refused and not end.startswith(b"-EXECABORT"):
        fail("EXEC after a refused command answered %r, not EXECABORT" % end[:80])
    if not refused:
        fail("the server queued %d MB of commands in one transaction" % mb)
    if c.call(b"GET", b"flood0") != b"$-1":
        fail("an aborted transaction set a key")
    if c.call(b"PING") != b"+PONG":
        fail("the connection does not work after the aborted transaction")
    print("multi flood: EXEC aborted, nothing set, the connection still works")


main()
