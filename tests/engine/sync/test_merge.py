"""Merging two machines' vaults by record: one test per rule (engine/sync/merge.py, docs/sync.md)."""

from __future__ import annotations

import pytest

from engine.sync.merge import MergeRefused, is_synced, merge_vaults
from tests.engine.sync.records import CONVERSATION, record, revised

PAGE = "private/pages/person/alice.md"
PAGE_ID = "pg_01JAAAAAAAAAAAAAAAAAAAAAAA"
CLAIM = "private/claims/cl_01JCCCCCCCCCCCCCCCCCCCCCCC.md"
CLAIM_ID = "cl_01JCCCCCCCCCCCCCCCCCCCCCCC"


def base_state() -> dict[str, bytes]:
    return {
        "ontology.yaml": b"page_types: {}\n",
        PAGE: record(PAGE_ID),
        CLAIM: record(CLAIM_ID, kind="claim", title="Alice lives in Oslo", claim_kind="fact",
                      assertion_origin="user", evidence=[{"source": "src_01JSSSSSSSSSSSSSSSSSSSSSSS"}]),
        f"{CONVERSATION}/claims/cl_01JDDDDDDDDDDDDDDDDDDDDDDD.md":
            record("cl_01JDDDDDDDDDDDDDDDDDDDDDDD", kind="claim"),
    }


def both_ways(base, ours, theirs):
    """The merge, checked to give the same files with the sides swapped."""
    result = merge_vaults(base, ours, theirs)
    assert merge_vaults(base, theirs, ours).files == result.files
    return result


def test_new_records_on_either_side_are_united() -> None:
    base = base_state()
    ours = {**base, "private/claims/cl_01JE.md": record("cl_01JE", kind="claim")}
    theirs = {**base, "private/pages/topic/oslo.md": record("pg_01JF", title="Oslo"),
              "private/sources/src_01JG.txt": b"excerpt\n"}
    result = both_ways(base, ours, theirs)
    assert result.files == {**ours, **theirs}
    assert not result.conflicts and not result.removals and not result.moves


def test_two_new_records_at_one_path_are_both_kept_the_older_in_place() -> None:
    base = base_state()
    older, newer = "pg_01JH0000000000000000000000", "pg_01JH0000000000000000000001"
    path = "private/pages/person/bob.md"
    ours = {**base, path: record(newer, title="Bob")}
    theirs = {**base, path: record(older, title="Bob")}
    result = both_ways(base, ours, theirs)
    assert result.files[path] == theirs[path]
    assert result.files[f"private/pages/person/bob-{newer}.md"] == ours[path]
    assert [(m.record_id, m.wanted, m.was, m.placed) for m in result.moves] == [
        (newer, path, path, f"private/pages/person/bob-{newer}.md")]
    assert not result.conflicts


def test_a_correction_on_one_machine_supersedes_the_claim() -> None:
    base = base_state()
    superseded = revised(base[CLAIM], lifecycle="superseded", updated_at="2026-01-02T00:00:00Z")
    correction = record("cl_01JK", kind="claim", title="Alice lives in Bergen", replaces=CLAIM_ID)
    ours = {**base, CLAIM: superseded, "private/claims/cl_01JK.md": correction}
    result = both_ways(base, ours, dict(base))
    assert result.files[CLAIM] == superseded
    assert result.files["private/claims/cl_01JK.md"] == correction
    assert not result.conflicts


def test_a_correction_stands_against_later_edits_of_the_claim_on_another_machine() -> None:
    base = base_state()
    superseded = revised(base[CLAIM], lifecycle="superseded", updated_at="2026-01-02T00:00:00Z")
    ours = {**base, CLAIM: superseded, "private/claims/cl_01JK.md": record("cl_01JK", kind="claim",
                                                                           replaces=CLAIM_ID)}
    edited_twice = revised(revised(base[CLAIM], tags=["home"]), updated_at="2026-02-01T00:00:00Z")
    theirs = {**base, CLAIM: edited_twice}
    result = both_ways(base, ours, theirs)
    assert result.files[CLAIM] == superseded
    [conflict] = result.conflicts
    assert (conflict.kind, conflict.record_id, conflict.kept_side) == ("revised_on_both", CLAIM_ID, "ours")
    assert conflict.other.data == edited_twice and conflict.base.data == base[CLAIM]


def test_a_page_revised_on_both_machines_is_a_conflict_with_one_current_by_rule() -> None:
    base = base_state()
    laptop = revised(base[PAGE], body="laptop", updated_at="2026-03-01T00:00:00Z")
    desktop = revised(base[PAGE], body="desktop", updated_at="2026-03-02T00:00:00Z")
    result = both_ways(base, {**base, PAGE: laptop}, {**base, PAGE: desktop})
    assert result.files[PAGE] == desktop  # same revision: the later updated_at stands
    [conflict] = result.conflicts
    assert (conflict.kind, conflict.kept.data, conflict.other.data) == ("revised_on_both", desktop, laptop)
    assert "-laptop" in conflict.diff() and "+desktop" in conflict.diff()
    assert conflict.diff().splitlines()[:2] == [f"--- {PAGE} (not standing)", f"+++ {PAGE} (stands)"]
    swapped = merge_vaults(base, {**base, PAGE: desktop}, {**base, PAGE: laptop}).conflicts
    assert [other.diff() for other in swapped] == [conflict.diff()]  # read the same on either machine


def test_the_higher_revision_stands_before_the_later_time() -> None:
    base = base_state()
    twice = revised(revised(base[PAGE], body="one"), body="two", updated_at="2026-03-01T00:00:00Z")
    once_later = revised(base[PAGE], body="later", updated_at="2026-09-01T00:00:00Z")
    result = both_ways(base, {**base, PAGE: once_later}, {**base, PAGE: twice})
    assert result.files[PAGE] == twice
    assert result.conflicts[0].kept_side == "theirs"


def test_the_same_time_falls_to_the_greater_sha256() -> None:
    base = base_state()
    one, two = revised(base[PAGE], body="one"), revised(base[PAGE], body="two")
    from engine.core.files import sha256_bytes
    greater = max(one, two, key=sha256_bytes)
    assert both_ways(base, {**base, PAGE: one}, {**base, PAGE: two}).files[PAGE] == greater


def test_a_withdrawal_is_not_undone_by_a_concurrent_edit() -> None:
    base = base_state()
    withdrawn = revised(base[PAGE], lifecycle="withdrawn")
    edited = revised(revised(base[PAGE], body="more"), body="even more")
    result = both_ways(base, {**base, PAGE: edited}, {**base, PAGE: withdrawn})
    assert result.files[PAGE] == withdrawn
    assert result.conflicts[0].other.data == edited


def test_a_removal_on_one_side_is_applied_and_listed() -> None:
    base = base_state()
    ours = {path: data for path, data in base.items() if path != PAGE}
    result = both_ways(base, ours, dict(base))
    assert PAGE not in result.files
    [removal] = result.removals
    assert (removal.side, removal.record_id, removal.base.data) == ("ours", PAGE_ID, base[PAGE])


def test_a_record_removed_on_one_side_and_revised_on_the_other_stays_revised() -> None:
    base = base_state()
    ours = {path: data for path, data in base.items() if path != PAGE}
    theirs = {**base, PAGE: revised(base[PAGE], body="kept")}
    result = both_ways(base, ours, theirs)
    assert result.files[PAGE] == theirs[PAGE]
    [conflict] = result.conflicts
    assert (conflict.kind, conflict.kept_side, conflict.other) == ("removed_and_revised", "theirs", None)
    assert not result.removals


def test_a_removal_of_a_revision_that_stands_over_the_other_sides_revision_applies_and_lists_it() -> None:
    # ours revised the page (later) and then removed it; theirs revised it meanwhile
    base = base_state()
    removed_here = revised(base[PAGE], body="ours, then removed", updated_at="2026-01-02T00:00:00Z")
    ours = {path: data for path, data in base.items() if path != PAGE}
    theirs = {**base, PAGE: revised(base[PAGE], body="theirs", updated_at="2026-01-01T12:00:00Z")}
    told = {"ours": [("c1", ["c0"], [(PAGE, removed_here)], [])], "theirs": [], "base": []}
    result = merge_vaults(base, ours, theirs, removed=told.__getitem__)
    assert PAGE not in result.files
    [conflict] = result.conflicts
    assert (conflict.kind, conflict.kept_side, conflict.kept.data, conflict.other.data) == (
        "revised_on_both", "ours", removed_here, theirs[PAGE])
    [removal] = result.removals
    assert (removal.side, removal.base.data) == ("ours", removed_here)
    swapped = {"ours": [], "theirs": told["ours"], "base": []}
    assert merge_vaults(base, theirs, ours, removed=swapped.__getitem__).files == result.files


def test_a_removal_of_an_earlier_revision_than_the_other_sides_leaves_that_revision() -> None:
    base = base_state()
    removed_here = revised(base[PAGE], body="ours, then removed", updated_at="2026-01-01T12:00:00Z")
    ours = {path: data for path, data in base.items() if path != PAGE}
    theirs = {**base, PAGE: revised(base[PAGE], body="theirs", updated_at="2026-01-02T00:00:00Z")}
    told = {"ours": [("c1", ["c0"], [(PAGE, removed_here)], [])], "theirs": [], "base": []}
    result = merge_vaults(base, ours, theirs, removed=told.__getitem__)
    assert result.files[PAGE] == theirs[PAGE]
    [conflict] = result.conflicts
    assert (conflict.kind, conflict.kept_side, conflict.other) == ("removed_and_revised", "theirs", None)


def test_a_file_moved_and_removed_in_one_commit_is_moved_not_removed() -> None:
    # a rename is read from git as a removal and a write in one commit: it tells nothing of a removal
    base = base_state()
    moved = "private/pages/person/alice-moved.md"
    ours = {path: data for path, data in base.items() if path != PAGE}
    theirs = {**base, PAGE: revised(base[PAGE], body="theirs")}
    told = {"ours": [("c1", ["c0"], [(PAGE, base[PAGE])], [(moved, base[PAGE])])], "theirs": [], "base": []}
    result = merge_vaults(base, ours, theirs, removed=told.__getitem__)
    assert PAGE not in result.files and result.files[moved] == theirs[PAGE]  # where ours last moved it


def test_a_record_moved_on_one_side_follows_its_id() -> None:
    base = base_state()
    moved = "private/pages/person/alice-smith.md"
    ours = {**{p: d for p, d in base.items() if p != PAGE}, moved: base[PAGE]}
    theirs = {**base, "private/claims/cl_01JZ.md": record("cl_01JZ", kind="claim")}
    result = both_ways(base, ours, theirs)
    assert PAGE not in result.files and result.files[moved] == base[PAGE]
    assert not result.conflicts and not result.removals


@pytest.mark.parametrize("revision", [2, 1], ids=["by an agent", "by hand, keeping the revision number"])
def test_a_record_moved_on_one_side_and_revised_in_place_on_the_other_is_the_revision_at_its_new_path(
        revision: int) -> None:
    base = base_state()
    moved = "private/pages/person/alice-smith.md"
    ours = {**{p: d for p, d in base.items() if p != PAGE}, moved: base[PAGE]}
    theirs = {**base, PAGE: revised(base[PAGE], body="edited", revision=revision)}
    result = both_ways(base, ours, theirs)
    assert PAGE not in result.files and result.files[moved] == theirs[PAGE]
    assert not result.conflicts and not result.removals and not result.moves


def test_a_record_moved_on_one_side_and_removed_on_the_other_is_removed_a_move_being_no_revision() -> None:
    base = base_state()
    moved = "private/pages/person/alice-smith.md"
    ours = {path: data for path, data in base.items() if path != PAGE}
    theirs = {**ours, moved: base[PAGE]}
    result = both_ways(base, ours, theirs)
    assert PAGE not in result.files and moved not in result.files and not result.conflicts
    [removal] = result.removals
    assert (removal.side, removal.record_id, removal.base.data) == ("ours", PAGE_ID, base[PAGE])


def test_a_record_moved_and_removed_on_one_side_and_revised_on_the_other_is_the_revision_where_it_was_moved() -> None:
    base = base_state()
    moved = "private/pages/person/alice-smith.md"
    ours = {path: data for path, data in base.items() if path != PAGE}
    theirs = {**base, PAGE: revised(base[PAGE], body="theirs")}
    told = {"ours": [("c2", ["c1"], [(moved, base[PAGE])], []),
                     ("c1", ["c0"], [(PAGE, base[PAGE])], [(moved, base[PAGE])])], "theirs": [], "base": []}
    result = merge_vaults(base, ours, theirs, removed=told.__getitem__)
    assert PAGE not in result.files and result.files[moved] == theirs[PAGE]
    [conflict] = result.conflicts
    assert (conflict.kind, conflict.kept_side, conflict.kept.path) == ("removed_and_revised", "theirs", moved)


def test_a_record_moved_twice_on_one_line_and_removed_counts_the_last_move_only() -> None:
    # renamed to b, then to a (a path smaller than b), then removed; the other side revised it where it was
    base = base_state()
    first, last = "private/pages/person/b.md", "private/pages/person/a.md"
    ours = {path: data for path, data in base.items() if path != PAGE}
    theirs = {**base, PAGE: revised(base[PAGE], body="theirs")}
    told = {"ours": [("c3", ["c2"], [(last, base[PAGE])], []),
                     ("c1", ["c0"], [(PAGE, base[PAGE])], [(first, base[PAGE])]),
                     ("c2", ["c1"], [(first, base[PAGE])], [(last, base[PAGE])])], "theirs": [], "base": []}
    result = merge_vaults(base, ours, theirs, removed=told.__getitem__)
    assert result.files[last] == theirs[PAGE] and first not in result.files and PAGE not in result.files


def test_a_record_moved_to_two_places_goes_to_the_greater_path_with_the_revision_and_is_a_conflict() -> None:
    base = base_state()
    ours = {**{p: d for p, d in base.items() if p != PAGE}, "private/pages/person/alice-smith.md": base[PAGE]}
    theirs = {**{p: d for p, d in base.items() if p != PAGE},
              "private/pages/person/alice-jones.md": revised(base[PAGE], body="edited")}
    result = both_ways(base, ours, theirs)
    assert result.files["private/pages/person/alice-smith.md"] == theirs["private/pages/person/alice-jones.md"]
    assert "private/pages/person/alice-jones.md" not in result.files
    [conflict] = result.conflicts
    assert conflict.kind == "revised_on_both"


@pytest.mark.parametrize("partition", ["private/", f"{CONVERSATION}/"])
def test_a_side_missing_a_whole_partition_folder_is_refused(partition: str) -> None:
    base = base_state()
    ours = {path: data for path, data in base.items() if not path.startswith(partition)}
    with pytest.raises(MergeRefused) as refused:
        merge_vaults(base, dict(base), ours)
    [finding] = refused.value.findings
    assert finding.code == "partition_missing" and finding.path == partition
    assert "theirs" in finding.message


def test_derived_files_are_never_merged() -> None:
    base = base_state()
    derived = {"private/.partition.json": b"{}", "private/claims/x.md.tmp": b"half", ".git/config": b"[core]",
               "state.sqlite": b"SQLite", "index/private.v2/meta.json": b"{}", "private/.gitattributes": b"*"}
    result = both_ways(base, {**base, **derived}, dict(base))
    assert result.files == base
    assert sorted(finding.path for finding in result.left_out) == sorted(derived)
    assert not any(is_synced(path) for path in derived)


@pytest.mark.parametrize("path", ["/etc/passwd", "../state.sqlite", "private/../../x.md", "private\\x.md",
                                  "private//x.md", ""])
def test_a_path_that_could_leave_the_vault_refuses_the_merge(path: str) -> None:
    base = base_state()
    with pytest.raises(MergeRefused) as refused:
        merge_vaults(base, {**base, path: b"x"}, dict(base))
    assert refused.value.findings[0].code == "unsafe_path"


def test_the_same_change_on_both_sides_is_taken_once() -> None:
    base = base_state()
    same = revised(base[PAGE], body="same")
    result = both_ways(base, {**base, PAGE: same}, {**base, PAGE: same})
    assert result.files[PAGE] == same and not result.conflicts


def test_a_file_that_is_no_record_is_merged_by_path() -> None:
    base = base_state()
    result = both_ways(base, {**base, "ontology.yaml": b"page_types: {a: {}}\n"},
                       {**base, "ontology.yaml": b"page_types: {b: {}}\n"})
    [conflict] = result.conflicts
    assert conflict.record_id is None and conflict.kind == "revised_on_both"
    assert result.files["ontology.yaml"] == conflict.kept.data


def test_updated_at_is_compared_as_a_moment() -> None:
    base = base_state()
    zulu = revised(base[PAGE], body="nine utc", updated_at="2026-03-01T09:00:00Z")
    offset = revised(base[PAGE], body="eight utc", updated_at="2026-03-01T10:00:00+02:00")
    assert both_ways(base, {**base, PAGE: offset}, {**base, PAGE: zulu}).files[PAGE] == zulu


def test_an_id_held_twice_on_one_side_is_merged_by_path() -> None:
    base = base_state()
    copy = "private/pages/person/alice-copy.md"
    ours = {**base, copy: base[PAGE]}  # a duplicate made by hand: both files stay, the owner resolves it
    theirs = {**base, PAGE: revised(base[PAGE], body="revised")}
    result = both_ways(base, ours, theirs)
    assert result.files[copy] == base[PAGE] and result.files[PAGE] == theirs[PAGE]
    assert not result.conflicts and not result.moves


def test_the_merge_changes_none_of_its_inputs() -> None:
    base = base_state()
    ours = {**base, PAGE: revised(base[PAGE], body="one")}
    theirs = {**base, PAGE: revised(base[PAGE], body="two"), "private/.partition.json": b"{}"}
    copies = [dict(base), dict(ours), dict(theirs)]
    merge_vaults(base, ours, theirs)
    with pytest.raises(MergeRefused):
        merge_vaults(base, {}, theirs)
    assert [base, ours, theirs] == copies


def test_with_blob_ids_only_the_changed_files_are_read() -> None:
    from engine.core.files import sha256_bytes

    base = {**base_state(), **{f"private/claims/cl_{n:04d}.md": record(f"cl_{n:04d}", kind="claim")
                               for n in range(500)}}
    ours = {**base, PAGE: revised(base[PAGE], body="one"), "private/claims/cl_new.md": record("cl_new")}
    theirs = {**base, PAGE: revised(base[PAGE], body="two")}
    blobs = {sha256_bytes(data): data for state in (base, ours, theirs) for data in state.values()}
    read = []

    def load(blob: object) -> bytes:
        read.append(blob)
        return blobs[blob]

    by_id = [{path: sha256_bytes(data) for path, data in state.items()} for state in (base, ours, theirs)]
    result = merge_vaults(*by_id, load=load)
    assert {path: blobs[blob] for path, blob in result.files.items()} == merge_vaults(base, ours, theirs).files
    assert set(read) == {by_id[0][PAGE], by_id[1][PAGE], by_id[2][PAGE], by_id[1]["private/claims/cl_new.md"]}
    assert result.conflicts[0].diff()


def test_a_partition_new_on_one_side_is_taken_whole() -> None:
    base = base_state()
    session = "conversations/9b2e0c1a-0c5e-4a4e-8f3a-1d2b3c4d5e6f"
    theirs = {**base, f"{session}/claims/cl_01JQ.md": record("cl_01JQ", kind="claim"),
              f"{session}/sources/src_01JQ.txt": b"said in that chat\n"}
    result = both_ways(base, dict(base), theirs)
    assert result.files == theirs and not result.conflicts


def test_a_markdown_file_that_is_no_record_is_merged_by_path_and_never_read_as_one() -> None:
    base = base_state()
    broken = b"---\nid: [unclosed\n---\nbody\n"
    ours = {**base, "private/notes/scratch.md": broken}
    theirs = {**base, "private/notes/scratch.md": b"plain notes\n"}
    result = both_ways(base, ours, theirs)
    [conflict] = result.conflicts
    assert (conflict.kind, conflict.record_id) == ("added_on_both", None)
    assert result.files["private/notes/scratch.md"] == conflict.kept.data


def test_a_record_moved_aside_returns_once_its_path_is_free() -> None:
    older, newer = "pg_01JH0000000000000000000000", "pg_01JH0000000000000000000001"
    path, aside = "private/pages/person/bob.md", f"private/pages/person/bob-{newer}.md"
    base = {**base_state(), path: record(older, title="Bob"), aside: record(newer, title="Bob")}
    ours = {p: d for p, d in base.items() if p != path}
    result = both_ways(base, ours, dict(base))
    assert result.files[path] == base[aside] and aside not in result.files
    assert [(m.record_id, m.wanted, m.was, m.placed) for m in result.moves] == [(newer, path, aside, path)]
    assert [removal.record_id for removal in result.removals] == [older]


def test_an_older_record_takes_its_path_from_a_newer_one_left_unchanged() -> None:
    older, newer = "pg_01JH0000000000000000000000", "pg_01JH0000000000000000000001"
    path = "private/pages/person/bob.md"
    base = {**base_state(), path: record(newer, title="Bob")}
    ours = {**base, "private/pages/person/bob-2.md": b"unrelated"}
    theirs = {**base, f"private/pages/person/bob-{older}.md": record(older, title="Bob")}
    result = both_ways(base, ours, theirs)
    assert result.files[path] == theirs[f"private/pages/person/bob-{older}.md"]
    assert result.files[f"private/pages/person/bob-{newer}.md"] == base[path]
