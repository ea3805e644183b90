"""One vector per memory, keyed by content hash, in a memory-mapped array on disk.

Files (in `<state>/vectors/<memory dir key>/`): `vectors.npy` (float32, one row per memory)
and `vectors.json` (format, model, dimension, the npy file's size and SHA-256, and each row's
key and content hash). Both are replaced atomically, the array first; the JSON names the
array it describes, so a crash between the two renames, a corrupt file or one written for
another model is noticed on load and the store starts empty (vectors are recomputed, never
trusted). A row whose key or content hash no longer matches is recomputed; a deleted
memory's row is dropped.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

import numpy as np
import numpy.typing as npt

from memoryd.automem.embeddings.encoder import Vectors
from memoryd.fsutil import ensure_private_dir

FORMAT = 1
ARRAY = "vectors.npy"
META = "vectors.json"


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class VectorStore:
    def __init__(self, folder: Path, model: str, dim: int) -> None:
        self.folder = folder
        self.model = model
        self.dim = dim
        self._lock = threading.Lock()
        self._rows: dict[str, int] = {}  # key → row
        self._hashes: list[str] = []
        self._keys: list[str | None] = []
        self._matrix: Vectors = np.zeros((0, dim), dtype=np.float32)
        self.rebuilt_reason: str | None = None  # why a file on disk was not used
        self.dirty = False
        # (keys, their rows) for `similarities`, the same objects until the contents change.
        self._view: tuple[list[str], npt.NDArray[np.int64]] | None = None

    # -- disk ---------------------------------------------------------------------------------
    def load(self) -> None:
        meta_path, array_path = self.folder / META, self.folder / ARRAY
        if not meta_path.exists() and not array_path.exists():
            return
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            if meta.get("format") != FORMAT or meta.get("model") != self.model:
                raise ValueError("written for another format or model")
            if meta.get("dim") != self.dim or meta.get("size") != array_path.stat().st_size:
                raise ValueError("dimension or size differs")
            if meta.get("sha256") != _digest(array_path):
                raise ValueError("array does not match its description")
            matrix = np.load(array_path, mmap_mode="r", allow_pickle=False)
            rows = meta["rows"]
            if matrix.dtype != np.float32 or matrix.shape != (len(rows), self.dim):
                raise ValueError("array shape or type differs")
            keys = [str(k) for k, _ in rows]
            hashes = [str(h) for _, h in rows]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            self.rebuilt_reason = f"vector index not used ({exc}); rebuilding"
            return
        with self._lock:
            self._matrix = matrix
            self._keys = list(keys)
            self._hashes = hashes
            self._rows = {k: i for i, k in enumerate(keys)}
            self._view = None

    def save(self) -> None:
        with self._lock:
            live = [i for i, k in enumerate(self._keys) if k is not None]
            matrix = np.ascontiguousarray(self._matrix[live], dtype=np.float32)
            rows = [[self._keys[i], self._hashes[i]] for i in live]
            self.dirty = False
        ensure_private_dir(self.folder)
        array_tmp = self.folder / f".{ARRAY}.tmp"
        with array_tmp.open("wb") as handle:
            np.save(handle, matrix, allow_pickle=False)
            handle.flush()
            os.fsync(handle.fileno())
        meta = {
            "format": FORMAT,
            "model": self.model,
            "dim": self.dim,
            "size": array_tmp.stat().st_size,
            "sha256": _digest(array_tmp),
            "rows": rows,
        }
        meta_tmp = self.folder / f".{META}.tmp"
        meta_tmp.write_text(json.dumps(meta), encoding="utf-8")
        array_tmp.replace(self.folder / ARRAY)
        meta_tmp.replace(self.folder / META)

    # -- contents -----------------------------------------------------------------------------
    def stale(self, wanted: dict[str, str]) -> tuple[list[str], list[str]]:
        """(keys whose vector is missing or of other content, keys no longer wanted)."""
        with self._lock:
            missing = [
                k
                for k, h in wanted.items()
                if (r := self._rows.get(k)) is None or self._hashes[r] != h
            ]
            gone = [k for k in self._rows if k not in wanted]
        return missing, gone

    def put(self, items: list[tuple[str, str]], vectors: Vectors) -> None:
        with self._lock:
            matrix = np.array(self._matrix, dtype=np.float32)  # off the read-only map
            fresh: list[Vectors] = []
            for (key, digest), vector in zip(items, vectors, strict=True):
                row = self._rows.get(key)
                if row is not None:
                    matrix[row] = vector
                    self._hashes[row] = digest
                else:
                    self._rows[key] = len(self._keys)
                    self._keys.append(key)
                    self._hashes.append(digest)
                    fresh.append(vector[None, :])
            self._matrix = np.vstack([matrix, *fresh]) if fresh else matrix
            self.dirty = True
            self._view = None

    def remove(self, keys: list[str]) -> None:
        with self._lock:
            for key in keys:
                row = self._rows.pop(key, None)
                if row is not None:
                    self._keys[row] = None
                    self._hashes[row] = ""
            self.dirty = self.dirty or bool(keys)
            self._view = None

    def __len__(self) -> int:
        return len(self._rows)

    def similarities(self, query: Vectors) -> tuple[list[str], Vectors]:
        """(keys, cosine of each key's memory to the unit vector `query`)."""
        with self._lock:
            if self._view is None:
                keys = list(self._rows)
                rows = np.fromiter(self._rows.values(), dtype=np.int64, count=len(keys))
                self._view = (keys, rows)
            keys, rows = self._view
            matrix = self._matrix
        if not keys:
            return [], np.zeros(0, dtype=np.float32)
        return keys, (matrix @ query)[rows]
