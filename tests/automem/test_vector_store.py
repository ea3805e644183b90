"""The vector store on disk: a checksummed base, an append-only log replayed on load, compaction,
and what damaged, torn or foreign files do (only what is damaged is dropped, never trusted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from memoryd.automem.embeddings import vectors as vectors_mod
from memoryd.automem.embeddings.encoder import Vectors
from memoryd.automem.embeddings.vectors import BLOCK_ROWS, LOCK, LOG, META, VectorStore
from tests.fakes.held_lock import held_lock, outcome_of
from tests.fakes.swapped_files import fifo_readers_freed

DIM = 8


def unit(seed: int, n: int = 1) -> Vectors:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    out: Vectors = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


def opened(folder: Path, model: str = "m", dim: int = DIM) -> VectorStore:
    store = VectorStore(folder, model, dim)
    store.load()
    return store


def contents(store: VectorStore) -> dict[str, tuple[str, list[float]]]:
    return {
        k: (h, store.vector(k).tolist())  # type: ignore[union-attr]
        for k, h in store.hashes().items()
    }


def base_file(folder: Path) -> Path:
    (found,) = folder.glob("vectors.*.npy")
    return found


def written(folder: Path, n: int) -> VectorStore:
    """A store of `n` keys k0000… (hash h0), saved as a base."""
    store = VectorStore(folder, "m", DIM)
    store.put([(f"k{i:04d}", "h0") for i in range(n)], unit(1, n))
    store.save()
    return store


def test_a_change_is_one_appended_record(tmp_path: Path) -> None:
    store = written(tmp_path, 3)
    base = base_file(tmp_path).read_bytes()
    log_size = (tmp_path / LOG).stat().st_size
    store.put([("k0001", "h1"), ("new", "h1")], unit(2, 2))
    store.save()
    assert base_file(tmp_path).read_bytes() == base  # the base is not rewritten
    grown = (tmp_path / LOG).stat().st_size - log_size
    assert 2 * 4 * DIM < grown < 2 * (4 * DIM + 64)
    again = opened(tmp_path)
    assert again.rebuilt_reason is None
    assert contents(again) == contents(store)
    assert again.hashes()["k0001"] == "h1"
    assert np.array_equal(again.vector("new"), unit(2, 2)[1])  # type: ignore[arg-type]


def test_a_copy_from_a_donor_dropped_meanwhile_copies_the_rest(tmp_path: Path) -> None:
    # The donor chosen from hashes() may be gone by copy() (intact() dropped a base cut
    # shorter): that was a KeyError, and the folder's embedding job was lost.
    store = written(tmp_path, 2)
    store.remove(["k0001"])
    copied = store.copy([("a", "h0"), ("b", "h0")], ["k0000", "k0001"])
    assert copied == {"a"}
    assert np.array_equal(store.vector("a"), store.vector("k0000"))  # type: ignore[arg-type]
    assert store.vector("b") is None


def test_remove_then_reload(tmp_path: Path) -> None:
    store = written(tmp_path, 3)
    store.remove(["k0000", "absent"])
    store.save()
    again = opened(tmp_path)
    assert sorted(again.hashes()) == ["k0001", "k0002"]
    assert again.stale({"k0001": "h0", "k0002": "h0"}) == ([], [])
    keys, sims = again.similarities(unit(1, 3)[2])
    assert dict(zip(keys, sims.tolist(), strict=True))["k0002"] == pytest.approx(1.0)


def test_the_log_is_folded_into_a_new_base_past_its_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectors_mod, "COMPACT_MIN_BYTES", 0)
    store = written(tmp_path, 40)  # base: 40 rows; the log may hold about a quarter of that
    first = base_file(tmp_path).name
    bases, logs = [], []
    for i in range(12):
        store.put([(f"k{i:04d}", "h1")], unit(10 + i))
        store.save()
        bases.append(base_file(tmp_path).name)
        logs.append((tmp_path / LOG).stat().st_size)
    compacted = next(i for i, name in enumerate(bases) if name != first)
    assert compacted >= 2  # the first changes were appended to the log ...
    record = logs[1] - logs[0]
    assert logs[compacted - 1] <= 0.25 * 40 * 4 * DIM < logs[compacted - 1] + record
    # ... until one more would pass a quarter of the base: a new base, the old one gone.
    assert len(list(tmp_path.glob("vectors*.npy"))) == 1
    assert contents(opened(tmp_path)) == contents(store)
    store._compact_next = True  # a compaction leaves a log of its header alone, naming the base
    store.save()
    magic = len(vectors_mod._LOG_MAGIC)
    log = (tmp_path / LOG).read_bytes()
    assert len(log) == magic + 8 + int.from_bytes(log[magic : magic + 4], "little")
    assert json.loads(log[magic + 8 :])["base"] in base_file(tmp_path).name


def test_on_disk_equals_a_rebuild_from_scratch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectors_mod, "COMPACT_MIN_BYTES", 0)
    changed = tmp_path / "changed"
    store = written(changed, 30)
    for step in range(25):  # puts, replacements and removals, some compactions on the way
        store.put([(f"k{(7 * step) % 40:04d}", f"h{step}")], unit(100 + step))
        store.remove([f"k{(11 * step) % 30:04d}"])
        store.save()
    store._compact_next = True
    store.save()
    final = contents(store)
    fresh = VectorStore(tmp_path / "fresh", "m", DIM)
    keys = list(final)
    fresh.put([(k, final[k][0]) for k in keys], np.array([final[k][1] for k in keys], np.float32))
    fresh.save()
    for name in (META, LOG, base_file(changed).name):
        assert (changed / name).read_bytes() == (tmp_path / "fresh" / name).read_bytes(), name
    assert contents(opened(changed)) == final


def test_a_torn_last_record_is_dropped_and_the_log_goes_on(tmp_path: Path) -> None:
    store = written(tmp_path, 2)
    store.put([("a", "h1")], unit(5))
    store.save()
    kept = (tmp_path / LOG).stat().st_size
    store.put([("b", "h1")], unit(6))
    store.save()
    with (tmp_path / LOG).open("r+b") as handle:  # a kill in the middle of the last record
        handle.truncate(kept + 20)
    torn = opened(tmp_path)
    assert "torn" in (torn.rebuilt_reason or "")
    assert "a" in torn.hashes()
    assert "b" not in torn.hashes()
    assert torn.stale({"a": "h1", "b": "h1"})[0] == ["b"]
    # The next save starts afresh from what is intact; everything reloads.
    torn.put([("b", "h1")], unit(6))
    torn.save()
    again = opened(tmp_path)
    assert again.rebuilt_reason is None
    assert contents(again) == contents(store)


def test_a_log_cut_anywhere_never_gives_a_wrong_vector(tmp_path: Path) -> None:
    store = written(tmp_path, 2)
    versions: dict[tuple[str, str], list[float]] = {
        (k, "h0"): v.tolist() for k, v in zip(["k0000", "k0001"], unit(1, 2), strict=True)
    }
    for step in range(4):
        vector = unit(50 + step)
        store.put([("k0000", f"h{step + 1}")], vector)
        versions[("k0000", f"h{step + 1}")] = vector[0].tolist()
        if step == 2:
            store.remove(["k0001"])
        store.save()
    log = (tmp_path / LOG).read_bytes()
    for cut in range(len(log) + 1):
        (tmp_path / LOG).write_bytes(log[:cut])
        store = opened(tmp_path)
        for key, (digest, vector) in contents(store).items():
            assert versions[(key, digest)] == vector, cut


def test_a_flipped_byte_in_the_base_drops_only_its_block(tmp_path: Path) -> None:
    store = written(tmp_path, 3 * BLOCK_ROWS)
    store.put([("k0001", "h1")], unit(9))
    store.save()
    expected = contents(store)  # (the store maps the file damaged below)
    path = base_file(tmp_path)
    data = bytearray(path.read_bytes())
    data[len(data) - 10] ^= 0x01  # in the last block's rows
    path.write_bytes(bytes(data))
    damaged = opened(tmp_path)
    assert f"{BLOCK_ROWS} of {3 * BLOCK_ROWS} vectors damaged" in (damaged.rebuilt_reason or "")
    assert len(damaged) == 2 * BLOCK_ROWS
    assert damaged.hashes()["k0001"] == "h1"  # the log still applies on top
    wanted = {f"k{i:04d}": "h0" for i in range(3 * BLOCK_ROWS)} | {"k0001": "h1"}
    missing, gone = damaged.stale(wanted)
    assert missing == [f"k{i:04d}" for i in range(2 * BLOCK_ROWS, 3 * BLOCK_ROWS)]
    assert gone == []
    # Recomputed and saved: the next load finds nothing wrong and everything as before.
    damaged.put([(k, "h0") for k in missing], unit(1, 3 * BLOCK_ROWS)[2 * BLOCK_ROWS :])
    damaged.save()
    again = opened(tmp_path)
    assert again.rebuilt_reason is None
    assert contents(again) == expected


def test_a_truncated_base_keeps_its_whole_intact_blocks(tmp_path: Path) -> None:
    written(tmp_path, 2 * BLOCK_ROWS)
    path = base_file(tmp_path)
    with path.open("r+b") as handle:
        handle.truncate(path.stat().st_size - 4 * DIM * 3)
    damaged = opened(tmp_path)
    assert len(damaged) == BLOCK_ROWS
    assert damaged.rebuilt_reason


def test_a_flipped_byte_in_the_log_drops_that_record_and_after(tmp_path: Path) -> None:
    store = written(tmp_path, 2)
    sizes = []
    for name in ("a", "b", "c"):
        store.put([(name, "h1")], unit(ord(name)))
        store.save()
        sizes.append((tmp_path / LOG).stat().st_size)
    data = bytearray((tmp_path / LOG).read_bytes())
    data[sizes[0] + 30] ^= 0x40  # inside b's record
    (tmp_path / LOG).write_bytes(bytes(data))
    damaged = opened(tmp_path)
    assert "damaged" in (damaged.rebuilt_reason or "")
    assert sorted(damaged.hashes()) == ["a", "k0000", "k0001"]
    assert np.array_equal(damaged.vector("a"), unit(ord("a"))[0])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "other",
    [
        {"model": "other"},
        {"dim": DIM + 1},
    ],
)
def test_files_for_another_model_or_dimension_are_not_used(
    tmp_path: Path, other: dict[str, object]
) -> None:
    written(tmp_path, 3)
    store = VectorStore(tmp_path, str(other.get("model", "m")), int(str(other.get("dim", DIM))))
    store.load()
    assert len(store) == 0
    assert "another format, model or dimension" in (store.rebuilt_reason or "")
    store.put([("a", "h")], np.ones((1, store.dim), dtype=np.float32))
    store.save()  # replaces the foreign files
    assert opened(tmp_path, store.model, store.dim).hashes() == {"a": "h"}


def test_foreign_or_garbage_files_are_not_trusted(tmp_path: Path) -> None:
    written(tmp_path, 3)
    meta = (tmp_path / META).read_bytes()
    # A log written for another model, with a valid frame.
    foreign = VectorStore(tmp_path / "foreign", "other", DIM)
    foreign.put([("k0000", "h0")], unit(3))
    foreign.save()
    foreign.put([("k0000", "h9")], unit(4))
    foreign.save()
    (tmp_path / LOG).write_bytes((tmp_path / "foreign" / LOG).read_bytes())
    store = opened(tmp_path)
    assert "another model" in (store.rebuilt_reason or "")
    assert store.hashes() == {f"k{i:04d}": "h0" for i in range(3)}
    (tmp_path / LOG).write_bytes(b"not a log at all")
    assert "not a log" in (opened(tmp_path).rebuilt_reason or "")
    # A well-framed header (its checksum right) whose JSON is not a description.
    (tmp_path / LOG).write_bytes(vectors_mod._LOG_MAGIC + vectors_mod._frame(b"[1, 2]"))
    listed = opened(tmp_path)
    assert "not a description" in (listed.rebuilt_reason or "")
    assert listed.hashes() == {f"k{i:04d}": "h0" for i in range(3)}
    # A description edited by hand (still valid JSON) fails its checksum.
    (tmp_path / META).write_bytes(meta.replace(b'"h0"', b'"h1"', 1))
    assert len(opened(tmp_path)) == 0
    # The previous format's files (one JSON, one vectors.npy) are rebuilt, then removed.
    (tmp_path / META).write_text(json.dumps({"format": 1, "model": "m", "dim": DIM, "rows": []}))
    np.save(tmp_path / "vectors.npy", np.zeros((0, DIM), np.float32))
    old = opened(tmp_path)
    assert len(old) == 0
    assert old.rebuilt_reason
    old.put([("a", "h")], unit(1))
    old.save()
    assert not (tmp_path / "vectors.npy").exists()
    assert opened(tmp_path).hashes() == {"a": "h"}


@pytest.mark.parametrize("where", ["description", "log header"])
@pytest.mark.parametrize("json_text", [b"[" * 5_000, b'{"dim": ' + b"9" * 5_000 + b"}"])
def test_json_past_its_limits_is_not_used_as_any_damage(
    tmp_path: Path, where: str, json_text: bytes
) -> None:
    # Checksummed by a crc anyone can compute: nested past json's depth, its RecursionError
    # got past load() (which drops a file it cannot read) and the store could not be opened.
    written(tmp_path, 3)
    if where == "description":
        body = json_text + b"\n[]"
        (tmp_path / META).write_bytes(b"%08x\n" % zlib.crc32(body) + body)
    else:
        (tmp_path / LOG).write_bytes(vectors_mod._LOG_MAGIC + vectors_mod._frame(json_text))
    store = opened(tmp_path)
    assert f"vector {'index' if where == 'description' else 'log'} not used" in (
        store.rebuilt_reason or ""
    )
    assert len(store) == (0 if where == "description" else 3)


def test_an_array_swapped_for_another_of_the_same_shape_is_not_trusted(tmp_path: Path) -> None:
    written(tmp_path, 3)
    path = base_file(tmp_path)
    np.save(path, np.ones((3, DIM), dtype=np.float32), allow_pickle=False)
    store = opened(tmp_path)
    assert len(store) == 0
    assert "3 of 3 vectors damaged" in (store.rebuilt_reason or "")


def test_a_kill_during_compaction_leaves_a_usable_store(tmp_path: Path) -> None:
    tmp_path = tmp_path / "vectors"
    store = written(tmp_path, 3)
    store.put([("a", "h1")], unit(7))
    store.save()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    store._compact_next = True
    store.save()
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    expected = contents(store)
    # Killed before the commit: the new array (under its own name) is there, the rest old.
    for name, data in before.items():
        (tmp_path / name).write_bytes(data)
    assert contents(opened(tmp_path)) == expected
    # Killed after the commit, before the new log: the old log names the old base.
    (tmp_path / META).write_bytes(after[META])
    stale = opened(tmp_path)
    assert stale.rebuilt_reason is None
    assert contents(stale) == expected
    # The next compaction clears what the killed one left.
    (tmp_path / ".vectors.0badf00d.npy.tmp").write_bytes(b"half")
    stale._compact_next = True
    stale.save()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [base_file(tmp_path).name, LOCK, LOG, META]
    )


def test_similarities_match_a_brute_force_over_every_change(tmp_path: Path) -> None:
    store = written(tmp_path, 50)
    reference = {f"k{i:04d}": v for i, v in enumerate(unit(1, 50))}
    for step in range(200):  # enough rows to grow the tail several times
        key = f"k{(step * 13) % 70:04d}"
        if step % 5 == 4:
            store.remove([key])
            reference.pop(key, None)
        else:
            store.put([(key, f"h{step}")], unit(1000 + step))
            reference[key] = unit(1000 + step)[0]
    query = unit(99)[0]
    keys, sims = store.similarities(query)
    assert sorted(keys) == sorted(reference)
    for key, sim in zip(keys, sims.tolist(), strict=True):
        assert sim == pytest.approx(float(reference[key] @ query), abs=1e-6)
    store.save()
    keys, sims = opened(tmp_path).similarities(query)
    assert {k: round(s, 5) for k, s in zip(keys, sims.tolist(), strict=True)} == {
        k: round(float(v @ query), 5) for k, v in reference.items()
    }


def test_a_store_that_was_never_saved_loads_empty(tmp_path: Path) -> None:
    store = opened(tmp_path / "nothing")
    assert len(store) == 0
    assert store.rebuilt_reason is None
    assert store.similarities(unit(1)[0])[0] == []


_WRITER = """
import sys
import numpy as np
from pathlib import Path
from memoryd.automem.embeddings import vectors
vectors.COMPACT_MIN_BYTES = 0  # compactions often, to be killed in one too
store = vectors.VectorStore(Path(sys.argv[1]), "m", 8)
store.load()
for step in range(1_000_000):
    v = np.random.default_rng(step).standard_normal((1, 8)).astype(np.float32)
    store.put([(f"k{step % 40}", f"h{step}")], v)
    if step % 7 == 3:
        store.remove([f"k{(step + 5) % 40}"])
    store.save()
    print(step, flush=True)
"""


@pytest.mark.parametrize("after", [3, 40, 170])
def test_a_kill_9_at_any_point_keeps_every_saved_change_and_no_wrong_vector(
    tmp_path: Path, after: int
) -> None:
    folder = tmp_path / "vectors"
    saved = -1
    with subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(folder)], stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:  # killed mid-run, wherever it is
            saved = int(line)
            if saved >= after:
                proc.kill()
                break
        proc.wait(timeout=30)
        # What it acknowledged before it died; it may have saved one step more.
        saved = max([saved, *(int(line) for line in proc.stdout)])
    assert saved >= after
    store = opened(folder)
    for key, (digest, vector) in contents(store).items():
        step = int(digest[1:])
        assert key == f"k{step % 40}"
        expected = np.random.default_rng(step).standard_normal((1, 8)).astype(np.float32)
        assert vector == expected[0].tolist(), key
        assert step > saved - 40  # not older than what the last acknowledged save held
    # Every key the last acknowledged save held is there, at that version or later.
    for step in range(max(0, saved - 39), saved + 1):
        key = f"k{step % 40}"
        removed = any(s % 7 == 3 and (s + 5) % 40 == step % 40 for s in range(step, saved + 2))
        if not removed:
            assert int(store.hashes()[key][1:]) >= step


def test_queries_in_another_thread_see_only_whole_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    monkeypatch.setattr(vectors_mod, "COMPACT_MIN_BYTES", 0)  # compactions on the way
    store = written(tmp_path, 30)
    query = unit(77)[0]
    versions: dict[str, set[float]] = {
        f"k{i:04d}": {round(float(v @ query), 5)} for i, v in enumerate(unit(1, 30))
    }
    for step in range(300):
        versions.setdefault(f"k{step % 30:04d}", set()).add(
            round(float(unit(500 + step)[0] @ query), 5)
        )
    done = threading.Event()
    reads: list[int] = []
    wrong: list[tuple[str, float]] = []

    def read() -> None:
        while not done.is_set() and len(reads) < 5_000:
            keys, sims = store.similarities(query)
            reads.append(len(keys))
            wrong.extend(
                (k, s)
                for k, s in zip(keys, sims.tolist(), strict=True)
                if round(s, 5) not in versions[k]
            )

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for step in range(300):
            store.put([(f"k{step % 30:04d}", f"h{step}")], unit(500 + step))
            if step % 10 == 9:
                store.remove([f"k{(step * 7) % 30:04d}"])
            store.save()
    finally:
        done.set()
        reader.join(timeout=30)
    assert len(reads) > 10
    assert wrong == []


# -- files that are not what they should be --------------------------------------------------
@pytest.mark.parametrize("name", [META, LOG, "array"])
def test_a_store_file_that_is_a_link_is_not_followed(tmp_path: Path, name: str) -> None:
    store = written(tmp_path, 3)
    store.put([("new", "h1")], unit(5))
    store.save()  # a log with a record
    target = base_file(tmp_path) if name == "array" else tmp_path / name
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    elsewhere.write_bytes(target.read_bytes())
    target.unlink()
    target.symlink_to(elsewhere)  # the same bytes: only the link is wrong (/dev/zero would be)
    reopened = opened(tmp_path)
    assert reopened.rebuilt_reason is not None
    assert "new" not in reopened.hashes()


@pytest.mark.parametrize("name", [META, LOG])
def test_a_fifo_in_place_of_a_store_file_never_blocks(tmp_path: Path, name: str) -> None:
    store = written(tmp_path, 3)
    (tmp_path / name).unlink()
    os.mkfifo(tmp_path / name)  # no writer: a blocking open would wait for one
    with fifo_readers_freed(tmp_path / name) as freed:
        reopened = opened(tmp_path)
        assert reopened.rebuilt_reason is not None
        store.put([("new", "h1")], unit(5))
        store.save()  # a log that cannot be appended to: a new base is written instead
    assert freed == []  # nothing waited at the FIFO
    if name == LOG:
        assert opened(tmp_path).hashes()["new"] == "h1"


def test_a_base_cut_short_under_its_map_is_dropped_not_read(tmp_path: Path) -> None:
    written(tmp_path, 2 * BLOCK_ROWS)
    store = opened(tmp_path)
    store.put([("tail", "h1")], unit(9))
    assert store.intact()
    path = base_file(tmp_path)
    with path.open("r+b") as handle:
        handle.truncate(path.stat().st_size // 2)
    assert not store.intact()  # rows past the file's end would have killed the process
    assert store.rebuilt_reason is not None
    assert list(store.hashes()) == ["tail"]  # the tail's own rows are kept
    keys, sims = store.similarities(unit(9)[0])
    assert keys == ["tail"]
    assert sims[0] == pytest.approx(1.0, abs=1e-5)
    assert store.stale({"k0000": "h0", "tail": "h1"}) == (["k0000"], [])
    store.put([("k0000", "h0")], unit(1, 1))
    store.save()  # everything written afresh
    assert sorted(opened(tmp_path).hashes()) == ["k0000", "tail"]


def test_two_daemons_saving_one_folder_in_turn_leave_it_whole(tmp_path: Path) -> None:
    # Found by a bug hunt (session 22): two daemons of one HOME index one memory dir. Each
    # appended to the log at the end it knew, into a log the other had replaced, and each
    # compaction deleted the other's base: the next load found the log damaged and dropped
    # what followed (embedded again). A save that finds the files changed by another writes
    # its whole contents instead.
    first = written(tmp_path, 3)
    second = opened(tmp_path)
    for step in range(8):
        for n, store in enumerate((first, second)):
            store.put([(f"s{n}-{step}", "h1"), ("k0001", f"h{step}{n}")], unit(10 * step + n, 2))
            if step % 3 == 2:
                store._compact_next = True  # a compaction too, now and then
            store.save()
            after = opened(tmp_path)
            assert after.rebuilt_reason is None, (step, n, after.rebuilt_reason)
            assert contents(after) == contents(store)  # the last save, whole
    assert len(second.similarities(unit(1)[0])[0]) == 3 + 8  # its own rows, all readable
    assert len(list(tmp_path.glob("vectors*.npy"))) == 1  # no base left behind


def test_a_lock_that_cannot_be_had_is_gone_without(tmp_path: Path) -> None:
    (tmp_path / LOCK).mkdir(parents=True)  # a folder where the lock file goes
    store = written(tmp_path, 3)
    store.put([("new", "h1")], unit(2))
    store.save()
    again = opened(tmp_path)
    assert again.rebuilt_reason is None
    assert contents(again) == contents(store)


def test_a_lock_held_by_a_stopped_daemon_is_waited_for_a_while_not_for_ever(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found in review (session 22): a daemon stopped (SIGSTOP, Ctrl-Z) while it held the
    # lock held every other daemon's embedding thread in its load or save for as long. A save
    # gives up now (its changes kept, an OSError `status` shows), a load goes on unlocked.
    monkeypatch.setattr(vectors_mod, "LOCK_WAIT_S", 0.2)
    store = written(tmp_path, 3)
    store.put([("new", "h1")], unit(2))
    with held_lock(tmp_path / LOCK):  # the lock file the store made
        refused = outcome_of(store.save)
        loaded = outcome_of(lambda: opened(tmp_path))
    assert isinstance(refused, OSError)
    assert refused.filename == str(tmp_path / LOCK)
    assert "held the lock" in str(refused)
    assert isinstance(loaded, VectorStore)
    assert sorted(loaded.hashes()) == ["k0000", "k0001", "k0002"]
    assert store.dirty  # kept for the next save, which goes through once the lock is free
    store.save()
    assert contents(opened(tmp_path)) == contents(store)


def test_every_file_of_the_store_is_private(tmp_path: Path) -> None:
    # The base array was opened with open(), 0644 under umask 022: vectors of private memories.
    store = written(tmp_path / "store", 3)
    store.put([("k9", "h1")], unit(3))
    store.save()
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "store").iterdir()}
    assert modes
    assert set(modes.values()) == {0o600}, modes
