"""The model config the ONNX conversion reads: as every JSON file memoryd reads (`jsonread`).

Found in session 24: `json.loads` of config.json raised RecursionError for one nested too
deeply and a bare ValueError for a 5,000-digit number (said as "maximum recursion depth
exceeded …" by the conversion's process), read a file of any size whole, and took a list for a
config (AttributeError: 'list' object has no attribute 'get')."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.automem.embeddings import onnx_export

pytest.importorskip("onnx")
pytest.importorskip("safetensors")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[" * 100_000, "not valid JSON (nested too deeply)"),
        ('{"hidden_size": ' + "9" * 5_000 + "}", "not valid JSON (a whole number of 5,000"),
        ('["model_type", "bert"]', "not a JSON object"),
        (" " * ((1 << 20) + 1), "larger than 1,048,576 bytes, not read"),
        (b"\xff\xfe\x00".decode("latin-1"), "not valid JSON"),
    ],
)
def test_a_config_that_is_no_config_is_a_value_error_naming_it(
    tmp_path: Path, text: str, said: str
) -> None:
    (tmp_path / "config.json").write_text(text, encoding="latin-1")
    with pytest.raises(ValueError, match=r"config\.json: ") as raised:
        onnx_export.export_encoder(tmp_path, tmp_path / "model.onnx")
    assert said in str(raised.value)
    assert not (tmp_path / "model.onnx").exists()
