"""Fixtures in the field's formats, written by these tests (never copied from the projects): AlpacaEval outputs,
Arena-Hard questions and answers in both published layouts, MT-Bench questions and answers, plain tables, and
LMArena battle logs. Texts are made up; lengths and markdown vary by system so that style has something to see.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

#: Systems of the fixtures, best first; ``base`` is the baseline.
SYSTEMS = ("strong", "base", "wordy", "weak")
TOPICS = ("tides", "volcanoes", "bread", "bridges", "comets", "coral", "glaciers", "maps")


def question(i: int) -> str:
    return f"Explain {TOPICS[i % len(TOPICS)]} to a curious reader (question {i})."


def answer(system: str, i: int, turn: int = 1) -> str:
    """A made-up answer: the wordy system writes long lists, the strong one uses a header and bold."""
    topic = TOPICS[i % len(TOPICS)]
    if system == "strong":
        return f"## {topic.title()}\n\n**In short:** {topic} follow clear rules (turn {turn}, q{i})."
    if system == "wordy":
        items = "\n".join(f"- point {k} about {topic}" for k in range(4 + i % 3))
        return f"Here is a long answer about {topic} (turn {turn}).\n{items}\n" + "More words. " * (6 + i % 4)
    if system == "weak":
        return f"{topic}? not sure (turn {turn})."
    return f"{topic.capitalize()} are explained here plainly, turn {turn}, question {i}."


def write_jsonl(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def alpaca_eval(folder: Path, n: int = 6, systems=SYSTEMS) -> list[Path]:
    """One ``<system>/model_outputs.json`` per system: a JSON array of instruction, output, generator, dataset."""
    paths = []
    for s in systems:
        rows = [
            {
                "dataset": "helpful" if i % 2 else "koala",
                "instruction": question(i),
                "output": answer(s, i),
                "generator": s,
            }
            for i in range(n)
        ]
        path = folder / s / "model_outputs.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rows, indent=2), encoding="utf-8")
        paths.append(path)
    return paths


def arena_hard_v01(folder: Path, n: int = 6, systems=SYSTEMS) -> Path:
    """question.jsonl (question_id, category, cluster, turns) and model_answer/<model>.jsonl (choices' turns)."""
    write_jsonl(
        folder / "question.jsonl",
        [
            {
                "question_id": f"q{i:03d}",
                "category": "arena-hard-v0.1",
                "cluster": "misc",
                "turns": [{"content": question(i)}],
            }
            for i in range(n)
        ],
    )
    for s in systems:
        write_jsonl(
            folder / "model_answer" / f"{s}.jsonl",
            [
                {
                    "question_id": f"q{i:03d}",
                    "answer_id": f"{s}-{i}",
                    "model_id": s,
                    "choices": [
                        {"index": 0, "turns": [{"content": answer(s, i), "token_len": len(answer(s, i)) // 4}]}
                    ],
                    "tstamp": 1.0,
                }
                for i in range(n)
            ],
        )
    return folder


def markdown_counts(text: str) -> dict:
    lines = text.splitlines()
    return {
        "header_count": {f"h{k}": sum(line.startswith("#" * k + " ") for line in lines) for k in range(1, 7)},
        "list_count": {"ordered": 0, "unordered": sum(line.startswith("- ") for line in lines)},
        "bold_count": {"**": text.count("**") // 2, "__": 0},
    }


def arena_hard_v2(folder: Path, n: int = 6, systems=SYSTEMS) -> Path:
    """question.jsonl (uid, category, subcategory, prompt) and model_answer/<model>.jsonl (messages, metadata)."""
    cats = ("hard_prompt", "creative_writing")
    write_jsonl(
        folder / "question.jsonl",
        [{"uid": f"u{i:03d}", "category": cats[i % 2], "subcategory": "x", "prompt": question(i)} for i in range(n)],
    )
    for s in systems:
        write_jsonl(
            folder / "model_answer" / f"{s}.jsonl",
            [
                {
                    "uid": f"u{i:03d}",
                    "ans_id": f"{s}-{i}",
                    "model": s,
                    "messages": [
                        {"role": "user", "content": question(i)},
                        {"role": "assistant", "content": {"answer": answer(s, i)}},
                    ],
                    "tstamp": 1.0,
                    "metadata": {"token_len": len(answer(s, i)) // 4, **markdown_counts(answer(s, i))},
                }
                for i in range(n)
            ],
        )
    return folder


def mt_bench(folder: Path, n: int = 4, systems=SYSTEMS) -> Path:
    """question.jsonl (two turns, a reference on math questions) and model_answer/<model>.jsonl (two answers)."""
    write_jsonl(
        folder / "question.jsonl",
        [
            {
                "question_id": 81 + i,
                "category": "math" if i % 2 else "writing",
                "turns": [question(i), f"Now say it in one line (question {i})."],
                **({"reference": [f"Reference for {i}.", f"Short reference {i}."]} if i % 2 else {}),
            }
            for i in range(n)
        ],
    )
    for s in systems:
        write_jsonl(
            folder / "model_answer" / f"{s}.jsonl",
            [
                {
                    "question_id": 81 + i,
                    "answer_id": f"{s}-{i}",
                    "model_id": s,
                    "choices": [{"index": 0, "turns": [answer(s, i, 1), answer(s, i, 2)]}],
                    "tstamp": 1.0,
                }
                for i in range(n)
            ],
        )
    return folder


def table_rows(n: int = 6, systems=SYSTEMS) -> list[dict]:
    """Rows of a plain export: id, prompt, response, model, topic."""
    return [
        {"id": f"p{i}", "prompt": question(i), "response": answer(s, i), "model": s, "topic": TOPICS[i % len(TOPICS)]}
        for i in range(n)
        for s in systems
    ]


def table_files(folder: Path, n: int = 6) -> dict[str, Path]:
    """The same rows as JSON lines, CSV and Parquet."""
    rows = table_rows(n)
    folder.mkdir(parents=True, exist_ok=True)
    jsonl = write_jsonl(folder / "outputs.jsonl", rows)
    with open(folder / "outputs.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    pq.write_table(pa.Table.from_pylist(rows), folder / "outputs.parquet")
    return {"jsonl": jsonl, "csv": folder / "outputs.csv", "parquet": folder / "outputs.parquet"}


def battles(folder: Path, n: int = 60, seed: int = 0) -> Path:
    """An LMArena-style battle log (JSON lines): model_a, model_b, winner (with ties and both-bad), conversations
    and conv_metadata style counts. Stronger systems (earlier in SYSTEMS) win more often, by a seeded coin."""
    import random

    rng = random.Random(seed)
    strength = {s: 1.0 - 0.5 * k for k, s in enumerate(SYSTEMS)}
    rows = []
    for i in range(n):
        a, b = rng.sample(SYSTEMS, 2)
        p = 1.0 / (1.0 + pow(10.0, strength[b] - strength[a]))
        u = rng.random()
        winner = "tie" if u < 0.1 else "tie (bothbad)" if u < 0.15 else "model_a" if rng.random() < p else "model_b"
        ta, tb = answer(a, i), answer(b, i)
        rows.append(
            {
                "question_id": f"b{i:04d}",
                "model_a": a,
                "model_b": b,
                "winner": winner,
                "judge": f"arena_user_{i % 7}",
                "turn": 1,
                "language": "English",
                "tstamp": 1700000000.0 + i,
                "conversation_a": [{"role": "user", "content": question(i)}, {"role": "assistant", "content": ta}],
                "conversation_b": [{"role": "user", "content": question(i)}, {"role": "assistant", "content": tb}],
                "conv_metadata": {
                    "sum_assistant_a_tokens": len(ta) // 4,
                    "sum_assistant_b_tokens": len(tb) // 4,
                    **{f"{k}_a": v for k, v in markdown_counts(ta).items()},
                    **{f"{k}_b": v for k, v in markdown_counts(tb).items()},
                },
            }
        )
    return write_jsonl(folder / "battles.jsonl", rows)
