"""With every vector built, the owner's hybrid search ranks as it did before ``semantic_weight``: the hits and scores of
the vault's 60 questions and every title, beside the same code with the similarity's weight fixed at
``1 - HYBRID_ALPHA`` (the formula before it), and how many searches had a weight under that.

    PYTHONPATH=<checkout> python scripts/hybrid_weight_unchanged.py VAULT MODEL_DIR
"""
import json, sys, tempfile
from pathlib import Path

from engine.access.authority import OperatorCaller
from engine.bench.vault_search import QUESTIONS, KINDS
from engine.importers.common import Writer, import_engine, import_instance, owner_caller
from engine.importers.markdown import import_markdown, load_markdown
from engine.search import hybrid
from engine.state.statedir import StateDir
from models.installed import ModelStore
from models.local import add_local

vault, model_dir = Path(sys.argv[1]), Path(sys.argv[2])
asked = json.loads(QUESTIONS.read_text(encoding="utf-8"))["questions"]
weights = []
real = hybrid.semantic_weight
def recording(found, similar):
    weights.append(real(found, similar)); return weights[-1]
with tempfile.TemporaryDirectory(prefix="hybrid-weight-") as work:
    state = StateDir(Path(work) / "state"); state.create()
    add_local(ModelStore(state.models), model_dir, name="m", replace=True)
    state.config.write_text(json.dumps({"embeddingModel": "onnx/m"}), encoding="utf-8")
    engine = import_engine(state)
    try:
        with owner_caller(engine, instance=import_instance("markdown")) as (caller, _):
            pages = import_markdown(Writer(engine, caller, "markdown"), *load_markdown(str(vault), engine.refuse_secrets))["pages"]
        owner = OperatorCaller("main")
        engine.owner_search(owner, {"query": "warm up", "mode": "hybrid"})
        runtime = engine.runtime(engine.authorize(owner, create=False).store)
        assert runtime.vector_feed.settled(600)
        titles = sorted({engine.get_record(owner, p)["title"] for p in pages.values()})
        queries = [q for q, _ in asked] + titles
        def answers():
            out = []
            for q in queries:
                a = engine.owner_search(owner, {"query": q, "mode": "hybrid", "limit": 10, "kinds": KINDS})
                assert a["vectors"] == "ready", q
                out.append([(h["id"], h["score"]) for h in a["hits"]])
            return out
        hybrid.semantic_weight = recording
        now = answers()
        hybrid.semantic_weight = lambda found, similar: 1 - hybrid.HYBRID_ALPHA
        before = answers()
        under = sum(w < 1 - hybrid.HYBRID_ALPHA for w in weights)
        same = sum(a == b for a, b in zip(now, before))
        print(f"queries {len(queries)}; identical hits and scores {same}; weight calls {len(weights)}, under 0.5: {under}; min weight {min(weights)}")
    finally:
        engine.close()
