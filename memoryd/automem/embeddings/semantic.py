"""Semantic recall for every memory directory: one encoder; per directory, one store of memory
vectors and one of their token vectors (`late_interaction`).

All model work runs on one background thread: loading the model, then embedding memories
that are new or changed (by content hash) as directories change. A query is embedded in a
worker thread (`start_query_embedding`) while the caller computes its lexical scores, so the
event loop never waits on the model.
Until the model is loaded, or when it cannot be, recall is lexical and `status` says why;
`report` says how many texts the model embedded (memories, queries), how many queries were
scored by late interaction, and how many memories still wait for a vector.
Recall's semantic signal is late interaction over a short list of candidates, when every
candidate has its token vectors; else the pooled cosines of every memory.
A dir the service lets go of (`warmup.MAX_WARM_DIRS`) lets go of its stores too (`forget`).
"""

from __future__ import annotations

import asyncio
import ctypes
import hashlib
import importlib.util
import os
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from memoryd.paths import state_dir

if TYPE_CHECKING:
    from memoryd.automem.embeddings.cosine_scale import CosineScale
    from memoryd.automem.embeddings.encoder import SentenceEncoder, Vectors
    from memoryd.automem.embeddings.late_interaction import TokenVectors
    from memoryd.automem.embeddings.models import ModelFiles
    from memoryd.automem.embeddings.token_store import TokenStore
    from memoryd.automem.embeddings.vectors import VectorStore

log = structlog.get_logger("memoryd.embeddings")

MAX_QUERY_CHARS = 2_000  # the model reads 256 tokens; a 1 MB query is cut before tokenising
# Memories embedded per step, then saved: a change costs a record in the store's log, so a
# daemon stopped while embedding a large directory keeps what it had embedded.
EMBED_CHUNK = 256


def content_hash(text: str) -> str:
    # Here, not beside the vector store: `sync` hashes on the event loop, and that module
    # imports numpy (~125 ms at a daemon's first get_context).
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def extra_installed() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "tokenizers"))


EMBEDDINGS_OFF = "lexical: embeddings turned off (MEMORYD_EMBEDDINGS)"
_SWITCH_ON = frozenset({"", "1", "on", "true", "yes"})
_SWITCH_OFF = frozenset({"0", "off", "false", "no"})


def embeddings_refused() -> str | None:
    """Why `MEMORYD_EMBEDDINGS` keeps embeddings off (a `status` reason), or None. A value
    that is neither on nor off keeps them off and says so: "disabled" or "off " (a trailing
    space from an env file) turned them on while the user meant to turn them off."""
    value = os.environ.get("MEMORYD_EMBEDDINGS", "")
    word = value.strip().lower()
    if word in _SWITCH_ON:
        return None
    if word in _SWITCH_OFF:
        return EMBEDDINGS_OFF
    shown = value if len(value) <= 40 else value[:40] + "…"
    return (
        f"lexical: MEMORYD_EMBEDDINGS={shown!r} is neither on (1, on, true, yes) nor off "
        "(0, off, false, no): embeddings left off"
    )


def _one_blas_thread() -> None:
    """BLAS runs one matrix-vector product per query here (memories × query vector): a second
    BLAS thread saves 0.2 ms on an idle machine but, on a busy one, waiting for it made that
    product's p95 2–8 ms instead of 0.5 ms. Same results either way (rows are split, not sums)."""
    try:
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]
    except ImportError:  # an install without the extra's helper: BLAS keeps its default
        return
    threadpool_limits(1, user_api="blas")


# memoryd is installed from its checkout (README): the hint names the extra there, not a
# package index, where no `memoryd` of ours is published.
EXTRA_MISSING = (
    "lexical: embeddings extra not installed (from the memoryd checkout: "
    "`pipx install --force '.[embeddings]'`, or `pip install '.[embeddings]'` into memoryd's "
    "environment)"
)


@dataclass(frozen=True)
class QueryEmbedding:
    vector: Vectors  # the query's unit vector
    tokens: TokenVectors  # and its tokens', for late interaction


@dataclass(frozen=True)
class Similarities:
    """A query's semantic signals for the ranker, each (keys, one value per key)."""

    scores: tuple[list[str], Vectors]  # fused with the lexical scores
    # Every memory's pooled cosine on the floors' scale (`cosine_scale`); None when the
    # model's scale could not be measured: no floors.
    cosines: tuple[list[str], Vectors] | None


def _return_freed_memory() -> None:
    """Hand the C heap's free memory back to the system (glibc's malloc_trim; a no-op
    elsewhere). Embedding frees many mid-sized arrays (each batch's hidden states and token
    vectors, a store's copy when it writes a new base) that glibc keeps for reuse: after
    indexing 3,000 memories the daemon held ~90 MB more than with the model just loaded, and
    after this call none."""
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


@dataclass(frozen=True)
class _Forget:
    """A job for the embedding thread: drop a dir's stores (`SemanticRecall.forget`)."""

    memory_dir: Path


def embedding_text(description: str, body: str) -> str:
    """What a memory's vector is made of: its description — the one-line summary the model
    selector also judges by — or, for a memory without one, the start of its body."""
    return description.strip() or body.strip()[:2_000]


def store_folder(memory_dir: Path) -> Path:
    """Where a memory directory's vectors are kept (`vectors.py`): beside, never inside it."""
    digest = hashlib.sha256(str(memory_dir).encode("utf-8", "surrogatepass")).hexdigest()
    return state_dir() / "vectors" / digest[:24]


class SemanticRecall:
    def __init__(self, model: str | None = None) -> None:
        self.model_name = model
        self.encoder: SentenceEncoder | None = None
        self.scale: CosineScale | None = None  # the encoder's cosines, measured when it loads
        self.reason = (
            "lexical: embedding model not loaded yet"
            " (it loads when a project's memory is first used)"
        )
        # Texts run through the model since start (memories: once per new content), and
        # memories found without a current vector that wait for one. Read by `status`.
        self.memories_embedded = 0
        self.queries_embedded = 0
        self.queries_late_interaction = 0  # of those, scored by token vectors (else pooled)
        self.waiting = 0
        self._stores: dict[Path, VectorStore] = {}
        self._token_stores: dict[Path, TokenStore] = {}
        self._synced: dict[Path, int] = {}
        # Per dir: the texts last synced, and the memories whose stored vectors are not of
        # their text now ({key: the text's hash}): until embedded again they are ranked
        # lexically. A dir is `verified` once the thread compared its stores with its texts.
        self._texts: dict[Path, dict[str, str]] = {}
        self._changed: dict[Path, dict[str, str]] = {}
        self._verified: set[Path] = set()
        self.save_problem: str | None = None  # why the vectors could not be saved, if so
        self._jobs: queue.Queue[tuple[Path, dict[str, str]] | _Forget | None] = queue.Queue()
        self._idle = threading.Event()
        self._idle.set()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._wanted: bool | None = None
        self._closed = False  # no job is taken after `close`

    # -- state --------------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self.encoder is not None

    @property
    def wanted(self) -> bool:
        """Worth starting: the extra is installed and not turned off (checked once)."""
        if self._wanted is None:
            refused = embeddings_refused()
            self._wanted = refused is None and extra_installed()
            if not self._wanted:
                self.reason = refused or EXTRA_MISSING
        return self._wanted

    def status(self) -> str:
        """Which ranker recall uses and why, for `status`."""
        _ = self.wanted
        reason = self.reason
        if self.save_problem is not None:
            reason += f"; vectors not saved ({self.save_problem}): kept in memory until a restart"
        if self.encoder is not None and not self._idle.is_set():
            return f"{reason}; indexing: memories without a vector yet are ranked lexically"
        return reason

    def report(self) -> dict[str, str | int | dict[str, float] | None]:
        """The model in use (None while lexical), its cosine scale and the counts, for
        `status`."""
        encoder, scale = self.encoder, self.scale
        return {
            "model": encoder.name if encoder is not None else None,
            # Where the relevance floors sit for this model (`cosine_scale`); None: no floors.
            # Measured just before the encoder is kept, so it is there once the model is.
            "cosine_scale": scale.as_dict() if scale is not None else None,
            "memories_embedded": self.memories_embedded,
            "queries_embedded": self.queries_embedded,
            "queries_late_interaction": self.queries_late_interaction,
            "waiting": self.waiting,
        }

    def start(self) -> None:
        """Load the model in the background (once)."""
        with self._lock:
            if self._thread is not None:
                return
            self._idle.clear()  # set again once the model is loaded (or failed) and jobs ran
            self._thread = threading.Thread(
                target=self._run, name="memoryd-embeddings", daemon=True
            )
            self._thread.start()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """True once the model is loaded (or failed) and no memories wait to be embedded."""
        return self._idle.wait(timeout)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._thread is not None:
                self._jobs.put(None)

    # -- memory directories -------------------------------------------------------------------
    def sync(self, memory_dir: Path, generation: int, texts: dict[str, str]) -> None:
        """Queue (re-)embedding of `texts` ({key: text}) when the directory changed."""
        if self._synced.get(memory_dir) == generation:
            return
        self._synced[memory_dir] = generation
        previous = self._texts.get(memory_dir, {})
        # Only what changed is hashed here, on the event loop (an unchanged text is the same
        # object, so the comparison is quick).
        changed = {k: content_hash(t) for k, t in texts.items() if previous.get(k) != t}
        self._texts[memory_dir] = current = dict(texts)
        with self._lock:  # never between the thread's "queue empty" and its "idle"
            pending = self._changed.setdefault(memory_dir, {})
            pending.update(changed)
            for key in [k for k in pending if k not in current]:
                del pending[key]
            self._idle.clear()
            self._jobs.put((memory_dir, current))
        self.start()

    def forget(self, memory_dir: Path) -> None:
        """Drop what is kept of a dir the service let go of (`warmup.MAX_WARM_DIRS`): its
        stores (memory-mapped vectors, a key → row map), its texts and marks. The stores go
        on the embedding thread, which uses them without the lock, in the order of its jobs
        (a `sync` queued later opens them again, from disk: nothing stored is embedded
        again). Until then recall goes on as before; after, the dir is ranked lexically
        until that `sync` has compared its stores with its texts again."""
        self._synced.pop(memory_dir, None)
        self._texts.pop(memory_dir, None)
        with self._lock:
            if self._thread is None or self._closed:  # no thread to hand it to: nothing opened
                self._changed.pop(memory_dir, None)
                self._verified.discard(memory_dir)
                return
            self._idle.clear()
            self._jobs.put(_Forget(memory_dir))

    def resync(self, memory_dir: Path) -> None:
        """Compare the dir's stores with its texts again at the next `sync` (a store that was
        found damaged dropped rows)."""
        self._synced.pop(memory_dir, None)

    def embed_query(self, query: str) -> QueryEmbedding | None:
        """The query's vectors (blocking: run it in a worker thread); None when lexical."""
        encoder = self.encoder
        if encoder is None or not query.strip():
            return None
        vectors, tokens = encoder.encode_tokens([query[:MAX_QUERY_CHARS]])
        self.queries_embedded += 1
        if not vectors[0].any():  # no token the model knows: it says nothing of the query
            return None
        return QueryEmbedding(vectors[0], tokens[0])

    def start_query_embedding(self, query: str) -> asyncio.Future[QueryEmbedding | None] | None:
        """`embed_query`, started now in a worker thread (await it when the vector is needed);
        None when recall is lexical."""
        if self.encoder is None:
            return None
        return asyncio.get_running_loop().run_in_executor(None, self.embed_query, query)

    def similarities(
        self, memory_dir: Path, query: QueryEmbedding, lexical_best: list[str]
    ) -> Similarities | None:
        """What the ranker gets for the query: the semantic scores it fuses — late
        interaction over the candidates (`lexical_best`, the lexical ranker's best, and the
        best by cosine) when all of them have token vectors, else every memory's pooled
        cosine — and every memory's pooled cosine on the floors' scale (`cosine_scale`)."""
        from memoryd.automem.embeddings import late_interaction
        from memoryd.automem.embeddings.cosine_scale import REFERENCE

        store = self._stores.get(memory_dir)
        if store is None or not len(store):
            return None
        tokens = self._token_stores.get(memory_dir)
        if not all(
            s.intact() for s in (store, *(() if tokens is None else (tokens.ids, tokens.vectors)))
        ):
            self.resync(memory_dir)
            return None
        keys, cosines = store.similarities(query.vector)
        with self._lock:
            # Verified and its stale marks read together: a `forget` between the two (its
            # marks dropped, the stores not yet compared again) would let edited memories be
            # ranked by their old vectors.
            if memory_dir not in self._verified:
                return None
            stale = dict(self._changed.get(memory_dir, {}))
        import numpy as np

        # Left out, so they keep their lexical score: vectors of a text since edited (not the
        # memory's now), and zero vectors (a text with no token the model knows: its cosine
        # 0 would put it under every floor, however well its words match), and vectors not
        # all numbers (kept by a version before the encoder zeroed them: NaN passed every
        # floor), until they are made again (`_old_unknown_vectors`).
        unread = (cosines == 0.0) | ~np.isfinite(cosines)
        left_out: set[str] = set(stale)
        if stale or unread.any():
            left_out.update(k for k, zero in zip(keys, unread, strict=True) if zero)
            fresh = np.fromiter((k not in left_out for k in keys), dtype=bool, count=len(keys))
            cosines = cosines[fresh]
            keys = [k for k, keep in zip(keys, fresh, strict=True) if keep]
        freq = tokens.frequencies if tokens is not None else None
        pooled = (keys, cosines)
        scale = self.scale
        floored = (keys, scale.to(REFERENCE, cosines)) if scale is not None else None
        if tokens is None or freq is None:
            return Similarities(pooled, floored)
        wanted = late_interaction.candidates(
            [k for k in lexical_best if k not in left_out], keys, cosines
        )
        found, ids, rows = tokens.rows(wanted)
        if len(found) < len(wanted):  # some still being indexed: one signal for all
            return Similarities(pooled, floored)
        self.queries_late_interaction += 1
        late = late_interaction.scores(query.tokens, ids, rows, freq)
        return Similarities((found, late), floored)

    # -- the background thread ----------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._load()
        except Exception as exc:
            self.reason = f"lexical: embedding model unavailable ({exc})"
            log.warning("embeddings off", reason=self.reason)
        while True:
            with self._lock:
                if self._jobs.empty():
                    self._idle.set()
            job = self._jobs.get()
            if job is None:
                return
            if isinstance(job, _Forget):  # before the skip: a failed model leaves marks too
                self._drop(job.memory_dir)
                continue
            if self.encoder is None:
                continue
            try:
                self._embed(*job)
            except Exception:
                log.exception("embedding memories failed", memory_dir=str(job[0]))

    def _load(self) -> None:
        if not self.wanted:  # the reason is set by `wanted`
            return
        from memoryd.automem.embeddings.cosine_scale import UNRELATED, measure
        from memoryd.automem.embeddings.encoder import SentenceEncoder
        from memoryd.automem.embeddings.models import (
            EncoderUnavailable,
            ModelRefused,
            discard_if_made_here,
            locate_model,
            refused_before,
            remember_refusal,
        )

        def usable(files: ModelFiles) -> tuple[SentenceEncoder, CosineScale]:
            encoder = SentenceEncoder(files)
            scale = measure(encoder.encode(list(UNRELATED)))
            if scale is None:
                # NaN, infinite or one vector for every text (a damaged or foreign graph):
                # fused in, every memory passed with no floors and each prompt recalled all.
                raise ModelRefused(
                    f"model {encoder.name} gives the same vector, or none that is a number, "
                    "for texts that share nothing: its graph is damaged or not a sentence encoder"
                )
            return encoder, scale

        _one_blas_thread()
        self.reason = "lexical: loading the embedding model"
        files = locate_model(self.model_name)
        try:
            encoder, scale = usable(files)
        except EncoderUnavailable as exc:
            # memoryd's own converted copy, damaged (a crash mid-copy, a full disk): made
            # again once from its source; anything else is the user's to fix, and says why.
            # One made afresh from the same source and refused is not made again: just now
            # (its conversion would be repeated for the same refusal) or at an earlier start.
            if isinstance(exc, ModelRefused) and files.fresh:
                remember_refusal(files)
                raise
            if isinstance(exc, ModelRefused) and refused_before(files):
                raise
            if not discard_if_made_here(files):
                raise
            log.warning("converted embedding model unreadable: making it again", why=str(exc))
            made = locate_model(self.model_name)
            try:
                encoder, scale = usable(made)
            except ModelRefused:
                remember_refusal(made)  # its source makes it so: not made again each start
                raise
        self.scale = scale  # before queries can use it
        self.encoder = encoder
        self.reason = f"hybrid: model {encoder.name} loaded"
        log.info("embeddings on", model=encoder.name, cosine_scale=self.report()["cosine_scale"])

    def _old_unknown_vectors(
        self, memory_dir: Path, store: VectorStore, texts: dict[str, str], missing: set[str]
    ) -> list[str]:
        """Memories whose text has no token the model knows but whose stored vector is not
        zero: made before such texts got none (the one [UNK] vector they all shared); and
        memories whose stored vector is not all numbers (NaN or infinity, made before the
        encoder turned those to zero): made again once. Checked when a dir is first opened;
        tokenizing and one product over the store cost no model run."""
        import numpy as np

        assert self.encoder is not None
        keys = [k for k in texts if k not in missing]
        unknown = self.encoder.knows_nothing_of([texts[k] for k in keys])
        # A row's sum is NaN or infinite when the row holds a NaN or an infinity; a unit or
        # zero row sums to sqrt(dim) at most. One product over the store, no copy of it.
        held, sums = store.similarities(np.ones(store.dim, dtype=np.float32))
        broken = {k for k, total in zip(held, np.isfinite(sums), strict=True) if not total}
        again = []
        for key, nothing in zip(keys, unknown, strict=True):
            vector = store.vector(key) if nothing else None
            if key in broken or (vector is not None and vector.any()):
                again.append(key)
        if again:
            with self._lock:
                pending = self._changed.setdefault(memory_dir, {})
                pending.update((k, content_hash(texts[k])) for k in again)
        return again

    def _save(self, tokens: TokenStore, store: VectorStore, *, only_dirty: bool = False) -> None:
        """Both stores to disk. One that cannot be written (a full disk) keeps its vectors in
        memory, which recall goes on using, and `status` says so; the next save tries again."""
        try:
            for opened in (tokens, store):
                if opened.dirty or not only_dirty:
                    opened.save()
        except OSError as exc:
            if self.save_problem is None:
                log.warning("vectors not saved", error=str(exc))
            # The file in the way, for `status`: "File exists" alone did not say which one
            # (a file where the store's folder goes, a folder where its vectors.json goes).
            where = exc.filename2 if exc.filename2 is not None else exc.filename
            why = exc.strerror or str(exc)
            self.save_problem = f"{why}: {where}" if where is not None and exc.strerror else why
            return
        self.save_problem = None

    def _drop(self, memory_dir: Path) -> None:
        """`forget`, on the thread: the dir's stores saved if changed, then let go."""
        with self._lock:
            self._verified.discard(memory_dir)  # first: recall stops using them
            self._changed.pop(memory_dir, None)
        store = self._stores.pop(memory_dir, None)
        tokens = self._token_stores.pop(memory_dir, None)
        if store is not None and tokens is not None:
            self._save(tokens, store, only_dirty=True)  # not saved: embedded again next time
            _return_freed_memory()

    def _open_stores(self, memory_dir: Path) -> tuple[VectorStore, TokenStore]:
        """The directory's stores, loaded from disk the first time."""
        from memoryd.automem.embeddings.token_store import TokenStore
        from memoryd.automem.embeddings.vectors import VectorStore

        assert self.encoder is not None
        store, tokens = self._stores.get(memory_dir), self._token_stores.get(memory_dir)
        if store is None or tokens is None:
            folder = store_folder(memory_dir)
            store = VectorStore(folder, self.encoder.name, self.encoder.dim)
            tokens = TokenStore(folder, self.encoder.name, self.encoder.dim)
            store.load()
            for why in [store.rebuilt_reason, *tokens.load()]:
                if why:
                    log.warning(why, memory_dir=str(memory_dir))
            self._stores[memory_dir], self._token_stores[memory_dir] = store, tokens
        return store, tokens

    def _embed(self, memory_dir: Path, texts: dict[str, str]) -> None:
        import numpy as np

        assert self.encoder is not None
        store, tokens = self._open_stores(memory_dir)
        wanted = {key: content_hash(text) for key, text in texts.items()}
        missing, gone = store.stale(wanted)
        # A store from before token vectors (or one whose file was damaged) fills in too.
        missing_tokens, gone_tokens = tokens.stale(wanted)
        missing = list(dict.fromkeys([*missing, *missing_tokens]))
        # Before the old keys go: a memory renamed or moved, its text unchanged, has them.
        copied = _copy_alike(store, tokens, {k: wanted[k] for k in missing}) if missing else []
        if copied:
            done = set(copied)
            missing = [k for k in missing if k not in done]
        store.remove(gone)
        tokens.remove(gone_tokens)
        with self._lock:
            # What the loop marked changed, with what the stores lack for these texts.
            pending = self._changed.setdefault(memory_dir, {})
            lacking = set(missing)
            for key in [k for k, h in pending.items() if k not in lacking and wanted.get(k) == h]:
                del pending[key]
            pending.update((k, wanted[k]) for k in missing if k not in pending)
        if memory_dir not in self._verified:
            missing += self._old_unknown_vectors(memory_dir, store, texts, set(missing))
        with self._lock:
            self._verified.add(memory_dir)
        # Memories of the same text (copies, templates) share one model run.
        alike: dict[str, list[str]] = {}
        for key in missing:
            alike.setdefault(wanted[key], []).append(key)
        # Texts of like length batched together: less padding to compute, the same vectors.
        distinct = sorted(alike, key=lambda digest: len(texts[alike[digest][0]]))
        self.waiting = len(missing)
        try:
            for start in range(0, len(distinct), EMBED_CHUNK):
                chunk = distinct[start : start + EMBED_CHUNK]
                vectors, token_lists = self.encoder.encode_tokens(
                    [texts[alike[d][0]] for d in chunk]
                )
                self.memories_embedded += len(chunk)
                keys = [(k, d) for d in chunk for k in alike[d]]
                copies = [len(alike[d]) for d in chunk]
                tokens.put(keys, token_lists, copies)
                # The pooled vector last: a memory with one has its token vectors too.
                store.put(keys, np.repeat(vectors, copies, axis=0))
                with self._lock:
                    for key, digest in keys:
                        if pending.get(key) == digest:
                            del pending[key]
                self._save(tokens, store)
                self.waiting -= len(keys)
        finally:
            self.waiting = 0
        self._save(tokens, store, only_dirty=True)
        if missing or copied or gone_tokens or tokens.frequencies is None:
            tokens.refresh()
        if missing:
            _return_freed_memory()


def _copy_alike(store: VectorStore, tokens: TokenStore, missing: dict[str, str]) -> list[str]:
    """Of `missing` ({key: its text's hash}), the keys whose vectors were copied from a key
    that holds them for the same text (a memory renamed or moved into a folder, a copy of
    another), so the model never runs twice on one text. Before session 22 each was embedded
    again: vectors are kept by content hash, yet a new name was a new text."""
    ids, packed = tokens.ids.hashes(), tokens.vectors.hashes()
    donor_of: dict[str, str] = {}
    for key, digest in store.hashes().items():
        if ids.get(key) == digest and packed.get(key) == digest:  # all three of that text
            donor_of.setdefault(digest, key)
    items = [(key, digest) for key, digest in missing.items() if digest in donor_of]
    if items:
        donors = [donor_of[digest] for _, digest in items]
        copied = {key for key, _ in items}
        for opened in (tokens.ids, tokens.vectors, store):  # the pooled vector last, as embedded
            copied &= opened.copy(items, donors)
        # A key one store could not copy is embedded as any new text, all three written again.
        items = [(key, digest) for key, digest in items if key in copied]
    return [key for key, _ in items]
