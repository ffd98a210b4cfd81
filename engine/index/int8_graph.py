"""An int8-weight ONNX graph, rewritten in memory to multiply in int8.

The all-MiniLM-L6-v2 int8 export keeps every weight matrix as int8 with one
float scale per output column and turns it back into float32 inside the
graph, ``MatMul(x, Mul(Cast(w_int8), scale))``. onnxruntime folds that into a
float32 matrix when it loads the graph, so the int8 file saves disk but every
product still runs in float32. ``int8_products`` turns each such product into
onnxruntime's ``com.microsoft.DynamicQuantizeMatMul`` over the same weights
and scales (stored as uint8 around a zero point of 128; the activations are
quantized to uint8 per run): the weights are exactly the file's, and the
cost per text falls (docs/models.md, "Embedding throughput"). The verified file itself is
never changed; a graph without that pattern comes back as it was.

``onnx`` (the package) is not a dependency: the rewrite parses the protobuf
with a schema of the few ONNX fields it reads or changes, and every other
field passes through untouched (protobuf keeps fields it does not know).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from google.protobuf.message import Message

import numpy as np

ONNX_FLOAT, ONNX_UINT8, ONNX_INT8 = 1, 2, 3  # TensorProto.DataType
MICROSOFT = "com.microsoft"
_PACKAGE = "knowledge_onnx_subset"


def _model_message() -> type["Message"]:
    """ModelProto with only graph, opset_import, node (input, output, name, op_type, domain) and an
    initializer's dims, data_type, name and raw_data: the field numbers of onnx/onnx.proto."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    schema = descriptor_pb2.FileDescriptorProto(name=f"{_PACKAGE}.proto", package=_PACKAGE, syntax="proto2")

    def message(name: str, *fields: tuple[int, str, int, bool, str | None]) -> None:
        declared = schema.message_type.add(name=name)
        for number, field_name, kind, repeated, type_name in fields:
            entry = declared.field.add(name=field_name, number=number, type=kind,  # type: ignore[arg-type]
                                       label=field.LABEL_REPEATED if repeated else field.LABEL_OPTIONAL)
            if type_name is not None:
                entry.type_name = f".{_PACKAGE}.{type_name}"

    text, int64, int32, nested = field.TYPE_STRING, field.TYPE_INT64, field.TYPE_INT32, field.TYPE_MESSAGE
    message("OperatorSetIdProto", (1, "domain", text, False, None), (2, "version", int64, False, None))
    message("TensorProto", (1, "dims", int64, True, None), (2, "data_type", int32, False, None),
            (8, "name", text, False, None), (9, "raw_data", field.TYPE_BYTES, False, None))
    message("NodeProto", (1, "input", text, True, None), (2, "output", text, True, None),
            (3, "name", text, False, None), (4, "op_type", text, False, None), (7, "domain", text, False, None))
    message("GraphProto", (1, "node", nested, True, "NodeProto"), (5, "initializer", nested, True, "TensorProto"))
    message("ModelProto", (7, "graph", nested, False, "GraphProto"),
            (8, "opset_import", nested, True, "OperatorSetIdProto"))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(schema)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.ModelProto"))


def int8_products(graph: bytes) -> tuple[bytes, int]:
    """The graph with every ``MatMul(x, Mul(Cast(int8 weights), column scales))`` multiplying in int8,
    and how many products were rewritten (0: the bytes as given)."""
    from google.protobuf.message import DecodeError

    try:
        model = _model_message().FromString(graph)
    except DecodeError:
        return graph, 0  # not a graph: onnxruntime says why, in its own words
    nodes = model.graph.node
    initializers = {tensor.name: tensor for tensor in model.graph.initializer}
    producers = {output: index for index, node in enumerate(nodes) for output in node.output}
    consumers = Counter(name for node in nodes for name in node.input)
    dropped: set[int] = set()
    for node in nodes:
        if node.op_type != "MatMul" or node.domain not in ("", "ai.onnx") or len(node.input) != 2:
            continue
        found = _int8_weights(nodes, initializers, producers, consumers, node.input[1])
        if found is None:
            continue
        weights, scale, unused = found
        columns = weights.dims[1]
        # uint8 weights around a zero point of 128 (the same values, shifted): onnxruntime's uint8 x int8
        # kernel for AVX2 sums pairs of products in 16 bits and saturates on full-range int8 weights, its
        # uint8 x uint8 kernel does not.
        shifted = (np.frombuffer(weights.raw_data, dtype=np.int8).astype(np.int16) + 128).astype(np.uint8)
        weights.raw_data, weights.data_type = shifted.tobytes(), ONNX_UINT8
        zero_point = model.graph.initializer.add(name=f"{weights.name}_zero_point", data_type=ONNX_UINT8,
                                                 dims=[columns], raw_data=bytes([128]) * columns)
        del scale.dims[:]
        scale.dims.append(columns)  # [1, N] -> [N]: one scale per column, as the operator takes it
        node.op_type, node.domain = "DynamicQuantizeMatMul", MICROSOFT
        node.input[1] = weights.name
        node.input.extend([scale.name, zero_point.name])
        dropped |= unused
    if not dropped:
        return graph, 0
    for index in sorted(dropped, reverse=True):
        del nodes[index]
    if not any(entry.domain == MICROSOFT for entry in model.opset_import):
        model.opset_import.add(domain=MICROSOFT, version=1)
    return model.SerializeToString(), len(dropped) // 2


def initializer_array(graph: bytes, name: str) -> np.ndarray:
    """The graph's initializer ``name`` as float32 (an int8 one times its ``_scale`` sibling when the export
    keeps one, as the word embeddings of the all-MiniLM-L6-v2 int8 file are)."""
    tensors = {tensor.name: tensor for tensor in _model_message().FromString(graph).graph.initializer}
    if name not in tensors:
        raise KeyError(f"the graph has no initializer {name!r}")
    tensor = tensors[name]
    kinds = {ONNX_FLOAT: np.float32, ONNX_INT8: np.int8, ONNX_UINT8: np.uint8}
    if tensor.data_type not in kinds:
        raise ValueError(f"initializer {name!r} has data type {tensor.data_type}, not float, int8 or uint8")
    values = np.frombuffer(tensor.raw_data, dtype=kinds[tensor.data_type]).astype(np.float32).reshape(tuple(tensor.dims))
    scale = name.removesuffix("_q") + "_scale"
    if tensor.data_type != ONNX_FLOAT and scale in tensors and scale != name:
        values = values * initializer_array(graph, scale)
    return values


def _int8_weights(nodes: Any, initializers: dict[str, Any], producers: dict[str, int], consumers: Counter[str],
                  operand: str) -> tuple[Any, Any, set[int]] | None:
    """(int8 weights [K, N], float scales [1, N], the Cast and Mul that dequantize them) when ``operand`` is
    exactly that and nothing else reads those nodes or the scales; otherwise None."""
    scaled = producers.get(operand)
    if scaled is None or nodes[scaled].op_type != "Mul" or consumers[operand] != 1:
        return None
    mul = nodes[scaled]
    cast = producers.get(mul.input[0])
    scale = initializers.get(mul.input[1]) if len(mul.input) == 2 else None
    if cast is None or nodes[cast].op_type != "Cast" or consumers[mul.input[0]] != 1 or scale is None:
        return None
    weights = initializers.get(nodes[cast].input[0])
    if (weights is None or weights.data_type != ONNX_INT8 or len(weights.dims) != 2
            or len(weights.raw_data) != weights.dims[0] * weights.dims[1] or consumers[weights.name] != 1
            or scale.data_type != ONNX_FLOAT or list(scale.dims) != [1, weights.dims[1]]
            or consumers[scale.name] != 1):
        return None  # a float Mul makes the Cast's output float, so the pattern is complete
    return weights, scale, {cast, scaled}
