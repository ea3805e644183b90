"""Write a BERT sentence encoder's safetensors weights out as an ONNX graph.

The graph has the interface of the ONNX exports published beside sentence-transformers
models (inputs `input_ids`, `attention_mask`, `token_type_ids`; output `last_hidden_state`),
so a model converted here and one fetched by name run through the same encoder code. Used
when the weights come from a package that ships only safetensors (this machine, and
offline installs); needs the `onnx` package, which only the conversion imports.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np


def export_bert(model_dir: Path, out_path: Path) -> None:
    """Convert `model_dir` (config.json + model.safetensors of a BertModel) to `out_path`."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from safetensors.numpy import load_file

    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    if config.get("model_type") != "bert":
        raise ValueError(f"not a BERT model: {config.get('model_type')!r}")
    weights = {
        k.removeprefix("bert."): v
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
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
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

    # Embeddings: word + position + token type, then LayerNorm.
    words = node("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"])
    seq_len = node(
        "Gather", [node("Shape", ["input_ids"]), const("one_i", np.array(1, dtype=np.int64))]
    )
    positions = node(
        "Range",
        [
            const("zero_i", np.array(0, dtype=np.int64)),
            seq_len,
            const("step_i", np.array(1, dtype=np.int64)),
        ],
    )
    pos = node("Gather", [weight("embeddings.position_embeddings.weight"), positions])
    types = node("Gather", [weight("embeddings.token_type_embeddings.weight"), "token_type_ids"])
    x = layer_norm(node("Add", [node("Add", [words, pos]), types]), "embeddings.LayerNorm")

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

    for i in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{i}"
        q = node(
            "Transpose",
            [node("Reshape", [linear(x, f"{p}.attention.self.query"), split_heads])],
            perm=[0, 2, 1, 3],
        )
        k = node(
            "Transpose",
            [node("Reshape", [linear(x, f"{p}.attention.self.key"), split_heads])],
            perm=[0, 2, 3, 1],
        )
        v = node(
            "Transpose",
            [node("Reshape", [linear(x, f"{p}.attention.self.value"), split_heads])],
            perm=[0, 2, 1, 3],
        )
        scores = node("Add", [node("Mul", [node("MatMul", [q, k]), scale]), additive])
        context = node("MatMul", [node("Softmax", [scores], axis=-1), v])
        context = node("Reshape", [node("Transpose", [context], perm=[0, 2, 1, 3]), merge_heads])
        x = layer_norm(
            node("Add", [linear(context, f"{p}.attention.output.dense"), x]),
            f"{p}.attention.output.LayerNorm",
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

    graph = helper.make_graph(
        nodes,
        "bert",
        [int_input("input_ids"), int_input("attention_mask"), int_input("token_type_ids")],
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
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_suffix(".tmp")
    tmp.write_bytes(model.SerializeToString())
    tmp.replace(out_path)
