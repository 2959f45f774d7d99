"""A pool's bookkeeping: which actors serve it, which calls each holds, and what it lost."""

from __future__ import annotations

import time


class PoolMonitor:
    """Which actors serve the pool, which calls each one holds, and what the pool lost: the facts a forwarder
    needs to choose an actor, and after an error to decide what to send again.

    The pool adds an actor (:meth:`joined`) once its engine is up and takes one out
    (:meth:`leave`) before stopping it. A forwarder asks :meth:`route` for the actor
    of each call. An actor reports its start (:meth:`arrived`, a restart when its slot
    was seen before) before it runs anything, and the start and end of every call
    (:meth:`started`, :meth:`finished`).
    A forwarder whose call failed asks :meth:`was_running`: a call that was running
    when its engine died (one of several, with batches in flight) counts against its
    batch; a call that only waited behind them is sent again for free.

    ``balance``: a call whose actor holds ``capacity`` calls or more goes to a live
    actor that holds fewer (a pool that grows: a new actor takes over the work
    dealt to the busy ones); otherwise a call goes to the actor its slot names.
    """

    def __init__(self, balance: bool = False, capacity: int = 1) -> None:
        self.balance, self.capacity = balance, capacity
        self.actors: dict[int, object] = {}  # the actors calls may be sent to, by slot
        self.current: dict[int, set[str]] = {}  # calls running in each actor's engine
        self.waiting: dict[int, set[str]] = {}  # calls sent to an actor, not yet in its engine
        self.idle_since: dict[int, float] = {}
        self.died_running: set[str] = set()
        self.restarts: list[dict] = []
        self.dead: set[int] = set()
        self.counts = {"batches_retried": 0, "rows_split": 0, "rows_failed": 0}

    def joined(self, slot: int, actor) -> None:
        self.actors[slot] = actor
        self.idle_since[slot] = time.monotonic()

    def leave(self, slot: int) -> bool:
        """Take ``slot`` out of the pool if it holds no call (then no call is sent to it again)."""
        if slot not in self.actors or self.current.get(slot) or self.waiting.get(slot):
            return False
        del self.actors[slot]
        return True

    def slots(self) -> list[int]:
        return sorted(self.actors)

    def route(self, slot: int, call: str, deaths: int = 0) -> tuple[int, object] | None:
        """The slot and actor ``call`` goes to: ``slot``'s, or when that actor is gone the live one at ``deaths``
        modulo their number, or with ``balance`` a less busy one; None when no actor is live."""
        live = sorted(self.actors)
        if not live:
            return None
        if slot not in self.actors:
            slot = live[deaths % len(live)]
        elif self.balance:
            load = {s: len(self.current.get(s, ())) + len(self.waiting.get(s, ())) for s in live}
            least = min(live, key=load.__getitem__)
            if load[slot] >= self.capacity and load[least] < load[slot]:
                slot = least
        self.waiting.setdefault(slot, set()).add(call)
        self.idle_since.pop(slot, None)
        return slot, self.actors[slot]

    def started(self, slot: int, call: str) -> None:
        self.waiting.get(slot, set()).discard(call)
        self.current.setdefault(slot, set()).add(call)

    def finished(self, slot: int, call: str) -> None:
        self.current.get(slot, set()).discard(call)
        if not self.current.get(slot) and not self.waiting.get(slot):
            self.idle_since[slot] = time.monotonic()

    def arrived(self, slot: int, pid: int) -> None:
        """An actor's engine is starting; for a slot seen before, that is a restart after a loss."""
        if slot in self.current:
            self.died_running |= self.current[slot]
            self.restarts.append({"slot": slot, "pid": pid, "at": time.time()})
        self.current[slot], self.waiting[slot] = set(), set()  # the calls it held failed; their senders resend
        self.idle_since[slot] = time.monotonic()

    def was_running(self, slot: int, call: str) -> bool:
        return call in self.died_running or call in self.current.get(slot, ())

    def forget(self, slot: int, call: str) -> None:
        """A call that failed holds its actor no longer."""
        self.waiting.get(slot, set()).discard(call)
        if slot in self.actors and not self.current.get(slot) and not self.waiting.get(slot):
            self.idle_since.setdefault(slot, time.monotonic())

    def mark_dead(self, slot: int) -> None:
        self.dead.add(slot)
        self.actors.pop(slot, None)
        self.current[slot], self.waiting[slot] = set(), set()

    def count(self, what: str, n: int = 1) -> None:
        self.counts[what] += n

    def loads(self) -> dict[int, tuple[int, int, float | None]]:
        """Per live actor: calls running, calls waiting, and seconds since it last had nothing to do (None while
        it has something)."""
        now = time.monotonic()
        return {
            s: (
                len(self.current.get(s, ())),
                len(self.waiting.get(s, ())),
                None if s not in self.idle_since else now - self.idle_since[s],
            )
            for s in self.actors
        }

    def summary(self) -> dict:
        """``lost``: engines that died (restarted, or dead for good); ``restarted``; ``dead`` slots; counters."""
        return {
            "lost": len(self.restarts) + len(self.dead),
            "restarted": len(self.restarts),
            "dead": sorted(self.dead),
            **self.counts,
        }
