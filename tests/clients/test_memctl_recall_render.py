"""`memctl recall`'s text: one line per memory of what the local ranker saw in it (`--why`)."""

from __future__ import annotations

from memctl.commands.recall import why_line


def test_why_line_names_each_signal_it_has() -> None:
    assert why_line({"words": ["cluster", "deploys"], "lexical": 1.0}) == (
        "words cluster, deploys · lexical 1.00"
    )
    assert why_line(
        {
            "words": [],
            "near_words": ["grandma"],
            "pasted_words": ["decoder"],
            "lexical": 0.4567,
            "semantic": 0.71,
            "cosine": 0.4249,
        }
    ) == ("words none · near grandma · pasted decoder · lexical 0.46 · semantic 0.71 · cosine 0.42")
    assert why_line(
        {
            "words": ["hiking"],
            "feedback_terms": ["trail"],
            "date": "2023-08-20",
            "date_signals": ["dated as asked", "same day as hike.md"],
            "lexical": 0.5,
        }
    ) == (
        "words hiking · feedback trail · date 2023-08-20 (dated as asked, same day as hike.md)"
        " · lexical 0.50"
    )
    assert why_line({"words": ["x"], "date": "2022-01-09"}) == "words x · date 2022-01-09"
    # a date read off the file's last write says so
    file_dated = {"words": ["x"], "date": "2026-12-02", "date_from": "file"}
    assert why_line(file_dated) == "words x · date 2026-12-02 (file time)"
    file_dated["date_signals"] = ["dated as asked"]
    assert why_line(file_dated) == "words x · date 2026-12-02 (file time, dated as asked)"
    assert why_line({}) == "words none"  # a daemon that sends less: what it sent
