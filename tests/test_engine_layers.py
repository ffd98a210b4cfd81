"""The engine's floor plan: feature packages in layers, each importing only its own package or lower ones.

    cli, bench                      the command line and the benchmarks
    importers                       knowledge brought in from elsewhere
    (root) service, runtime,        the Engine facade and the store runtime (its write groups)
           write_groups
    wire                            socket, protocol, tools, bridge
    operator                        the owner's desk on the socket
    sync                            a store between machines: merge by record, git remotes
    gate                            the recall gate
    memory                          prompt, Knowledge Index, recall, ontology views
    search                          keyword search, search_knowledge, passages
    index                           tantivy, analysis, embeddings, vectors
    access                          authority and store resolution
    store                           one store: catalog, publication, writes, reads, git
    decision                        the Decision runtime and its providers
    state                           state directory, config, registry
    vault                           records, ontology, evidence, manifest
    core                            errors, ids, files, db, findings, ...

An import that runs (at module load or in a function) must point to its own package or a lower
layer.  Imports made only for type checking (``if TYPE_CHECKING:``) create no dependency when the
code runs; the few that reach upward are listed in TYPE_ONLY_UPWARD, a list that may only shrink.
The modules' import graph, type-only imports included (those listed aside), has no cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_architecture_boundaries import ROOT

ENGINE = ROOT / "engine"
LAYERS = ["core", "vault", "state", "decision", "store", "access", "index", "search", "memory", "gate", "sync",
          "operator", "wire", "(root)", "importers", "bench", "cli"]
RANK = {name: rank for rank, name in enumerate(LAYERS)}
ROOT_MODULES = {"service", "runtime", "write_groups"}
# (importing module, imported module): type-only references that still reach upward.  Features take the
# small typed protocols they need (access.authority.StoreEntry, store.open_store.OpenStore, ...); what is
# left is the socket and the operator's method table, which serve the whole Engine facade, and
# attachments' caller types (it sits in store, below access).  This list may only shrink.
TYPE_ONLY_UPWARD: set[tuple[str, str]] = {
    ('engine.operator.methods', 'engine.service'),
    ('engine.store.attachments', 'engine.access.authority'),
    ('engine.wire.protocol', 'engine.service'),
    ('engine.wire.server', 'engine.service'),
    ('engine.wire.tools', 'engine.service'),
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(ENGINE.rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "engine" or len(parts) == 1:
        return None  # outside the engine, or the package face (engine.__version__)
    if parts[1] in RANK:
        return parts[1]
    return "(root)" if parts[1] in ROOT_MODULES else None


def engine_imports(path: Path, modules: dict[str, Path], root: Path = ROOT) -> list[tuple[str, bool, int]]:
    """(engine module imported, whether only for type checking, line) for every import in ``path``."""
    parts = path.relative_to(root).with_suffix("").parts
    package = parts[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    type_only = {id(node) for branch in ast.walk(tree) if isinstance(branch, ast.If)
                 and getattr(branch.test, "id", getattr(branch.test, "attr", None)) == "TYPE_CHECKING"
                 for node in ast.walk(branch)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            prefix = ".".join([*base, node.module] if node.module else base)
            names = [f"{prefix}.{alias.name}" for alias in node.names]
            targets = [name if name in modules else prefix for name in names]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # engine.x.Name -> engine.x
                target = target.rpartition(".")[0]
            if target:
                found.append((target, id(node) in type_only, node.lineno))
    return found


def test_every_engine_module_is_in_a_layer() -> None:
    strays = [name for name in _modules() if name != "engine" and _layer(name) is None]
    assert strays == [], "each engine module belongs to a feature package (or is the facade or runtime)"


def test_imports_run_downwards_only() -> None:
    modules = _modules()
    upward, type_only = [], set()
    for name, path in modules.items():
        mine = _layer(name)
        for target, typing_only, line in engine_imports(path, modules):
            theirs = _layer(target)
            if mine is None or theirs is None or theirs == mine or RANK[theirs] < RANK[mine]:
                continue
            if typing_only:
                type_only.add((name, target))
            else:
                upward.append(f"{path.relative_to(ROOT)}:{line} ({mine}) imports {target} ({theirs})")
    assert upward == []
    assert type_only <= TYPE_ONLY_UPWARD, f"new type-only imports reaching upward: {type_only - TYPE_ONLY_UPWARD}"
    assert type_only >= TYPE_ONLY_UPWARD, f"no longer needed, strike them off: {TYPE_ONLY_UPWARD - type_only}"
    assert len(modules) > 60


def test_no_import_cycle_between_modules() -> None:
    modules = _modules()
    graph = {name: {target for target, _, _ in engine_imports(path, modules)
                    if target != name and (name, target) not in TYPE_ONLY_UPWARD}
             for name, path in modules.items()}
    for package in [name for name, path in modules.items() if path.name == "__init__.py"]:
        graph[package] = {t for t in graph[package] if not t.startswith(package + ".")}  # a face re-exports
    cycles = []
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                cycles.append(trail[trail.index(target):] + [target] if target in trail else [node, target])
            elif target not in state:
                visit(target, [*trail, target])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_the_layer_check_sees_runtime_and_type_only_imports(tmp_path: Path) -> None:
    probe = tmp_path / "engine" / "core" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("from ..vault.records import parse_record\nfrom typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n    from ..service import Engine\n"
                     "def later():\n    from ..gate import turn\n", encoding="utf-8")
    modules = {"engine.vault.records": probe, "engine.service": probe, "engine.gate.turn": probe}

    found = {(target, typing_only) for target, typing_only, _ in engine_imports(probe, modules, root=tmp_path)}

    assert found == {("engine.vault.records", False), ("engine.service", True), ("engine.gate.turn", False)}


def test_only_the_engine_queues_work_on_a_stores_lane():
    """Features reach a store through ``Engine.enter``/``on_store`` (a caller's work) or ``Engine.maintain``
    (the owner's): a ``runtime.call(...)`` anywhere else is a second door."""
    allowed = {"engine.runtime", "engine.service"}
    found = []
    for module, path in _modules().items():
        if module in allowed or module.startswith("engine.bench"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "call"
                    and isinstance(node.func.value, ast.Name) and "runtime" in node.func.value.id):
                found.append(f"{module}:{node.lineno}")
    assert found == []
