"""The operator methods of this layer, which ``knowledge serve`` adds to the socket's method table.

They sit above the wire and operator layers (they run an export or an import as a whole), so the
process that serves registers them (``register``) rather than the dispatcher itself.  The command line
asks them when an engine serves its state directory (``engine/cli/desk.py``), and so does the window;
the engine does the work and checks the parameters as for any operator method.

    method            params                                   answer, and what changes
    operator/export   out (an absolute path), store?, agent?,  the export's result; writes the archive file out
                      withHistory?
    operator/startExport  as operator/export                   a job (kind ``export``) whose ``result`` is
                                                               operator/export's answer (the window's way: its
                                                               one worker is not held while the archive is written)
    operator/folders  agent, folder?, offset?, limit?          an imported vault's folders and a folder's notes
                                                               (engine/importers/folders_view.py)
    operator/noteLink agent, from, name                        the page a [[link]] in page ``from`` names, as the
                                                               import resolved it (folders_view.py)
    operator/import   format, path (absolute), agent?, store?, a job (kind ``import``): progress per item of the
                      dryRun?, replaceEdits?                   input (``done``/``total`` in its ``unit``, the
                                                               item in ``message``), cancellable between items;
                                                               its ``result`` is ``knowledge import --json``'s

An import's job goes through phases, which its progress names (``phase``, engine/core/jobs.py):
``reading`` the input, ``checking`` it (each file scanned for credentials, counted as checked),
``writing`` its items (``done`` of ``total``), ``linking`` them (a Markdown folder's ``[[links]]``,
note by note), then ``indexing`` what it wrote for search (its count stays that of the items written),
which cannot be cancelled: the records are all written by then, and the job says ``cancellable: false``
(a dry run writes nothing and skips it).

A Markdown or memory-core import leaves a page revised in the store since an earlier import wrote it as it is,
and lists it (the result's ``keptEdits``); ``replaceEdits`` takes the changed notes or memory files anyway (any
other format refuses it, before the job starts).

An import's job first reads and checks the whole input, so a malformed one fails the job with the file
and the place in it (``error.file``, ``error.place``) before any agent, store or record exists.  A
cancelled import keeps what it had published, as an interrupted one does; starting it again finishes it
(the request ids are the same, engine/importers/common.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable

from ..core.errors import InvalidParams
from ..core.jobs import JobContext
from ..core.methods import Method
from ..core.params import AgentName, Choice, Flag, Params, String
from ..service import Engine
from ..wire.protocol import Dispatcher
from .answers import AnyImport, ExportJob, ExportResult, ImportJob
from .archive import export_archive
from .common import Progress
from .folders_view import FOLDERS, NOTE_LINK, NoteFolders, NoteLink, note_folders, note_link
from .formats import FORMATS, check_replace_edits, index_imported, receiving_agent, run_import

EXPORT = Params(String("out", 4096, required=True, min_chars=1, what="the archive's absolute path"),
                String("store", 64, min_chars=1, what="a store's name or id"), AgentName("agent"),
                Flag("withHistory", default=False))
IMPORT = Params(Choice("format", required=True, choices=tuple(FORMATS)),
                String("path", 4096, required=True, min_chars=1, what="the input's absolute path"),
                AgentName("agent"), String("store", 64, min_chars=1, what="a store's name or id"),
                Flag("dryRun", default=False), Flag("replaceEdits", default=False))
IMPORT_JOB, EXPORT_JOB = "import", "export"
READING, CHECKING, INDEXING = "reading", "checking", "indexing"  # an import's phases, with writing and linking


def methods(engine: Engine) -> tuple[Method, ...]:
    """This layer's ``operator/*`` methods (engine/core/methods.py)."""
    return (Method("export", EXPORT, ExportResult, lambda params: export(engine, params)),
            Method("startExport", EXPORT, ExportJob, lambda params: start_export(engine, params)),
            Method("import", IMPORT, ImportJob, lambda params: start_import(engine, params)),
            Method("folders", FOLDERS, NoteFolders, lambda params: note_folders(engine, params)),
            Method("noteLink", NOTE_LINK, NoteLink, lambda params: note_link(engine, params)))


def register(dispatcher: Dispatcher, engine: Engine) -> None:
    """Serve this layer's methods on ``dispatcher``, as ``knowledge serve`` does."""
    for method in methods(engine):
        dispatcher.register_operator(method)


def export(engine: Engine, params: dict[str, Any]) -> ExportResult:
    """``knowledge export`` in the serving engine: the store's archive, collected on its lane."""
    return _exporter(engine, params)()


def start_export(engine: Engine, params: dict[str, Any]) -> ExportJob:
    """The same export as a job; the parameters are checked before it starts."""
    write = _exporter(engine, params)
    out = Path(params["out"])

    def work(context: JobContext) -> ExportResult:
        context.report(message=f"Writing {out.name}")
        context.check()  # cancelled before it began; once writing, the archive is finished (or not written)
        return write()

    return engine.jobs.start(EXPORT_JOB, f"export:{out}", f"Export to {out.name}", work)


def _exporter(engine: Engine, params: dict[str, Any]) -> Callable[[], ExportResult]:
    values = EXPORT.read(params)
    out = Path(values["out"])
    if not out.is_absolute():  # the engine's working directory is not the command's
        raise InvalidParams("out must be an absolute path", field="out")
    return lambda: export_archive(engine, out, store=values["store"], agent=values["agent"],
                                  with_history=values["withHistory"])


def start_import(engine: Engine, params: dict[str, Any]) -> ImportJob:
    """``knowledge import FORMAT PATH`` in the serving engine, as a job; answers with the job at once."""
    values = IMPORT.read(params)
    chosen = FORMATS[values["format"]]
    path = Path(values["path"])
    if not path.is_absolute():  # the engine's working directory is not the caller's
        raise InvalidParams("path must be an absolute path", field="path")
    replace_edits = values["replaceEdits"]
    check_replace_edits(chosen, replace_edits)  # before the job: nothing is read or written
    agent, dry_run = receiving_agent(engine, values["store"], values["agent"]), values["dryRun"]

    def work(context: JobContext) -> AnyImport:
        context.phase(READING, unit="files", message=f"Reading {path.name}")
        checked: set[str] = set()

        def scan(places: Iterable[tuple[str, str]]) -> None:  # the input is read whole: checking begins
            listed = list(places)
            if not checked:
                context.phase(CHECKING, unit="files")
            checked.update(place for place, _ in listed[:1])
            context.report(len(checked), message=listed[0][0] if listed else None)
            engine.refuse_secrets(listed)

        plan = chosen.load(str(path), scan)  # checked whole: nothing exists yet if it fails
        context.check()

        written: list[Progress] = []  # the last item written or linked

        def progress(step: Progress) -> None:  # after each item: cancelling stops before the next one
            written[:] = [step]
            if step.phase != context.current_phase:
                context.phase(step.phase, total=step.total, unit=chosen.unit)
            if step.done < step.total and not step.stopping:
                context.progress(step.done, step.total, message=step.item)
            else:  # the phase's last item (the next phase or the end checks), or one finished while stopping
                context.report(step.done, step.total, message=step.item)

        result = run_import(engine, chosen, plan, agent=agent, dry_run=dry_run, progress=progress,
                            keep_token=lambda name, token: str(engine.state.write_agent_token(name, token)),
                            replace_edits=replace_edits)
        if not dry_run and any(result["imported"].values()):  # type: ignore[typeddict-item]
            counted = written[0].total if written else None  # indexing keeps the count written: none of its own
            context.phase(INDEXING, done=counted or 0, total=counted, message="Indexing the imported records "
                          "for search", cancellable=False)
            result["notes"] = [*(result.get("notes") or []), *index_imported(engine, agent)]  # type: ignore
        return result

    title = (f"{'Dry run: import' if dry_run else 'Import'} {chosen.name} {path.name} into {agent}'s store"
             + (", replacing edits made in the store" if replace_edits else ""))
    return engine.jobs.start(IMPORT_JOB, f"import:{chosen.name}:{agent}:{path}:{'dry' if dry_run else 'write'}",
                             title, work, unit=chosen.unit)
