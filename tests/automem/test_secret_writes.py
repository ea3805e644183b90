"""A memory write whose text holds a secret: a warning in the reply, or -32005 when refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd_client import RpcError
from tests.conftest import DaemonHandle, IsolatedEnv

# Built at run time so that no literal here looks like a key to a scanner.
AWS_KEY = "AK" + "IA" + "QYLPMN5HHHFPZAM2"
GITHUB_TOKEN = "gh" + "p_" + "N3r8wq5Vb2Zt7LkPf0HsXa9Jc4Ue6Ym1Dg8R"


async def test_a_private_write_with_a_secret_warns_and_saves(
    daemon: DaemonHandle, project: Path
) -> None:
    body = f"Deploy with the CI user.\naws key {AWS_KEY}\n"
    result = await daemon.call(
        "memory.write",
        cwd=str(project),
        type="reference",
        name="CI deploy user",
        description="how CI deploys",
        body=body,
    )
    assert Path(result["path"]).read_text().count(AWS_KEY) == 1
    (secret,) = result["secrets"]
    assert (secret["field"], secret["line"], secret["rule"]) == ("body", 2, "aws-access-token")
    assert secret["description"]
    (warning,) = result["warnings"]
    assert "aws-access-token" in warning
    assert "memorydRefuseSecrets" in warning
    assert AWS_KEY not in json.dumps(result["warnings"])  # never the secret itself


async def test_a_clean_write_has_empty_warnings(daemon: DaemonHandle, project: Path) -> None:
    result = await daemon.call(
        "memory.write",
        cwd=str(project),
        type="user",
        name="Tea",
        description="drinks tea",
        body="The user drinks green tea.",
    )
    assert (result["warnings"], result["secrets"]) == ([], [])


async def test_remember_warns_too(daemon: DaemonHandle, project: Path) -> None:
    result = await daemon.call(
        "memory.remember", cwd=str(project), text=f"My GitHub token is {GITHUB_TOKEN}"
    )
    assert result["created"] is True
    assert [s["rule"] for s in result["secrets"]] == ["github-pat"]
    assert result["warnings"]


async def test_the_refuse_setting_refuses_and_writes_nothing(
    daemon: DaemonHandle, project: Path, isolated_env: IsolatedEnv
) -> None:
    isolated_env.config_dir.mkdir(parents=True, exist_ok=True)
    (isolated_env.config_dir / "settings.json").write_text('{"memorydRefuseSecrets": true}')
    for method, fields in (
        (
            "memory.write",
            {"type": "user", "name": "Keys", "description": "d", "body": f"key {AWS_KEY}"},
        ),
        ("memory.remember", {"text": f"token {GITHUB_TOKEN}"}),
    ):
        with pytest.raises(RpcError) as err:
            await daemon.call(method, cwd=str(project), **fields)
        assert err.value.code == -32005
        assert "memorydRefuseSecrets" in err.value.message
        assert AWS_KEY not in err.value.message
        assert GITHUB_TOKEN not in err.value.message
        assert err.value.data["secrets"][0]["rule"] in ("aws-access-token", "github-pat")
    listing = await daemon.call("memory.list", cwd=str(project))
    assert listing["memories"] == []


async def test_a_repository_cannot_turn_the_refusal_off(
    daemon: DaemonHandle, project: Path, isolated_env: IsolatedEnv
) -> None:
    isolated_env.config_dir.mkdir(parents=True, exist_ok=True)
    (isolated_env.config_dir / "settings.json").write_text('{"memorydRefuseSecrets": true}')
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text('{"memorydRefuseSecrets": false}')
    with pytest.raises(RpcError) as err:
        await daemon.call(
            "memory.write",
            cwd=str(project),
            type="user",
            name="Keys",
            description="d",
            body=f"key {AWS_KEY}",
        )
    assert err.value.code == -32005


async def test_a_secret_in_the_file_name_is_found_like_one_in_the_text(
    daemon: DaemonHandle, project: Path, isolated_env: IsolatedEnv
) -> None:
    # Found by a bug hunt: `file` was not scanned, and the token went into MEMORY.md's index
    # line, so into every session's context, with no warning and past the refusal.
    fields = {"type": "reference", "name": "ci token", "description": "the CI token"}
    warned = await daemon.call(
        "memory.write",
        cwd=str(project),
        body="see the file name",
        file=f"ci_{GITHUB_TOKEN}.md",
        **fields,
    )
    assert [(s["field"], s["rule"]) for s in warned["secrets"]] == [("file", "github-pat")]
    (warning,) = warned["warnings"]
    assert "file matches secret rule github-pat" in warning
    assert GITHUB_TOKEN not in warning
    isolated_env.config_dir.mkdir(parents=True, exist_ok=True)
    (isolated_env.config_dir / "settings.json").write_text('{"memorydRefuseSecrets": true}')
    with pytest.raises(RpcError) as err:
        await daemon.call(
            "memory.write",
            cwd=str(project),
            body="see the file name",
            file=f"keys/{AWS_KEY}.md",
            **fields,
        )
    assert err.value.code == -32005
    assert AWS_KEY not in err.value.message
    assert err.value.data["secrets"] == [
        {"field": "file", "line": 1, "rule": "aws-access-token", "description": "AWS access key ID"}
    ]
    listing = await daemon.call("memory.list", cwd=str(project))
    assert len(listing["memories"]) == 1  # only the first, warned about


@pytest.mark.parametrize(
    "text",
    [
        f"{GITHUB_TOKEN} is the CI token for deploys",
        f"The deploy key is {AWS_KEY}. Rotate it monthly.",
    ],
)
async def test_remember_keeps_a_secret_out_of_the_name_file_and_index(
    daemon: DaemonHandle, project: Path, text: str
) -> None:
    # Found by a bug hunt: only the note was scanned, and the name derived from it, its file
    # name and its MEMORY.md line carried the key into every session's context.
    result = await daemon.call("memory.remember", cwd=str(project), text=text)
    path = Path(result["path"])
    index = (path.parent / "MEMORY.md").read_text()
    shown = [result["name"], result["description"], path.name, index]
    for key in (GITHUB_TOKEN, AWS_KEY):
        assert not [where for where in shown if key.lower() in where.lower()]
    assert "[redacted]" in result["description"]
    assert text in path.read_text()  # the body is the note, as warned
    assert result["secrets"]


async def test_two_remembers_named_by_different_keys_do_not_replace_each_other(
    daemon: DaemonHandle, project: Path
) -> None:
    # Both names are redacted to one "[redacted]"; taken as the user's name, the second note
    # updated the first memory in place and the first note was left only in history.
    notes = ("the staging deploy bot uses this", "the release signing bot uses that one")
    paths = set()
    for name, text in zip((GITHUB_TOKEN, GITHUB_TOKEN[:-4] + "WXYZ"), notes, strict=True):
        result = await daemon.call(
            "memory.remember", cwd=str(project), type="reference", name=name, text=text
        )
        paths.add(result["path"])
    assert len(paths) == 2
    saved = "".join(Path(p).read_text() for p in paths)
    assert all(note in saved for note in notes)


def test_a_secret_in_a_given_or_model_chosen_name_is_redacted() -> None:
    from memoryd.automem.quickadd import derive, parse_model_choice

    given = derive("the CI token", "reference", f"token {GITHUB_TOKEN}")
    assert given.name == "token [redacted]"
    reply = json.dumps(
        {"type": "reference", "name": f"CI key {AWS_KEY}", "description": f"use {AWS_KEY}"}
    )
    chosen = parse_model_choice(reply, f"ci key {AWS_KEY}", None)
    assert chosen is not None
    assert (chosen.name, chosen.description) == ("CI key [redacted]", "use [redacted]")


def test_a_secret_across_the_guessed_head_is_redacted_whole() -> None:
    from memoryd.automem.quickadd import without_secrets
    from memoryd.automem.quickguess import GUESS_CHARS

    text = "x" * (GUESS_CHARS - 30) + f" token {GITHUB_TOKEN} and more"
    head = without_secrets(text, GUESS_CHARS)
    assert head.endswith(" token [redacted]")
    assert "N3r8" not in head


def test_a_model_answer_with_part_of_a_key_or_the_key_recased_is_redacted() -> None:
    # The scanner knows a whole key: "ghp_N3r8wq5Vb2…" (a model shortening what it copies) or
    # the key in capitals went into the name, the file name and the MEMORY.md line.
    from memoryd.automem.quickadd import parse_model_choice

    note = f"{GITHUB_TOKEN} is the CI token for deployments"
    short, upper = GITHUB_TOKEN[:14], GITHUB_TOKEN.upper()
    reply = json.dumps(
        {"type": "reference", "name": f"CI token {short}…", "description": f"deployments: {upper}"}
    )
    chosen = parse_model_choice(reply, note, None)
    assert chosen is not None
    assert (chosen.name, chosen.description) == (
        "CI token [redacted]…",
        "deployments: [redacted]",  # a word of the note outside the key stays
    )
