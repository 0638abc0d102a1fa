"""What the kv test clients that speak RESP on their own sockets share: a command in RESP, and the
way a client fails."""
import sys


def command(*args):
    """args (bytes, or anything str() makes text of) as one RESP array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def fail(msg):
    """Prints the failure and exits 1, which the calling shell script reports."""
    print("FAIL: " + msg)
    sys.exit(1)
