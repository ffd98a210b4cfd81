"""The committed tool reference is exactly what the socket serves."""

from pathlib import Path

from engine.wire.protocol_docs import render
from engine.wire.tools import CORE_TOOLS

DOCS = Path(__file__).resolve().parents[3] / "docs"


def test_the_tool_reference_matches_the_served_schemas():
    assert (DOCS / "protocol-tools.md").read_text(encoding="utf-8") == render(), \
        "regenerate with: python -m engine.wire.protocol_docs > docs/protocol-tools.md"


def test_the_tool_reference_keeps_its_prose_as_lines():
    lines = render().splitlines()
    assert "## Results" in lines and "### Schemas and strict mode" in lines
    assert any(line.startswith("- Null is absent.") for line in lines)
    assert any(line.startswith("- Strict mode.") for line in lines)


def test_the_protocol_guide_names_every_tool_and_host_method():
    guide = (DOCS / "protocol.md").read_text(encoding="utf-8")
    for tool in CORE_TOOLS:
        assert f"`{tool.name}`" in guide, tool.name
    for method in ("initialize", "tools/list", "tools/call", "ping", "memory/search", "memory/read",
                   "memory/health", "memory/status", "memory/prompt", "memory/index", "memory/recallCandidates",
                   "memory/flushPlan"):
        assert f"`{method}`" in guide, method
