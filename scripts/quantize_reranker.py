"""Write a dynamic int8 graph of a reranker's fp32 ONNX graph: ``onnx/model_int8.onnx`` beside it.

    SCRATCH_PYTHON scripts/quantize_reranker.py MODEL_DIR [GRAPH]

``GRAPH`` (default ``model.onnx``) is another fp32 graph of the folder's ``onnx/``, such as the
``model_fused.onnx`` of ``scripts/fuse_reranker.py``; its int8 graph is ``<name>_int8.onnx``.

Run it with a Python that has ``onnx`` and ``onnxruntime`` (a scratch
environment: ``onnx`` is not a project dependency).  Weights of every
MatMul become signed int8, one scale per output channel; activations are
quantized at run time.  On CPUs with AVX512-VNNI or AVX-VNNI, onnxruntime
runs these integer matrix multiplies much faster than fp32
(docs/benchmarks/gate.md); elsewhere measure first (the desktop's Models
view has a Benchmark button).  The result is what ``knowledge bench gate
--variant model_int8`` runs.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    folder = Path(argv[1])
    source = folder / "onnx" / (argv[2] if len(argv) == 3 else "model.onnx")
    target = source.with_name(f"{source.stem}_int8.onnx")
    if not source.is_file():
        print(f"{source} does not exist", file=sys.stderr)
        return 2
    # DefaultTensorType: ONNX's shape inference does not see through com.microsoft operators (a fused graph's
    # attention), so the activations after them are typed float32 here.
    quantize_dynamic(source, target, weight_type=QuantType.QInt8, per_channel=True,
                     extra_options={"MatMulConstBOnly": True, "DefaultTensorType": 1})
    print(f"wrote {target} ({target.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
