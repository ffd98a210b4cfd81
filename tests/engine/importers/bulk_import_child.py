"""An import killed midway, for the bulk kill tests: a Markdown vault imported with its items written in bulk.

    python -m tests.engine.importers.bulk_import_child STATE_DIR VAULT

Each page and relationship whose receipt came back is printed as one JSON line (``{"page": id}``,
``{"relationships": [ids]}``), flushed before the writer goes on, so whatever the parent reads was
acknowledged.  The parent sets ``KNOWLEDGE_FAULT`` to have the engine SIGKILL this process at a chosen
publication step, inside a group of the import's writes.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

from engine.importers.common import Original, Writer, import_instance, owner_caller
from engine.importers.markdown import import_markdown, load_markdown
from engine.service import Engine
from engine.state.statedir import StateDir

_PRINTING = threading.Lock()


class PrintingWriter(Writer):
    """A writer that prints what was acknowledged, as it is."""

    def save_page(self, key: str, params: dict[str, Any]) -> str:
        page_id = super().save_page(key, params)
        _print({"page": page_id})
        return page_id

    def save_page_retaining(self, key: str, params: dict[str, Any], original: Original, *, media_type: str,
                            filename: str) -> tuple[str, list[str]]:
        page_id, sources = super().save_page_retaining(key, params, original, media_type=media_type,
                                                       filename=filename)
        _print({"page": page_id})
        return page_id, sources

    def remember(self, key: str, items: list[dict[str, Any]]) -> list[str]:
        ids = super().remember(key, items)
        _print({"relationships": ids})
        return ids


def _print(line: dict[str, Any]) -> None:
    with _PRINTING:
        print(json.dumps(line), flush=True)


def main() -> None:
    state, vault = StateDir(Path(sys.argv[1])), sys.argv[2]
    with Engine(state, watch=False) as engine:
        with owner_caller(engine, instance=import_instance("markdown")) as (caller, _):
            import_markdown(PrintingWriter(engine, caller, "markdown"), *load_markdown(vault, engine.refuse_secrets))


if __name__ == "__main__":
    main()
