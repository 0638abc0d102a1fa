"""The membership churn the kv test clients run beside their load, through redis-py: a worker added,
then removed or crashed (SHARD.CRASH: REROUTE), over and over."""
import time

import redis


def churn(port, pace):
    """Adds a worker and removes or crashes it, every 20 ms, while pace (pace.py) says go on, for at
    least 4 changes. Return: how many changes it made."""
    c = redis.Redis(port=port)
    i = 0
    while pace.going(2 * i, 4):
        name = f"t{i}"
        c.execute_command("SHARD.ADD", name)
        c.execute_command("SHARD.REMOVE" if i % 2 else "SHARD.CRASH", name)
        i += 1
        time.sleep(0.02)  # the pace of the churn, not synchronisation
    return 2 * i
