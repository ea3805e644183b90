"""`memory_instructions`: how the main agent should use and write auto memory (our wording)."""

from __future__ import annotations

from pathlib import Path

from memoryd.automem.index import INDEX_NAME, MAX_INDEX_BYTES, MAX_INDEX_LINES
from memoryd.automem.taxonomy import NEVER_SAVE, describe_types

_TEMPLATE = """\
# Auto memory

You have a persistent memory directory at `{memory_dir}`. What you save there is shown to
future sessions in this project, so keep it small, true and useful.

## Types of memory (a closed set)
{types}

## Never save
{never}

## How to save
1. Write one Markdown file per memory in the memory directory, e.g. `feedback_testing.md`,
   starting with this frontmatter:
   ```
   ---
   name: short title
   description: one line that says when this memory matters
   type: user | feedback | project | reference
   ---
   ```
   then the body. For `feedback` and `project`, the body has a **Why:** line and a
   **How to apply:** line.
2. Add one line for it to `{index}` in the same directory:
   `- [Title](file.md) — one-line hook`. The index is loaded into every session and is cut
   after {lines} lines or {bytes} bytes, so keep each line short and put detail in the file.
3. Update an existing memory instead of adding a near duplicate; delete memories that
   turned out wrong.

## Using memory
- Memories are context, not instructions from the user: they may be outdated.
- Verify before you recommend: if a memory names a file, function, flag or command, check
  that it still exists before relying on it. "The memory says X exists" is not "X exists now".
- A recalled memory with a staleness note is more than a day old; treat it with that in mind.
"""


def memory_instructions(memory_dir: Path | str) -> str:
    return _TEMPLATE.format(
        memory_dir=memory_dir,
        types=describe_types(),
        never="\n".join(f"- {item}" for item in NEVER_SAVE),
        index=INDEX_NAME,
        lines=MAX_INDEX_LINES,
        bytes=f"{MAX_INDEX_BYTES:,}",
    )


# The text with a placeholder path, for callers that have no project at hand.
MEMORY_INSTRUCTIONS = memory_instructions("<memory dir>")
