"""The static plan's counts per block, in a small actor on the driver's node (:mod:`.streamed`).

A module of its own that imports nothing heavy: the actor's process imports the module of the class it runs,
and the planning module's imports (pyarrow, the store, the schedulers) cost about 1.3 CPU seconds a run.
"""

from __future__ import annotations

from typing import Any


class PlanCounter:
    """Per block: comparisons wanted, found cached, and left to another run that claimed them (a Ray actor; a
    task run twice counts once). :meth:`next_sweep` starts counting a sweep again."""

    def __init__(self, blocks: int) -> None:
        self.blocks = blocks
        self.seen: dict[str, tuple[int, int, int]] = {}

    def add(self, block: str, wanted: int, cached: int, deferred: int = 0) -> None:
        self.seen[block] = (wanted, cached, deferred)

    def next_sweep(self) -> None:
        self.seen = {}

    def totals(self) -> dict[str, Any]:
        wanted = sum(w for w, _, _ in self.seen.values())
        cached = sum(c for _, c, _ in self.seen.values())
        deferred = sum(d for _, _, d in self.seen.values())
        return {
            "planned": len(self.seen),
            "blocks": self.blocks,
            "wanted": wanted,
            "cached": cached,
            "deferred": deferred,
        }
