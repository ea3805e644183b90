"""Per-session and per-doc bookkeeping stays bounded however long the daemon runs (issue 14):
MagicDocs keeps its most recently read docs and, per doc, its most recent sessions; the
touched paths of sessions have a cap in all, the least recently used sessions going first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memoryd import magicdocs
from memoryd.magicdocs import DocHeader, MagicDocs
from memoryd.rules import sessions
from memoryd.rules.sessions import SessionPaths

NO_DAEMON: Any = None  # neither bookkeeping touches the daemon
ROOT = Path("/p")  # the project of every session here


def register(docs: MagicDocs, session_id: str, path: Path) -> None:
    docs._register(session_id, Path("/p"), [(path, ("text", DocHeader("T", None)))])


def test_magic_docs_keep_the_most_recently_read(tmp_path: Path) -> None:
    docs = MagicDocs(NO_DAEMON)
    for i in range(magicdocs.MAX_DOCS + 500):
        register(docs, "s", tmp_path / f"doc{i}.md")
    register(docs, "s", tmp_path / "doc0.md")  # read again: the most recent now
    assert len(docs.docs) == magicdocs.MAX_DOCS
    assert tmp_path / "doc0.md" in docs.docs
    assert tmp_path / f"doc{magicdocs.MAX_DOCS + 499}.md" in docs.docs
    assert tmp_path / "doc1.md" not in docs.docs


def test_a_magic_doc_keeps_its_most_recent_sessions(tmp_path: Path) -> None:
    docs = MagicDocs(NO_DAEMON)
    for i in range(magicdocs.MAX_SESSIONS_PER_DOC + 300):
        register(docs, f"s{i}", tmp_path / "doc.md")
    register(docs, "s0", tmp_path / "doc.md")
    (doc,) = docs.docs.values()
    assert len(doc.sessions) == magicdocs.MAX_SESSIONS_PER_DOC
    assert "s0" in doc.sessions
    assert "s1" not in doc.sessions


def test_touched_paths_have_a_cap_in_all() -> None:
    paths = SessionPaths()
    per_session = sessions.MAX_PATHS_TOTAL // 10
    for i in range(30):
        paths.add(ROOT, f"s{i}", (f"/src/{i}/{n}.py" for n in range(per_session)))
    assert sum(len(paths.get(ROOT, f"s{i}")) for i in range(30)) <= sessions.MAX_PATHS_TOTAL
    assert len(paths.get(ROOT, "s29")) == per_session  # the session in use keeps all of its paths
    assert paths.get(ROOT, "s0") == frozenset()  # the least recently used went first
