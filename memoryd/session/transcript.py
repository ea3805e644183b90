"""The transcript and usage fields of `after_turn` / `compact`, checked at the RPC boundary.

A transcript is a list of Anthropic-format messages: role `user` or `assistant`, content a
string or a list of blocks, each block an object with a string `type`. Block types we do not
know are accepted (kept and counted); everything else is an InvalidParams naming the index.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator

ROLES = ("user", "assistant")
MAX_MESSAGES = 1_000_000
MAX_SHOWN_ROLE = 60


def check_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ValueError(
                f"messages[{index}]: a message must be an object, got {type(message).__name__}"
            )
        role = message.get("role")
        if role not in ROLES:
            shown = repr(role)  # what was sent, any size: a few words of it say enough
            shown = shown if len(shown) <= MAX_SHOWN_ROLE else f"{shown[:MAX_SHOWN_ROLE]}…"
            raise ValueError(
                f"messages[{index}].role: unknown role {shown}; expected 'user' or 'assistant'"
            )
        content = message.get("content")
        if isinstance(content, str):
            continue
        if not isinstance(content, list):
            raise ValueError(
                f"messages[{index}].content: must be a string or a list of content blocks, "
                f"got {type(content).__name__}"
            )
        for position, block in enumerate(content):
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                raise ValueError(
                    f"messages[{index}].content[{position}]: a content block must be an object "
                    "with a string 'type'"
                )
    return messages


def _messages(value: Any) -> list[dict[str, Any]]:
    """The client's list itself, checked: pydantic's `list[dict[str, Any]]` copied every
    message and block on every turn (0.36 s of the loop for a 257,000-message session)."""
    if not isinstance(value, list):
        raise ValueError(f"must be a list of messages, got {type(value).__name__}")
    if len(value) > MAX_MESSAGES:
        raise ValueError(f"at most {MAX_MESSAGES:,} messages, got {len(value):,}")
    return check_messages(value)


Messages = Annotated[list[dict[str, Any]], PlainValidator(_messages)]


class Usage(BaseModel):
    """A model response's `usage`; other fields the provider adds are accepted and ignored."""

    model_config = ConfigDict(extra="allow", frozen=True)

    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)
    cache_creation_input_tokens: int | None = Field(default=None, ge=0)
    cache_read_input_tokens: int | None = Field(default=None, ge=0)
