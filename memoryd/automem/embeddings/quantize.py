"""Int8 weights for an encoder's ONNX graph: a base-size model at small-model speed.

Dynamic quantization (onnxruntime's): each matrix product's weights are stored as int8 per
output channel, and its input is scaled to int8 on the fly from its own range. That range is
what can go wrong: the input of some feed-forward output projections carries a few activations
ten times larger than the rest (all-mpnet-base-v2's layers 6–10 reach ~97 where the others stay
under ~31), so one int8 step there swallows the small values. Those projections stay float32;
which ones is measured per model (`bench/bench_quantize_fidelity.py`).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Collection
from pathlib import Path

from memoryd.fsutil import make_private_dirs

# The feed-forward output projection of layer N: by its weight's name in graphs converted here
# (`onnx_export`), or by the node's name in exports made with torch.
_FFN_OUTPUT = re.compile(r"layer\.(\d+)[./]output[./]dense")


def ffn_output_nodes(onnx_path: Path) -> dict[int, str]:
    """Layer index → name of the MatMul node of that layer's feed-forward output projection."""
    import onnx

    model = onnx.load(str(onnx_path), load_external_data=False)
    found: dict[int, str] = {}
    for node in model.graph.node:
        if node.op_type != "MatMul":
            continue
        for text in (node.name, *node.input):
            match = _FFN_OUTPUT.search(text)
            if match:
                found[int(match.group(1))] = node.name
                break
    return found


def quantize_int8(source: Path, target: Path, float_layers: Collection[int]) -> None:
    """Write `source` with int8 matrix-product weights to `target` (atomically), keeping the
    feed-forward output projections of `float_layers` in float32."""
    from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped]

    nodes = ffn_output_nodes(source)
    missing = sorted(set(float_layers) - set(nodes))
    if missing:
        raise ValueError(f"{source} has no feed-forward output projection in layers {missing}")
    make_private_dirs(target.parent)
    # A name of its own (as `onnx_export`'s): the child of a daemon that just died may still be
    # stopping (`apart`) while the next daemon's quantizes, and one fixed name was one file for
    # both, written at once and removed under the other.
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        quantize_dynamic(
            source,
            tmp,
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul"],
            nodes_to_exclude=[nodes[i] for i in sorted(float_layers)],
        )
        tmp.replace(target)
    except BaseException:
        # Failed, or stopped because the daemon is gone (`apart`): no half graph is left in
        # the model cache (tens of MB, till the next quantization wrote over it).
        tmp.unlink(missing_ok=True)
        raise
