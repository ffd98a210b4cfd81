"""Counts the engine's functions whose declared return is untyped JSON, by package.

    python scripts/untyped_answers.py [--list]

A function counts as untyped when its return annotation, as written, is ``Any`` or ``dict[str, Any]``
(the ``ast`` text of the annotation, so ``dict[str, Any] | None`` does not count and neither does a
TypedDict).  Functions declared to return ``JsonObject``/``JsonValue`` (JSON by nature, see
engine/core/answers.py) are counted on a line of their own, so the first figure cannot be lowered by
renaming ``Any``.
"""

from __future__ import annotations

import ast
import collections
import pathlib
import sys

UNTYPED = {"Any", "dict[str, Any]", "Dict[str, Any]"}
JSON = {"JsonObject", "JsonValue"}


def main() -> None:
    root = pathlib.Path(__file__).resolve().parent.parent / "engine"
    untyped: collections.Counter[str] = collections.Counter()
    json_like = functions = 0
    listed = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            functions += 1
            returns = ast.unparse(node.returns) if node.returns is not None else ""
            where = path.relative_to(root.parent)
            if returns in UNTYPED:
                untyped[str(where.parent)] += 1
                listed.append(f"{where}:{node.lineno} {node.name} -> {returns}")
            elif returns in JSON:
                json_like += 1
    print(f"{sum(untyped.values())} of {functions} engine functions return Any or dict[str, Any]; "
          f"{json_like} return JsonObject/JsonValue")
    for package, count in untyped.most_common():
        print(f"  {count:4} {package}")
    if "--list" in sys.argv:
        print("\n".join(listed))


if __name__ == "__main__":
    main()
