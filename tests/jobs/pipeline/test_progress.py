"""The heartbeat that speaks before a judging step has numbers (issue 27, item 2)."""

from __future__ import annotations

import time

from pairank.jobs.pipeline.progress import Heartbeat


def test_a_status_is_said_at_once_then_again_every_period_until_the_next():
    said: list[str] = []
    polls: list[float] = []
    beat = Heartbeat(said.append, every=0.3, poll=lambda: polls.append(time.monotonic()))
    beat.say("starting 1 engine")
    time.sleep(1.05)
    beat.say("1 engine ready in 1 s")
    beat.say(None)
    time.sleep(0.7)
    beat.stop()
    assert said[0] == "starting 1 engine" and said[-1] == "1 engine ready in 1 s"
    repeats = said[1:-1]
    assert 2 <= len(repeats) <= 4 and all(r.startswith("starting 1 engine (") for r in repeats), said
    assert len(polls) >= 1


def test_a_poll_that_fails_is_said_once_and_never_raised():
    said: list[str] = []

    def broken():
        raise OSError("gone")

    beat = Heartbeat(said.append, every=0.2, poll=broken)
    time.sleep(2.3)
    beat.stop()
    assert said == ["(progress could not be read: OSError: gone)"]
