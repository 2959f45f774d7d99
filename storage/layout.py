"""Where a run's files live under its storage root.

::

    <output>/tables/judgments/            the judgment cache (a Delta table), shared by every run under the root
    <output>/tables/passes/               first passes of multi-pass modes (analyses, pointwise scores), shared too
    <output>/runs/<name>/manifest.json    the spec, the counts and the state of the run
    <output>/runs/<name>/rankings.parquet
    <output>/runs/<name>/spearman.parquet, position_bias.parquet
    <output>/runs/<name>/winrates.parquet, winrate_judges.parquet   (when the spec asks for win rates)
    <output>/runs/<name>/report.md, report.json
    <output>/leaderboard/leaderboard.parquet, leaderboard.json, index.html   (pairank leaderboard: all runs)
"""

from __future__ import annotations

from dataclasses import dataclass

from pairank.storage.fs import Location


@dataclass(frozen=True)
class RunLayout:
    root: Location
    name: str

    @classmethod
    def of(cls, output: str, name: str) -> RunLayout:
        return cls(Location.of(output), name)

    @property
    def judgments(self) -> Location:
        return self.root.join("tables", "judgments")

    @property
    def passes(self) -> Location:
        return self.root.join("tables", "passes")

    @property
    def run(self) -> Location:
        return self.root.join("runs", self.name)

    @property
    def manifest(self) -> Location:
        return self.run.join("manifest.json")

    @property
    def rankings(self) -> Location:
        return self.run.join("rankings.parquet")

    @property
    def spearman(self) -> Location:
        return self.run.join("spearman.parquet")

    @property
    def position_bias(self) -> Location:
        return self.run.join("position_bias.parquet")

    @property
    def report_md(self) -> Location:
        return self.run.join("report.md")

    @property
    def report_json(self) -> Location:
        return self.run.join("report.json")

    @property
    def winrates(self) -> Location:
        return self.run.join("winrates.parquet")

    @property
    def winrate_judges(self) -> Location:
        return self.run.join("winrate_judges.parquet")

    @property
    def runs(self) -> Location:
        """The folder holding every run under the root."""
        return self.root.join("runs")

    @property
    def leaderboard(self) -> Location:
        """The root's leaderboard folder (of the runs under the root, not of this run alone)."""
        return self.root.join("leaderboard")

    @property
    def leaderboard_table(self) -> Location:
        return self.leaderboard.join("leaderboard.parquet")

    @property
    def leaderboard_json(self) -> Location:
        return self.leaderboard.join("leaderboard.json")

    @property
    def leaderboard_html(self) -> Location:
        return self.leaderboard.join("index.html")
