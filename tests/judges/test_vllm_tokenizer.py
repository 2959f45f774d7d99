"""The vLLM judge's tokenizer (judges/engines/vllm_tokenizer.py): the embedded default model's read straight from its
``tokenizer.json``, every other model's by vLLM's loader, and the two the same tokenizer for what the judge asks of it.

The tests with ``default_model`` read the real prepared Gemma-3-270M (and import vLLM); the rule's own tests build
folders that look prepared, without a model.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from pairank.judges.engines.vllm_tokenizer import PREPARED_FILES, differences, fast_tokenizer_file, load_fast
from pairank.judges.models import DEFAULT_NAME
from pairank.judges.prompts import load_prompts
from tests.helpers import ROOT

#: The prepared folder's tokenizer_config.json, as `pairank model prepare` writes it with transformers 5.19.
PREPARED_CONFIG = {
    "backend": "tokenizers",
    "bos_token": "<bos>",
    "eos_token": "<eos>",
    "is_local": True,
    "local_files_only": False,
    "mask_token": "<mask>",
    "model_max_length": 1000000000000000019884624838656,
    "pad_token": "<pad>",
    "tokenizer_class": "GemmaTokenizer",
    "unk_token": "<unk>",
}
ASPECTS = ["coherence", "consistency", "fluency", "informativeness", "relevance"]
#: Texts a tokenizer may split differently: unicode of many scripts and forms, runs of every kind of whitespace,
#: byte-fallback characters, the normaliser's own space mark, and the special tokens' texts in and around words.
ODD = [
    "",
    " ",
    "A",
    " A",
    "B",
    " B",
    "   leading and trailing   ",
    "tabs\t\tand\u00a0no-break\u2003em\u3000ideographic spaces",
    "\n\n\nthree newlines, then CRLF\r\n\r\nand a lone CR\r",
    " " * 40 + "\t" * 9 + "\n" * 17,
    "naïve café, naïve café (NFC and NFD: the second has combining marks)",
    "日本語のテキストと中文文本와 한국어",
    "مرحبا بالعالم — שלום עולם",
    "emoji 👩🏽‍🔬 family 👨‍👩‍👧‍👦 flag 🇳🇿 keycap 1️⃣",
    "math ∑∫√∞ ≤ ≥ ≠ and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 outside the BMP",
    "control \x00\x01\x07\x1b[0m and replacement \ufffd and BOM \ufeff and ZWJ\u200d and ZWSP\u200b",
    "\u2581 the normaliser's space mark \u2581\u2581 itself",
    "<bos><eos><pad><unk><mask>",
    "text<eos>more text <bos> after a space<pad>",
    "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n",
    "[multimodal] <unused0> <unused99> <eo",
    "<<<A\nfenced\nA>>> Verdict: [[A]]",
]


def look_prepared(cache: Path, config: dict | None = None, extra: str | None = None) -> Path:
    """A folder where the default model's would be under ``cache``, with the prepared folder's file names (empty
    files; its tokenizer_config.json ``config``) and its complete marker."""
    folder = cache / "pairank" / "models" / DEFAULT_NAME
    folder.mkdir(parents=True)
    for name in PREPARED_FILES | ({extra} if extra else set()):
        (folder / name).write_text("{}")
    (folder / "tokenizer_config.json").write_text(json.dumps(PREPARED_CONFIG if config is None else config))
    (folder / ".pairank-done").write_text("done\n")
    return folder


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_rule_takes_the_prepared_folder_named_as_the_model_and_nothing_else(cache, tmp_path):
    folder = look_prepared(cache)
    assert fast_tokenizer_file({"model": str(folder)}) == folder / "tokenizer.json"
    assert fast_tokenizer_file({"model": str(folder), "tokenizer": str(folder)}) == folder / "tokenizer.json"
    # the same folder by another path (a symlink) is still the prepared one
    (tmp_path / "link").symlink_to(folder)
    assert fast_tokenizer_file({"model": str(tmp_path / "link")}) == tmp_path / "link" / "tokenizer.json"
    # vLLM asked for another tokenizer or mode
    assert fast_tokenizer_file({"model": str(folder), "tokenizer": str(tmp_path)}) is None
    assert fast_tokenizer_file({"model": str(folder), "tokenizer_mode": "hf"}) is None
    # another folder with the same files
    other = tmp_path / "copy"
    shutil.copytree(folder, other)
    assert fast_tokenizer_file({"model": str(other)}) is None
    assert fast_tokenizer_file({"model": "google/gemma-3-270m"}) is None


@pytest.mark.parametrize(
    "change",
    [
        "unfinished",
        "extra file",
        "chat template file",
        "other class",
        "other backend",
        "extra config key",
        "no class",
        "config not json",
    ],
)
def test_the_rule_leaves_a_prepared_folder_to_vllm_when_anything_differs(cache, change):
    config = dict(PREPARED_CONFIG)
    extra = {"extra file": "special_tokens_map.json", "chat template file": "chat_template.jinja"}.get(change)
    if change == "other class":
        config["tokenizer_class"] = "LlamaTokenizer"
    elif change == "other backend":
        config["backend"] = "sentencepiece"
    elif change == "extra config key":
        config["add_bos_token"] = True
    elif change == "no class":
        del config["tokenizer_class"]
    folder = look_prepared(cache, config, extra)
    if change == "unfinished":
        (folder / ".pairank-done").unlink()
    elif change == "config not json":
        (folder / "tokenizer_config.json").write_text("{not json")
    assert fast_tokenizer_file({"model": str(folder)}) is None


@pytest.mark.parametrize("change", [None, "pre_tokenizer", "decoder", "byte_fallback"])
def test_a_file_whose_pipeline_is_not_gemmas_is_left_to_vllms_loader(tmp_path, change):
    """:func:`load_fast` reads a tokenizer.json holding GemmaTokenizer's own pipeline (here with a 5-token vocabulary),
    with the special tokens of tokenizer_config.json, and refuses one whose pipeline differs where GemmaTokenizer
    builds its own (vLLM's loader would make another tokenizer of it)."""
    from tokenizers import decoders, pre_tokenizers
    from transformers import GemmaTokenizer

    backend = GemmaTokenizer().backend_tokenizer
    if change == "pre_tokenizer":
        backend.pre_tokenizer = pre_tokenizers.Metaspace()
    elif change == "decoder":
        backend.decoder = decoders.ByteFallback()
    elif change == "byte_fallback":
        backend.model.byte_fallback = False
    backend.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**PREPARED_CONFIG, "eos_token": "<mask>"}))
    loaded = load_fast(tmp_path / "tokenizer.json")
    if change is None:
        assert loaded is not None and differences(loaded.backend_tokenizer, backend) == []
        assert (loaded.eos_token_id, loaded.bos_token_id) == (4, 2)  # the config's, not GemmaTokenizer's default
    else:
        assert loaded is None
        assert differences(GemmaTokenizer().backend_tokenizer, backend) == [change]


def summeval_prompts(candidates) -> list[str]:
    """Every SummEval summary in a prompt the judge sends for SummEval: each article's summaries in pairs (1-2, 3-4,
    ...), the pairs taking the summarization templates in turn, every other pair in the swapped order."""
    templates = list(load_prompts(ROOT / "configs/prompts/summarization", ASPECTS).values())
    by_context: dict[str, tuple[str, list[str]]] = {}
    for row in candidates.select(["context_id", "context", "text"]).to_pylist():
        by_context.setdefault(row["context_id"], (row["context"], []))[1].append(row["text"])
    pairs = [(c, a, b) for c, texts in by_context.values() for a, b in zip(texts[0::2], texts[1::2], strict=True)]
    return [
        templates[i % len(templates)].render(c, *((a, b) if i % 2 else (b, a))) for i, (c, a, b) in enumerate(pairs)
    ]


@pytest.fixture(scope="module")
def both(default_model):
    """(the judge's tokenizer for the default model, the tokenizer vLLM's own loader makes of the same folder)."""
    from vllm.tokenizers import get_tokenizer

    from pairank.judges.engines.vllm_tokenizer import engine_tokenizer

    return engine_tokenizer({"model": str(default_model)}), get_tokenizer(str(default_model))


def test_the_default_model_takes_the_fast_path_and_another_folder_vllms_loader(both, default_model, tmp_path):
    from transformers import GemmaTokenizer

    from pairank.judges.engines.vllm_tokenizer import engine_tokenizer

    fast, vllms = both
    assert fast_tokenizer_file({"model": str(default_model)}) == default_model / "tokenizer.json"
    assert type(fast) is GemmaTokenizer  # read from the file; vLLM's loader wraps its own in a cached subclass
    assert type(vllms) is not GemmaTokenizer and isinstance(vllms, GemmaTokenizer)
    # the same tokenizer files in another folder: vLLM's loader
    other = tmp_path / "copy"
    other.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (other / name).symlink_to(default_model / name)
    assert fast_tokenizer_file({"model": str(other)}) is None
    loaded = engine_tokenizer({"model": str(other)})
    assert type(loaded) is not GemmaTokenizer and type(loaded).__name__ == type(vllms).__name__
    assert loaded.backend_tokenizer.to_str() == fast.backend_tokenizer.to_str()


def test_the_fast_tokenizer_is_vllms_for_every_call_the_judge_makes(both, summeval_tables):
    fast, vllms = both
    # the whole pipeline (vocabulary, merges, added tokens, normaliser, pre-tokenizer, post-processor, decoder)
    assert fast.backend_tokenizer.to_str() == vllms.backend_tokenizer.to_str()
    assert differences(fast.backend_tokenizer, vllms.backend_tokenizer) == []
    for name in ("eos_token_id", "bos_token_id", "pad_token_id", "unk_token_id", "all_special_ids", "add_bos_token"):
        assert getattr(fast, name) == getattr(vllms, name), name
    assert fast.eos_token_id == 1 and fast.bos_token_id == 2  # from tokenizer_config.json, not left None
    prompts = summeval_prompts(summeval_tables[0])
    assert len(prompts) == 800
    added = list(vllms.get_added_vocab())
    assert len(added) > 6000  # every added token's text, alone and inside a word
    texts = prompts + ODD + added + [f"x{token}y z" for token in added]
    for text in texts:
        ids = vllms.encode(text)  # as the judge sends a prompt (and as vLLM tokenizes a text prompt)
        assert fast.encode(text) == ids, text
        plain = vllms.encode(text, add_special_tokens=False)  # as the judge reads label and option forms
        assert fast.encode(text, add_special_tokens=False) == plain, text
        assert fast.decode(ids, skip_special_tokens=True) == vllms.decode(ids, skip_special_tokens=True), text
    # what the engine may generate: any ids, with specials, byte-fallback pieces (half a UTF-8 character among
    # them), the space mark and newlines
    pieces = [*vllms.all_special_ids, *vllms.convert_tokens_to_ids(["<0xE2>", "<0x9C>", "<0x00>", "\u2581", "\n"])]
    rng = random.Random(0)
    size = len(vllms)
    for _ in range(2000):
        ids = [rng.randrange(size) for _ in range(rng.randint(1, 12))] + rng.sample(pieces, 3)
        rng.shuffle(ids)
        for skip in (True, False):
            assert fast.decode(ids, skip_special_tokens=skip) == vllms.decode(ids, skip_special_tokens=skip), ids
