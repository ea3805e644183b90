"""Write a sentence encoder's safetensors weights (BERT or MPNet) out as an ONNX graph.

The graph has the interface of the ONNX exports published beside sentence-transformers
models (inputs `input_ids`, `attention_mask`, and `token_type_ids` for BERT; output
`last_hidden_state`), so a model converted here and one fetched by name run through the same
encoder code. Used when the weights come from a package that ships only safetensors (this
machine, and offline installs); needs the `onnx` package, which only the conversion imports.

MPNet differs from BERT in three places: no token types, positions counted from the padding
id + 1 (as RoBERTa), and a learnt bias per attention head for each bucket of relative
distance (as T5), added to every layer's attention scores.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memoryd import jsonread
from memoryd.fsutil import make_private_dirs, read_regular_file

# A model's config.json is a few KB: a larger one (a link to /dev/zero) is no model's.
MAX_CONFIG_BYTES = 1 << 20

# Each kind's names for one layer's attention weights: query, key, value, output, its LayerNorm.
_ATTENTION_NAMES = {
    "bert": (
        "attention.self.query",
        "attention.self.key",
        "attention.self.value",
        "attention.output.dense",
        "attention.output.LayerNorm",
    ),
    "mpnet": (
        "attention.attn.q",
        "attention.attn.k",
        "attention.attn.v",
        "attention.attn.o",
        "attention.LayerNorm",
    ),
}


def relative_buckets(length: int, buckets: int, max_distance: int = 128) -> npt.NDArray[np.int64]:
    """MPNet's bucket of each (query, key) position pair's relative distance, as in its
    reference code: half the buckets per direction, exact up to a quarter of them, then
    logarithmic up to `max_distance`."""
    distance = np.arange(length)[:, None] - np.arange(length)[None, :]  # query - key
    half = buckets // 2
    out = np.where(distance < 0, half, 0)
    n = np.abs(distance)
    exact = half // 2
    with np.errstate(divide="ignore"):
        large = exact + (
            np.log(np.maximum(n, 1) / exact) / math.log(max_distance / exact) * (half - exact)
        ).astype(np.int64)
    large = np.minimum(large, half - 1)
    bucket: npt.NDArray[np.int64] = (out + np.where(n < exact, n, large)).astype(np.int64)
    return bucket


def read_config(model_dir: Path) -> dict[str, Any]:
    """`model_dir`'s config.json, read as memoryd reads any JSON file (`jsonread`): nesting past
    json's depth or a number of 5,000 digits is a JSONDecodeError saying so, not a
    RecursionError or a bare ValueError; a FIFO there (it blocked for good) or a file over
    MAX_CONFIG_BYTES (read whole, /dev/zero took the memory) is refused unread. ValueError
    (an OSError for a file that cannot be opened) for a file that is no config."""
    path = model_dir / "config.json"
    # Through links: the Hugging Face cache links each file to its blob.
    data = read_regular_file(path, MAX_CONFIG_BYTES, follow_links=True)
    if len(data) > MAX_CONFIG_BYTES:
        raise ValueError(f"{path}: larger than {MAX_CONFIG_BYTES:,} bytes, not read")
    try:
        # No number in a model's config is over 20 digits: a longer one is a damaged file.
        config = jsonread.loads(data, long_ints="refuse")
    except ValueError as exc:  # a JSONDecodeError, or bytes that are no Unicode
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path}: not a JSON object")
    return config


def export_encoder(model_dir: Path, out_path: Path) -> None:
    """Convert `model_dir` (config.json + model.safetensors of a BertModel or MPNetModel)
    to `out_path`."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from safetensors.numpy import load_file

    config = read_config(model_dir)
    kind = config.get("model_type")
    if kind not in _ATTENTION_NAMES:
        raise ValueError(f"not a BERT or MPNet model: {kind!r}")
    query_w, key_w, value_w, attn_out, attn_norm = _ATTENTION_NAMES[kind]
    weights = {
        k.removeprefix(f"{kind}."): v
        for k, v in load_file(str(model_dir / "model.safetensors")).items()
    }
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    head_dim = hidden // heads
    eps = float(config.get("layer_norm_eps", 1e-12))

    initializers: list[Any] = []
    nodes: list[Any] = []
    counter = iter(range(1_000_000))

    def const(name: str, value: np.ndarray) -> str:
        initializers.append(numpy_helper.from_array(value, name))
        return name

    def weight(key: str, transpose: bool = False) -> str:
        value = weights[key].astype(np.float32)
        return const(key, np.ascontiguousarray(value.T if transpose else value))

    def node(op: str, inputs: list[str], **attrs: Any) -> str:
        out = f"{op.lower()}_{next(counter)}"
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def layer_norm(x: str, prefix: str) -> str:
        return node(
            "LayerNormalization",
            [x, weight(f"{prefix}.weight"), weight(f"{prefix}.bias")],
            axis=-1,
            epsilon=eps,
        )

    def linear(x: str, prefix: str) -> str:
        return node(
            "Add", [node("MatMul", [x, weight(f"{prefix}.weight", True)]), weight(f"{prefix}.bias")]
        )

    # Embeddings: word + position (+ token type), then LayerNorm.
    words = node("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"])
    seq_len = node(
        "Gather", [node("Shape", ["input_ids"]), const("one_i", np.array(1, dtype=np.int64))]
    )
    # MPNet counts real tokens' positions from the padding id + 1; padding is masked anyway.
    first = int(config["pad_token_id"]) + 1 if kind == "mpnet" else 0
    first_position = const("first_position", np.array(first, dtype=np.int64))
    positions = node(
        "Range",
        [
            first_position,
            node("Add", [seq_len, first_position]),
            const("step_i", np.array(1, dtype=np.int64)),
        ],
    )
    x = node(
        "Add", [words, node("Gather", [weight("embeddings.position_embeddings.weight"), positions])]
    )
    if kind == "bert":
        types = weight("embeddings.token_type_embeddings.weight")
        x = node("Add", [x, node("Gather", [types, "token_type_ids"])])
    x = layer_norm(x, "embeddings.LayerNorm")

    # Padding positions get -10000 before the softmax.
    mask = node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    inverted = node("Sub", [const("one_f", np.array(1.0, dtype=np.float32)), mask])
    additive = node("Mul", [inverted, const("neg_f", np.array(-10000.0, dtype=np.float32))])
    additive = node("Unsqueeze", [additive, const("axes_12", np.array([1, 2], dtype=np.int64))])
    split_heads = const("split_heads", np.array([0, 0, heads, head_dim], dtype=np.int64))
    merge_heads = const("merge_heads", np.array([0, 0, hidden], dtype=np.int64))
    scale = const("scale", np.array(1.0 / math.sqrt(head_dim), dtype=np.float32))
    sqrt2 = const("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
    half = const("half", np.array(0.5, dtype=np.float32))
    if kind == "mpnet":
        # [heads, L, L], broadcast over the batch: the bias of each pair's bucket, cut from a
        # table made for the longest input.
        longest = int(config["max_position_embeddings"])
        table = const(
            "relative_buckets",
            relative_buckets(longest, int(config["relative_attention_num_buckets"])),
        )
        length = node("Reshape", [seq_len, const("one_d", np.array([1], dtype=np.int64))])
        corner = node(
            "Slice",
            [
                table,
                const("zeros_2", np.array([0, 0], dtype=np.int64)),
                node("Concat", [length, length], axis=0),
                const("axes_01", np.array([0, 1], dtype=np.int64)),
            ],
        )
        bias = node("Gather", [weight("encoder.relative_attention_bias.weight"), corner])
        additive = node("Add", [additive, node("Transpose", [bias], perm=[2, 0, 1])])

    for i in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{i}"
        q = node(
            "Transpose",
            [node("Reshape", [linear(x, f"{p}.{query_w}"), split_heads])],
            perm=[0, 2, 1, 3],
        )
        k = node(
            "Transpose",
            [node("Reshape", [linear(x, f"{p}.{key_w}"), split_heads])],
            perm=[0, 2, 3, 1],
        )
        v = node(
            "Transpose",
            [node("Reshape", [linear(x, f"{p}.{value_w}"), split_heads])],
            perm=[0, 2, 1, 3],
        )
        scores = node("Add", [node("Mul", [node("MatMul", [q, k]), scale]), additive])
        context = node("MatMul", [node("Softmax", [scores], axis=-1), v])
        context = node("Reshape", [node("Transpose", [context], perm=[0, 2, 1, 3]), merge_heads])
        x = layer_norm(
            node("Add", [linear(context, f"{p}.{attn_out}"), x]),
            f"{p}.{attn_norm}",
        )
        h = linear(x, f"{p}.intermediate.dense")
        h = node(
            "Mul",
            [
                node("Mul", [h, half]),
                node(
                    "Add",
                    [
                        node("Erf", [node("Div", [h, sqrt2])]),
                        const(f"one_{i}", np.array(1.0, dtype=np.float32)),
                    ],
                ),
            ],
        )
        x = layer_norm(node("Add", [linear(h, f"{p}.output.dense"), x]), f"{p}.output.LayerNorm")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))

    def int_input(name: str) -> Any:
        return helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])

    inputs = ["input_ids", "attention_mask"] + (["token_type_ids"] if kind == "bert" else [])
    graph = helper.make_graph(
        nodes,
        kind,
        [int_input(name) for name in inputs],
        [
            helper.make_tensor_value_info(
                "last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden]
            )
        ],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    make_private_dirs(out_path.parent)
    # A name of its own beside the target: two daemons converting at once each wrote one
    # fixed `model.tmp`, and the second rename found it gone (ENOENT), or renamed the other's.
    fd, name = tempfile.mkstemp(dir=out_path.parent, prefix=f".{out_path.name}.", suffix=".tmp")
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(model.SerializeToString())
        tmp.replace(out_path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
