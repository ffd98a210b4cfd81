"""Write a dynamic int8 graph of a reranker's fp32 ONNX graph: ``onnx/model_int8.onnx`` beside it.

    SCRATCH_PYTHON scripts/quantize_reranker.py MODEL_DIR

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

    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder = Path(argv[1])
    source, target = folder / "onnx" / "model.onnx", folder / "onnx" / "model_int8.onnx"
    if not source.is_file():
        print(f"{source} does not exist", file=sys.stderr)
        return 2
    quantize_dynamic(source, target, weight_type=QuantType.QInt8, per_channel=True,
                     extra_options={"MatMulConstBOnly": True})
    print(f"wrote {target} ({target.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
