"""The git outbox's queue: pending publications in order with their files, read in one statement."""

from __future__ import annotations

from engine.core.db import Database
from engine.store.outbox import PENDING_FILES, GitOutbox
from engine.store.store import STATE_MIGRATIONS


def _outbox_with(publications: list[tuple[str, list[bytes], str]]) -> Database:
    """A database whose outbox holds ``(partition, files' bytes, state)`` per publication, in order."""
    db = Database.open(None, create=True, migrations=STATE_MIGRATIONS)
    for seq, (partition, contents, state) in enumerate(publications, start=1):
        db.execute("INSERT INTO publications (seq, id, partition, operation, request_hash, agent, state, receipt, "
                   "created_at) VALUES (?, ?, ?, 'save_page', 'h', ?, 'applied', '{}', 'now')",
                   (seq, f"pub_{seq}", partition, f"agent-{seq}"))
        db.executemany("INSERT INTO publication_files (publication_seq, ordinal, path, role, new_sha256, new_bytes, "
                       "removes) VALUES (?, ?, ?, 'record', 's', ?, 0)",
                       [(seq, ordinal, f"pages/p{seq}-{ordinal}.md", data) for ordinal, data in enumerate(contents)])
        db.execute("INSERT INTO outbox (publication_seq, state, updated_at) VALUES (?, ?, 'now')", (seq, state))
    return db


def test_the_pending_queue_lists_each_publication_once_in_order_with_its_files_in_order():
    chat = "conversation:0b1e3c1e-8f4a-4c57-9d1a-2f3c4d5e6f70"
    db = _outbox_with([("private", [b"a0", b"a1", b"a2"], "pending"), ("private", [b"b0"], "committed"),
                       (chat, [b"c0", b"c1"], "pending"), ("private", [], "pending")])
    queue = GitOutbox(db).pending()
    assert [(entry["seq"], entry["id"], entry["agent"], entry["partition"], entry["operation"]) for entry in queue] == [
        (1, "pub_1", "agent-1", "private", "save_page"), (3, "pub_3", "agent-3", chat, "save_page"),
        (4, "pub_4", "agent-4", "private", "save_page")]
    folder = "conversations/0b1e3c1e-8f4a-4c57-9d1a-2f3c4d5e6f70"
    assert [entry["files"] for entry in queue] == [
        [("private/pages/p1-0.md", b"a0"), ("private/pages/p1-1.md", b"a1"), ("private/pages/p1-2.md", b"a2")],
        [(f"{folder}/pages/p3-0.md", b"c0"), (f"{folder}/pages/p3-1.md", b"c1")],
        []]


def test_committing_takes_publications_off_the_queue_with_their_journalled_bytes():
    db = _outbox_with([("private", [b"a0"], "pending"), ("private", [b"b0", b"b1"], "pending"),
                       ("private", [b"c0"], "pending")])
    GitOutbox(db).committed([1, 2], "abc123")
    assert [entry["seq"] for entry in GitOutbox(db).pending()] == [3]
    assert db.tuples("SELECT publication_seq, state, commit_id, attempts FROM outbox ORDER BY publication_seq") == [
        (1, "committed", "abc123", 1), (2, "committed", "abc123", 1), (3, "pending", None, 0)]
    assert db.tuples("SELECT DISTINCT publication_seq FROM publication_files") == [(3,)]


def test_the_pending_queue_is_found_through_its_own_index_not_every_committed_row():
    db = _outbox_with([("private", [b"a0"], "committed")])
    plan = " ".join(row[3] for row in db.all(f"EXPLAIN QUERY PLAN {PENDING_FILES}"))
    assert "USING INDEX outbox_pending" in plan, plan
