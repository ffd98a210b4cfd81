"""``knowledge bench``: the benchmarks' commands.  A benchmark is not a test: it prints figures and writes
them to ``docs/benchmarks/`` with the command and the machine.  Each loads only when its command runs:
importing them all would slow every other command."""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from pathlib import Path
from typing import Any

from ..bench import defaults as bench_defaults
from ..state.statedir import StateDir


def add_bench_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    bench = commands.add_parser("bench", parents=[common], help="measure the engine (figures, not tests)")
    bench_commands = bench.add_subparsers(dest="bench_command", required=True, metavar="BENCHMARK")
    bench_search = bench_commands.add_parser(
        "search", parents=[common], help="tantivy search side by side with SQLite FTS5: quality and speed",
        description="Retrieval quality on LoCoMo and index/query speed on LoCoMo and a generated partition, "
                    "for the engine's tantivy search and an SQLite FTS5 reference. --state-dir names a "
                    "LoCoMo state dir to reuse; without it everything happens in a throwaway directory.")
    bench_search.add_argument("--data", default=str(bench_defaults.LOCOMO_DATA),
                              help="the LoCoMo file (default: %(default)s, from the repository root)")
    bench_search.add_argument("--output", default=str(bench_defaults.SEARCH_OUTPUT),
                              help="where the Markdown report goes, '-' for nowhere (default: %(default)s)")
    bench_search.add_argument("--quick", action="store_true",
                              help="a smoke run: 2 conversations, 10,000 generated records, one round")
    bench_search.add_argument("--records", type=int, help="generated records (default 99,900; quick 10,000)")
    bench_search.add_argument("--queries", type=int, help="generated queries (default 500; quick 50)")
    bench_search.add_argument("--rounds", type=int, help="latency rounds over the queries (default 3)")
    bench_search.add_argument("--repeats", type=int, help="index builds per engine (default 3)")
    bench_search.add_argument("--samples", type=int, help="only the first N LoCoMo conversations")
    bench_search.add_argument("--seed", type=int, help="seed of the generated partition (default 0)")
    bench_search.add_argument("--work-dir", help="keep the stores and indexes here instead of a temporary dir")
    bench_search.add_argument("--embedding-model", metavar="DIR",
                              help="an embedding model folder (e.g. <state>/models/all-minilm-l6-v2-int8): adds "
                                   "the search_knowledge lexical, semantic, hybrid and rrf rows on LoCoMo")
    bench_search.set_defaults(handler=cmd_bench_search)
    bench_socket = bench_commands.add_parser(
        "socket", parents=[common], help="round trips and throughput of the agent socket, 1/8/32 clients")
    bench_socket.add_argument("--pages", type=int, default=500, help="pages in the agent's store (default 500)")
    bench_socket.add_argument("--seconds", type=float, default=5.0, help="load per concurrency level (default 5)")
    bench_socket.add_argument("--bounds", action="store_true",
                              help="instead: connections without a token against the socket's bounds (memory, "
                                   "and an agent's ping meanwhile)")
    bench_socket.add_argument("--connections", type=int, default=200,
                              help="attacking connections per phase, with --bounds (default 200)")
    bench_socket.add_argument("--output", help="default docs/benchmarks/socket.md, or socket-bounds.md with "
                                               "--bounds; '-' writes no file")
    bench_socket.set_defaults(handler=cmd_bench_socket)
    bench_throughput = bench_commands.add_parser(
        "throughput", parents=[common],
        help="writes and reads through the socket at a small and a large partition")
    bench_throughput.add_argument("--records", type=int, nargs="+", default=list(bench_defaults.THROUGHPUT_SIZES),
                                  help="partition sizes, in generated records (default 100 95000)")
    bench_throughput.add_argument("--seconds", type=float, default=5.0,
                                  help="each concurrent phase (default 5)")
    bench_throughput.add_argument("--round-trips", type=int, default=200,
                                  help="requests of each one-client phase (default 200)")
    bench_throughput.add_argument("--output", default="docs/benchmarks/throughput.md",
                                  help="default docs/benchmarks/throughput.md; '-' writes no file")
    bench_throughput.set_defaults(handler=cmd_bench_throughput)
    bench_cataloguing = bench_commands.add_parser(
        "cataloguing", parents=[common], help="new files dropped into a partition, then the first search",
        description="The first search after generated note pages were copied into a store's private partition "
                    "(the catalog's sync and the search index's catch-up), repeated; with --compare, side by "
                    "side with another checkout of the engine, alternated run by run.")
    bench_cataloguing.add_argument("--records", type=int, default=bench_defaults.CATALOGUING_RECORDS,
                                   help="generated records (default %(default)s)")
    bench_cataloguing.add_argument("--repeats", type=int, default=3, help="runs of each side (default 3)")
    bench_cataloguing.add_argument("--compare", metavar="NAME=DIR",
                                   help="another checkout to run first in each pair, e.g. before=../main")
    bench_cataloguing.add_argument("--template", metavar="DIR",
                                   help="keep the generated records here and reuse them (same --records)")
    bench_cataloguing.add_argument("--output", default=str(bench_defaults.CATALOGUING_OUTPUT),
                                   help="default %(default)s; '-' writes no file")
    bench_cataloguing.set_defaults(handler=cmd_bench_cataloguing)
    bench_git = bench_commands.add_parser(
        "git", parents=[common], help="a vault's git history after many checkpoints: packed, and never packed")
    bench_git.add_argument("--checkpoints", type=int, default=bench_defaults.GIT_HISTORY_CHECKPOINTS,
                           help="checkpoints each of the two vaults takes (default %(default)s)")
    bench_git.add_argument("--output", default=str(bench_defaults.GIT_HISTORY_OUTPUT),
                           help="default %(default)s; '-' writes no file")
    bench_git.set_defaults(handler=cmd_bench_git)
    bench_sync = bench_commands.add_parser(
        "sync", parents=[common], help="sync rounds between machines against issue 28's targets",
        description="Machines as state directories of their own in a throwaway directory, syncing through a bare "
                    "repository on disk (and git daemon on loopback for one row): new records reaching the other "
                    "machine's search, one record, a round with nothing new, sync clone of a large store, and "
                    "knowledge_grep beside 4 writers with and without rounds.")
    bench_sync.add_argument("--records", type=int, default=bench_defaults.SYNC_RECORDS,
                            help="records written on A per batch (default %(default)s)")
    bench_sync.add_argument("--clone-records", type=int, default=bench_defaults.SYNC_CLONE_RECORDS,
                            help="records in the store that is cloned (default %(default)s)")
    bench_sync.add_argument("--repeats", type=int, default=bench_defaults.SYNC_REPEATS,
                            help="repetitions of each figure (default %(default)s)")
    bench_sync.add_argument("--seconds", type=float, default=bench_defaults.SYNC_SECONDS,
                            help="each grep phase (default %(default)s)")
    bench_sync.add_argument("--out", "--output", dest="out", default=str(bench_defaults.SYNC_OUTPUT),
                            help="default %(default)s; '-' writes no file")
    bench_sync.set_defaults(handler=cmd_bench_sync)
    bench_mcp = bench_commands.add_parser(
        "mcp", parents=[common], help="knowledge mcp: launch to its answer to initialize, beside a bare python")
    bench_mcp.add_argument("--rounds", type=int, default=20, help="default %(default)s")
    bench_mcp.add_argument("--output", default="docs/benchmarks/mcp-start.md",
                           help="default %(default)s; '-' writes no file")
    bench_mcp.set_defaults(handler=cmd_bench_mcp)
    bench_vault = bench_commands.add_parser(
        "vault", parents=[common], help="the owner's search on a real notes vault: keyword and hybrid, questions and "
                                        "exact titles")
    bench_vault.add_argument("--vault", required=True, type=Path,
                             help="the en/ folder of github.com/obsidianmd/obsidian-help (not part of this project)")
    bench_vault.add_argument("--embedding-model", required=True, type=Path,
                             help="an embedding model folder (the one `knowledge models pull all-minilm-l6-v2-int8` "
                                  "fills)")
    bench_vault.add_argument("--output", default="docs/benchmarks/search-vault.md",
                             help="default %(default)s; '-' writes no file")
    bench_vault.set_defaults(handler=cmd_bench_vault)
    bench_owner = bench_commands.add_parser(
        "owner-locomo", parents=[common], help="the owner's search alone on LoCoMo: keyword and hybrid, recall per "
                                               "half of the conversations (--state-dir: a LoCoMo state dir to "
                                               "reuse or fill, kept with its vectors)")
    bench_owner.add_argument("--data", type=Path, default=bench_defaults.LOCOMO_DATA,
                             help="the LoCoMo file (default %(default)s)")
    bench_owner.add_argument("--embedding-model", required=True, type=Path, help="an embedding model folder")
    bench_owner.add_argument("--output", default="-", help="a file to write; '-' (the default) writes none")
    bench_owner.set_defaults(handler=cmd_bench_owner_locomo)
    bench_bridge = bench_commands.add_parser(
        "bridge", parents=[common], help="knowledge mcp: memory per connected client and time added per call")
    bench_bridge.add_argument("--blocks", type=int, default=20, help="alternating blocks of calls (default %(default)s)")
    bench_bridge.add_argument("--calls", type=int, default=100, help="calls per block (default %(default)s)")
    bench_bridge.add_argument("--bridge-command", nargs="+", metavar="WORD",
                              help="the launcher to measure instead of the `knowledge` beside this Python (a "
                                   "bundle's executable, say); `mcp --agent main ...` is appended")
    bench_bridge.add_argument("--output", default="docs/benchmarks/bridge.md",
                              help="default %(default)s; '-' writes no file")
    bench_bridge.set_defaults(handler=cmd_bench_bridge)
    bench_import = bench_commands.add_parser(
        "import", parents=[common], help="import a synthetic ChatGPT export: conversations per second",
        description="Imports N synthetic ChatGPT conversations (knowledge import chatgpt, in-process, in a "
                    "throwaway state directory) and reports conversations per second and the time 10,000 "
                    "would take.")
    bench_import.add_argument("--conversations", type=int, default=1000, help="conversations (default 1000)")
    bench_import.add_argument("--markdown-notes", type=int, metavar="N",
                              help="import a generated Markdown vault of N linked notes instead of a ChatGPT export "
                                   "(written to docs/benchmarks/imports-markdown.md unless --output says otherwise)")
    bench_import.add_argument("--messages", type=int, default=8,
                              help="messages on each conversation's active branch (default 8)")
    bench_import.add_argument("--profile", action="store_true", help="run the import under cProfile and "
                              "report where its time goes")
    bench_import.add_argument("--one-by-one", action="store_true", help="write the items one after another, "
                              "each waiting for its receipt, as imports did before bulk writing (to compare)")
    bench_import.add_argument("--output", default=str(bench_defaults.IMPORTS_OUTPUT),
                              help="default %(default)s; '-' writes no file")
    bench_import.set_defaults(handler=cmd_bench_import)
    bench_gate = bench_commands.add_parser(
        "gate", parents=[common], help="the recall gate on LoCoMo: latency, quality, and a reranker against PyTorch",
        description="Per-turn latency of memory/gate on a LoCoMo store with the model --model names (an installed "
                    "one, or a folder: a cross-encoder, or an embedding model served as embedding/NAME); with "
                    "--quality, what the gate injects on LoCoMo (precision, recall, F1 per threshold, ROC AUC); "
                    "with --torch-python, the same pairs scored by sentence-transformers CrossEncoder with PyTorch, "
                    "side by side. --state-dir names a LoCoMo state dir to reuse.")
    bench_gate.add_argument("--model", help="an installed model's name (in --state-dir) or a model folder with an "
                                            "ONNX graph, tokenizer.json and config.json (a reranker or an embedding "
                                            "model; scripts/make_fullsize_reranker.py makes a full-size reranker)")
    bench_gate.add_argument("--variant", metavar="NAME",
                            help="run onnx/NAME.onnx of the folder instead of onnx/model.onnx (model_int8: "
                                 "scripts/quantize_reranker.py)")
    bench_gate.add_argument("--torch-python", help="a Python with torch and sentence-transformers: adds the PyTorch "
                                                   "comparison (a reranker folder with model.safetensors)")
    bench_gate.add_argument("--quality", action="store_true",
                            help="precision, recall, F1 per threshold and ROC AUC on LoCoMo conversations 5-9")
    bench_gate.add_argument("--fit-calibration", action="store_true",
                            help="no longer fitted here: the embedding Decision model's calibration is "
                                 "fitted by python -m engine.bench.gate_shapes --fit (two page shapes)")
    bench_gate.add_argument("--candidates", nargs="+", default=["keyword"], choices=["keyword", "hybrid", "model"],
                            help="candidate modes the quality figures compare (default keyword)")
    bench_gate.add_argument("--data", default=str(bench_defaults.LOCOMO_DATA), help="the LoCoMo file")
    bench_gate.add_argument("--questions", type=int, default=150, help="gate turns (default 150)")
    bench_gate.add_argument("--timeout-ms", type=int, default=1500, help="recallGate.timeoutMs (default 1500)")
    bench_gate.add_argument("--long-windows", type=int, default=0, metavar="N",
                            help="recallGate.longWindows of the gate turns (the cascade; default 0: equal windows)")
    bench_gate.add_argument("--rounds", type=int, default=3,
                            help="throughput rounds per side, or --first-turn rounds per setup (default 3)")
    bench_gate.add_argument("--first-turn", action="store_true",
                            help="the first gate turn on a freshly opened generated store against the turns after "
                                 "it, for each --candidates mode and without store vectors (--model: an embedding "
                                 "model; writes the 'First turn' section of --output)")
    bench_gate.add_argument("--pages", type=int, default=400, help="--first-turn: pages in the store (default 400)")
    bench_gate.add_argument("--warm-turns", type=int, default=20,
                            help="--first-turn: turns after the first in each round (default 20)")
    bench_gate.add_argument("--output", default=str(bench_defaults.GATE_OUTPUT), help="'-' writes no file")
    bench_gate.set_defaults(handler=cmd_bench_gate)


def cmd_bench_socket(args: argparse.Namespace, state: StateDir) -> int:
    if args.bounds:
        from ..bench import socket_bounds as socket_bounds_bench
        command = f"knowledge bench socket --bounds --connections {args.connections}"
        text = socket_bounds_bench.report(socket_bounds_bench.run(connections=args.connections), command)
    else:
        from ..bench import socket as socket_bench
        command = f"knowledge bench socket --pages {args.pages} --seconds {args.seconds:g}"
        text = socket_bench.report(socket_bench.run(pages=args.pages, seconds=args.seconds), command)
    return _reported(text, args.output or ("docs/benchmarks/socket-bounds.md" if args.bounds
                                           else "docs/benchmarks/socket.md"))


def cmd_bench_throughput(args: argparse.Namespace, state: StateDir) -> int:
    from ..bench import throughput as throughput_bench
    sizes = tuple(args.records)
    command = (f"knowledge bench throughput --records {' '.join(map(str, sizes))} --seconds {args.seconds:g} "
               f"--round-trips {args.round_trips}")
    result = throughput_bench.run(sizes=sizes, seconds=args.seconds, round_trips=args.round_trips,
                                  say=lambda line: print(line, file=sys.stderr, flush=True))
    text = throughput_bench.report(result, command)
    return _reported(text, args.output)


def cmd_bench_cataloguing(args: argparse.Namespace, state: StateDir) -> int:
    """Throwaway state directories in a temporary directory; the state directory is never touched."""
    from ..bench import cataloguing
    sides: dict[str, Path] = {}
    if args.compare:
        name, _, directory = args.compare.partition("=")
        sides[name] = Path(directory).resolve()
    sides["this checkout"] = Path.cwd()
    command = f"knowledge bench cataloguing --records {args.records} --repeats {args.repeats}"
    if args.compare:
        command += f" --compare {args.compare}"
    result = cataloguing.run(records=args.records, repeats=args.repeats, sides=sides,
                             template=Path(args.template) if args.template else None,
                             say=lambda line: print(line, file=sys.stderr, flush=True))
    return _reported(cataloguing.report(result, command), args.output)


def cmd_bench_git(args: argparse.Namespace, state: StateDir) -> int:
    """Two throwaway vaults in a temporary directory; the state directory is never touched."""
    from ..bench import git_history
    text = git_history.report(git_history.measure(args.checkpoints), args.checkpoints,
                              git_history.command("knowledge bench git", args.checkpoints))
    return _reported(text, args.output)


def cmd_bench_sync(args: argparse.Namespace, state: StateDir) -> int:
    """Throwaway state directories in a temporary directory; the state directory is never touched."""
    from ..bench import sync as sync_bench
    for name in ("records", "clone_records", "repeats"):
        if getattr(args, name) < 1:
            print(f"knowledge bench sync: --{name.replace('_', '-')} must be at least 1", file=sys.stderr)
            return 2
    if args.seconds <= 0:
        print("knowledge bench sync: --seconds must be more than 0", file=sys.stderr)
        return 2
    result = sync_bench.run(records=args.records, clone_records=args.clone_records, repeats=args.repeats,
                            seconds=args.seconds, say=lambda line: print(line, file=sys.stderr, flush=True))
    text = sync_bench.report(result, sync_bench.command("knowledge bench sync", args.records, args.clone_records,
                                                        args.repeats, args.seconds))
    return _reported(text, args.out)


def cmd_bench_mcp(args: argparse.Namespace, state: StateDir) -> int:
    """A throwaway state directory and engine of its own; the state directory is never touched."""
    from ..bench import mcp_start
    text = mcp_start.report(mcp_start.measure(args.rounds), f"knowledge bench mcp --rounds {args.rounds}")
    return _reported(text, args.output)


def cmd_bench_vault(args: argparse.Namespace, state: StateDir) -> int:
    """A throwaway state directory and engine of its own; the state directory is never touched."""
    from ..bench import vault_search
    command = "knowledge " + shlex.join(args.argv)
    return _reported(vault_search.report(vault_search.run(args.vault, args.embedding_model), command), args.output)


def cmd_bench_owner_locomo(args: argparse.Namespace, state: StateDir) -> int:
    """Only an explicit --state-dir is used (to reuse a LoCoMo import); the default one is never touched."""
    from ..bench import owner_locomo
    command = "knowledge " + shlex.join(args.argv)
    result = owner_locomo.run(args.data, args.embedding_model,
                              Path(args.state_dir).expanduser() if args.state_dir else None,
                              say=lambda line: print(line, file=sys.stderr, flush=True))
    return _reported(owner_locomo.report(result, command), args.output)


def cmd_bench_bridge(args: argparse.Namespace, state: StateDir) -> int:
    """A throwaway state directory and engine of its own; the state directory is never touched."""
    from ..bench import bridge
    command = "knowledge " + shlex.join(args.argv)
    return _reported(bridge.report(bridge.measure(args.blocks, args.calls, args.bridge_command), command), args.output)


def cmd_bench_import(args: argparse.Namespace, state: StateDir) -> int:
    """Everything happens in a throwaway directory; the state directory is never touched."""
    command = "knowledge " + shlex.join(args.argv)
    if args.markdown_notes is not None:
        from ..bench import import_markdown
        output = ("docs/benchmarks/imports-markdown.md" if args.output == str(bench_defaults.IMPORTS_OUTPUT)
                  else args.output)
        return _reported(import_markdown.report(import_markdown.run(
            args.markdown_notes, args.profile, bulk=not args.one_by_one), command),
                         output)
    from ..bench import imports as imports_bench
    result = imports_bench.run(conversations=args.conversations, messages=args.messages, profile=args.profile,
                               say=lambda line: print(line, file=sys.stderr, flush=True), bulk=not args.one_by_one)
    text = imports_bench.report(result, command)
    return _reported(text, args.output)


def cmd_bench_gate(args: argparse.Namespace, state: StateDir) -> int:
    """Only an explicit --state-dir is used (to reuse a LoCoMo import); the default one is never touched."""
    if args.first_turn:
        return _bench_gate_first_turn(args)
    from ..bench import gate as gate_bench
    options = gate_bench.Options(
        model=args.model, variant=args.variant,
        torch_python=Path(args.torch_python) if args.torch_python else None, data=Path(args.data),
        state_dir=Path(args.state_dir).expanduser() if args.state_dir else None, questions=args.questions,
        timeout_ms=args.timeout_ms, rounds=args.rounds, output=None if args.output == "-" else Path(args.output),
        command="knowledge " + shlex.join(args.argv), quality=args.quality, fit=args.fit_calibration,
        candidates=tuple(args.candidates), long_windows=args.long_windows)
    try:
        gate_bench.run(options, say=lambda line: print(line, flush=True))
    except gate_bench.BenchmarkSkipped as exc:
        print(f"knowledge bench gate: skipped, nothing was measured: {exc}", file=sys.stderr)
        return 2
    return 0


def _bench_gate_first_turn(args: argparse.Namespace) -> int:
    """A throwaway state directory; --state-dir only lends the installed model --model names."""
    from ..bench import gate_first_turn
    if args.model is None:
        print("knowledge bench gate: skipped, nothing was measured: --first-turn needs --model (an embedding model)",
              file=sys.stderr)
        return 2
    options = gate_first_turn.Options(
        model=args.model, models_from=Path(args.state_dir).expanduser() if args.state_dir else None,
        pages=args.pages, rounds=args.rounds, warm=args.warm_turns, candidates=tuple(args.candidates),
        output=None if args.output == "-" else Path(args.output), command="knowledge " + shlex.join(args.argv))
    try:
        gate_first_turn.run(options, say=lambda line: print(line, flush=True))
    except gate_first_turn.BenchmarkSkipped as exc:
        print(f"knowledge bench gate: skipped, nothing was measured: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_bench_search(args: argparse.Namespace, state: StateDir) -> int:
    """Only an explicit --state-dir is used (to reuse a LoCoMo import); the default one is never touched."""
    from ..bench import search as search_bench
    defaults = search_bench.Options.quick_run() if args.quick else search_bench.Options()
    chosen = {name: getattr(args, name) for name in ("records", "queries", "rounds", "repeats", "samples", "seed")
              if getattr(args, name) is not None}
    if args.embedding_model:
        chosen["embedding_model"] = Path(args.embedding_model).expanduser().absolute()
    options = dataclasses.replace(
        defaults, **chosen, data=Path(args.data),
        state_dir=Path(args.state_dir).expanduser() if args.state_dir else None,
        output=None if args.output == "-" else Path(args.output),
        work_dir=Path(args.work_dir) if args.work_dir else None,
        command="knowledge " + shlex.join(args.argv),
    )
    try:
        search_bench.run(options, say=lambda line: print(line, flush=True))
    except search_bench.BenchmarkSkipped as exc:
        print(f"knowledge bench search: skipped, nothing was measured: {exc}", file=sys.stderr)
        return 2
    return 0


def _reported(text: str, output: str) -> int:
    """Print a benchmark's report and write it to ``output`` ('-': nowhere)."""
    print(text, end="")
    if output != "-":
        from ..bench.report_file import write_report  # loaded for a bench command only, as each benchmark is

        write_report(output, text)  # the sections written by hand below the figures stay
    return 0
