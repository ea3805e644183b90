"""The installed memoryd version, read from package metadata (clients never import memoryd)."""

from __future__ import annotations


def installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # slow: only when asked

    try:
        return version("memoryd")
    except PackageNotFoundError:
        return "(not installed: run from a source tree)"
