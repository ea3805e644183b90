"""Resolving an `@include` reference to a path, and which files may be included at all."""

from __future__ import annotations

import os.path
from pathlib import Path

# Only text: an include is pasted into the prompt. Every extension Claude Code's own list
# has (its TEXT_FILE_EXTENSIONS) and more, except `.env` (secrets), left out on purpose.
TEXT_EXTENSIONS = frozenset(
    # A word list reads better than a hundred quoted strings (hence the SIM905 noqa).
    """
    md markdown mdx mdown txt text rst adoc asciidoc org tex latex
    json jsonc json5 yaml yml toml ini cfg conf config xml csv tsv edn lock
    html htm css scss sass less svg ejs erb hbs pug jade
    js jsx mjs cjs ts tsx mts cts vue svelte astro
    py pyi pyw rb rake go rs java kt kts scala sbt groovy gradle swift m mm c h cc cpp cxx
    hpp hh hxx cs fs php pl pm lua r jl dart ex exs erl hrl hs lhs ml mli clj cljs cljc elm
    nim zig v sol f f90 f95 for
    sh bash zsh fish ps1 bat cmd sql graphql gql proto thrift tf hcl nix cmake mk make
    makefile properties editorconfig gitignore dockerignore dockerfile patch diff log
    """.split()  # noqa: SIM905
)
# A name without an extension is text only when it is one of these (Claude Code takes any
# such file): an extension is no name, since `~/.kube/config` or `.git/config` may hold
# credentials.
TEXT_NAMES = frozenset({"editorconfig", "gitignore", "dockerignore", "dockerfile", "makefile"})


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
    """A known text extension; or, for a name with none, one of TEXT_NAMES (`.gitignore`,
    `.editorconfig`, `Dockerfile`, `Makefile`: Python sees no suffix in a dotfile's name)."""
    if path.suffix:
        return path.suffix.lower()[1:] in TEXT_EXTENSIONS
    return path.name.lower().lstrip(".") in TEXT_NAMES


def is_within(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)
