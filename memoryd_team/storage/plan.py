"""What a PUT does to a repository, decided without touching a database (pure).

Both storages read the repo's current `(checksum, version)` per key inside their write
transaction, call `plan_upsert` (`plan_put` over an `Upsert`), and apply the returned writes. Keeping the decision here means
SQLite and PostgreSQL cannot drift apart on ETags, preconditions or the entry limit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from memoryd.team.protocol import checksum
from memoryd_team.storage.base import (
    IfMatch,
    KeyCollision,
    PreconditionFailed,
    TooManyEntries,
    Upsert,
)
from memoryd_team.storage.folders import find_clash


@dataclass(frozen=True, slots=True)
class Current:
    """One stored entry as the write transaction sees it."""

    checksum: str
    version: int


@dataclass(frozen=True, slots=True)
class Write:
    """A new version of one entry: appended to the history and made current."""

    key: str
    content: str
    checksum: str
    version: int


@dataclass(frozen=True, slots=True)
class Plan:
    writes: tuple[Write, ...]
    etag: str
    unchanged: tuple[str, ...]


def etag_for(checksums: Mapping[str, str]) -> str:
    """A strong ETag over the whole repo state: sha256 of the sorted (key, checksum) pairs.

    Sorted in Python (code point order), never by the database, whose collation may differ
    between SQLite and a PostgreSQL cluster; so every server process computes the same tag.
    """
    digest = hashlib.sha256()
    for key in sorted(checksums):
        digest.update(key.encode("utf-8"))
        digest.update(b"\0")
        digest.update(checksums[key].encode("ascii"))
        digest.update(b"\n")
    return f'"{digest.hexdigest()}"'


EMPTY_ETAG = etag_for({})


def precondition_holds(current_etag: str, has_entries: bool, if_match: IfMatch | None) -> bool:
    """If-Match against the repo state.

    Absent header: allowed only while the repo has no entries (the protocol's first push); on
    a repo with entries it fails like a stale tag, so a client that pulled a 404 and lost the
    race refreshes instead of overwriting. `*` needs entries to exist (RFC 9110 §13.1.1).
    """
    if if_match is None:
        return not has_entries
    if if_match.any:
        return has_entries
    return current_etag in if_match.etags


def check_stored_etag(stored_etag: str | None, upsert: Upsert) -> None:
    """PreconditionFailed unless the upsert's If-Match holds against the repository's stored
    ETag (`team_repos.etag`, written in the same transaction as the entries it describes;
    None when the repository has no row). One row decides a 412: under contention most PUTs
    are stale, and before this each read every entry's checksum and hashed them all, holding
    the repository's write lock (about 20 ms at 10,000 entries) only to refuse."""
    etag = stored_etag or EMPTY_ETAG
    if upsert.check_precondition and not precondition_holds(
        etag, etag != EMPTY_ETAG, upsert.if_match
    ):
        raise PreconditionFailed(etag)


def plan_put(
    current: Mapping[str, Current],
    incoming: Mapping[str, str],
    if_match: IfMatch | None,
    *,
    max_entries: int | None,
    check_precondition: bool = True,
) -> Plan:
    """Upsert `incoming` over `current`; keys absent from `incoming` stay as they are.

    Raises PreconditionFailed (stale If-Match) first: a stale client must refresh, and its
    recomputed delta may differ. Then KeyCollision for a new key no client folder could hold
    beside the others (a stored key is never refused: its updates go on), before
    TooManyEntries: the client drops that key, and the rest may fit.
    """
    checksums = {key: entry.checksum for key, entry in current.items()}
    current_etag = etag_for(checksums)
    if check_precondition and not precondition_holds(current_etag, bool(current), if_match):
        raise PreconditionFailed(current_etag)
    new_keys = sorted(key for key in incoming if key not in current)
    if new_keys:
        clash = find_clash(current, new_keys)
        if clash is not None:
            raise KeyCollision(clash.key, clash.other, clash.reason)
    writes: list[Write] = []
    unchanged: list[str] = []
    for key in sorted(incoming):
        content = incoming[key]
        digest = checksum(content)
        existing = current.get(key)
        if existing is not None and existing.checksum == digest:
            unchanged.append(key)
            continue
        writes.append(Write(key, content, digest, existing.version + 1 if existing else 1))
        checksums[key] = digest
    if max_entries is not None and len(checksums) > max_entries and len(checksums) > len(current):
        raise TooManyEntries(max_entries, len(checksums))
    return Plan(tuple(writes), etag_for(checksums), tuple(unchanged))


def plan_upsert(current: Mapping[str, Current], upsert: Upsert) -> Plan:
    """`plan_put` for a storage's write transaction."""
    return plan_put(
        current,
        upsert.entries,
        upsert.if_match,
        max_entries=upsert.max_entries,
        check_precondition=upsert.check_precondition,
    )
