"""``knowledge models list / pull NAME / add-local DIR``: the owner's model commands.

They only touch ``<state>/models/`` (and read config.json), so they work
beside a running engine; the engine picks a pulled or added model up the
next time ``decisionModel`` names it.  A serving engine is asked for its
listing once the manifest is written, so it notices the change and tells the
owner's window (the ``models`` change).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from models.catalogue import CATALOGUE, DEFAULT_EMBEDDING_MODEL
from models.errors import ModelError
from models.installed import ModelStore
from models.local import add_local
from models.pull import pull

from ..state.config import SettingsSource
from ..operator.model_operator import models_report
from ..state.statedir import StateDir
from ..wire.operator_client import OperatorConnection, OperatorError


def add_models_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    models = commands.add_parser("models", parents=[common], help="Decision models: catalogue, download, local folders")
    actions = models.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", parents=[common], help="the catalogue and the installed models")
    listing.add_argument("--json", action="store_true", help="print the catalogue and installed models as JSON")
    listing.set_defaults(handler=cmd_models_list)
    fetch = actions.add_parser(
        "pull", parents=[common], help="download a catalogue model (pinned revision, sha256-verified, resumable)")
    fetch.add_argument("name", help=f"a catalogue model ({', '.join(sorted(CATALOGUE))})")
    fetch.add_argument("--variant", help="which ONNX file (default: the entry's default; see `models list`)")
    fetch.set_defaults(handler=cmd_models_pull)
    local = actions.add_parser(
        "add-local", parents=[common], help="register a model folder in the Hugging Face layout",
        description="Registers DIR (onnx/model.onnx or model.safetensors, tokenizer.json, config.json) as NAME, "
                    "selectable as decisionModel onnx/NAME. Pickle weights, Python code and configurations "
                    "that ask for remote code are refused. The files stay in DIR; their sha256 are recorded "
                    "now and checked at every load.")
    local.add_argument("dir", metavar="DIR", help="the model folder (it stays where it is)")
    local.add_argument("--name", help="the model's name (default: the folder's name)")
    local.add_argument("--variant", help="which ONNX file when the folder has several (e.g. model_int8)")
    local.add_argument("--replace", action="store_true", help="replace a model already registered under NAME")
    local.set_defaults(handler=cmd_models_add_local)


def _fail(error: ModelError) -> int:
    print(f"knowledge models: {error.message}", file=sys.stderr)
    return 2


def tell_serving_engine(state: StateDir) -> None:
    """A serving engine lists the models again, which makes it notice the manifest just written and say so to
    the window.  An engine that cannot be reached (stopping, say) is no failure of the command: the manifest is
    written, and the window reads it when the Models view is shown again."""
    if state.serving_engine() is None:
        return
    try:
        with OperatorConnection(state, client_name="knowledge-cli") as connection:
            connection.call("operator/models")
    except (OperatorError, OSError) as exc:
        print(f"knowledge models: the serving engine was not told ({exc}); the window lists the model when its "
              "Models view is shown again", file=sys.stderr)


def cmd_models_list(args: argparse.Namespace, state: StateDir) -> int:
    settings = SettingsSource(state.config)
    report = models_report(ModelStore(state.models), settings.current(), settings.problem)
    if "manifestProblem" in report:
        print(f"knowledge models: {report['manifestProblem']}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print(_list_text(report))
    return 0


def _list_text(report: dict[str, Any]) -> str:
    lines = ["Catalogue (knowledge models pull NAME [--variant V]):"]
    for entry in report["catalogue"]:
        revision = entry["revision"] if entry["revision"].startswith("pypi:") else entry["revision"][:12]
        lines.append(f"  {entry['name']}  {entry['repo']}@{revision}  {entry['license']}")
        for variant in entry["variants"]:
            size = f"{variant['size'] / 1e6:,.0f} MB" if variant["size"] else "size unknown"
            flags = "pullable" if variant["pullable"] else "not pullable: no pinned sha256"
            default = ", default" if variant["name"] == entry["defaultVariant"] else ""
            lines.append(f"    {variant['name']:<12} {variant['file']:<28} {size:>12}  {flags}{default}")
    lines.append("Installed (select with decisionModel, or embeddingModel for an embedder, \"onnx/NAME\"):")
    if not report["installed"]:
        lines.append("  none yet")
    for model in report["installed"]:
        weights = model["onnx"] or "safetensors only (not runnable here)"
        mark = "  [selected]" if model["selected"] else ""
        lines.append(f"  {model['name']:<32} {model['source']:<9} {weights}  {model['folder']}{mark}")
    lines.append(f"decisionModel: {report['decisionModel'] or '(not set)'}")
    lines.append(f"embeddingModel: {report['embeddingModel'] or '(off)'}")
    if report.get("configProblem"):
        lines.append(f"config.json: {report['configProblem']} (the last valid settings stay in force)")
    return "\n".join(lines)


def cmd_models_pull(args: argparse.Namespace, state: StateDir) -> int:
    try:
        model = pull(ModelStore(state.models), args.name, args.variant, say=lambda line: print(line, flush=True))
    except ModelError as exc:
        return _fail(exc)
    tell_serving_engine(state)
    setting = "embeddingModel" if CATALOGUE[model.name].kind == "embedding" else "decisionModel"
    print(f"Installed {model.name} ({model.variant}) in {model.folder}; select it with "
          f"\"{setting}\": \"onnx/{model.name}\" in {state.config}"
          + (" (the default embeddingModel)" if model.name == DEFAULT_EMBEDDING_MODEL else "")
          + (f", and as the recall gate's Decision model with \"decisionModel\": \"embedding/{model.name}\"."
             if setting == "embeddingModel" else "."))
    return 0


def cmd_models_add_local(args: argparse.Namespace, state: StateDir) -> int:
    try:
        model = add_local(ModelStore(state.models), args.dir, name=args.name, variant=args.variant,
                          replace=args.replace)
    except ModelError as exc:
        return _fail(exc)
    tell_serving_engine(state)
    what = model.onnx or "safetensors weights (the onnx provider cannot run these)"
    print(f"Registered {model.folder} as {model.name} ({what}, {len(model.files)} files hashed); select it with "
          f"\"decisionModel\": \"onnx/{model.name}\" in {state.config}.")
    return 0
