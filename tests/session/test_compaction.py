from __future__ import annotations

from typing import Any

from memoryd.fences import in_fenced_code
from memoryd.llm.tokens import estimate_message, estimate_text
from memoryd.session.compaction import (
    BOUNDARY_TAG,
    MAX_KEEP_TOKENS,
    MIN_KEEP_TEXT_MESSAGES,
    MIN_KEEP_TOKENS,
    SECTION_CUT_NOTE,
    compacted_head,
    cut_long_sections,
    has_text,
    plan_compaction,
    plan_window,
    tool_result_ids,
    tool_use_ids,
)
from memoryd.session.template import builtin_template
from tests.session.builders import assistant, conversation, tool_call, tool_result, user, words


def per(messages: list[dict[str, Any]]) -> list[int]:
    return [estimate_message(m) for m in messages]


def assert_pairs_intact(kept: list[dict[str, Any]]) -> None:
    calls: set[str] = set()
    for message in kept:
        for tool_id in tool_result_ids(message):
            assert tool_id in calls, f"tool result {tool_id} kept without its call"
        calls |= tool_use_ids(message)


def test_window_meets_the_minimums_and_stays_under_the_cap() -> None:
    messages = conversation(200_000, per_exchange=2_000)
    window = plan_window(messages, per(messages))
    kept = messages[window.start :]
    assert MIN_KEEP_TOKENS <= window.tokens <= MAX_KEEP_TOKENS
    assert window.tokens == sum(per(kept))
    assert sum(has_text(m) for m in kept) >= MIN_KEEP_TEXT_MESSAGES
    assert window.text_messages == sum(has_text(m) for m in kept)
    assert_pairs_intact(kept)


def test_window_keeps_five_text_messages_beyond_ten_thousand_tokens() -> None:
    # Two huge tool results make 10k tokens quickly; text messages must still reach 5.
    messages: list[dict[str, Any]] = []
    for index in range(8):
        messages.append(user(f"question {index}"))
        messages.append(assistant(f"answer {index}"))
    call = tool_call(file_path="/big")
    messages += [call, tool_result(call, words(12_000))]
    window = plan_window(messages, per(messages))
    kept = messages[window.start :]
    assert sum(has_text(m) for m in kept) >= MIN_KEEP_TEXT_MESSAGES
    assert window.tokens >= MIN_KEEP_TOKENS


def test_window_stops_at_the_cap_even_below_the_minimums() -> None:
    messages = [user(words(30_000)), assistant(words(15_000)), user(words(100))]
    window = plan_window(messages, per(messages))
    assert window.start == 1  # 15k + 100 fit; adding 30k would pass 40k
    assert window.tokens <= MAX_KEEP_TOKENS


def test_a_last_message_over_the_cap_is_not_kept() -> None:
    messages = [user("hi"), assistant(words(50_000))]
    window = plan_window(messages, per(messages))
    assert window.start == 2
    assert window.tokens == 0


def test_the_start_never_splits_a_call_from_its_result() -> None:
    # Each exchange: user, (call, result), assistant; try many sizes so starts land everywhere.
    for size in range(900, 3_000, 137):
        messages = conversation(60_000, per_exchange=size, tools=3)
        window = plan_window(messages, per(messages))
        kept = messages[window.start :]
        assert_pairs_intact(kept)
        assert window.tokens <= MAX_KEEP_TOKENS


def test_the_call_is_pulled_in_when_it_fits() -> None:
    call = tool_call(file_path="/a")
    messages = [user(words(20_000)), call, tool_result(call, words(9_990)), *[assistant("x")] * 5]
    window = plan_window(messages, per(messages))
    assert window.start == 1  # started at the result, moved back one to include the call
    assert window.moved_for_tools == -1


def test_the_result_is_dropped_when_its_call_does_not_fit() -> None:
    call = tool_call(file_path="/a", text=words(15_000))
    messages = [user("q"), call, tool_result(call, words(30_000)), assistant(words(5_000))]
    window = plan_window(messages, per(messages))
    kept = messages[window.start :]
    assert_pairs_intact(kept)
    assert kept[0]["role"] == "assistant"
    assert window.tokens <= MAX_KEEP_TOKENS


def test_a_result_with_no_call_anywhere_is_left_alone() -> None:
    orphan = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "x"}],
    }
    messages = [user("a"), assistant("b"), orphan, assistant("c")]
    window = plan_window(messages, per(messages))
    assert window.start == 0  # everything fits; the orphan does not move the start


def test_unsummarized_messages_are_kept_when_they_fit() -> None:
    messages = conversation(80_000, per_exchange=2_000)
    plain = plan_window(messages, per(messages))
    covered = plain.start - 8
    window = plan_window(messages, per(messages), summarized=covered)
    assert window.start <= covered
    # Never past the cap, even for unsummarized messages.
    window = plan_window(messages, per(messages), summarized=0)
    assert window.tokens <= MAX_KEEP_TOKENS


def test_empty_transcript_plans_an_empty_window() -> None:
    window = plan_window([], [])
    assert (window.start, window.tokens) == (0, 0)


def test_long_sections_are_cut_at_a_line_boundary() -> None:
    long_body = "\n".join(f"- step {i}: " + "x" * 60 for i in range(400))
    summary = builtin_template().replace("# Worklog\n_", f"# Worklog\n{long_body}\n_", 1)
    cut = cut_long_sections(summary, "/s/summary.md")
    assert cut.cut_sections == ("Worklog",)
    section = cut.text.split("# Worklog\n", 1)[1]
    assert estimate_text(section) < 2_200
    for line in section.splitlines()[:-1]:
        assert line in long_body.splitlines()  # whole lines only
    assert "/s/summary.md" in section.splitlines()[-1]
    # Short sections are untouched.
    assert cut.text.split("# Worklog\n", 1)[0] == summary.split("# Worklog\n", 1)[0]


def test_a_single_overlong_line_is_cut_inside() -> None:
    cut = cut_long_sections("# Learnings\n" + "y" * 20_000 + "\n", "/p")
    assert cut.cut_sections == ("Learnings",)
    assert len(cut.text) < 9_000


def test_plan_compaction_shape() -> None:
    messages = conversation(100_000, per_exchange=2_000)
    plan = plan_compaction(messages, per(messages), "# Session Title\nfix bug\n", "/s/summary.md")
    boundary, summary, *rest = plan.messages
    assert boundary["role"] == "user"
    assert boundary["content"][0]["text"].startswith(BOUNDARY_TAG)
    assert summary["role"] == "user"
    assert "fix bug" in summary["content"][0]["text"]
    assert "/s/summary.md" in summary["content"][0]["text"]
    assert rest == messages[plan.window.start :]
    assert rest[0] is messages[plan.window.start]  # kept messages are passed through as-is
    assert plan.tokens_before == sum(per(messages))
    assert plan.tokens_after < plan.tokens_before


def test_a_summary_with_many_sections_is_cut_as_a_whole() -> None:
    sections = "".join(f"# Part {i}\n" + "\n".join(["z" * 70] * 80) + "\n" for i in range(30))
    cut = cut_long_sections(sections, "/p")
    assert cut.cut_sections == ("(whole summary)",)
    assert estimate_text(cut.text) <= 24_200
    assert cut.text.rstrip().endswith("...]")


def test_a_long_paragraph_after_the_description_is_cut_inside_not_dropped() -> None:
    # The template's shape: heading, italic description, then the notes as one paragraph.
    paragraph = " ".join(f"note{i}" for i in range(4_000))
    cut = cut_long_sections(f"# Current State\n_What is going on._\n{paragraph}\n", "/p")
    assert cut.cut_sections == ("Current State",)
    _, description, kept, note = cut.text.splitlines()
    assert description == "_What is going on._"
    assert paragraph.startswith(kept)
    assert 1_800 < estimate_text(kept) <= 2_000
    assert not kept.endswith(" ")
    assert kept.split()[-1] in paragraph.split()  # ended at a word
    assert "/p" in note


def test_a_line_of_cjk_text_is_cut_to_the_budget_in_tokens() -> None:
    cut = cut_long_sections("# Learnings\n" + "记忆" * 10_000 + "\n", "/p")
    body = cut.text.split("# Learnings\n", 1)[1].splitlines()[0]
    assert 1_900 < estimate_text(body) <= 2_000


def test_a_line_that_does_not_fit_is_left_out_when_little_room_is_left() -> None:
    lines = ["w" * 7_840, "v" * 4_000]  # 1,960 tokens, then 1,000: under 50 left for it
    cut = cut_long_sections("# Worklog\n" + "\n".join(lines) + "\n", "/p")
    assert cut.text.split("# Worklog\n", 1)[1].splitlines()[0] == lines[0]
    assert "v" not in cut.text


def test_an_earlier_compactions_head_is_not_kept() -> None:
    # Found by a bug hunt: a short compacted transcript compacted again (a /compact soon
    # after) kept the old marker and the old notes after the new ones: two markers, and two
    # versions of the notes, the older one stale.
    first = plan_compaction(conversation(6_000), per(conversation(6_000)), "# Old notes\n", "/s")
    again = [*first.messages, user("and now?"), assistant("ok")]
    second = plan_compaction(again, per(again), "# New notes\n", "/s", 2)
    texts = [str(m["content"]) for m in second.messages]
    assert sum(BOUNDARY_TAG in t for t in texts) == 1
    assert sum("<session-notes>" in t for t in texts) == 1
    assert "New notes" in texts[1]
    assert "Old notes" not in " ".join(texts)
    assert second.messages[2:] == again[2:]
    assert compacted_head(again) == 2
    # A client that kept the marker alone: only the marker goes.
    without_notes = [again[0], *again[2:]]
    assert compacted_head(without_notes) == 1
    assert compacted_head(again[2:]) == 0
    third = plan_compaction(without_notes, per(without_notes), "# New notes\n", "/s")
    assert third.messages[2:] == without_notes[1:]


def test_comments_in_code_blocks_are_not_headings() -> None:
    # Found by a bug hunt: a Workflow with shell snippets (`# build`, `# run the slow
    # tests`) was split at each comment: 4,000 tokens of it kept in parts each under the cap,
    # the comments named in `cut_sections`.
    paragraph = " ".join(f"ran{i}" for i in range(1_400))  # ~2,100 tokens
    workflow = "\n".join(
        [
            *("```bash", "# build the extension", "make -j2", "```", paragraph),
            *("~~~sh", "# run the slow tests", "pytest -m slow", "~~~", paragraph),
        ]
    )
    summary = builtin_template().replace("# Workflow\n_", f"# Workflow\n{workflow}\n_", 1)
    cut = cut_long_sections(summary, "/p")
    assert cut.cut_sections == ("Workflow",)
    section = cut.text.split("# Workflow\n", 1)[1].split("\n# Errors", 1)[0]
    assert estimate_text(section) < 2_200
    assert "# build the extension" in section  # a code line, kept as it was


def test_a_cut_inside_a_code_block_closes_it() -> None:
    # Found by a bug hunt: cut inside a fence, the note and every later section were left
    # in the code block (and the next fence, meant to open one, closed it).
    log = "\n".join(f"E   line {i}: AssertionError: expected 3, got 4" for i in range(600))
    summary = builtin_template().replace(
        "# Errors & Corrections\n_", f"# Errors & Corrections\n````text\n{log}\n````\n_", 1
    )
    cut = cut_long_sections(summary, "/p")
    assert cut.cut_sections == ("Errors & Corrections",)
    lines = cut.text.splitlines()
    fenced = dict(zip(lines, in_fenced_code(lines), strict=True))
    assert not fenced["# Codebase and System Documentation"]
    assert not fenced[SECTION_CUT_NOTE.format(path="/p")]
    assert lines[lines.index(SECTION_CUT_NOTE.format(path="/p")) - 1] == "````"


def test_a_summary_cut_as_a_whole_inside_a_code_block_closes_it() -> None:
    block = "\n".join(["~~~"] + ["z" * 70] * 1_500 + ["~~~"])
    cut = cut_long_sections(f"# Part\n{block}\n" * 2, "/p", max_tokens=100_000)
    assert cut.cut_sections == ("(whole summary)",)
    lines = cut.text.splitlines()
    assert lines[-2:] == ["~~~", SECTION_CUT_NOTE.format(path="/p")]
    assert not list(in_fenced_code([*lines, ""]))[-1]


def test_sections_under_one_title_are_cut_each_not_as_one() -> None:
    # Found by a bug hunt: a user template of `## ` sections under one `# ` title was read
    # as one section, and compact cut all the notes to ~2,000 tokens (7 of 8 sections lost).
    names = [f"Part {i}" for i in range(8)]
    notes = "# Session notes\n_Kept by memoryd._\n" + "".join(
        f"## {name}\n_About it._\n" + " ".join(f"p{i}-{j}" for j in range(1_000)) + "\n"
        for i, name in enumerate(names)
    )
    cut = cut_long_sections(notes, "/p")
    assert cut.cut_sections == ()
    assert cut.text == notes
    longer = notes.replace("## Part 3\n_About it._\n", "## Part 3\n_About it._\n" + words(3_000))
    cut = cut_long_sections(longer, "/p")
    assert cut.cut_sections == ("Part 3",)
    assert all(f"## {name}" in cut.text for name in names)


def test_subheadings_inside_sections_do_not_split_them() -> None:
    # The built-in template's `#` sections stay the sections when the notes use `##` inside.
    worklog = "\n".join(f"## Step {i}\n" + words(300) for i in range(10))  # ~3,000 tokens
    summary = builtin_template().replace("# Worklog\n_", f"# Worklog\n{worklog}\n_", 1)
    cut = cut_long_sections(summary, "/p")
    assert cut.cut_sections == ("Worklog",)


def test_a_cut_closes_the_block_it_is_in_not_an_earlier_one() -> None:
    lines = ["```", "# not a heading", "```", "   ~~~~ text", "```python", *(["q" * 70] * 300)]
    cut = cut_long_sections("# Notes\n" + "\n".join(lines) + "\n", "/p")
    assert cut.cut_sections == ("Notes",)
    kept = cut.text.splitlines()
    assert kept[-2] == "~~~~"
    assert not list(in_fenced_code([*kept, ""]))[-1]


def test_a_byte_order_mark_does_not_hide_the_first_heading() -> None:
    summary = "\ufeff# Session Title\n" + words(3_000) + "\n# Worklog\n- one\n"
    cut = cut_long_sections(summary, "/p")
    assert cut.cut_sections == ("Session Title",)
    assert cut.text.startswith("# Session Title\n")
