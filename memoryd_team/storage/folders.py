"""Which keys can be files side by side in one team folder on every client (pure).

`protocol.key_problem` judges one key; this judges a key beside the others of its repository.
A client writes each key as a path under `team/`, so two keys cannot both be written when
- they, or folders on their way, differ only in case (`Notes.md` / `notes.md`, `Docs/a.md` /
  `docs/b.md`): macOS and Windows folders ignore case, and there one file would stand for
  both, a pull writing each over the other;
- one needs as a folder what the other is as a file (`a` / `a/b.md`), on any system.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Clash:
    key: str  # the new key that cannot be written
    other: str  # the stored key or folder it clashes with
    reason: str


def fold(path: str) -> str:
    """Unicode's canonical caseless form (§3.13, D145): what a case-insensitive folder (APFS,
    NTFS) takes for the same name. Full case folding: a little stricter than each of them."""
    if path.isascii():
        return path.lower()  # the same, and the common case: this runs for every stored key
    return unicodedata.normalize("NFD", unicodedata.normalize("NFD", path).casefold())


def find_clash(stored: Iterable[str], new: Iterable[str]) -> Clash | None:
    """The first of `new` (in the order given) that clashes with a stored key or with an
    earlier one of `new`; None when all of them can be written."""
    taken: dict[str, tuple[str, bool]] = {}  # folded path -> (its spelling, is a folder)
    for key in stored:
        _take(taken, key)
    for key in new:
        clash = _clash(taken, key)
        if clash is not None:
            return clash
        _take(taken, key)
    return None


def _take(taken: dict[str, tuple[str, bool]], key: str) -> None:
    """`key` as a file and each folder on its way. A path in `taken` has its folders there
    too, so the walk up stops at the first one: about one entry per key, not one per level."""
    path, folded = key, fold(key)
    taken.setdefault(folded, (path, False))
    while "/" in path:
        path, folded = path.rpartition("/")[0], folded.rpartition("/")[0]
        if folded in taken:
            return
        taken[folded] = (path, True)


def _clash(taken: dict[str, tuple[str, bool]], key: str) -> Clash | None:
    # Folding keeps every `/` and works character by character: the key is folded once, and
    # its folders' folds are its prefixes.
    segments, folds = key.split("/"), fold(key).split("/")
    for depth in range(1, len(segments) + 1):
        path, is_folder = "/".join(segments[:depth]), depth < len(segments)
        seen = taken.get("/".join(folds[:depth]))
        if seen is None:
            continue
        other, other_is_folder = seen
        if other != path:
            return Clash(
                key,
                other,
                f"{path!r} and {other!r} differ only in case: a macOS or Windows folder "
                "holds one of them, not both",
            )
        if is_folder and not other_is_folder:
            return Clash(key, other, f"{path!r} is an entry, so it cannot also be a folder")
        if other_is_folder and not is_folder:
            return Clash(
                key, other, f"{path!r} is a folder of other entries, so it cannot also be one"
            )
    return None
