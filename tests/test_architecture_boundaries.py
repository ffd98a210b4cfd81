"""Dependency direction is desktop -> engine -> models; engine and models never import Qt."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QT = {"PySide6", "shiboken6"}
FORBIDDEN = {"engine": QT | {"desktop"}, "models": QT | {"desktop", "engine"}}


def imported_modules(path: Path, root: Path = ROOT) -> set[str]:
    """Absolute names of everything a module imports, relative imports resolved."""
    package = path.relative_to(root).with_suffix("").parts[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            prefix = ".".join([*base, node.module] if node.module else base)
            names.add(prefix)
            names.update(f"{prefix}.{alias.name}" for alias in node.names)
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", None)) in {"import_module", "__import__"}):
            names.add(node.args[0].value)
    return {name for name in names if name}


def test_layers_only_import_downwards() -> None:
    scanned: dict[str, int] = {}
    violations = []
    for layer, forbidden in FORBIDDEN.items():
        modules = sorted((ROOT / layer).rglob("*.py"))
        scanned[layer] = len(modules)
        for path in modules:
            for name in imported_modules(path):
                if name.split(".")[0] in forbidden:
                    violations.append(f"{path.relative_to(ROOT)} imports {name}")
    assert scanned["engine"] >= 10 and scanned["models"] >= 1, scanned
    assert violations == []


def test_the_import_scanner_sees_every_import_form(tmp_path: Path) -> None:
    probe = tmp_path / "engine" / "probe.py"
    probe.parent.mkdir()
    probe.write_text("import PySide6.QtCore\nfrom ..desktop import app\nfrom . import store\n"
                     "importlib.import_module('shiboken6')\n", encoding="utf-8")

    found = imported_modules(probe, root=tmp_path)

    assert {"PySide6.QtCore", "desktop", "desktop.app", "engine", "engine.store", "shiboken6"} <= found
