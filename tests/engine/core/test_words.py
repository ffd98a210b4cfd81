from engine.core.words import counted, for_count
from engine.sync.status import conflict_kind_words


def test_a_count_says_its_noun_singular_for_one_only() -> None:
    assert counted(1, "file") == "1 file"
    assert counted(0, "file") == "0 files"
    assert counted(1146, "record") == "1,146 records"
    assert counted(2, "directory", "directories") == "2 directories"
    assert [for_count(n, "was", "were") for n in (1, 0, 3)] == ["was", "were", "were"]


def test_a_conflict_kind_is_said_in_words_and_an_unknown_one_readably() -> None:
    assert conflict_kind_words("removed_and_revised") == "removed on one machine and revised on the other, so it stays"
    assert conflict_kind_words("moved_on_both") == "moved on both"
    assert conflict_kind_words(None) == "a conflict"
