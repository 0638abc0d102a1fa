#!/usr/bin/env python3
"""Clients that send INCRs and hang up: every command the server received must run.

    hangup_client.py PORT N

Half-close: sends N INCRs of "hangup:fin", shuts its side down (a FIN) and reads until the server
closes: N replies, the last one N.

Reset: sends N INCRs of "hangup:reset" in two halves. Between them it waits until a reply has arrived
and leaves it unread, so that at the close its receive queue holds data and Linux answers the close
with a reset instead of a FIN (the server then sees ECONNRESET after the data, or EPIPE on writing a
reply). Before closing it waits until the server's kernel has acknowledged every byte, since a reset
discards what the client has not yet sent. Then another connection asks for the counter until it is
N, as redis-server would have it.

Unread PINGs: sends N PINGs, which the server answers straight into its output, reads none of the
replies and closes. The server must drop the replies and free the connection: connected_clients, asked
on another connection, comes back to what it was.

Exits 1 on a failure, printing how many of the N ran.
"""
import fcntl
import select
import socket
import struct
import sys
import termios
import time

from wire import command, fail


def ioctl_int(sock, request):
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), request, b"\0\0\0\0"))[0]


def read_reply(f):
    """One RESP reply from a buffered reader: an integer, a bulk string (None for a nil) or a status."""
    line = f.readline()
    if not line.endswith(b"\r\n"):
        fail("connection closed mid-reply")
    kind, body = line[:1], line[1:-2]
    if kind == b"$":
        n = int(body)
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b"-":
        fail("error reply: " + body.decode())
    return body


def half_close(port, n):
    key = b"hangup:fin"
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(30)
    f = s.makefile("rb")
    s.sendall(command(b"DEL", key) + command(b"INCR", key) * n)
    s.shutdown(socket.SHUT_WR)
    read_reply(f)
    for i in range(1, n + 1):
        v = read_reply(f)
        if v != b"%d" % i:
            fail("half-close: reply %d of %d is %r" % (i, n, v))
    if f.read(1) != b"":
        fail("half-close: more than the replies, or no close")
    s.close()
    print("hang-up with a FIN: %d of %d INCRs answered, then the connection closed" % (n, n))


def reset(port, n):
    key = b"hangup:reset"
    check = socket.create_connection(("127.0.0.1", port))
    check.settimeout(30)
    replies = check.makefile("rb")
    check.sendall(command(b"DEL", key))
    read_reply(replies)

    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(command(b"INCR", key) * (n // 2))
    if not select.select([s], [], [], 30)[0]:
        fail("no reply to the first half within 30 s")
    s.sendall(command(b"INCR", key) * (n - n // 2))
    # SIOCOUTQ (TIOCOUTQ): bytes sent but not yet acknowledged. A wait for the kernel, bounded.
    for _ in range(30000):
        if ioctl_int(s, termios.TIOCOUTQ) == 0:
            break
        time.sleep(0.001)
    else:
        fail("the server's kernel did not acknowledge the requests within 30 s")
    unread = ioctl_int(s, termios.FIONREAD)
    if unread == 0:
        fail("no reply left unread: the close would not be a reset")
    s.close()

    # The server runs what it received some time after the reset: ask until the counter is n, each
    # question a round trip, at most 1,000 of them 10 ms apart.
    got = None
    for _ in range(1000):
        check.sendall(command(b"GET", key))
        v = read_reply(replies)
        got = int(v) if v is not None else 0
        if got >= n:
            break
        time.sleep(0.01)
    if got != n:
        fail("a client that hung up with %d bytes of replies unread: %d of its %d INCRs ran"
             % (unread, got, n))
    print("hang-up with a reset (%d bytes of replies unread): %d of %d INCRs ran" % (unread, got, n))


def connected_clients(sock, replies):
    sock.sendall(command(b"INFO", b"clients"))
    for line in read_reply(replies).split(b"\r\n"):
        if line.startswith(b"connected_clients:"):
            return int(line.split(b":")[1])
    fail("INFO clients has no connected_clients")


def unread_pings(port, n):
    check = socket.create_connection(("127.0.0.1", port))
    check.settimeout(30)
    replies = check.makefile("rb")
    before = connected_clients(check, replies)
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(30)
    s.sendall(b"PING\r\n" * n)
    s.close()
    # The server frees the connection some time after the close: ask, at most 1,000 times 10 ms apart.
    for _ in range(1000):
        now = connected_clients(check, replies)
        if now <= before:
            break
        time.sleep(0.01)
    else:
        fail("a client that closed with %d PINGs unread is still connected after 10 s (%d clients, %d before)"
             % (n, now, before))
    print("hang-up with %d PINGs unread: the connection was freed" % n)


def main():
    port, n = int(sys.argv[1]), int(sys.argv[2])
    half_close(port, n)
    reset(port, n)
    unread_pings(port, 5 * n)


main()
