"""Resolving an `@include` reference to a path, and which files may be included at all."""

from __future__ import annotations

import os.path
from pathlib import Path

# Only text: an include is pasted into the prompt. `.env`-style files are left out on
# purpose (they hold secrets), and so is anything without an extension.
TEXT_EXTENSIONS = frozenset(
    # A word list reads better than a hundred quoted strings (hence the SIM905 noqa).
    """
    md markdown mdx mdown txt text rst adoc asciidoc org tex
    json jsonc json5 yaml yml toml ini cfg conf xml csv tsv
    html htm css scss sass less svg
    js jsx mjs cjs ts tsx mts cts vue svelte astro
    py pyi rb go rs java kt kts scala groovy gradle swift m mm c h cc cpp cxx hpp hh cs fs
    php pl pm lua r jl dart ex exs erl hrl hs ml mli clj cljs elm nim zig v sol
    sh bash zsh fish ps1 bat cmd sql graphql gql proto thrift tf hcl nix cmake mk
    properties editorconfig gitignore dockerignore dockerfile patch diff log
    """.split()  # noqa: SIM905
)


def resolve(ref: str, including_dir: Path, home: Path) -> Path:
    """`@./x`, `@x`, `@../x` relative to the including file; `@~/x` from home; `@/x` absolute."""
    if ref == "~" or ref.startswith("~/"):
        target = home / ref[2:] if ref.startswith("~/") else home
    elif ref.startswith("/"):
        target = Path(ref)
    else:
        target = including_dir / ref
    return Path(os.path.normpath(target))


def is_text_name(path: Path) -> bool:
    """A known text extension; or, for a name with none, the name itself (`.gitignore`,
    `.editorconfig`, `Dockerfile`: Python sees no suffix in a dotfile's name)."""
    suffix = path.suffix.lower().lstrip(".") or path.name.lower().lstrip(".")
    return suffix in TEXT_EXTENSIONS


def is_within(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)
