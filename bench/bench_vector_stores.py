"""Vector stores for memoryd's embeddings, side by side: memoryd's (a memory-mapped .npy base
and an append-only log), the whole-array rewrite it replaced, stdlib sqlite3 with BLOBs,
sqlite-vec, usearch.

At 10,000 and 100,000 unit vectors of dimension 384 (seeded random: the hardest case for an
approximate index), each store keeps one vector per memory key with its content hash, as
memoryd/automem/embeddings/vectors.py does, and every change is made durable before the
next. Measured per store, each in its own process, with ratios to the whole-array rewrite
("npy rewrite (before)", memoryd's store until session 4, kept here to measure against):

- build: writing N vectors into a new store;
- cold open: (the library imported) opening the files with their pages dropped from the page cache
  (posix_fadvise DONTNEED) and answering a first top-30 query; for memoryd's store also with
  its log 20% of the base (just under the point where it is folded into a new base);
- query: top-30 for a query, p50/p95 over 50 queries (brute force for the .npy, sqlite3 and
  sqlite-vec; usearch's HNSW graph, with its recall@30 against the exact top 30);
- add / replace / delete one vector, durable (median of 5): one durable change;
- compaction (memoryd's store): folding the log into a new base;
- file size, and RSS growth after opening and querying;
- robustness: after 100 durable replacements, the main file (and memoryd's log) truncated to
  half, and 4 KiB of random bytes written into its middle: what opening and querying it does
  (refused, rebuilt, silently wrong, crash; for memoryd's store: how many vectors it kept and
  whether any kept one is wrong).

sqlite-vec needs a Python whose sqlite3 can load extensions; when the standard library's
cannot (Python built without `--enable-loadable-sqlite-extensions`, as pyenv's default and
macOS's are), the bench uses `pysqlite3` when installed. A store whose package is not
installed is skipped with a one-line reason.

    .venv/bin/python bench/bench_vector_stores.py [--sizes 10000,100000]
"""

from __future__ import annotations

import argparse
import hashlib
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
class NpyLogStore:
    """memoryd's VectorStore: a memory-mapped float32 .npy base with a CRC-32 per block, and
    an append-only log of changes (a CRC-32 per record) folded into a new base past 25%."""

    name = "npy+log (memoryd)"
    modules = ("memoryd.automem.embeddings.vectors",)
    main_file = "vectors.*.npy"
    log_file = "vectors.log"
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

    def damage_found(self) -> str | None:
        return self.store.rebuilt_reason

    def held(self) -> int:
        return len(self.store)

    def vector(self, k: str) -> np.ndarray | None:
        return self.store.vector(k)

    def add(self, k: str, h: str, v: np.ndarray) -> None:
        self.store.put([(k, h)], v[None, :])
        self.store.save()

    replace = add

    def delete(self, k: str) -> None:
        self.store.remove([k])
        self.store.save()

    def fill_log(self, vectors: np.ndarray) -> None:
        """Replace rows in one durable change, the log staying just under its compaction point."""
        self.store.put([(key(i), digest(i, 2)) for i in range(len(vectors))], vectors)
        self.store.save()

    def compact(self) -> None:
        self.store._compact_next = True
        self.store.save()

    def query(self, q: np.ndarray) -> list[str]:
        keys, cosines = self.store.similarities(q)
        top = np.argpartition(-cosines, TOP)[:TOP]
        return [keys[i] for i in top[np.argsort(-cosines[top])]]


class NpyRewriteStore:
    """The store before the log (memoryd until session 4), kept here to measure against: one
    memory-mapped .npy rewritten whole on every save, with a JSON holding its SHA-256."""

    name = "npy rewrite (before)"
    modules = ("numpy",)
    main_file = "vectors.npy"
    exact = True

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.matrix = np.zeros((0, DIM), dtype=np.float32)
        self.rows: dict[str, tuple[int, str]] = {}
        self.view: tuple[list[str], np.ndarray] | None = None  # cached until a change

    @staticmethod
    def available() -> str | None:
        return None

    @staticmethod
    def _digest(path: Path) -> str:
        h = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()

    def _save(self) -> None:
        self.view = None
        live = sorted(self.rows.values())
        matrix = np.ascontiguousarray(self.matrix[[r for r, _ in live]], dtype=np.float32)
        keys = {r: k for k, (r, _) in self.rows.items()}
        listed = [[keys[r], h] for r, h in live]
        self.folder.mkdir(parents=True, exist_ok=True)
        array_tmp = self.folder / ".vectors.npy.tmp"
        with array_tmp.open("wb") as handle:
            np.save(handle, matrix, allow_pickle=False)
            handle.flush()
            os.fsync(handle.fileno())
        meta = {"size": array_tmp.stat().st_size, "sha256": self._digest(array_tmp)}
        meta_tmp = self.folder / ".vectors.json.tmp"
        meta_tmp.write_text(json.dumps(meta | {"rows": listed}), encoding="utf-8")
        array_tmp.replace(self.folder / "vectors.npy")
        meta_tmp.replace(self.folder / "vectors.json")

    def build(self, vectors: np.ndarray) -> None:
        self.matrix = vectors.astype(np.float32)
        self.rows = {key(i): (i, digest(i)) for i in range(len(vectors))}
        self._save()

    def open(self) -> None:
        array = self.folder / "vectors.npy"
        meta = json.loads((self.folder / "vectors.json").read_text(encoding="utf-8"))
        if meta["size"] != array.stat().st_size or meta["sha256"] != self._digest(array):
            raise ValueError("array does not match its description; rebuilding")
        self.matrix = np.load(array, mmap_mode="r", allow_pickle=False)
        self.rows = {str(k): (i, str(h)) for i, (k, h) in enumerate(meta["rows"])}

    def add(self, k: str, h: str, v: np.ndarray) -> None:
        matrix = np.array(self.matrix, dtype=np.float32)  # off the read-only map, as it did
        old = self.rows.get(k)
        if old is not None:
            matrix[old[0]] = v
            self.rows[k] = (old[0], h)
        else:
            self.rows[k] = (len(matrix), h)
            matrix = np.vstack([matrix, v[None, :]])
        self.matrix = matrix
        self._save()

    replace = add

    def delete(self, k: str) -> None:
        self.rows.pop(k)
        self._save()

    def query(self, q: np.ndarray) -> list[str]:
        if self.view is None:
            order = list(self.rows)
            rows = np.fromiter((self.rows[k][0] for k in order), dtype=np.int64, count=len(order))
            self.view = (order, rows)
        order, rows = self.view
        cosines = (self.matrix @ q)[rows]
        top = np.argpartition(-cosines, TOP)[:TOP]
        return [order[i] for i in top[np.argsort(-cosines[top])]]


class SqliteBlobStore:
    """The standard library's sqlite3 (no extension): a table of key, hash and vector BLOB in
    WAL mode with synchronous=FULL, read whole into an in-memory matrix on open."""

    name = "sqlite3 BLOBs"
    modules = ("sqlite3",)
    main_file = "vectors.sqlite"
    exact = True

    def __init__(self, folder: Path) -> None:
        self.path = folder / self.main_file
        self.db: Any = None
        self.matrix = np.zeros((0, DIM), dtype=np.float32)
        self.keys: list[str] = []
        self.rows: dict[str, int] = {}

    @staticmethod
    def available() -> str | None:
        return None

    def _connect(self) -> None:
        import sqlite3

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(self.path), isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")

    def build(self, vectors: np.ndarray) -> None:
        self._connect()
        self.db.execute("CREATE TABLE vectors (key TEXT PRIMARY KEY, hash TEXT, vector BLOB)")
        self.db.execute("BEGIN")
        self.db.executemany(
            "INSERT INTO vectors VALUES (?, ?, ?)",
            ((key(i), digest(i), vectors[i].tobytes()) for i in range(len(vectors))),
        )
        self.db.execute("COMMIT")
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def open(self) -> None:
        self._connect()
        found = self.db.execute("SELECT key, vector FROM vectors").fetchall()
        self.keys = [k for k, _ in found]
        self.rows = {k: i for i, k in enumerate(self.keys)}
        blob = b"".join(v for _, v in found)
        self.matrix = np.frombuffer(blob, dtype=np.float32).reshape(len(found), DIM).copy()

    def add(self, k: str, h: str, v: np.ndarray) -> None:
        self.db.execute(
            "INSERT INTO vectors VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE "
            "SET hash = excluded.hash, vector = excluded.vector",
            (k, h, v.tobytes()),
        )
        row = self.rows.get(k)
        if row is None:  # (amortised growth left out: the bench adds only a few)
            self.rows[k] = len(self.keys)
            self.keys.append(k)
            self.matrix = np.vstack([self.matrix, v[None, :]])
        else:
            self.matrix[row] = v

    replace = add

    def delete(self, k: str) -> None:
        self.db.execute("DELETE FROM vectors WHERE key = ?", (k,))
        row = self.rows.pop(k)
        self.matrix[row] = 0.0
        self.keys[row] = ""

    def query(self, q: np.ndarray) -> list[str]:
        cosines = self.matrix @ q
        top = np.argpartition(-cosines, TOP)[:TOP]
        return [self.keys[i] for i in top[np.argsort(-cosines[top])]]


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


STORES: list[Any] = [NpyRewriteStore, NpyLogStore, SqliteBlobStore, SqliteVecStore, UsearchStore]


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
    logged: dict[str, float] = {}
    if hasattr(store, "fill_log"):
        # Near the worst case for opening: the log close to its compaction point (a quarter
        # of the base), then the compaction itself.
        store.fill_log(unit_vectors(int(0.2 * n), 17))
        drop_from_page_cache(folder)
        reopened = cls(folder)
        logged["cold_full_ms"] = 1000 * timed(lambda: (reopened.open(), reopened.query(queries[0])))
        logged["compact_ms"] = 1000 * timed(reopened.compact)
    return logged | {
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


LOGGED = 100  # changes a log holds in the robustness runs (keys 0–99, version 1)


def child_changes(store_name: str, folder: Path, n: int) -> dict[str, Any]:
    """`LOGGED` replacements, each durable (for a store with a log: one record each)."""
    cls = next(s for s in STORES if s.name == store_name)
    store = cls(folder)
    store.open()
    fresh = unit_vectors(LOGGED, 19)
    for i in range(LOGGED):
        store.replace(key(i), digest(i, 1), fresh[i])
    return {}


def child_corrupt(store_name: str, folder: Path, n: int) -> dict[str, Any]:
    cls = next(s for s in STORES if s.name == store_name)
    store = cls(folder)
    try:
        store.open()
        got = store.query(unit_vectors(1, 7)[0])
    except Exception as exc:
        return {"outcome": f"refused: {type(exc).__name__}: {str(exc)[:90]}"}
    if hasattr(store, "damage_found"):  # keeps what is intact: is every vector kept right?
        versions = {digest(i): v for i, v in enumerate(unit_vectors(n, 13))}
        versions |= {digest(i, 1): v for i, v in enumerate(unit_vectors(LOGGED, 19))}
        hashes = store.store.hashes()
        wrong = sum(not np.array_equal(store.vector(k), versions[h]) for k, h in hashes.items())
        why = store.damage_found() or "damage not noticed"
        return {"outcome": f"kept {len(hashes):,} of {n:,}, {wrong} wrong: {why[:70]}"}
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


def damage(folder: Path, pattern: str, how: str) -> None:
    (path,) = folder.glob(pattern)
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
        fn = {
            "build": child_build,
            "measure": child_measure,
            "changes": child_changes,
            "corrupt": child_corrupt,
        }[action]
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
        ("cold_full_ms", "  log 20% full", "{:.1f}"),
        ("p50_ms", "q p50 ms", "{:.2f}"),
        ("p95_ms", "q p95 ms", "{:.2f}"),
        ("add_ms", "add ms", "{:.1f}"),
        ("replace_ms", "replace ms", "{:.1f}"),
        ("delete_ms", "delete ms", "{:.1f}"),
        ("compact_ms", "compaction ms", "{:.1f}"),
        ("size_mb", "file MB", "{:.1f}"),
        ("rss_mb", "RSS MB", "{:.1f}"),
    ]
    try:
        for n in sizes:
            results: dict[str, dict[str, Any]] = {}
            for cls in stores:
                folder = work / f"{n}-{stores.index(cls)}"
                built = run_child("build", cls.name, folder, n)
                measured = (
                    run_child("measure", cls.name, folder, n) if "failed" not in built else {}
                )
                results[cls.name] = built | measured
                shutil.rmtree(folder, ignore_errors=True)
            print(
                f"\n{n:,} vectors of dimension {DIM}, top-{TOP} queries (each store in its own process)"
            )
            print(f"{'':<16}" + "".join(f"{label:>21}" for label in results))
            ref = results.get(NpyRewriteStore.name, {})
            for field, label, fmt in fields:
                cells = []
                for r in results.values():
                    if field not in r:
                        cells.append(f"{r.get('failed', '-')[:20]:>21}")
                        continue
                    ratio = f" ({r[field] / ref[field]:.2f}x)" if ref.get(field) else ""
                    cells.append(f"{fmt.format(r[field]) + ratio:>21}")
                print(f"{label:<16}" + "".join(cells))
            recall = [
                f"{r['recall']:.3f}" if r.get("recall") is not None else "exact"
                for r in results.values()
            ]
            print(f"{'recall@30':<16}" + "".join(f"{c:>21}" for c in recall))
        n = sizes[0]
        print(f"\nrobustness ({n:,} vectors, {LOGGED} replaced; a file damaged, then opened)")
        for number, cls in enumerate(stores):
            intact = work / "robust" / str(number) / "intact"
            run_child("build", cls.name, intact, n)
            run_child("changes", cls.name, intact, n)
            cases = [(cls.main_file, "truncated"), (cls.main_file, "random bytes")]
            if hasattr(cls, "log_file"):
                cases += [(cls.log_file, "truncated"), (cls.log_file, "random bytes")]
            for pattern, how in cases:
                what = f"{'log' if pattern == getattr(cls, 'log_file', '') else 'main'} {how}"
                folder = intact.parent / what.replace(" ", "-")
                shutil.copytree(intact, folder)
                damage(folder, pattern, how)
                got = run_child("corrupt", cls.name, folder, n)
                print(f"  {cls.name:<20} {what:<17} {got.get('outcome') or got.get('failed')}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
