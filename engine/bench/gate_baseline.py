"""The PyTorch baseline of ``knowledge bench gate``: sentence-transformers ``CrossEncoder`` on the same weights.

Runs as a script in another virtual environment (one with torch and
sentence-transformers, which are never project dependencies), so it imports
nothing from the engine:

    PYTHON engine/bench/gate_baseline.py MODEL_DIR PAIRS.json OUT.json

``PAIRS.json`` is ``[{"query": ..., "documents": [...]}, ...]``: one entry
per gate turn, exactly the pairs the engine scored.  Each turn's pairs are
scored with one ``CrossEncoder.predict`` call, as an owner scripting the
same questions would (default batch size, the model's default attention).
``OUT.json`` gets the seconds, real (unpadded) tokens and scores (the
CrossEncoder's sigmoid probabilities) of every turn.
"""

from __future__ import annotations

import json
import sys
import time


def main(argv: list[str]) -> int:
    import sentence_transformers
    import torch
    from sentence_transformers import CrossEncoder

    model_dir, pairs_path, out_path = argv[1:4]
    turns = json.loads(open(pairs_path, encoding="utf-8").read())
    started = time.perf_counter()
    model = CrossEncoder(model_dir, device="cpu")
    load_s = time.perf_counter() - started
    tokenizer = model.tokenizer
    warm = turns[0]
    model.predict([(warm["query"], document) for document in warm["documents"]], show_progress_bar=False)
    results = []
    for turn in turns:
        pairs = [(turn["query"], document) for document in turn["documents"]]
        encoded = tokenizer([q for q, _ in pairs], [d for _, d in pairs])
        tokens = sum(len(ids) for ids in encoded["input_ids"])
        started = time.perf_counter()
        scores = model.predict(pairs, show_progress_bar=False)
        results.append({"seconds": time.perf_counter() - started, "tokens": tokens, "pairs": len(pairs),
                        "scores": [float(score) for score in scores]})
    with open(out_path, "w", encoding="utf-8") as handle:
        json.dump({"torch": torch.__version__, "sentenceTransformers": sentence_transformers.__version__,
                   "threads": torch.get_num_threads(), "loadSeconds": load_s, "turns": results}, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
