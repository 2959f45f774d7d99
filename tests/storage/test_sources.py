"""Outside files read record by record (storage/importers/sources.py): a CSV field's text kept byte for byte."""

from __future__ import annotations

import json

from pairank.storage.fs import Location
from pairank.storage.importers.outputs import Fields, import_outputs
from pairank.storage.importers.sources import records
from pairank.storage.inputs import read_candidates
from pairank.storage.keys import text_hash

PROMPT = "Line one\r\nline two\r\n"
ANSWERS = {"m1": "A CRLF\r\nan LF\na lone CR\r then \r\n\r\n two CRLFs", "m2": "plain"}
#: The CSV as a spreadsheet writes it: CRLF line ends, and the fields with line breaks quoted.
CSV = (
    b"prompt,response,model\r\n"
    + "".join(f'"{PROMPT}","{text}",{model}\r\n' for model, text in ANSWERS.items()).encode()
    + b'"second\r\nprompt",x,m1\n"second\r\nprompt",y,m2'  # an LF line end, and none at the end
)


def test_a_crlf_inside_a_quoted_csv_field_is_kept(tmp_path):
    path = tmp_path / "outputs.csv"
    path.write_bytes(CSV)
    got = list(records(Location.of(str(path))))
    assert [r for _, r in got] == [
        {"prompt": PROMPT, "response": ANSWERS["m1"], "model": "m1"},
        {"prompt": PROMPT, "response": ANSWERS["m2"], "model": "m2"},
        {"prompt": "second\r\nprompt", "response": "x", "model": "m1"},
        {"prompt": "second\r\nprompt", "response": "y", "model": "m2"},
    ]
    assert [w.place for w, _ in got] == ["line 2", "line 9", "line 12", "line 14"]  # where each record starts


def test_imported_csv_text_and_its_key_are_the_original_bytes(tmp_path):
    """The CSV import stores the texts as the file has them, with the ids the same rows get from JSON lines."""
    (tmp_path / "outputs.csv").write_bytes(CSV)
    rows = [{"prompt": PROMPT, "response": text, "model": model} for model, text in ANSWERS.items()]
    rows += [{"prompt": "second\r\nprompt", "response": t, "model": m} for t, m in (("x", "m1"), ("y", "m2"))]
    (tmp_path / "outputs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    fields = Fields(context="prompt", output="response", system="model")
    stored = {}
    for kind in ("csv", "jsonl"):
        import_outputs("table", [str(tmp_path / f"outputs.{kind}")], str(tmp_path / kind), fields)
        stored[kind] = read_candidates(Location.of(str(tmp_path / kind))).sort_by("candidate_id").to_pylist()
    by_system = {r["system"]: r for r in stored["csv"] if r["context"] == PROMPT}
    assert {s: r["text"] for s, r in by_system.items()} == ANSWERS
    assert by_system["m1"]["text"].encode() == ANSWERS["m1"].encode()  # CR LF, LF, CR as they were
    assert by_system["m1"]["context_id"] == f"ctx/{text_hash(PROMPT)}"
    assert stored["csv"] == stored["jsonl"]
