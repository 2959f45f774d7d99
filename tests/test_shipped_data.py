"""The data that ships in data/ is what the importers make of the public source files (issue 17, item 1)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from pairank.storage.fs import Location
from pairank.storage.importers import run_import
from tests.helpers import ROOT, SHIPPED_DATA


@pytest.mark.parametrize(("name", "source"), [("summeval", "summeval"), ("llmbar", "llmbar/LLMBar/Natural")])
def test_the_shipped_tables_equal_a_fresh_import(name, source, shared_data, tmp_path):
    folder = SHIPPED_DATA / ("summeval" if name == "summeval" else "llmbar-natural")
    run_import(name, str(shared_data / source), str(tmp_path / "fresh"))
    shipped = sorted(p.name for p in folder.glob("*.parquet"))
    assert shipped == sorted(p.name for p in (tmp_path / "fresh").glob("*.parquet"))
    for table in shipped:
        assert pq.read_table(folder / table).equals(pq.read_table(tmp_path / "fresh" / table)), table


def test_the_shipped_data_is_small_and_every_spec_reads_it():
    size = sum(p.stat().st_size for p in SHIPPED_DATA.rglob("*") if p.is_file())
    assert size < 1_000_000, size  # the README says 608 KB
    from pairank.jobs.specs.job import load_spec
    from pairank.storage.inputs import read_candidates

    for spec_file in ("demo", "pairs_beam", "simulated", "winrate", "modes"):
        spec = load_spec(
            ROOT / "configs" / f"{spec_file}.yaml", ["winrate.baseline=M0"] if spec_file == "simulated" else []
        )
        assert Location.of(spec.input).uri.startswith(str(SHIPPED_DATA)), spec_file
        assert read_candidates(Location.of(spec.input)).num_rows > 0
