"""The vLLM judge's tokenizer: the one vLLM would load, loaded faster where that is provably the same tokenizer.

vLLM loads a tokenizer with transformers' ``AutoTokenizer``. For the embedded default model that is transformers'
``GemmaTokenizer``, and transformers 5 loads it by rebuilding it in Python: it parses the 33 MB ``tokenizer.json``
twice with ``json``, hands its 262,144 vocabulary entries and merges to a new BPE model as Python objects and adds its
6,384 added tokens one by one (about 4.3 CPU s of every engine start, BENCHMARKS.md §22). The rebuilt tokenizer takes
its vocabulary, merges, added tokens and post-processor from the file and only its normalizer, pre-tokenizer,
decoder and model options from the class. So where the file holds the same normalizer, pre-tokenizer, decoder and
options as the class builds, the file read as it is (by ``tokenizers``, in Rust, about 0.9 s) is the same tokenizer.

The fast path is taken only for the folder pairank prepared itself (:func:`fast_tokenizer_file`): the default
model's folder in this machine's cache, complete, holding exactly the files the preparation writes, its
``tokenizer_config.json`` naming ``GemmaTokenizer`` on the ``tokenizers`` backend and no setting the fast path
would not pass on, and vLLM asked for nothing but its default loader. Once loaded, the file's pipeline is compared
with the one ``GemmaTokenizer`` builds (:func:`differences`); any difference (a later transformers, say) falls back
to vLLM's loader. Every other model is loaded by vLLM's own ``get_tokenizer``. The prepared files are read, never
changed: the judge's identity hashes them (:func:`pairank.judges.models.folder_revision`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from pairank.judges.models import default_model_dir, is_prepared

log = logging.getLogger(__name__)

#: The files of a prepared default model folder (besides its dot files): nothing else a loader could read.
PREPARED_FILES = frozenset(
    {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}
)
#: The class and backend the fast path reproduces.
TOKENIZER_CLASS = "GemmaTokenizer"
BACKEND = "tokenizers"
#: The ``tokenizer_config.json`` keys the fast path passes on as ``AutoTokenizer`` does; any other key falls back.
CONFIG_KEYS = frozenset(
    {
        "backend",
        "tokenizer_class",
        "bos_token",
        "eos_token",
        "unk_token",
        "pad_token",
        "mask_token",
        "model_max_length",
        "is_local",
        "local_files_only",
    }
)
#: vLLM's keyword for a text-generating model's tokenizer (``resolve_tokenizer_args``).
TRUNCATION_SIDE = "left"


def engine_tokenizer(engine_kwargs: dict[str, Any]) -> Any:
    """The tokenizer vLLM would load for these ``vllm.LLM`` keywords, loaded once: the prepared default model's
    read from its ``tokenizer.json`` (:func:`fast_tokenizer_file`), any other by vLLM's own loader."""
    from vllm import envs
    from vllm.tokenizers import get_tokenizer

    # With VLLM_USE_FASTOKENS vLLM swaps the BPE backend of the tokenizers it loads: its loader, then.
    path = None if envs.VLLM_USE_FASTOKENS else fast_tokenizer_file(engine_kwargs)
    tokenizer = load_fast(path) if path is not None else None
    if tokenizer is not None:
        return tokenizer

    return get_tokenizer(
        engine_kwargs.get("tokenizer") or engine_kwargs["model"],
        tokenizer_mode=engine_kwargs.get("tokenizer_mode", "auto"),
        trust_remote_code=engine_kwargs.get("trust_remote_code", False),
        revision=engine_kwargs.get("tokenizer_revision") or engine_kwargs.get("revision"),
    )


def fast_tokenizer_file(engine_kwargs: dict[str, Any]) -> Path | None:
    """The ``tokenizer.json`` to read directly for these ``vllm.LLM`` keywords, or None for vLLM's loader.

    Only the default model folder pairank prepared on this machine qualifies (see the module's docstring), named
    as the model and nowhere else as a tokenizer, with vLLM's default tokenizer mode.
    """
    model = engine_kwargs["model"]
    if engine_kwargs.get("tokenizer") not in (None, model) or engine_kwargs.get("tokenizer_mode", "auto") != "auto":
        return None
    folder = Path(model)
    prepared = default_model_dir()
    if not (folder.is_dir() and prepared.is_dir() and folder.resolve() == prepared.resolve() and is_prepared(folder)):
        return None
    if {p.name for p in folder.iterdir() if not p.name.startswith(".")} != PREPARED_FILES:
        return None
    config = _tokenizer_config(folder)
    if config is None or config.get("tokenizer_class") != TOKENIZER_CLASS or config.get("backend") != BACKEND:
        return None
    return folder / "tokenizer.json" if set(config) <= CONFIG_KEYS else None


def _tokenizer_config(folder: Path) -> dict | None:
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def load_fast(path: Path) -> Any | None:
    """``GemmaTokenizer`` over ``path`` read as it is, with the settings of the folder's ``tokenizer_config.json``
    (the special tokens among them) and vLLM's; None (and a log line) when its pipeline is not the one
    ``GemmaTokenizer`` builds, where vLLM's loader would make a different tokenizer."""
    from transformers import GemmaTokenizer

    folder = path.parent
    config = _tokenizer_config(folder) or {}
    settings = {k: v for k, v in config.items() if k != "tokenizer_class"}
    tokenizer = GemmaTokenizer(
        tokenizer_file=str(path), name_or_path=str(folder), truncation_side=TRUNCATION_SIDE, **settings
    )
    found = differences(tokenizer.backend_tokenizer, GemmaTokenizer().backend_tokenizer)
    if found:
        log.warning("%s: loaded by vLLM's loader: its %s differ from GemmaTokenizer's", path, ", ".join(found))
        return None
    return tokenizer


#: The parts of a ``tokenizers.Tokenizer`` that ``GemmaTokenizer`` builds itself instead of reading them.
BUILT_PARTS = ("normalizer", "pre_tokenizer", "decoder")
#: The BPE options ``GemmaTokenizer`` sets itself.
MODEL_OPTIONS = (
    "dropout",
    "unk_token",
    "continuing_subword_prefix",
    "end_of_word_suffix",
    "fuse_unk",
    "byte_fallback",
    "ignore_merges",
)


def differences(loaded: Any, built: Any) -> list[str]:
    """The parts and model options in which two ``tokenizers.Tokenizer`` differ, of those ``GemmaTokenizer``
    builds itself (vocabularies, merges, added tokens and post-processors are not compared)."""
    found = [part for part in BUILT_PARTS if _state(getattr(loaded, part)) != _state(getattr(built, part))]
    if type(loaded.model) is not type(built.model):
        return [*found, "model type"]
    return found + [o for o in MODEL_OPTIONS if getattr(loaded.model, o) != getattr(built.model, o)]


def _state(part: Any) -> Any:
    """A pipeline part's serialisation (None for none)."""
    return None if part is None else json.loads(part.__getstate__())
