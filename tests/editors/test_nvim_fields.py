"""The Neovim plugin derives a memory's name and description as memoryd does (format.as_field
against memfile.as_field), character by character: a field memory.write refuses, or takes
as empty, must never be derived from a text the user saved."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.automem import memfile
from tests.editors.headless_nvim import NVIM, run_lua

pytestmark = pytest.mark.skipif(NVIM is None, reason="nvim is not installed")

# Each line a text (hex of its UTF-8) in, the plugin's field (hex) out.
AS_FIELD = """
local format = require('memoryd.format')
local out = {}
for line in io.lines(os.getenv('MEMORYD_TEST_IN')) do
  local text = line:gsub('%x%x', function(h) return string.char(tonumber(h, 16)) end)
  out[#out + 1] = (format.as_field(text):gsub('.', function(c) return ('%02x'):format(c:byte()) end))
end
local f = assert(io.open(os.getenv('MEMORYD_TEST_OUT'), 'w'))
f:write(table.concat(out, '\\n'), '\\n')
f:close()
"""


def test_as_field_is_the_daemons_rule_for_every_character_it_changes(tmp_path: Path) -> None:
    # Every character memfile.as_field drops or makes a space is below U+3001; a few beyond
    # (U+FEFF, which Python keeps, an emoji, the last) stand for the rest, kept by both.
    chars = [chr(c) for c in range(0x3100) if not 0xD800 <= c <= 0xDFFF]
    chars += ["\ufeff", "\U0001f600", "\U0010ffff"]
    # At either end, alone, in a run with a space and between words: a line of no-break
    # spaces was offered as the name and refused as empty.
    texts = [f"{c}a{c}{c} b{c}" for c in chars] + [c * 3 for c in chars]
    (tmp_path / "in").write_text("".join(t.encode("utf-8").hex() + "\n" for t in texts))
    out = run_lua(tmp_path, AS_FIELD, {"MEMORYD_TEST_IN": str(tmp_path / "in")}, timeout=120)
    got = [bytes.fromhex(h).decode("utf-8") for h in out.splitlines()]
    assert len(got) == len(texts)
    wrong = [
        (text, field, memfile.as_field(text))
        for text, field in zip(texts, got, strict=True)
        if field != memfile.as_field(text)
    ]
    assert not wrong, f"{len(wrong)} texts differ, e.g. (text, plugin, memoryd): {wrong[:5]}"
