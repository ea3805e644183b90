"""A write by memoryd to a memory file written by hand or by another tool keeps what memoryd
does not write: frontmatter keys other than name, description and type stay, as written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from memoryd.automem.memfile import keep_unknown_keys, load_frontmatter, render_memory
from tests.conftest import DaemonHandle

NEW = render_memory("user", "Short answers", "answer style, updated", "Keep them very short.")


def _meta(text: str) -> dict[str, object]:
    return dict(load_frontmatter(text).metadata)


@pytest.mark.parametrize(
    ("old", "kept"),
    [
        (
            "---\nname: Short answers\ndescription: answer style\ntype: user\n"
            "tags: [style, tone]\ncreated: 2024-01-02  # by hand\n---\n\nKeep answers short.\n",
            "tags: [style, tone]\ncreated: 2024-01-02  # by hand\n",
        ),
        (  # CRLF, a comment, a block list at column 0, a folded description, no type
            "\ufeff---\r\n# mine\r\nname: Short answers\r\ndescription: >\r\n  answer\r\n"
            "  style\r\naliases:\r\n- brief\r\n- terse\r\n---\r\nbody\r\n",
            "# mine\n",
        ),
        (  # quoted keys, a key memoryd writes given twice
            "---\n'source': claude\nname: x\n\"origin session\": abc\nname: y\n---\nbody\n",
            "'source': claude\n",
        ),
    ],
)
def test_unknown_keys_survive_an_update(old: str, kept: str) -> None:
    text = keep_unknown_keys(old, NEW)
    assert kept in text
    meta = _meta(text)
    for key, value in _meta(old).items():
        if key not in ("name", "description", "type"):
            assert meta[key] == value
    assert {k: meta[k] for k in ("name", "description", "type")} == {
        "name": "Short answers",
        "description": "answer style, updated",
        "type": "user",
    }
    assert load_frontmatter(text).content == "Keep them very short."


@pytest.mark.parametrize(
    "old",
    [
        "no frontmatter\n",
        "---\nname: x\ndescription: d\ntype: user\n---\nbody\n",  # nothing else to keep
        "---\nname: [unclosed\n---\nbody\n",  # broken: nothing can be kept
    ],
)
def test_nothing_to_keep_writes_the_new_text(old: str) -> None:
    assert keep_unknown_keys(old, NEW) == NEW


@pytest.mark.parametrize(
    ("old", "kept", "value"),
    [
        (  # `name: Fix: uv` broke the header; tags is a list as written
            "---\nname: Fix: uv\ndescription: d\ntype: user\ntags: [a, b]\n---\nbody\n",
            "tags: [a, b]\n",
            ["a", "b"],
        ),
        (  # the broken line is the kept key's own: read as the retry reads it, kept as is
            "---\nname: x\ndescription: d\ntype: user\nsource: see: a.md\n---\nbody\n",
            "source: see: a.md\n",
            "see: a.md",
        ),
    ],
)
def test_keys_of_a_header_read_by_the_quoting_retry_stay_as_written(
    old: str, kept: str, value: object
) -> None:
    # Found by a review: a header that parsed only with its values quoted as Claude Code
    # quotes them (569f8c3) had its other keys rewritten as that retry read them: an update
    # turned `tags: [a, b]` into the string `tags: '[a, b]'` in the file.
    text = keep_unknown_keys(old, NEW)
    assert kept in text
    assert _meta(text)[kept.split(":")[0]] == value
    assert _meta(text)["description"] == "answer style, updated"


def test_keys_that_cannot_be_spliced_are_dumped_again() -> None:
    # A flow mapping spread over lines with the key memoryd writes inside its lines.
    old = "---\nname: x\nextra: {a: 1,\nname: 2}\ntype: user\n---\nbody\n"
    assert yaml.safe_load(old.split("---")[1])["extra"] == {"a": 1, "name": 2}
    text = keep_unknown_keys(old, NEW)
    assert _meta(text)["extra"] == {"a": 1, "name": 2}
    assert _meta(text)["description"] == "answer style, updated"


async def test_memory_write_keeps_a_hand_written_files_keys(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    memdir.mkdir(parents=True)
    path = memdir / "user_short_answers.md"
    path.write_text(
        "---\nname: Short answers\ndescription: answer style\ntype: user\n"
        "tags: [style, tone]  # mine\nsource: claude-code\n---\n\nKeep answers short.\n"
    )
    res = await daemon.call(
        "memory.write",
        cwd=str(project),
        type="user",
        name="Short answers",
        description="answer style, updated",
        body="Keep them very short.",
    )
    assert res["path"] == str(path)
    assert path.read_text() == (
        "---\nname: Short answers\ndescription: answer style, updated\ntype: user\n"
        "tags: [style, tone]  # mine\nsource: claude-code\n---\n\nKeep them very short.\n"
    )
    read = await daemon.call("memory.read", cwd=str(project), path=res["path"])
    assert read["frontmatter"]["tags"] == ["style", "tone"]
    assert read["valid"]
