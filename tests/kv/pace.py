"""How long a test client's threads run: SECONDS at least, then on until each has done the least its
check needs to mean anything, so a slow build (ThreadSanitizer, a loaded machine) does more seconds,
not a failed floor; never past a hard deadline, which only a server that stopped making progress
reaches (the client then fails on its floor, as before)."""
import time

HARD_SECONDS = 120


class Pace:
    def __init__(self, seconds):
        now = time.monotonic()
        self.stop = now + seconds
        self.hard = now + max(seconds, HARD_SECONDS)

    def going(self, done, least):
        """Whether a thread that has done `done` of the `least` it owes goes on."""
        now = time.monotonic()
        return now < self.hard and (now < self.stop or done < least)
