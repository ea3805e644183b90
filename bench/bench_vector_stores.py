"""Vector stores for memoryd's embeddings, side by side: memory-mapped .npy (memoryd's), sqlite-vec, usearch.

At 10,000 and 100,000 unit vectors of dimension 384 (seeded random: the hardest case for an
approximate index), each store keeps one vector per memory key with its content hash, as
memoryd/automem/embeddings/vectors.py does, and every change is made durable before the
next (the daemon saves after each batch). Measured per store, each in its own process:

- build: writing N vectors into a new store;
- cold open: (the library imported) opening the files with their pages dropped from the page cache
  (posix_fadvise DONTNEED) and answering a first top-30 query;
- query: top-30 for a query, p50/p95 over 50 queries (brute force for the .npy and
  sqlite-vec; usearch's HNSW graph, with its recall@30 against the exact top 30);
- add / replace / delete one vector, durable (median of 5);
- file size, and RSS growth after opening and querying;
- robustness: the main file truncated to half, and 4 KiB of random bytes written into
  its middle: what opening and querying it does (refused, rebuilt, silently wrong, crash).

sqlite-vec needs a Python whose sqlite3 can load extensions; when the standard library's
cannot (Python built without `--enable-loadable-sqlite-extensions`, as pyenv's default and
macOS's are), the bench uses `pysqlite3` when installed. A store whose package is not
installed is skipped with a one-line reason.

    .venv/bin/python bench/bench_vector_stores.py [--sizes 10000,100000]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _harness import rss_mb

DIM = 384
TOP = 30
QUERIES = 50
OPS = 5
MODEL = "bench"


def unit_vectors(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, DIM), dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def key(i: int) -> str:
    return f"memory_{i:06d}.md"


def digest(i: int, version: int = 0) -> str:
    return f"{i:024x}{version:08x}"


def drop_from_page_cache(folder: Path) -> None:
    for path in folder.iterdir():
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


# -- the stores ---------------------------------------------------------------------------------
class NpyStore:
    """memoryd's own VectorStore (memory-mapped float32 .npy + JSON with its SHA-256)."""

    name = "npy (memoryd)"
    modules = ("memoryd.automem.embeddings.vectors",)
    main_file = "vectors.npy"
    exact = True

    def __init__(self, folder: Path) -> None:
        from memoryd.automem.embeddings.vectors import VectorStore

        self.store = VectorStore(folder, MODEL, DIM)

    @staticmethod
    def available() -> str | None:
        return None

    def build(self, vectors: np.ndarray) -> None:
        self.store.put([(key(i), digest(i)) for i in range(len(vectors))], vectors)
        self.store.save()

    def open(self) -> None:
        self.store.load()
        if self.store.rebuilt_reason:
            raise ValueError(self.store.rebuilt_reason)

    def add(self, k: str, h: str, v: np.ndarray) -> None:
        self.store.put([(k, h)], v[None, :])
        self.store.save()

    replace = add

    def delete(self, k: str) -> None:
        self.store.remove([k])
        self.store.save()

    def query(self, q: np.ndarray) -> list[str]:
        keys, cosines = self.store.similarities(q)
        top = np.argpartition(-cosines, TOP)[:TOP]
        return [keys[i] for i in top[np.argsort(-cosines[top])]]


def sqlite_module() -> Any:
    """A DB-API sqlite3 module that can load extensions, or None."""
    import sqlite3

    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3
    if find_spec("pysqlite3") is not None:
        import pysqlite3.dbapi2  # type: ignore[import-not-found]

        return pysqlite3.dbapi2
    return None


class SqliteVecStore:
    """A vec0 virtual table (brute-force KNN) with the key as primary key and the hash beside."""

    name = "sqlite-vec"
    modules = ("sqlite_vec",)
    main_file = "vectors.db"
    exact = True

    def __init__(self, folder: Path) -> None:
        self.path = folder / self.main_file
        self.db: Any = None

    @staticmethod
    def available() -> str | None:
        if find_spec("sqlite_vec") is None:
            return "not installed (pip install sqlite-vec)"
        if sqlite_module() is None:
            return (
                "this Python's sqlite3 cannot load extensions (built without "
                "--enable-loadable-sqlite-extensions) and pysqlite3 is not installed"
            )
        return None

    def _connect(self) -> None:
        import sqlite_vec

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite_module().connect(str(self.path), isolation_level=None)
        self.db.enable_load_extension(True)
        sqlite_vec.load(self.db)
        self.db.enable_load_extension(False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")

    def build(self, vectors: np.ndarray) -> None:
        self._connect()
        self.db.execute(
            f"CREATE VIRTUAL TABLE vectors USING vec0(key TEXT PRIMARY KEY, "
            f"embedding float[{DIM}] distance_metric=cosine, +hash TEXT)"
        )
        self.db.execute("BEGIN")
        self.db.executemany(
            "INSERT INTO vectors(key, embedding, hash) VALUES (?, ?, ?)",
            ((key(i), vectors[i].tobytes(), digest(i)) for i in range(len(vectors))),
        )
        self.db.execute("COMMIT")
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def open(self) -> None:
        self._connect()

    def add(self, k: str, h: str, v: np.ndarray) -> None:
        self.db.execute(
            "INSERT INTO vectors(key, embedding, hash) VALUES (?, ?, ?)", (k, v.tobytes(), h)
        )

    def replace(self, k: str, h: str, v: np.ndarray) -> None:
        self.db.execute(
            "UPDATE vectors SET embedding = ?, hash = ? WHERE key = ?", (v.tobytes(), h, k)
        )

    def delete(self, k: str) -> None:
        self.db.execute("DELETE FROM vectors WHERE key = ?", (k,))

    def query(self, q: np.ndarray) -> list[str]:
        rows = self.db.execute(
            "SELECT key FROM vectors WHERE embedding MATCH ? AND k = ? ORDER BY distance",
            (q.tobytes(), TOP),
        ).fetchall()
        return [r[0] for r in rows]


class UsearchStore:
    """An HNSW index (cosine, f32) saved whole after each change, keys and hashes in a JSON."""

    name = "usearch (HNSW)"
    modules = ("usearch.index",)
    main_file = "vectors.usearch"
    exact = False

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.index: Any = None
        self.ids: dict[str, tuple[int, str]] = {}
        self.keys: dict[int, str] = {}
        self.next_id = 0

    @staticmethod
    def available() -> str | None:
        return None if find_spec("usearch") else "not installed (pip install usearch)"

    def _save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".{self.main_file}.tmp"
        self.index.save(str(tmp))
        with tmp.open("rb+") as handle:
            os.fsync(handle.fileno())
        meta_tmp = self.folder / ".keys.json.tmp"
        meta_tmp.write_text(json.dumps({"next": self.next_id, "ids": self.ids}))
        tmp.replace(self.folder / self.main_file)
        meta_tmp.replace(self.folder / "keys.json")

    def build(self, vectors: np.ndarray) -> None:
        from usearch.index import Index

        self.index = Index(ndim=DIM, metric="cos", dtype="f32")
        self.index.add(np.arange(len(vectors), dtype=np.uint64), vectors, threads=1)
        self.ids = {key(i): (i, digest(i)) for i in range(len(vectors))}
        self.next_id = len(vectors)
        self._save()

    def open(self) -> None:
        from usearch.index import Index

        meta = json.loads((self.folder / "keys.json").read_text())
        self.ids = {k: (int(i), h) for k, (i, h) in meta["ids"].items()}
        self.keys = {i: k for k, (i, _) in self.ids.items()}
        self.next_id = int(meta["next"])
        self.index = Index.restore(str(self.folder / self.main_file))
        if self.index is None:
            raise ValueError("usearch: not an index file")

    def add(self, k: str, h: str, v: np.ndarray) -> None:
        old = self.ids.get(k)
        if old is not None:
            self.index.remove(old[0])
            self.keys.pop(old[0], None)
        self.ids[k] = (self.next_id, h)
        self.keys[self.next_id] = k
        self.index.add(self.next_id, v, threads=1)
        self.next_id += 1
        self._save()

    replace = add

    def delete(self, k: str) -> None:
        old = self.ids.pop(k)
        self.keys.pop(old[0], None)
        self.index.remove(old[0])
        self._save()

    def query(self, q: np.ndarray) -> list[str]:
        found = self.index.search(q, TOP, threads=1)
        return [self.keys[int(i)] for i in found.keys]


STORES: list[Any] = [NpyStore, SqliteVecStore, UsearchStore]


# -- in a child process -------------------------------------------------------------------------
def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def child_build(store_name: str, folder: Path, n: int) -> dict[str, Any]:
    cls = next(s for s in STORES if s.name == store_name)
    store = cls(folder)
    return {"build_s": timed(lambda: store.build(unit_vectors(n, 13)))}


def child_measure(store_name: str, folder: Path, n: int) -> dict[str, Any]:
    cls = next(s for s in STORES if s.name == store_name)
    queries = unit_vectors(QUERIES, 7)
    fresh = unit_vectors(OPS, 11)
    base = rss_mb()
    for module in cls.modules:  # imported before the clock starts, counted in RSS
        importlib.import_module(module)
    drop_from_page_cache(folder)
    store = cls(folder)
    cold = timed(lambda: (store.open(), store.query(queries[0])))
    rss = rss_mb() - base
    times = []
    results = []
    for q in queries:
        started = time.perf_counter()
        results.append(store.query(q))
        times.append(time.perf_counter() - started)
    recall = None
    if not cls.exact:  # against the exact top 30 of the same vectors
        matrix = unit_vectors(n, 13)
        exact = 0
        for q, got in zip(queries, results, strict=True):
            top = np.argpartition(-(matrix @ q), TOP)[:TOP]
            exact += len({key(int(i)) for i in top} & set(got))
        recall = exact / (TOP * QUERIES)
    adds = [timed(lambda i=i: store.add(key(n + i), digest(n + i), fresh[i])) for i in range(OPS)]
    replaces = [
        timed(lambda i=i: store.replace(key(i), digest(i, 1), fresh[i])) for i in range(OPS)
    ]
    deletes = [timed(lambda i=i: store.delete(key(OPS + i))) for i in range(OPS)]
    size = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    ordered = sorted(times)
    return {
        "cold_ms": 1000 * cold,
        "rss_mb": rss,
        "p50_ms": 1000 * ordered[len(ordered) // 2],
        "p95_ms": 1000 * ordered[int(0.95 * (len(ordered) - 1))],
        "recall": recall,
        "add_ms": 1000 * statistics.median(adds),
        "replace_ms": 1000 * statistics.median(replaces),
        "delete_ms": 1000 * statistics.median(deletes),
        "size_mb": size / 1e6,
    }


def child_corrupt(store_name: str, folder: Path, n: int) -> dict[str, Any]:
    cls = next(s for s in STORES if s.name == store_name)
    store = cls(folder)
    try:
        store.open()
        got = store.query(unit_vectors(1, 7)[0])
    except Exception as exc:
        return {"outcome": f"refused: {type(exc).__name__}: {str(exc)[:90]}"}
    reference = cls(folder.parent / "intact")
    reference.open()
    expected = reference.query(unit_vectors(1, 7)[0])
    same = len(set(got) & set(expected))
    if same == TOP:
        return {"outcome": "opened; top 30 unchanged (damage not noticed)"}
    return {"outcome": f"opened; silently wrong: {same} of the top {TOP} as before"}


def run_child(action: str, store_name: str, folder: Path, n: int) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", action, store_name, str(folder), str(n)],
        capture_output=True,
        text=True,
        timeout=3_600,
        check=False,
    )
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or [""])[-1][:100]
        signal = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
        return {"failed": f"crashed ({signal}) {why}".strip()}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def damage(folder: Path, main_file: str, how: str) -> None:
    path = folder / main_file
    size = path.stat().st_size
    if how == "truncated":
        os.truncate(path, size // 2)
    else:
        with path.open("r+b") as handle:
            handle.seek(size // 2)
            handle.write(np.random.default_rng(5).bytes(4096))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        action, store_name, folder, n = args.child
        fn = {"build": child_build, "measure": child_measure, "corrupt": child_corrupt}[action]
        print(json.dumps(fn(store_name, Path(folder), int(n))))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    stores = []
    for cls in STORES:
        why = cls.available()
        if why:
            print(f"skipped {cls.name}: {why}")
        else:
            stores.append(cls)
    work = Path(tempfile.mkdtemp(prefix="mdb-vectors-", dir="/tmp"))
    fields = [
        ("build_s", "build s", "{:.2f}"),
        ("cold_ms", "cold open+q ms", "{:.1f}"),
        ("p50_ms", "q p50 ms", "{:.2f}"),
        ("p95_ms", "q p95 ms", "{:.2f}"),
        ("add_ms", "add ms", "{:.1f}"),
        ("replace_ms", "replace ms", "{:.1f}"),
        ("delete_ms", "delete ms", "{:.1f}"),
        ("size_mb", "file MB", "{:.1f}"),
        ("rss_mb", "RSS MB", "{:.1f}"),
    ]
    try:
        for n in sizes:
            results: dict[str, dict[str, Any]] = {}
            for cls in stores:
                folder = work / f"{n}-{cls.main_file}"
                built = run_child("build", cls.name, folder, n)
                measured = (
                    run_child("measure", cls.name, folder, n) if "failed" not in built else {}
                )
                results[cls.name] = built | measured
                shutil.rmtree(folder, ignore_errors=True)
            print(
                f"\n{n:,} vectors of dimension {DIM}, top-{TOP} queries (each store in its own process)"
            )
            print(f"{'':<16}" + "".join(f"{label:>16}" for label in results))
            ref = results.get(NpyStore.name, {})
            for field, label, fmt in fields:
                cells = []
                for r in results.values():
                    if field not in r:
                        cells.append(f"{r.get('failed', '-')[:15]:>16}")
                        continue
                    ratio = r[field] / ref[field] if ref.get(field) else float("nan")
                    cells.append(f"{fmt.format(r[field]) + f' ({ratio:.2f}x)':>16}")
                print(f"{label:<16}" + "".join(cells))
            recall = [
                f"{r['recall']:.3f}" if r.get("recall") is not None else "exact"
                for r in results.values()
            ]
            print(f"{'recall@30':<16}" + "".join(f"{c:>16}" for c in recall))
        n = sizes[0]
        print(f"\nrobustness ({n:,} vectors; the main file damaged, then opened and queried)")
        for cls in stores:
            intact = work / "robust" / cls.main_file / "intact"
            run_child("build", cls.name, intact, n)
            for how in ("truncated", "random bytes"):
                folder = intact.parent / how.replace(" ", "-")
                shutil.copytree(intact, folder)
                damage(folder, cls.main_file, how)
                got = run_child("corrupt", cls.name, folder, n)
                print(f"  {cls.name:<16} {how:<13} {got.get('outcome') or got.get('failed')}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
