"""The read-only shell parser: what runs, and everything a shell would interpret, refused."""

from __future__ import annotations

import pytest

from memoryd.agent.policy import Denied
from memoryd.agent.shell import parse


@pytest.mark.parametrize(
    ("command", "paths"),
    [
        ("ls -la /tmp/x", ("/tmp/x",)),
        ("cat 'my file.md'", ("my file.md",)),
        ("head -n 5 notes.md", ("notes.md",)),
        ("tail -n 20 a.md b.md", ("a.md", "b.md")),
        ("wc -l a.md", ("a.md",)),
        ("stat -c %s a.md", ("a.md",)),
        ("find /mem -name '*.md' -type f", ("/mem",)),
        ("find -maxdepth 1", (".",)),
        ("find . -newer ref.md", (".", "ref.md")),
        ("find . -newerma ref.md", (".", "ref.md")),
        ("find . -newermt 2024-01-01", (".",)),
        ("cat -- -weird.md", ("-weird.md",)),
        ('ls "a;b.md"', ("a;b.md",)),
    ],
)
def test_allowed_commands_and_their_paths(command: str, paths: tuple[str, ...]) -> None:
    plan = parse(command)
    assert plan.paths == paths
    assert plan.argv[0] == plan.program


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("rm -rf /", "'rm' is not allowed"),
        ("rm -rf .", "'rm' is not allowed"),
        ("cat x > y", "redirection"),
        ("cat < /etc/passwd", "redirection"),
        ("ls; rm x", "chaining"),
        ("ls && rm x", "background or chaining"),
        ("ls | sh", "pipes"),
        ("cat $(echo /etc/passwd)", "substitution"),
        ("cat `echo x`", "substitution"),
        ('cat "$HOME/.ssh/id_rsa"', "expansion"),
        ("find . -delete", "-delete"),
        ("find . -exec rm {} ;", "brace expansion"),
        ("find . -exec rm '{}' ';'", "-exec"),
        ("find . -execdir ls ';'", "-execdir"),
        ("find . -fprint out.txt", "-fprint"),
        ("find -L /mem", "follows symlinks"),
        ("ls *.md", "glob"),
        ("cat ~/.bashrc", "'~'"),
        ("ls -lL /x", "option"),
        ("tail -f log", "option"),
        ("wc --files0-from=list", "option"),
        # GNU getopt takes unambiguous prefixes of long options.
        ("wc --files0=list", "option"),
        ("tail --foll log", "option"),
        ("ls --derefer /x", "option"),
        # Starting points read from an unchecked file.
        ("find -files0-from list", "-files0-from"),
        ("cat -", "standard input"),
        ("PATH=/x ls", "environment"),
        ("/bin/ls", "not allowed"),
        ("ls 'unterminated", "unterminated"),
        ("ls\nrm x", "multiple commands"),
        ("", "empty"),
        ("(ls)", "subshells"),
    ],
)
def test_refused_commands(command: str, reason: str) -> None:
    with pytest.raises(Denied) as info:
        parse(command)
    assert reason in info.value.reason
