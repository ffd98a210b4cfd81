"""The owner's hybrid search on Obsidian's help vault imported into a state directory holding the demo store, while
the vault's records are still being embedded (docs/benchmarks/search-vault.md, *A partly embedded store*).

    PYTHONPATH=<checkout> python scripts/partly_embedded_search.py VAULT MODEL_DIR BUDGETS

The demo's records get their vectors first; then the vault is imported with the vectors held back, and for each
of BUDGETS (records embedded so far, ascending, comma-separated; the catch-up embeds the newest first, so the
vault's links before its notes) the 60 questions of engine/bench/data/vault_questions.json are asked: an
answering note first / in the top 5 / in the top 10, and how many of the top-5 hits are not the vault's."""
import json, sys, tempfile
from pathlib import Path

from engine.access.authority import OperatorCaller
from engine.bench.vault_search import QUESTIONS, KINDS
from engine.importers.common import Writer, import_engine, import_instance, owner_caller
from engine.importers.demo import seed_demo
from engine.importers.markdown import import_markdown, load_markdown
from engine.state.statedir import StateDir
from models.installed import ModelStore
from models.local import add_local

vault, model_dir = Path(sys.argv[1]), Path(sys.argv[2])
budgets = [int(b) for b in sys.argv[3].split(",")]
asked = json.loads(QUESTIONS.read_text(encoding="utf-8"))["questions"]
with tempfile.TemporaryDirectory(prefix="partly-embedded-") as work:
    state = StateDir(Path(work) / "state"); state.create()
    add_local(ModelStore(state.models), model_dir, name="m", replace=True)
    state.config.write_text(json.dumps({"embeddingModel": "onnx/m"}), encoding="utf-8")
    engine = import_engine(state)
    try:
        seed_demo(engine)
        owner = OperatorCaller("main")
        engine.owner_search(owner, {"query": "warm up", "mode": "hybrid"})
        runtime = engine.runtime(engine.authorize(owner, create=False).store)
        assert runtime.vector_feed.settled(600)
        runtime.vector_feed.queue = lambda partition=None: None  # the import's notes wait for their vectors
        with owner_caller(engine, instance=import_instance("markdown")) as (caller, _):
            pages = import_markdown(Writer(engine, caller, "markdown"), *load_markdown(str(vault), engine.refuse_secrets))["pages"]
        partition = engine.authorize(owner, create=False).partition
        embedder = runtime._vector_model()
        done = 0
        for budget in budgets:
            if budget > done:
                caught = runtime.vectors.catch_up(partition, embedder, budget=budget - done, lane=runtime.vector_feed._lane)
                done = budget
                print("catch-up:", caught, flush=True)
            for mode in (("keyword", "hybrid") if budget == budgets[0] else ("hybrid",)):
                first = top5 = top10 = 0; foreign5 = 0; building = 0
                for question, answers in asked:
                    wanted = {pages[path] for path in answers}
                    answer = engine.owner_search(owner, {"query": question, "mode": mode, "limit": 10, "kinds": KINDS})
                    building += answer.get("vectors") == "building"
                    ids = [hit["id"] for hit in answer["hits"]]
                    first += bool(wanted & set(ids[:1])); top5 += bool(wanted & set(ids[:5])); top10 += bool(wanted & set(ids[:10]))
                    foreign5 += sum(1 for i in ids[:5] if i not in set(pages.values()))
                print(f"embedded-budget={budget} mode={mode} first/top5/top10={first}/{top5}/{top10} of {len(asked)} "
                      f"non-vault-hits-in-top5={foreign5} building-answers={building}", flush=True)
    finally:
        engine.close()
