"""The decisions of a sync, as pure functions over checksums (no I/O, no clock).

Three checksums per key drive everything: the server's (`server`), the local file's
(`local`, None when the file is missing) and the one both sides agreed on at the last sync
(`synced`). With them a pull tells "the server changed" from "I changed" from "both changed",
and a push sends exactly the keys the user edited.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


class PullAction(enum.Enum):
    IN_STEP = "in_step"  # the local file already has the server's content
    WRITE = "write"  # missing locally, or unchanged locally since the last sync: server wins
    KEEP_LOCAL = "keep_local"  # edited locally, the server still has the synced version: push it
    CONFLICT = "conflict"  # both changed: save the local edit aside, then the server wins


def pull_action(server: str, local: str | None, synced: str | None) -> PullAction:
    if local == server:
        return PullAction.IN_STEP
    if local is None or local == synced:
        return PullAction.WRITE
    if server == synced:
        return PullAction.KEEP_LOCAL
    return PullAction.CONFLICT


def push_delta(
    local: Mapping[str, str], server: Mapping[str, str], synced: Mapping[str, str]
) -> list[str]:
    """Keys to upload, sorted: content differs from the server's AND the server has no version
    of it or the user changed it since the last sync. A key unchanged locally whose server
    copy moved on is the pull's business — pushing it would overwrite a teammate's edit."""
    return sorted(
        key
        for key, digest in local.items()
        if digest != server.get(key) and (key not in server or digest != synced.get(key))
    )


def conflicted_keys(
    local: Mapping[str, str], server: Mapping[str, str], synced: Mapping[str, str]
) -> list[str]:
    """Keys both sides changed since the last sync, sorted: the local file differs from the
    server's version and from the synced one, and the server's version is not the synced one
    either (or the server has a version we never synced). Pushing such a key would overwrite a
    teammate's edit; the pull's rule applies instead (PullAction.CONFLICT: server wins, the
    local edit is saved aside)."""
    return sorted(
        key
        for key, digest in local.items()
        if key in server
        and digest != server[key]
        and digest != synced.get(key)
        and server[key] != synced.get(key)
    )


def stale_keys(
    local: Mapping[str, str], server: Mapping[str, str], synced: Mapping[str, str]
) -> list[str]:
    """Keys the server changed while the local file stayed as synced: a pull would update them."""
    return sorted(
        key
        for key, digest in server.items()
        if local.get(key) != digest and (key not in local or local[key] == synced.get(key))
    )


@dataclass(frozen=True, slots=True)
class Admission:
    admitted: tuple[str, ...]
    over_limit: tuple[str, ...]


def admit(delta: Iterable[str], server: Mapping[str, str], max_entries: int | None) -> Admission:
    """Keep a push under the server's learned entry limit: updates always fit, new keys only
    while there is room (in sorted order, so the choice is stable from push to push)."""
    keys = sorted(delta)
    if max_entries is None:
        return Admission(tuple(keys), ())
    room = max(0, max_entries - len(server))
    admitted: list[str] = []
    over: list[str] = []
    for key in keys:
        if key in server:
            admitted.append(key)
        elif room > 0:
            admitted.append(key)
            room -= 1
        else:
            over.append(key)
    return Admission(tuple(admitted), tuple(over))


def backoff_delay(failures: int, *, base: float, cap: float, jitter: float) -> float:
    """Exponential backoff: base·2^(failures-1), capped, scaled by `jitter` (0.5–1.5, random
    and supplied by the caller so this stays pure)."""
    exponent = min(max(failures - 1, 0), 30)
    return float(min(cap, base * (2**exponent)) * jitter)
