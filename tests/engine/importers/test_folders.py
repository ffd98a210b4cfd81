"""The one way every importer reads a folder it was given: links never followed, dot-files left out."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.core.errors import InvalidParams
from engine.importers.folders import left_out_notes, read_regular_file, walk_input


def _tree(root: Path, outside: Path) -> None:
    (root / "notes" / "deep").mkdir(parents=True)
    (root / "a.md").write_text("a", encoding="utf-8")
    (root / "notes" / "b.md").write_text("b", encoding="utf-8")
    (root / "notes" / "deep" / "c.md").write_text("c", encoding="utf-8")
    (root / ".bash_history").write_text("secret", encoding="utf-8")
    (root / ".config").mkdir()
    (root / ".config" / "personal.txt").write_text("secret", encoding="utf-8")
    outside.mkdir()
    (outside / "tax-2025.txt").write_text("private", encoding="utf-8")
    os.symlink(outside / "tax-2025.txt", root / "notes" / "linked.md")
    os.symlink(outside, root / "elsewhere")


def test_links_are_named_and_never_followed_and_dot_files_are_left_out(tmp_path: Path) -> None:
    _tree(tmp_path / "in", tmp_path / "out")
    folder = walk_input(tmp_path / "in")
    assert folder.files == ("a.md", "notes/b.md", "notes/deep/c.md")
    assert folder.symlinks == ("elsewhere", "notes/linked.md")
    assert left_out_notes(folder.symlinks) == [
        "Left out 2 symbolic links, which an import never follows: elsewhere, notes/linked.md."]


def test_depth_bounds_the_walk(tmp_path: Path) -> None:
    _tree(tmp_path / "in", tmp_path / "out")
    assert walk_input(tmp_path / "in", depth=2).files == ("a.md", "notes/b.md")


def test_a_file_swapped_for_a_link_is_refused_not_read_through(tmp_path: Path) -> None:
    _tree(tmp_path / "in", tmp_path / "out")
    with pytest.raises(InvalidParams, match="symbolic link"):
        read_regular_file(tmp_path / "in" / "notes" / "linked.md", "notes/linked.md")
    assert walk_input(tmp_path / "in").read("a.md") == b"a"
