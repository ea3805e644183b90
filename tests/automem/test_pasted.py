"""Which lines of a prompt the user wrote and which they pasted (`automem/recall/pasted.py`)."""

from __future__ import annotations

import pytest

from memoryd.automem.recall.pasted import split_prompt

TRACEBACK = """Traceback (most recent call last):
  File "/home/me/app/server.py", line 88, in handle_request
    body = json.loads(request.data)
json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"""


def test_a_fenced_block_is_pasted_and_the_prose_around_it_is_not() -> None:
    got = split_prompt(
        "why is this loop slow?\n\n```python\nfor row in rows:\n    total += 1\n```\nany idea"
    )
    assert got.written == "why is this loop slow?\n\nany idea"
    assert got.pasted == "```python\nfor row in rows:\n    total += 1\n```"


def test_a_fence_ends_only_on_its_own_kind_and_length() -> None:
    got = split_prompt("look:\n````\n```\nstill code\n~~~\n````\nafter")
    assert got.written == "look:\nafter"


def test_an_unclosed_fence_runs_to_the_end() -> None:
    assert split_prompt("fix this\n```\nx = 1\n\nwhy").written == "fix this"


def test_a_line_opening_with_a_triple_backtick_code_span_opens_no_fence() -> None:
    # A backtick fence's info string holds no backtick: "```make deploy``` fails" is a code
    # span. Read as a fence, every later line, the user's question too, was pasted.
    prompt = "```make deploy``` fails on staging\nwho owns the release checklist?"
    got = split_prompt(prompt)
    assert "who owns the release checklist?" in got.written
    assert got.pasted == ""


@pytest.mark.parametrize(
    ("paste", "kept"),
    [
        (TRACEBACK, "Traceback (most recent call last):"),  # the heading stays: it is one line
        ("$ git status\nOn branch main\nYour branch is ahead of 'origin/main' by 2 commits.", ""),
        (
            "npm ERR! code ERESOLVE\nnpm ERR! Found: react@18.2.0\nnpm ERR! from the root project",
            "",
        ),
        (
            'Exception in thread "main" java.lang.NullPointerException\n'
            "\tat com.acme.Orders.validate(Orders.java:57)\n\tat com.acme.Main.main(Main.java:12)",
            "",
        ),
        ("NAME   READY   STATUS\nweb-7d9f-x2kq9   0/1   CrashLoopBackOff", ""),
    ],
)
def test_unfenced_output_is_pasted(paste: str, kept: str) -> None:
    got = split_prompt(f"what is wrong here?\n{paste}\ncan you help?")
    assert got.written == "\n".join(x for x in ("what is wrong here?", kept, "can you help?") if x)


@pytest.mark.parametrize(
    "prose",
    [
        "What does `load_settings()` return when the file is missing?\nAnd what about `None`?",
        "Rename `config_path` to `settings_path` in `app/settings.py`\nand in the tests, "
        "`tests/test_settings.py`.",
        "The p95 went from 7.2 ms to 3.3 ms (17 of 20 found, 0.64 each)\nafter the change.",
        "Caroline went to the LGBTQ support group on 7 May 2023.\nMelanie painted a sunrise.\n"
        "John's team won the game 3-1.",
        "- first, check the logs\n- then, restart the service\n  if it still fails, page Dana",
        "Compare f(x) with g(x) for me.\nWhich is faster?",
        # Notes written as a list: a closing semicolon, an "=", a path of directories, and
        # the item's next lines indented to its text are prose in sentences.
        "Before the release:\n"
        "- bump the version in both package files and tag it on main;\n"
        "- the changelog lists every fix since the last tag, with input/output/cache figures;\n"
        "  - a batch of more than 1,000 calls gets -32600 from the server, and\n"
        "    the connection whose input would go past the cap is closed;\n"
        "  - warm = the context served from the daemon's cache, cold = a fresh process;",
    ],
)
def test_prose_is_the_users_own(prose: str) -> None:
    assert split_prompt(prose).written == prose


def test_one_line_is_never_a_paste() -> None:
    line = "x = load(path); return {k: v for k, v in x.items()}"
    assert split_prompt(line).written == line


@pytest.mark.parametrize(
    "code",
    [
        # constants with their comments read as sentences but for the comment after the code
        "COMPACT_SHARE = 0.25  # the log is folded into a new base past this share of it\n"
        "BLOCK_ROWS = 1024  # rows per checksummed block of the base: what a flipped byte costs",
        "def total(rows):\n    for row in rows:\n        yield row.amount if row else 0",
    ],
)
def test_code_that_reads_like_prose_is_pasted(code: str) -> None:
    got = split_prompt(f"what does this do?\n{code}")
    assert got.written == "what does this do?"


def test_the_keys_under_a_yaml_list_item_that_reads_as_a_sentence_are_pasted() -> None:
    # Its indented lines are no sentences, so their indentation is code's, not a list item's.
    got = split_prompt(
        "steps:\n  - name: build and test the whole project on every push\n"
        "    run: make test\n    env:\n      CI: true"
    )
    assert got.pasted == "    run: make test\n    env:\n      CI: true"


def test_a_question_under_a_shell_session_is_the_users() -> None:
    got = split_prompt("$ make test\nFAIL: test_refund (2 of 41)\nwhy does only this one fail?")
    assert got.written == "why does only this one fail?"
