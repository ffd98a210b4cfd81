"""Write a ModernBERT reranker's fp32 ONNX graph with its attention fused: ``onnx/model_fused.onnx`` beside it.

    SCRATCH_PYTHON scripts/fuse_reranker.py MODEL_DIR [--max-positions N]

Run it with a Python that has ``onnx`` and ``onnxruntime`` (a scratch environment: ``onnx`` is not a
project dependency), then ``scripts/quantize_reranker.py MODEL_DIR --source model_fused.onnx`` for its
int8 graph.  In each of the graph's attention blocks, what the export spells out op by op (split the
packed q/k/v projection, rotate half of each head for the rotary embeddings, q·kᵀ, scale, mask, softmax,
·v, merge the heads) becomes onnxruntime's ``com.microsoft.RotaryEmbedding`` for q and k and one
``com.microsoft.MultiHeadAttention`` with the block's own mask as its attention bias; the weights, the
masks (full and sliding-window) and everything else stay as they are.  The rotary tables are the graph's
own, read by running it once over ``--max-positions`` tokens (longer inputs are refused by onnxruntime,
so pick the longest pair the gate sends: docs/recall-gate.md).

The graph must be the one ``transformers`` exports for ``ModernBertForSequenceClassification`` (as
``scripts/make_fullsize_reranker.py`` makes it); a block that does not have that shape stops the script
with its name, and nothing is written.  The fused graph's scores are checked against the original's on
the same inputs before it is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

MICROSOFT = "com.microsoft"


def main(argv: list[str]) -> int:
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--max-positions", type=int, default=1024)
    args = parser.parse_args(argv[1:])
    source = args.model_dir / "onnx" / "model.onnx"
    target = args.model_dir / "onnx" / "model_fused.onnx"
    model = onnx.load(str(source))
    graph = model.graph
    producer = {output: node for node in graph.node for output in node.output}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    def constant(name: str) -> np.ndarray:
        node = producer[name]
        if node.op_type != "Constant":
            raise SystemExit(f"{name}: expected a constant, found {node.op_type}")
        return numpy_helper.to_array(node.attribute[0].t)

    def only(name: str, op_type: str) -> Any:
        found = [node for node in consumers.get(name, []) if node.op_type == op_type]
        if len(found) != 1:
            raise SystemExit(f"{name}: expected one {op_type} reading it, found {len(found)}")
        return found[0]

    blocks = [node for node in graph.node if node.op_type == "MatMul" and node.name.endswith("/attn/Wqkv/MatMul")]
    if not blocks:
        raise SystemExit("no attention block of the expected shape (…/attn/Wqkv/MatMul) in the graph")
    heads = hidden = None
    plans = []
    for wqkv in blocks:
        prefix = wqkv.name.removesuffix("Wqkv/MatMul")
        reshape = only(wqkv.output[0], "Reshape")
        # Reshaped to (batch, sequence, 3, heads, head size), the heads left to be inferred.
        head_size = int(constant(producer[reshape.input[1]].input[-1])[0])
        weight = next(i for i in graph.initializer if i.name == wqkv.input[1])
        hidden = int(weight.dims[-1]) // 3
        heads = hidden // head_size
        softmax = next(node for node in graph.node if node.name == prefix + "Softmax")
        add_mask = producer[softmax.input[0]]
        scale_mul = producer[add_mask.input[0]]
        scale = float(constant(scale_mul.input[1]))
        mask = add_mask.input[1]
        rotate = next(node for node in graph.node if node.name == prefix + "Mul")  # q times the cosines
        cos = producer[rotate.input[1]].input[0]
        sin = producer[next(node for node in graph.node if node.name == prefix + "Mul_1").input[1]].input[0]
        wo = next(node for node in graph.node if node.name == prefix + "Wo/MatMul")
        plans.append((prefix, wqkv, wo, mask, scale, cos, sin))

    # The graph's own rotary tables (cos and sin of every position, per table), read by running it once.
    import onnxruntime as ort

    tables = sorted({(cos, sin) for *_, cos, sin in plans})
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    del probe.graph.output[:]
    for cos, sin in tables:
        probe.graph.output.extend([helper.make_empty_tensor_value_info(cos), helper.make_empty_tensor_value_info(sin)])
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    length = args.max_positions
    feeds = {"input_ids": np.ones((1, length), dtype=np.int64), "attention_mask": np.ones((1, length), dtype=np.int64)}
    values = session.run(None, feeds)
    caches = {}
    for number, (cos, sin) in enumerate(tables):
        full_cos, full_sin = values[2 * number][0], values[2 * number + 1][0]  # (positions, head size)
        half = full_cos.shape[-1] // 2
        if not (np.allclose(full_cos[:, :half], full_cos[:, half:]) and np.allclose(full_sin[:, :half], full_sin[:, half:])):
            raise SystemExit(f"{cos}: the rotary table is not the rotate-half layout this fusion expects")
        caches[(cos, sin)] = (f"fused_rotary_{number}_cos", f"fused_rotary_{number}_sin")
        graph.initializer.extend([numpy_helper.from_array(full_cos[:, :half].astype(np.float32), caches[(cos, sin)][0]),
                                  numpy_helper.from_array(full_sin[:, :half].astype(np.float32), caches[(cos, sin)][1])])
    graph.initializer.append(numpy_helper.from_array(np.array([0], dtype=np.int64), "fused_position_offset"))
    initializers = {i.name: numpy_helper.to_array(i) for i in graph.initializer
                    if i.name in {wqkv.input[1] for _, wqkv, *_ in plans} | set(mlp_weights(graph))}

    added = []
    for prefix, wqkv, wo, mask, scale, cos, sin in plans:
        q, k, v = (f"{prefix}fused_{part}" for part in "qkv")
        cos_cache, sin_cache = caches[(cos, sin)]
        weight = initializers[wqkv.input[1]]
        for part, name in zip(np.split(weight, 3, axis=-1), (q, k, v)):
            graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(part), f"{name}_weight"))
        added += [
            *(helper.make_node("MatMul", [wqkv.input[0], f"{name}_weight"], [name], name=f"{name}/MatMul")
              for name in (q, k, v)),
            helper.make_node("RotaryEmbedding", [q, "fused_position_offset", cos_cache, sin_cache], [q + "_rotated"],
                             name=f"{prefix}fused_rotary_q", domain=MICROSOFT, num_heads=heads, interleaved=0),
            helper.make_node("RotaryEmbedding", [k, "fused_position_offset", cos_cache, sin_cache], [k + "_rotated"],
                             name=f"{prefix}fused_rotary_k", domain=MICROSOFT, num_heads=heads, interleaved=0),
            helper.make_node("MultiHeadAttention", [q + "_rotated", k + "_rotated", v, "", "", mask],
                             [f"{prefix}fused_attention"], name=f"{prefix}fused_attention", domain=MICROSOFT,
                             num_heads=heads, scale=scale),
        ]
        wo.input[0] = f"{prefix}fused_attention"
    for wi, gelu_in, gate in mlp_blocks(graph, consumers):
        weight = initializers[wi.input[1]]
        halves = np.split(weight, 2, axis=-1)
        for half, slice_node in zip(halves, (gelu_in, gate)):
            name = slice_node.output[0]
            graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(half), f"{name}_weight"))
            added.append(helper.make_node("MatMul", [wi.input[0], f"{name}_weight"], [name + "_fused"],
                                          name=f"{name}/MatMul"))
            for reader in consumers[name]:
                reader.input[:] = [name + "_fused" if value == name else value for value in reader.input]
    graph.node.extend(added)
    _drop_unused(graph)
    _sort(graph)
    if not any(opset.domain == MICROSOFT for opset in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MICROSOFT, 1))

    # The same scores as the original graph on the same inputs, or nothing is written.
    fused = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    original = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(7)
    worst = 0.0
    for length in (17, 96, min(300, args.max_positions)):
        ids = rng.integers(5, 50000, size=(4, length), dtype=np.int64)
        attention = np.ones_like(ids)
        attention[1, length // 2:] = 0  # a padded row
        feeds = {"input_ids": ids, "attention_mask": attention}
        worst = max(worst, float(np.abs(fused.run(None, feeds)[0] - original.run(None, feeds)[0]).max()))
    if worst > 1e-3:
        raise SystemExit(f"the fused graph's logits differ from the original's by {worst:.2e}; nothing written")
    onnx.save(model, str(target))
    print(f"wrote {target} ({target.stat().st_size:,} bytes): {len(plans)} attention blocks fused, "
          f"logits within {worst:.1e} of the original's")
    return 0


def mlp_blocks(graph: Any, consumers: dict[str, list[Any]]) -> list[tuple[Any, Any, Any]]:
    """Each GeGLU block's ``Wi`` product with the two Slices that halve it (activation half, gate half)."""
    blocks = []
    for node in graph.node:
        if node.op_type == "MatMul" and node.name.endswith("/mlp/Wi/MatMul"):
            slices = sorted((reader for reader in consumers.get(node.output[0], []) if reader.op_type == "Slice"),
                            key=lambda reader: reader.name)
            readers = [reader for reader in consumers.get(node.output[0], []) if reader.op_type != "Shape"]
            if len(slices) != 2 or len(readers) != 2:
                raise SystemExit(f"{node.name}: expected the two halves of a GeGLU, found {len(readers)} readers")
            blocks.append((node, slices[0], slices[1]))  # …/mlp/Slice (to the GELU), …/mlp/Slice_1 (the gate)
    return blocks


def mlp_weights(graph: Any) -> list[str]:
    return [node.input[1] for node in graph.node if node.op_type == "MatMul" and node.name.endswith("/mlp/Wi/MatMul")]


def _drop_unused(graph: Any) -> None:
    """Remove nodes whose outputs nothing reads (repeatedly), and initializers nothing reads."""
    wanted = {output.name for output in graph.output}
    nodes = list(graph.node)
    while True:
        read = wanted | {name for node in nodes for name in node.input}
        kept = [node for node in nodes if any(output in read for output in node.output)]
        if len(kept) == len(nodes):
            break
        nodes = kept
    read = {name for node in nodes for name in node.input}
    initializers = [i for i in graph.initializer if i.name in read]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(initializers)


def _sort(graph: Any) -> None:
    """Order the nodes so each comes after what it reads (ONNX requires a topological order)."""
    available = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""}
    pending, ordered = list(graph.node), []
    while pending:
        ready = [node for node in pending if all(name in available for name in node.input)]
        if not ready:
            raise SystemExit("the fused graph has a cycle or reads a value nothing makes")
        ordered += ready
        for node in ready:
            available.update(node.output)
        placed = {id(node) for node in ready}
        pending = [node for node in pending if id(node) not in placed]
    del graph.node[:]
    graph.node.extend(ordered)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
