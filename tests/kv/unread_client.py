#!/usr/bin/env python3
"""A client that pipelines GETs of a large value without reading, then reads them all.

    unread_client.py PORT SERVER_PID N MAX_GROWTH_MB [get|getrange|keys|lrange]

SETs a 512 KB value, then sends N GETs of it without reading a reply, until all are sent or the
server has stopped taking them (nothing could be sent for 2 s), and waits until the server has done
what it took (its CPU time stands still). The server must hold its memory to about its output limit
for this connection: its peak resident size (VmHWM in /proc/PID/status) may grow by at most
MAX_GROWTH_MB over its size before the GETs. Then the client reads everything, and every one of the
N replies must be the value, complete. Stops within 120 s whatever the server does (20 s without a
byte of reply is a failure). Exits 1 on a failure.

With "keys", the request is KEYS * over 20,000 keys (a reply of about 500 KB that no argument of the
command bounds) instead of the GET; with "lrange", LRANGE 0 19 of a list of ten small elements and ten
of 512 KB (5 MB a reply: its indexes bound the copied text, the large elements go by reference);
with "getrange", GETRANGE 1 -1 of the 512 KB value (all of it but its first byte: a range sent from
the stored value; a copy a request grew the server by 891 MB over 1,000 of 2 MB each).
Every reply must then be the same as one read before.
"""
import select
import socket
import sys
import time

from wire import command, fail

VALUE = bytes(range(256)) * 2048  # 512 KiB
KEY = b"big"


def vm_kb(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    fail("no %s in /proc/%d/status" % (field, pid))


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


def wait_idle(pid, deadline):
    """Polls the server's CPU time until it stands still for 0.5 s (at most until deadline)."""
    last, still = cpu_ticks(pid), 0
    while still < 5 and time.monotonic() < deadline:
        time.sleep(0.1)
        now = cpu_ticks(pid)
        still = still + 1 if now == last else 0
        last = now


def read_exactly(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            fail("the server closed the connection")
        data += chunk
    return data


def read_line(s):
    line = b""
    while not line.endswith(b"\r\n"):
        line += read_exactly(s, 1)
    return line


def array_reply(s, request):
    """request once, its reply read whole (an array of bulk strings): what every later one must be."""
    s.sendall(request)
    head = read_line(s)
    out = head
    for _ in range(int(head[1:])):
        bulk = read_line(s)
        out += bulk + read_exactly(s, int(bulk[1:]) + 2)
    return out


def set_up(s, mode):
    """The data, and the request and reply the test repeats."""
    if mode in ("get", "getrange"):
        s.sendall(command(b"SET", KEY, VALUE))
        if s.recv(16) != b"+OK\r\n":
            fail("SET of the 512 KB value was not answered +OK")
        if mode == "getrange":
            return command(b"GETRANGE", KEY, b"1", b"-1"), b"$%d\r\n%s\r\n" % (len(VALUE) - 1, VALUE[1:])
        return command(b"GET", KEY), b"$%d\r\n%s\r\n" % (len(VALUE), VALUE)
    if mode == "lrange":
        for i in range(10):
            s.sendall(command(b"RPUSH", b"biglist", b"small", VALUE))
            if read_line(s) != b":%d\r\n" % (2 * i + 2):
                fail("RPUSH was not answered with the list's length")
        request = command(b"LRANGE", b"biglist", b"0", b"19")
        return request, array_reply(s, request)
    s.sendall(b"".join(command(b"SET", b"k%015d" % i, b"v") for i in range(20000)))
    if read_exactly(s, 5 * 20000) != b"+OK\r\n" * 20000:
        fail("the 20,000 SETs were not all answered +OK")
    request = command(b"KEYS", b"*")
    return request, array_reply(s, request)


def main():
    port, pid, n, max_growth_mb = (int(a) for a in sys.argv[1:5])
    mode = sys.argv[5] if len(sys.argv) > 5 else "get"
    deadline = time.monotonic() + 120
    s = socket.create_connection(("127.0.0.1", port))
    request, expected = set_up(s, mode)
    base = vm_kb(pid, "VmHWM")

    requests = memoryview(request * n)
    s.setblocking(False)
    sent = 0
    while sent < len(requests) and time.monotonic() < deadline:
        try:
            sent += s.send(requests[sent:sent + 65536])
        except BlockingIOError:
            if not select.select([], [s], [], 2.0)[1]:
                break  # the server reads no more of this connection
    wait_idle(pid, min(deadline, time.monotonic() + 30))
    stalled_rss = vm_kb(pid, "VmRSS")
    stalled_hwm = vm_kb(pid, "VmHWM")
    what = {"get": "GETs", "getrange": "GETRANGEs", "keys": "KEYS", "lrange": "LRANGEs"}[mode]
    print("unread: %d of %d %s sent, no reply read, server idle: RSS +%.1f MB, peak +%.1f MB"
          % (sent // len(request), n, what, (stalled_rss - base) / 1024,
             (stalled_hwm - base) / 1024))

    # Now read every reply (sending the rest as the server takes it) and check each one whole.
    buf = bytearray()
    done = 0
    while done < n:
        left = min(deadline - time.monotonic(), 20)
        if left <= 0:
            fail("only %d of %d replies within 120 s" % (done, n))
        r, w, _ = select.select([s], [s] if sent < len(requests) else [], [], left)
        if not r and not w:
            fail("no reply for %.0f s after %d of %d" % (left, done, n))
        if w:
            try:
                sent += s.send(requests[sent:sent + 65536])
            except BlockingIOError:
                pass
        if r:
            data = s.recv(1 << 20)
            if not data:
                fail("the server closed the connection after %d of %d replies" % (done, n))
            buf += data
            pos = 0
            while len(buf) - pos >= len(expected):
                if buf[pos:pos + len(expected)] != expected:
                    fail("reply %d is not the value" % done)
                pos += len(expected)
                done += 1
            del buf[:pos]
    if buf:
        fail("%d bytes after the last reply" % len(buf))
    growth_mb = (vm_kb(pid, "VmHWM") - base) / 1024
    if growth_mb >= max_growth_mb:
        fail("a client pipelining %d %s without reading grew the server by %.0f MB (peak); "
             "at most %d MB allowed" % (n, what, growth_mb, max_growth_mb))
    print("unread: all %d replies complete after reading; server peak RSS +%.1f MB (limit %d MB)"
          % (n, growth_mb, max_growth_mb))


main()
