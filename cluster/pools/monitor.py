"""A pool's bookkeeping: which actors serve it, which calls each holds, and what it lost."""

from __future__ import annotations

import time
from collections import Counter

from pairank.cluster.metrics import Meter


class PoolMonitor:
    """Which actors serve the pool, which calls each one holds, and what the pool lost: the facts a forwarder
    needs to choose an actor, and after an error to decide what to send again.

    The pool adds an actor (:meth:`joined`) once its engine is up and takes one out
    (:meth:`leave`) before stopping it. A forwarder asks :meth:`route` for the actor
    of each call. An actor reports its start (:meth:`arrived`, a restart when its slot
    was seen before) before it runs anything, and the start and end of every call
    (:meth:`started`, :meth:`finished`). A restart is recorded with the time its actor
    arrived (``at``) and the time the first call entered its engine (``judging_at``:
    the slot judging again; None until then).
    A forwarder whose call failed asks :meth:`was_running`: a call that was running
    when its engine died (one of several, with batches in flight) counts against its
    batch; a call that only waited behind them is sent again for free.

    ``balance``: a call whose actor holds ``capacity`` calls or more goes to a live
    actor that holds fewer (a pool that grows: a new actor takes over the work
    dealt to the busy ones); otherwise a call goes to the actor its slot names.

    What each slot's engines judged (:meth:`tally`, from every batch a forwarder got
    back) is counted here, on the driver's node, not in the actor: an actor's restart
    loses none of it (:meth:`totals`). With a ``meter``, the monitor records the pool's
    metrics (:mod:`pairank.cluster.metrics`) as it learns them.
    """

    def __init__(self, balance: bool = False, capacity: int = 1, meter: Meter | None = None) -> None:
        self.balance, self.capacity = balance, capacity
        self.actors: dict[int, object] = {}  # the actors calls may be sent to, by slot
        self.current: dict[int, set[str]] = {}  # calls running in each actor's engine
        self.waiting: dict[int, set[str]] = {}  # calls sent to an actor, not yet in its engine
        self.idle_since: dict[int, float] = {}
        self.died_running: set[str] = set()
        self.restarts: list[dict] = []  # slot, pid, at, judging_at (wall times)
        self.back: dict[int, dict] = {}  # by slot: its restart, until the first call enters the restarted engine
        self.dead: set[int] = set()
        self.counts = {"batches_retried": 0, "rows_split": 0, "rows_failed": 0}
        self.judged: dict[int, dict] = {}  # by slot: batches, rows, prompts per judging pass, tokens
        self.meter = meter

    def renew(self, meter: Meter | None = None) -> None:
        """A new job on the pool's engines (a warm pool's, :mod:`pairank.cluster.pools.warm`): what they judged, lost
        and sent again is counted from 0, and recorded with the job's ``meter``; the actors stay as they are."""
        self.died_running, self.restarts, self.back, self.dead = set(), [], {}, set()
        self.counts = dict.fromkeys(self.counts, 0)
        self.judged, self.meter = {}, meter
        self._gauges()

    def busy(self) -> bool:
        """Whether a call runs in, or waits for, any actor."""
        return any(self.current.get(s) or self.waiting.get(s) for s in self.actors)

    def joined(self, slot: int, actor) -> None:
        self.actors[slot] = actor
        self.idle_since[slot] = time.monotonic()
        self._gauges()

    def leave(self, slot: int) -> bool:
        """Take ``slot`` out of the pool if it holds no call (then no call is sent to it again)."""
        if slot not in self.actors or self.current.get(slot) or self.waiting.get(slot):
            return False
        del self.actors[slot]
        self._gauges()
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
        self._gauges()
        return slot, self.actors[slot]

    def started(self, slot: int, call: str) -> None:
        restart = self.back.pop(slot, None)
        if restart is not None:  # the first call in the engine of a restarted actor: the slot judges again
            restart["judging_at"] = time.time()
        self.waiting.get(slot, set()).discard(call)
        self.current.setdefault(slot, set()).add(call)
        self._gauges()

    def finished(self, slot: int, call: str) -> None:
        self.current.get(slot, set()).discard(call)
        if not self.current.get(slot) and not self.waiting.get(slot):
            self.idle_since[slot] = time.monotonic()
        self._gauges()

    def tally(self, slot: int, cost: dict) -> None:
        """A batch the engine of ``slot`` judged and a forwarder got back: what it cost
        (:func:`~pairank.cluster.pools.judge_actor.batch_cost`)."""
        done = self.judged.setdefault(
            slot, {"batches": 0, "rows": 0, "calls": Counter(), "input_tokens": 0, "output_tokens": 0}
        )
        done["batches"] += 1
        done["rows"] += cost["rows"]
        done["calls"].update(cost["calls"])
        done["input_tokens"] += cost["input_tokens"]
        done["output_tokens"] += cost["output_tokens"]
        if self.meter is not None:
            judging_pass = cost["judging_pass"]
            for kind, n in cost["calls"].items():
                self.meter.add("pairank_engine_prompts_total", n, judging_pass=kind)
            self.meter.add("pairank_engine_batches_total", 1, judging_pass=judging_pass)
            self.meter.add("pairank_engine_input_tokens_total", cost["input_tokens"], judging_pass=judging_pass)
            self.meter.add("pairank_engine_output_tokens_total", cost["output_tokens"], judging_pass=judging_pass)
            self.meter.observe("pairank_batch_seconds", cost["seconds"], judging_pass=judging_pass)

    def totals(self) -> dict[int, dict]:
        """Per slot that judged anything: batches, rows, engine prompts per judging pass (``calls``) and tokens, over
        every engine the slot had (restarts included)."""
        return {slot: {**done, "calls": dict(done["calls"])} for slot, done in self.judged.items()}

    def arrived(self, slot: int, pid: int) -> None:
        """An actor's engine is starting; for a slot seen before, that is a restart after a loss."""
        if slot in self.current:
            self.died_running |= self.current[slot]
            self.back[slot] = {"slot": slot, "pid": pid, "at": time.time(), "judging_at": None}
            self.restarts.append(self.back[slot])
            if self.meter is not None:
                self.meter.add("pairank_engines_lost_total")
                self.meter.add("pairank_engines_restarted_total")
        self.current[slot], self.waiting[slot] = set(), set()  # the calls it held failed; their senders resend
        self.idle_since[slot] = time.monotonic()
        self._gauges()

    def was_running(self, slot: int, call: str) -> bool:
        return call in self.died_running or call in self.current.get(slot, ())

    def forget(self, slot: int, call: str) -> None:
        """A call that failed holds its actor no longer."""
        self.waiting.get(slot, set()).discard(call)
        if slot in self.actors and not self.current.get(slot) and not self.waiting.get(slot):
            self.idle_since.setdefault(slot, time.monotonic())
        self._gauges()

    def mark_dead(self, slot: int) -> None:
        if slot not in self.dead and self.meter is not None:
            self.meter.add("pairank_engines_lost_total")
        self.dead.add(slot)
        self.actors.pop(slot, None)
        self.current[slot], self.waiting[slot] = set(), set()
        self._gauges()

    def count(self, what: str, n: int = 1) -> None:
        self.counts[what] += n
        if what == "batches_retried" and self.meter is not None:
            self.meter.add("pairank_batches_retried_total", n)

    def _gauges(self) -> None:
        """The pool's actors, calls running and calls waiting, as metrics."""
        if self.meter is None:
            return
        self.meter.set("pairank_pool_actors", len(self.actors))
        self.meter.set("pairank_pool_running", sum(len(self.current.get(s, ())) for s in self.actors))
        self.meter.set("pairank_pool_backlog", sum(len(self.waiting.get(s, ())) for s in self.actors))

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
        """``lost``: engines that died (restarted, or dead for good); ``restarted``; ``dead`` slots; ``restarts``
        (each: ``slot``, ``pid``, ``at`` when the restarted actor arrived, ``judging_at`` when a call first
        entered its engine, or None); counters."""
        return {
            "lost": len(self.restarts) + len(self.dead),
            "restarted": len(self.restarts),
            "dead": sorted(self.dead),
            "restarts": [dict(r) for r in self.restarts],
            **self.counts,
        }
