"""One vector per memory, keyed by content hash: a memory-mapped base array and an append-only
log of what changed since, so a durable change costs one record, not a rewrite of every row.
A row is `dim` float32 values (a memory's embedding), or `dim` values of another dtype (its
packed token vectors, `late_interaction`).

Files (in `<state>/vectors/<memory dir key>/`):

- `vectors.<id>.npy`: the base, one row per memory, rows sorted by key;
- `vectors.json`: its description: the CRC-32 of the rest; a JSON line (format, model,
  dimension, the base's file name, the CRC-32 of its npy header and of each block of
  `BLOCK_ROWS` rows); a JSON line of each row's key and content hash. `<id>` is a checksum of
  that content, so replacing this one file is what commits a new base;
- `vectors.log`: a header naming the model, dimension and base id, then one record per change
  since the base was written (`put` key, hash and vector, or `remove` key), each framed by its
  length and CRC-32, appended and fsynced on `save`.

On load the base's blocks are checked and the log is replayed on top. Nothing damaged is
trusted, and only what is damaged is dropped (its vectors are recomputed): a block of the base
whose checksum differs, the log from its first bad record on (a torn last record after a kill),
or everything when the description or the base's header is corrupt, missing, or written for
another format, model or dimension. A row's vector always travels with its content hash, so a
dropped record at worst leaves an older (key, hash, vector) that the next sync finds stale.

When the log grows past `COMPACT_SHARE` of the base, `save` writes a new base of the live rows
(and a new empty log): the new npy under its own name, then `vectors.json` replaced atomically
(the commit), then the log. A kill between these steps leaves either the old base with its log
or the new base with a log naming the old one, which is ignored.

Daemons sharing a HOME (one socket-activated, one started by hand) index the same folder: a load
or save holds a lock (`.lock`, flock), and a save that finds the files not as its last load or
save left them (another daemon wrote) writes its whole contents as a new base instead of
appending to a log it does not know. Each daemon's rows stay its own; the last save is what the
next start reads, whole. (Before session 22 each compaction deleted the other's base and its
half-written temporary file, and each appended to a log the other had replaced: the next start
found the log damaged and embedded a third of a directory again.)
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import struct
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memoryd import jsonread
from memoryd.automem.embeddings.encoder import Vectors
from memoryd.fsutil import (
    NotRegularFile,
    atomic_write_bytes,
    ensure_private_dir,
    flock_within,
    fsync_dir,
    open_lock_file,
    open_regular_file,
    read_regular_file,
)

FORMAT = 2
META = "vectors.json"
LOG = "vectors.log"
LOCK = ".lock"  # not `vectors*`: a folder holding only the lock holds no store
BLOCK_ROWS = 1024  # rows per checksummed block of the base: what one flipped byte costs
COMPACT_SHARE = 0.25  # the log is folded into a new base past this share of the base's size
COMPACT_MIN_BYTES = 1 << 20  # ... or past this, for a small base
# The longest the other daemon's hold is waited for: its save of 10,000 memories' three
# stores, a whole new base each, took 0.6-3.9 s on a loaded machine.
LOCK_WAIT_S = 30.0
_LOG_MAGIC = b"memoryd-vectors-log\n"
# What is read of a description or a log at most: far past any real one (10,000 memories'
# description is ~1 MB), so a file that is not ours cannot fill the memory.
MAX_META_BYTES = 64 << 20
MAX_LOG_BYTES = 1 << 30
_FRAME = struct.Struct("<II")  # payload length, CRC-32 of the payload
_PUT, _REMOVE = b"P", b"R"

Rows = npt.NDArray[Any]  # float32 vectors, or packed token vectors


def _frame(payload: bytes) -> bytes:
    return _FRAME.pack(len(payload), zlib.crc32(payload)) + payload


def _record(key: str, digest: str, vector: Rows | None, dtype: np.dtype[Any]) -> bytes:
    name, hashed = key.encode("utf-8", "surrogatepass"), digest.encode("ascii")
    head = struct.pack("<H", len(name)) + name + struct.pack("<B", len(hashed)) + hashed
    if vector is None:
        return _frame(_REMOVE + head)
    return _frame(_PUT + head + np.ascontiguousarray(vector, dtype=dtype).tobytes())


def _block_checksums(matrix: Rows) -> list[int]:
    return [
        zlib.crc32(np.ascontiguousarray(matrix[start : start + BLOCK_ROWS]).data)
        for start in range(0, len(matrix), BLOCK_ROWS)
    ]


class VectorStore:
    def __init__(
        self, folder: Path, model: str, dim: int, dtype: npt.DTypeLike = np.float32
    ) -> None:
        self.folder = folder
        self.model = model
        self.dim = dim
        self.dtype: np.dtype[Any] = np.dtype(dtype).newbyteorder("<")
        self._row_bytes = self.dtype.itemsize * dim
        self._lock = threading.Lock()  # the contents below
        self._save_lock = threading.Lock()  # one save at a time
        # Row r is base row r (r < len(base)) or tail row r - len(base). Rows are never
        # overwritten: a changed vector gets a new row and its old one is dead (key None), so a
        # query reading the arrays outside the lock never sees a row change under it.
        self._base: Rows = np.zeros((0, dim), dtype=self.dtype)
        self._tail: Rows = np.zeros((0, dim), dtype=self.dtype)  # grows by doubling
        self._tail_rows = 0
        self._rows: dict[str, int] = {}  # key → row
        self._keys: list[str | None] = []
        self._hashes: list[str] = []
        self._pending: set[str] = set()  # keys changed since the last save
        self._changes = 0  # bumps on every change (a compaction checks none happened meanwhile)
        self._base_id: str | None = None  # the base on disk; None: none usable
        # The file the base is mapped from: (path, inode, bytes the map reaches). A file cut
        # shorter under a map kills the process (SIGBUS) when the rows past its end are read.
        self._mapped: tuple[Path, int, int] | None = None
        self._log_end = 0  # where the log's next record goes; 0: no usable log
        self._compact_next = False  # damage was found: write everything afresh
        # The description and the log as this store last read or wrote them (`_on_disk`);
        # other files there at a save: another daemon wrote them.
        self._written: tuple[int, int, int, int] | None = None
        self.rebuilt_reason: str | None = None  # what on disk was not used, and why
        # (keys, their rows, tail rows) for `similarities`, the same until the contents change.
        self._view: tuple[list[str], npt.NDArray[np.int64], int] | None = None

    @property
    def dirty(self) -> bool:
        return bool(self._pending) or self._compact_next

    # -- loading ------------------------------------------------------------------------------
    def load(self) -> None:
        if not any(self.folder.glob("vectors*")):
            return
        with self._writers(saving=False):
            self._load()

    def _load(self) -> None:
        problems: list[str] = []
        base_id: str | None = None
        try:
            base, keys, hashes, base_id, damage = self._load_base()
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            damage = f"vector index not used ({exc})"
            base, keys, hashes = self._base, [], []
        if damage:
            problems.append(damage)
        final: dict[str, tuple[str, int]] = {}
        logged = np.zeros((0, self.dim), dtype=self.dtype)
        log_end = 0
        if base_id is not None:
            try:
                final, logged, log_end, why = self._read_log(base_id)
            except (OSError, ValueError) as exc:
                why = f"vector log not used ({exc})"
            if why:
                problems.append(why)
        with self._lock:
            self._base, self._keys, self._hashes = base, keys, hashes
            self._rows = {k: i for i, k in enumerate(keys) if k is not None}
            # The log on top: each key as its last record left it, the vectors in one copy.
            for key in final:
                old = self._rows.pop(key, None)
                if old is not None:
                    self._keys[old] = None
            put = [(key, digest, row) for key, (digest, row) in final.items() if row >= 0]
            self._tail = np.array(logged[[row for _, _, row in put]], dtype=self.dtype)
            self._tail_rows = len(put)
            for key, digest, _ in put:
                self._rows[key] = len(self._keys)
                self._keys.append(key)
                self._hashes.append(digest)
            self._pending.clear()
            self._base_id, self._log_end = base_id, log_end
            self._compact_next = bool(problems)
            self._view = None
            self._written = self._on_disk(log_end) if log_end else None
        if problems:
            self.rebuilt_reason = "; ".join(problems) + "; recomputing what was dropped"

    def _load_base(self) -> tuple[Rows, list[str | None], list[str], str, str]:
        """(base, row keys (None: damaged), row hashes, base id, what was damaged or "")."""
        raw = read_regular_file(self.folder / META, MAX_META_BYTES)
        if len(raw) > MAX_META_BYTES:
            raise ValueError(f"description over {MAX_META_BYTES} bytes")
        checksum, _, body = raw.partition(b"\n")
        if checksum != b"%08x" % zlib.crc32(body):
            raise ValueError("description damaged or written by another version")
        head, _, listed = body.partition(b"\n")
        # Checksummed, but by a crc anyone can compute: nested past json's depth, its
        # RecursionError got past load() and the store could not be opened.
        meta, rows = (
            jsonread.loads(head, long_ints="refuse"),
            jsonread.loads(listed, long_ints="refuse"),
        )
        if meta["format"] != FORMAT or meta["model"] != self.model or meta["dim"] != self.dim:
            raise ValueError("written for another format, model or dimension")
        path = self.folder / str(meta["array"])
        if path.parent != self.folder:
            raise ValueError("the array is named outside the index's folder")
        with os.fdopen(open_regular_file(path), "rb") as handle:
            if np.lib.format.read_magic(handle) != (1, 0):
                raise ValueError("array header damaged")
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle)
            offset = handle.tell()
            handle.seek(0)
            if zlib.crc32(handle.read(offset)) != meta["header_crc"]:
                raise ValueError("array header damaged")
            info = os.fstat(handle.fileno())
            size = info.st_size
            if dtype != self.dtype or fortran or shape != (len(rows), self.dim):
                raise ValueError("array shape or type differs from its description")
            # A truncated array keeps the whole rows it still has; checksums judge them.
            whole = min(len(rows), (size - offset) // self._row_bytes)
            base = _map(handle, offset, whole, self.dim, self.dtype)  # the file checked
        self._mapped = (path, info.st_ino, offset + whole * self._row_bytes)
        keys: list[str | None] = [str(k) for k, _ in rows[:whole]]
        hashes = [str(h) for _, h in rows[:whole]]
        damaged = len(rows) - whole
        for block, got in enumerate(_block_checksums(base)):
            if got != meta["blocks"][block]:
                start, stop = block * BLOCK_ROWS, min((block + 1) * BLOCK_ROWS, whole)
                keys[start:stop] = [None] * (stop - start)
                damaged += stop - start
        why = f"{damaged} of {len(rows)} vectors damaged" if damaged else ""
        if not why and size != offset + self._row_bytes * len(rows):
            why = "array longer than its description"
        return base, keys, hashes, str(meta["id"]), why

    def _read_log(self, base_id: str) -> tuple[dict[str, tuple[str, int]], Rows, int, str]:
        """({key: (hash, its row in the vectors, -1: removed)} as the log leaves them, those
        vectors, where the next record goes (0: start a new log), what was wrong or "")."""
        nothing = np.zeros((0, self.dim), dtype=self.dtype)
        try:
            data = read_regular_file(self.folder / LOG, MAX_LOG_BYTES)
        except FileNotFoundError:
            return {}, nothing, 0, ""
        if len(data) > MAX_LOG_BYTES:
            return {}, nothing, 0, f"vector log not used (over {MAX_LOG_BYTES} bytes)"
        view = memoryview(data)
        header = self._frame_at(view, len(_LOG_MAGIC))
        if not data.startswith(_LOG_MAGIC) or header is None:
            return {}, nothing, 0, "vector log not used (not a log, or its header is damaged)"
        info = jsonread.loads(bytes(view[header[0] : header[1]]), long_ints="refuse")
        if not isinstance(info, dict):  # a well-framed header that describes nothing
            return {}, nothing, 0, "vector log not used (its header is not a description)"
        if info.get("model") != self.model or info.get("dim") != self.dim:
            return {}, nothing, 0, "vector log not used (written for another model or dimension)"
        if info.get("base") != base_id:  # a kill after the new base was committed: folded in
            return {}, nothing, 0, ""
        final: dict[str, tuple[str, int]] = {}
        vectors: list[memoryview] = []
        end, why = header[1], ""
        while end < len(data):
            frame = self._frame_at(view, end)
            record = self._parse(view, *frame) if frame is not None else None
            if frame is None or record is None:
                why = f"vector log: last {len(data) - end} bytes damaged or torn"
                break
            key, digest, vector = record
            if vector is not None:
                vectors.append(vector)
            final[key] = (digest, len(vectors) - 1 if vector is not None else -1)
            end = frame[1]
        rows = np.frombuffer(b"".join(vectors), dtype=self.dtype).reshape(len(vectors), self.dim)
        return final, rows, end, why

    @staticmethod
    def _frame_at(view: memoryview, at: int) -> tuple[int, int] | None:
        """(start, end) of the payload of the intact frame at `at`, or None."""
        if at + _FRAME.size > len(view):
            return None
        length, crc = _FRAME.unpack_from(view, at)
        start, stop = at + _FRAME.size, at + _FRAME.size + length
        if stop > len(view) or zlib.crc32(view[start:stop]) != crc:
            return None
        return start, stop

    def _parse(
        self, view: memoryview, start: int, stop: int
    ) -> tuple[str, str, memoryview | None] | None:
        """(key, hash, the vector's bytes or None for a removal) of the record at start:stop."""
        try:
            op = view[start : start + 1]
            (name_len,) = struct.unpack_from("<H", view, start + 1)
            at = start + 3 + name_len
            key = str(view[start + 3 : at], "utf-8", "surrogatepass")
            hash_end = at + 1 + view[at]
            digest = str(view[at + 1 : hash_end], "ascii")
        except (struct.error, IndexError, UnicodeDecodeError):
            return None
        if hash_end > stop:
            return None
        if op == _REMOVE and hash_end == stop:
            return key, digest, None
        if op == _PUT and stop - hash_end == self._row_bytes:
            return key, digest, view[hash_end:stop]
        return None

    # -- saving -------------------------------------------------------------------------------
    def save(self) -> None:
        """Make every change so far durable: appended to the log, or a new base when the log
        would grow past its share of the base (or nothing usable is on disk)."""
        with self._save_lock:
            with self._lock:
                pending, self._pending = self._pending, set()
                fresh = self._compact_next or self._log_end == 0
                records = (
                    b""
                    if fresh
                    else b"".join(
                        _record(k, self._hashes[r], self._row(r), self.dtype)
                        if (r := self._rows.get(k)) is not None
                        else _record(k, "", None, self.dtype)
                        for k in sorted(pending)
                    )
                )
                limit = max(COMPACT_SHARE * self._base.nbytes, COMPACT_MIN_BYTES)
                compact = fresh or self._log_end + len(records) > limit
            try:
                ensure_private_dir(self.folder)
                with self._writers(saving=True):
                    # Another daemon wrote since: its log is not ours to append to.
                    compact = compact or self._on_disk(self._log_end) != self._written
                    if not compact:
                        try:
                            self._append(records)
                            return
                        except OSError:  # e.g. the log was removed: write everything afresh
                            pass
                    self._compact()
            except BaseException:
                with self._lock:
                    self._pending |= pending
                raise

    @contextlib.contextmanager
    def _writers(self, *, saving: bool) -> Iterator[None]:
        """Held while this process reads or writes the store's files: daemons sharing the
        folder take turns. Without a lock to be had (a file system without locks, a `.lock`
        that is no file) it goes on unlocked, as before there was one. A holder that keeps it
        LOCK_WAIT_S is stopped (SIGSTOP, Ctrl-Z), maybe halfway through its own save: a load
        goes on unlocked (what it finds half-written is dropped and recomputed) and a save
        gives up (an OSError: the vectors stay in memory, `status` says why, the next save
        tries again). Waiting for as long kept this daemon's embedding thread stopped with it."""
        fd = None
        held = True
        try:
            fd = open_lock_file(self.folder / LOCK)
            held = flock_within(fd, LOCK_WAIT_S)
        except OSError:
            pass
        if not held:
            assert fd is not None
            os.close(fd)
            fd = None
            if saving:
                raise OSError(
                    errno.EWOULDBLOCK,
                    f"another memoryd has held the lock over {LOCK_WAIT_S:.0f} s",
                    str(self.folder / LOCK),
                )
        try:
            yield
        finally:
            if fd is not None:
                os.close(fd)  # and the lock with it

    def _on_disk(self, log_end: int) -> tuple[int, int, int, int] | None:
        """(the description's inode and modification time, the log's inode, `log_end` if the log
        ends there, else -1); None when either is missing."""
        try:
            meta = os.stat(self.folder / META, follow_symlinks=False)
            log = os.stat(self.folder / LOG, follow_symlinks=False)
        except OSError:
            return None
        return meta.st_ino, meta.st_mtime_ns, log.st_ino, log_end if log.st_size == log_end else -1

    def _append(self, records: bytes) -> None:
        # Not through a link, and never waiting on a FIFO put in its place.
        fd = os.open(self.folder / LOG, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise NotRegularFile(errno.EINVAL, "not a regular file", str(self.folder / LOG))
            os.ftruncate(fd, self._log_end)  # a torn record from before goes first
            os.pwrite(fd, records, self._log_end)
            os.fsync(fd)
        finally:
            os.close(fd)
        self._log_end += len(records)
        self._written = self._on_disk(self._log_end)

    def _compact(self) -> None:
        self.intact()
        with self._lock:
            changes = self._changes
            order = sorted(self._rows)
            rows = np.fromiter((self._rows[k] for k in order), dtype=np.int64, count=len(order))
            hashes = [self._hashes[r] for r in rows]
            base, tail = self._base, self._tail[: self._tail_rows]
        matrix = _gather(base, tail, rows)  # rows never change in place: outside the lock
        blocks = _block_checksums(matrix)
        listed = json.dumps([[k, h] for k, h in zip(order, hashes, strict=True)]).encode()
        described = json.dumps([self.model, self.dim, blocks]).encode()
        base_id = f"{zlib.crc32(listed, zlib.crc32(described)):08x}"
        array = f"vectors.{base_id}.npy"
        array_tmp = self.folder / f".{array}.tmp"
        # 0600: the vectors are of private memories (open() would give 0644 under umask 022).
        array_tmp.unlink(missing_ok=True)  # a stale one keeps its mode through O_TRUNC
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with os.fdopen(os.open(array_tmp, flags, 0o600), "w+b") as handle:
            np.save(handle, matrix, allow_pickle=False)
            offset = handle.tell() - matrix.nbytes
            handle.flush()
            os.fsync(handle.fileno())
            handle.seek(0)
            header_crc = zlib.crc32(handle.read(offset))
        head = {
            "format": FORMAT,
            "model": self.model,
            "dim": self.dim,
            "id": base_id,
            "array": array,
            "header_crc": header_crc,
            "blocks": blocks,
        }
        body = json.dumps(head).encode() + b"\n" + listed
        log_header = _LOG_MAGIC + _frame(
            json.dumps({"model": self.model, "dim": self.dim, "base": base_id}).encode()
        )
        array_tmp.replace(self.folder / array)
        fsync_dir(self.folder)
        atomic_write_bytes(self.folder / META, b"%08x\n" % zlib.crc32(body) + body)  # the commit
        atomic_write_bytes(self.folder / LOG, log_header)
        # Older bases, and what a compaction killed before its commit left.
        for old in [*self.folder.glob("vectors*.npy"), *self.folder.glob(".vectors*.tmp")]:
            if old.name != array:
                with contextlib.suppress(OSError):
                    old.unlink()
        with os.fdopen(open_regular_file(self.folder / array), "rb") as handle:
            mapped = _map(handle, offset, len(matrix), self.dim, self.dtype)
            inode = os.fstat(handle.fileno()).st_ino
        written = self._on_disk(len(log_header))
        with self._lock:
            self._base_id, self._log_end, self._compact_next = base_id, len(log_header), False
            self._written = written
            if self._changes == changes:  # nothing changed meanwhile: serve from the new base
                self._base, self._tail_rows = mapped, 0
                self._mapped = (self.folder / array, inode, offset + matrix.nbytes)
                self._tail = np.zeros((0, self.dim), dtype=self.dtype)  # its memory freed
                self._keys, self._hashes = list(order), hashes
                self._rows = {k: i for i, k in enumerate(order)}
                self._view = None

    # -- contents -----------------------------------------------------------------------------
    def intact(self) -> bool:
        """Whether the mapped base file still reaches as far as its map. When it was cut
        shorter (by hand, by a full disk's repair), its rows are dropped before anything reads
        them — reading past the file's end would kill the daemon — and are recomputed."""
        mapped = self._mapped
        if mapped is None:
            return True
        path, inode, end = mapped
        try:
            info = os.stat(path, follow_symlinks=False)
        except OSError:
            return True  # removed or replaced: the map keeps its own inode's pages
        if info.st_ino != inode or info.st_size >= end:
            return True
        with self._lock:
            if self._mapped is not mapped:
                return True
            dropped = len(self._base)
            for row in range(dropped):
                key = self._keys[row]
                if key is not None:
                    del self._rows[key]
                    self._keys[row] = None
            self._base = np.zeros((0, self.dim), dtype=self.dtype)
            # Rows are numbered through the base: renumber the tail's as the only rows.
            kept = {k: r - dropped for k, r in self._rows.items()}
            self._keys = self._keys[dropped:]
            self._hashes = self._hashes[dropped:]
            self._rows = kept
            self._mapped, self._compact_next, self._view = None, True, None
            self._changes += 1
        self.rebuilt_reason = f"{path.name} was cut short: its {dropped} vectors are recomputed"
        return False

    def _row(self, row: int) -> Rows:
        base = self._base
        vector: Rows = base[row] if row < len(base) else self._tail[row - len(base)]
        return vector

    def _apply(self, key: str, digest: str, vector: Rows | None) -> None:
        """One change, under the lock: a new row for `vector`, or none for None."""
        old = self._rows.pop(key, None)
        if old is not None:
            self._keys[old] = None
        if vector is not None:
            if self._tail_rows == len(self._tail):
                grown = np.empty((max(64, 2 * len(self._tail)), self.dim), dtype=self.dtype)
                grown[: self._tail_rows] = self._tail[: self._tail_rows]
                self._tail = grown  # a query holding the old array still reads valid rows
            self._tail[self._tail_rows] = vector
            self._tail_rows += 1
            self._rows[key] = len(self._keys)
            self._keys.append(key)
            self._hashes.append(digest)
        self._pending.add(key)
        self._changes += 1
        self._view = None

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

    def put(self, items: list[tuple[str, str]], vectors: Rows) -> None:
        with self._lock:
            for (key, digest), vector in zip(items, vectors, strict=True):
                self._apply(key, digest, vector)

    def copy(self, items: list[tuple[str, str]], donors: list[str]) -> set[str]:
        """Give each of `items` (key, content hash) a copy of the row its donor key holds; the
        keys given one. A donor dropped since it was chosen (`intact` found the base cut
        shorter, on the loop, between the caller's look and this) gives none: it was a
        KeyError, and the folder's whole embedding job was lost until its next change."""
        with self._lock:
            held = [
                (key, digest, self._rows[donor])
                for (key, digest), donor in zip(items, donors, strict=True)
                if donor in self._rows
            ]
            at = np.fromiter((row for _, _, row in held), dtype=np.int64, count=len(held))
            rows = _gather(self._base, self._tail, at)  # a copy: `_apply` may grow the tail
            for (key, digest, _), row in zip(held, rows, strict=True):
                self._apply(key, digest, row)
            return {key for key, _, _ in held}

    def remove(self, keys: list[str]) -> None:
        with self._lock:
            for key in keys:
                if key in self._rows:
                    self._apply(key, "", None)

    def vector(self, key: str) -> Rows | None:
        """A copy of `key`'s vector, or None."""
        with self._lock:
            row = self._rows.get(key)
            return None if row is None else np.array(self._row(row))

    def rows(self, keys: list[str] | None = None) -> tuple[list[str], Rows]:
        """(those of `keys` held, or every key held; a copy of their rows in that order)."""
        with self._lock:
            found = list(self._rows) if keys is None else [k for k in keys if k in self._rows]
            at = np.fromiter((self._rows[k] for k in found), dtype=np.int64, count=len(found))
            base, tail = self._base, self._tail
        return found, _gather(base, tail, at)  # rows never change in place: outside the lock

    def hashes(self) -> dict[str, str]:
        """{key: content hash} of every vector held."""
        with self._lock:
            return {k: self._hashes[r] for k, r in self._rows.items()}

    def __len__(self) -> int:
        return len(self._rows)

    def similarities(self, query: Vectors) -> tuple[list[str], Vectors]:
        """(keys, cosine of each key's memory to the unit vector `query`)."""
        with self._lock:
            if self._view is None:
                keys = list(self._rows)
                rows = np.fromiter(self._rows.values(), dtype=np.int64, count=len(keys))
                self._view = (keys, rows, self._tail_rows)
            keys, rows, tail_rows = self._view
            base, tail = self._base, self._tail
        if not keys:
            return [], np.zeros(0, dtype=np.float32)
        # A row an older version stored with an infinity gives NaN (no warning: the caller
        # leaves out what is not a number, `SemanticRecall.similarities`).
        with np.errstate(invalid="ignore", over="ignore"):
            scores = base @ query
            if tail_rows:
                scores = np.concatenate([scores, tail[:tail_rows] @ query])
        return keys, scores[rows]


def _gather(base: Rows, tail: Rows, at: npt.NDArray[np.int64]) -> Rows:
    """A copy of rows `at`, numbered through the base, then the tail."""
    out = np.empty((len(at), base.shape[1]), dtype=base.dtype)
    in_base = at < len(base)
    out[in_base] = base[at[in_base]]
    out[~in_base] = tail[at[~in_base] - len(base)]
    return out


def _map(handle: Any, offset: int, rows: int, dim: int, dtype: np.dtype[Any]) -> Rows:
    """`rows` rows of `dim` values at `offset` in the open file `handle`, memory-mapped
    read-only (the map holds the file on its own once made)."""
    if not rows:  # an empty map is refused
        return np.zeros((0, dim), dtype=dtype)
    mapped: Rows = np.memmap(handle, dtype=dtype, mode="r", offset=offset, shape=(rows, dim))
    return mapped
