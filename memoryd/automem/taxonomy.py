"""The closed set of memory types, and what is never worth saving."""

from __future__ import annotations

from typing import Final, Literal

MemoryType = Literal["user", "feedback", "project", "reference"]
MEMORY_TYPES: Final[tuple[MemoryType, ...]] = ("user", "feedback", "project", "reference")

# One line each: what the type holds, when to save it, how to use it later.
TYPE_GUIDE: Final[dict[MemoryType, tuple[str, str, str]]] = {
    "user": (
        "who the user is: role, goals, what they know, how they like to work",
        "when you learn something durable about the person, not about today's task",
        "shape explanations and choices to them; do not re-ask what you already know",
    ),
    "feedback": (
        "corrections the user gave you, and confirmations that a non-obvious approach was right",
        "when the user corrects you, or approves a choice you were unsure of",
        "apply it without being told again; the body says **Why:** and **How to apply:**",
    ),
    "project": (
        "ongoing work, decisions, deadlines and constraints that the code does not show",
        "when a decision or date is made that a future session could not derive from the repo",
        "respect the decision and the date; the body says **Why:** and **How to apply:**",
    ),
    "reference": (
        "pointers to external systems: dashboards, tickets, documents, channels, runbooks",
        "when the user names where something lives outside this repository",
        "go there to look things up instead of guessing",
    ),
}

# Types whose body must carry the reasoning, so a later session can judge edge cases.
REASONED_TYPES: Final[frozenset[str]] = frozenset({"feedback", "project"})

NEVER_SAVE: Final[tuple[str, ...]] = (
    "code patterns, conventions, architecture or file layout — read the code instead",
    "git history, who changed what, or how a bug was fixed — git log and the code hold that",
    "anything already written in CLAUDE.md or the other instruction files",
    "transient task state: the current step, a to-do list, what you are about to do",
    "secrets, credentials, tokens or personal data the user did not ask you to keep",
)


def is_memory_type(value: object) -> bool:
    return isinstance(value, str) and value in MEMORY_TYPES


def describe_types() -> str:
    """A compact listing of the types, for prompts."""
    lines = []
    for name in MEMORY_TYPES:
        holds, when, use = TYPE_GUIDE[name]
        lines.append(f"- `{name}`: {holds}. Save {when}. How to use it: {use}.")
    return "\n".join(lines)
