"""The in-memory rewrite of int8-weight products: what it changes, what it leaves alone, and that it computes
the same thing.

The graphs are built here, byte by byte through protobuf, in the layout of
the all-MiniLM-L6-v2 int8 export: ``MatMul(x, Mul(Cast(w_int8), scale))``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnxruntime
import pytest

from engine.index.int8_graph import MICROSOFT, _model_message, initializer_array, int8_products
from models.fixtures import TINY_EMBEDDER

_PACKAGE = "int8_graph_test"


def _full_model_message() -> Any:
    """Enough of onnx.proto to write a runnable graph (ir_version, value infos, attributes, raw data)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    schema = descriptor_pb2.FileDescriptorProto(name=f"{_PACKAGE}.proto", package=_PACKAGE, syntax="proto2")
    text, int64, int32, data, nested = (field.TYPE_STRING, field.TYPE_INT64, field.TYPE_INT32, field.TYPE_BYTES,
                                        field.TYPE_MESSAGE)
    messages = {
        "OperatorSetIdProto": [(1, "domain", text, False, None), (2, "version", int64, False, None)],
        "TensorProto": [(1, "dims", int64, True, None), (2, "data_type", int32, False, None),
                        (8, "name", text, False, None), (9, "raw_data", data, False, None)],
        "AttributeProto": [(1, "name", text, False, None), (3, "i", int64, False, None),
                           (20, "type", int32, False, None)],
        "NodeProto": [(1, "input", text, True, None), (2, "output", text, True, None), (3, "name", text, False, None),
                      (4, "op_type", text, False, None), (5, "attribute", nested, True, "AttributeProto"),
                      (7, "domain", text, False, None)],
        "Dimension": [(1, "dim_value", int64, False, None), (2, "dim_param", text, False, None)],
        "Shape": [(1, "dim", nested, True, "Dimension")],
        "TensorType": [(1, "elem_type", int32, False, None), (2, "shape", nested, False, "Shape")],
        "TypeProto": [(1, "tensor_type", nested, False, "TensorType")],
        "ValueInfoProto": [(1, "name", text, False, None), (2, "type", nested, False, "TypeProto")],
        "GraphProto": [(1, "node", nested, True, "NodeProto"), (2, "name", text, False, None),
                       (5, "initializer", nested, True, "TensorProto"), (11, "input", nested, True, "ValueInfoProto"),
                       (12, "output", nested, True, "ValueInfoProto")],
        "ModelProto": [(1, "ir_version", int64, False, None), (7, "graph", nested, False, "GraphProto"),
                       (8, "opset_import", nested, True, "OperatorSetIdProto")],
    }
    for name, fields in messages.items():
        declared = schema.message_type.add(name=name)
        for number, field_name, kind, repeated, type_name in fields:
            entry = declared.field.add(name=field_name, number=number, type=kind,
                                       label=field.LABEL_REPEATED if repeated else field.LABEL_OPTIONAL)
            if type_name is not None:
                entry.type_name = f".{_PACKAGE}.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(schema)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.ModelProto"))


def int8_weight_graph(weights: np.ndarray, scales: np.ndarray, *, shared_scale: bool = False) -> bytes:
    """y = x @ (float(weights) * scales), x [batch, K]; with ``shared_scale`` the scales also feed the output."""
    model = _full_model_message()(ir_version=8)
    model.opset_import.add(domain="", version=17)
    graph = model.graph
    graph.name = "int8-weights"
    graph.initializer.add(name="w_q", data_type=3, dims=list(weights.shape), raw_data=weights.astype(np.int8).tobytes())
    graph.initializer.add(name="w_scale", data_type=1, dims=[1, weights.shape[1]],
                          raw_data=scales.astype(np.float32).tobytes())
    cast = graph.node.add(input=["w_q"], output=["w_f"], name="cast", op_type="Cast")
    cast.attribute.add(name="to", i=1, type=2)
    graph.node.add(input=["w_f", "w_scale"], output=["w"], name="dequantize", op_type="Mul")
    graph.node.add(input=["x", "w"], output=["y"], name="product", op_type="MatMul")
    outputs = [("y", [None, weights.shape[1]])]
    if shared_scale:
        graph.node.add(input=["w_scale", "w_scale"], output=["s2"], name="square", op_type="Mul")
        outputs.append(("s2", [1, weights.shape[1]]))
    for target, name, dims in [(graph.input, "x", [None, weights.shape[0]])] + [
            (graph.output, name, dims) for name, dims in outputs]:
        value = target.add(name=name)
        value.type.tensor_type.elem_type = 1
        for dim in dims:
            if dim is None:
                value.type.tensor_type.shape.dim.add(dim_param="batch")
            else:
                value.type.tensor_type.shape.dim.add(dim_value=dim)
    return model.SerializeToString()


def run(graph: bytes, x: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(graph, providers=["CPUExecutionProvider"])
    return session.run(["y"], {"x": x})[0]


def op_types(graph: bytes) -> list[tuple[str, str]]:
    return [(node.op_type, node.domain) for node in _model_message().FromString(graph).graph.node]


@pytest.fixture
def weights() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return rng.integers(-127, 128, size=(48, 24)).astype(np.int8), rng.uniform(0.001, 0.02, size=24)


def test_an_int8_weight_product_multiplies_in_int8_and_answers_the_same(weights):
    original = int8_weight_graph(*weights)
    rewritten, count = int8_products(original)
    assert count == 1
    assert op_types(original) == [("Cast", ""), ("Mul", ""), ("MatMul", "")]
    assert op_types(rewritten) == [("DynamicQuantizeMatMul", MICROSOFT)]
    x = np.random.default_rng(8).normal(size=(5, 48)).astype(np.float32)
    expected, got = run(original, x), run(rewritten, x)
    assert np.allclose(expected, x @ (weights[0].astype(np.float32) * weights[1].astype(np.float32)), atol=1e-4)
    # Only the activations are quantized (uint8, per run): within a few percent of the float product.
    assert np.abs(got - expected).max() < 0.03 * np.abs(expected).max()
    assert (got * expected).sum() / (np.linalg.norm(got) * np.linalg.norm(expected)) > 0.999


def test_a_scale_read_elsewhere_or_a_float_graph_is_left_as_it_is(weights):
    shared = int8_weight_graph(*weights, shared_scale=True)
    assert int8_products(shared) == (shared, 0)
    fixture = (TINY_EMBEDDER / "onnx" / "model.onnx").read_bytes()  # float32 weights throughout
    assert int8_products(fixture) == (fixture, 0)
    assert int8_products(b"not a graph") == (b"not a graph", 0)


def test_an_initializer_is_read_as_float_with_its_scale_applied(weights):
    int8, scales = weights
    graph = int8_weight_graph(int8, scales)
    assert np.allclose(initializer_array(graph, "w_q"), int8.astype(np.float32) * scales.astype(np.float32)[None, :])
    assert np.allclose(initializer_array(graph, "w_scale"), scales.astype(np.float32)[None, :])
    with pytest.raises(KeyError):
        initializer_array(graph, "missing")
