"""The `memoryd-team` commands the pages name are the server's: PROTOCOL.md's table of them is
a contract (`serve`, `token create/list/revoke`, `history`, `restore`, `--database`), and no
test read the pages against `memoryd_team.cli`'s parser (memctl's and memoryd's commands
each have one in test_docs_claims.py)."""

from __future__ import annotations

import argparse
import itertools
import re
from pathlib import Path

from memoryd_team.cli import _parser

REPO = Path(__file__).resolve().parent.parent
PAGES = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices) if actions else {}


def _commands() -> dict[str, argparse.ArgumentParser]:
    """Every runnable command by its words (`serve`, `token create`, …)."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(words: str, parser: argparse.ArgumentParser) -> None:
        subs = _subcommands(parser)
        if not subs:
            found[words] = parser
        for name, sub in subs.items():
            walk(f"{words} {name}".strip(), sub)

    walk("", _parser())
    return found


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings if s.startswith("--")} - {"--help"}


def test_every_memoryd_team_command_named_in_the_pages_exists_with_its_flags() -> None:
    commands = _commands()
    wrong: list[str] = []
    for page in PAGES:
        for span in re.findall(r"`memoryd-team ([^`]*)`", page.read_text()):
            words = span.split()
            name = next(
                (
                    c
                    for c in sorted(commands, key=len, reverse=True)
                    if words[: len(c.split())] == c.split()
                ),
                None,
            )
            if name is None:
                # A command's first words alone (`memoryd-team token`) name no runnable one.
                lead = list(itertools.takewhile(lambda w: re.fullmatch(r"[a-z]+", w), words))
                if not any(c.split()[: len(lead)] == lead for c in commands):
                    wrong.append(f"{page.name}: memoryd-team {span}: no such command")
                continue
            unknown = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", span)) - _flags(commands[name])
            if unknown:
                wrong.append(f"{page.name}: memoryd-team {span}: {sorted(unknown)}")
    assert wrong == []


def test_the_team_server_page_s_table_names_every_command_and_flag() -> None:
    text = (REPO / "docs" / "team-server.md").read_text()
    table = text.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `memoryd-team ([^`]*)`", table, re.M)
    # "Every command takes `--database URL`", said once below the table.
    assert "Every command takes `--database URL`" in table
    missing: dict[str, list[str]] = {}
    for name, parser in _commands().items():
        said = [row for row in rows if row.split()[: len(name.split())] == name.split()]
        named = {flag for row in said for flag in re.findall(r"--[a-z][a-z-]*", row)}
        left = sorted(_flags(parser) - named - {"--database"})
        if not said or left:
            missing[name] = left or ["(no row)"]
    assert missing == {}
