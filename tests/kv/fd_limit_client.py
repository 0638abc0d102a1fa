"""A server out of descriptors: fd_limit_client.py PORT PID N

Opens N connections to a kv_server started with few descriptors and sends PING on each. Every one must
get PONG or be closed by the server (none left waiting in the backlog: a PING there would time out),
some of each; while the client holds them, the server must not spin (under half a core over a
second: a spin on the readable listening socket takes a whole one or more). Exits non-zero on failure."""
import os
import socket
import sys
import time

from wire import fail


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    port, pid, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
    served = closed = 0
    for s in held:
        s.settimeout(10)
        try:
            s.sendall(b"PING\r\n")
            r = s.recv(16)
        except (ConnectionResetError, BrokenPipeError):
            r = b""
        except socket.timeout:
            fail("a connection got no reply and was not closed within 10 s: left in the backlog")
        if r == b"+PONG\r\n":
            served += 1
        elif r == b"":
            closed += 1
        else:
            fail("unexpected reply %r" % r)
    if served == 0 or closed == 0:
        fail("%d served and %d closed of %d: the limit did not bite, or nothing was served"
             % (served, closed, n))
    before = cpu_seconds(pid)
    time.sleep(1)
    used = cpu_seconds(pid) - before
    if used > 0.5:
        fail("the server used %.2f s of CPU in 1 s while out of descriptors and idle: it spins" % used)
    for s in held:
        s.close()
    print("out of descriptors: %d connections served, %d closed at once, %.2f s of CPU idle"
          % (served, closed, used))


main()
