"""Which file a memory written by name goes to, so two different memories never share one.

A name becomes `<type>_<slug>.md` (`memfile.file_name_for`); different names can slug alike
(`Deploy Keys` / `deploy-keys!`, `.` / `..`). The file of the same name is updated in place;
a different memory gets the next free `<type>_<slug>_<n>.md`. The index file name and its
case and width variants (`memory.md`, `ＭＥＭＯＲＹ.md`: NFKC + casefold) are never a memory.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping

from memoryd.automem.index import INDEX_NAME

_INDEX_FOLDED = unicodedata.normalize("NFKC", INDEX_NAME).casefold()
MAX_SUFFIX = 10_000


def is_index_name(file_name: str) -> bool:
    """True for `MEMORY.md` and every name a case-insensitive or normalising filesystem (or
    reader) could take for it."""
    return unicodedata.normalize("NFKC", file_name).casefold() == _INDEX_FOLDED


def same_name(a: str, b: str) -> bool:
    """Names of the same memory: equal as written (NFC, outer whitespace dropped, as the
    frontmatter keeps them). `Deploy Keys` and `deploy keys` are two memories: when in doubt,
    keep both rather than replace one."""
    return unicodedata.normalize("NFC", a.strip()) == unicodedata.normalize("NFC", b.strip())


def family(base: str, keys: Mapping[str, object]) -> list[str]:
    """`base` and its suffixed siblings (`x.md`, `x_2.md`, `x_3.md` …) among `keys`."""
    stem = base.removesuffix(".md")
    pattern = re.compile(re.escape(stem) + r"(?:_\d+)?\.md")
    return sorted(k for k in keys if pattern.fullmatch(k))


def own_file(base: str, name: str, names: Mapping[str, str]) -> str | None:
    """The key in `base`'s family whose memory is called `name` ({key: name}), if any."""
    for key in family(base, names):
        if same_name(names[key], name):
            return key
    return None


def free_file(base: str, taken: Callable[[str], bool]) -> str:
    """`base`, or the first `<stem>_<n>.md` (n ≥ 2) that `taken` says is free."""
    if not taken(base):
        return base
    stem = base.removesuffix(".md")
    for n in range(2, MAX_SUFFIX):
        key = f"{stem}_{n}.md"
        if not taken(key):
            return key
    raise RuntimeError(f"no free file name for {base} after {MAX_SUFFIX} tries")
