"""Small vault states for the merge tests: records rendered the way the engine renders them."""

from __future__ import annotations

from engine.vault.records import RECORD_FORMAT, Record

CONVERSATION = "conversations/3f2504e0-4f89-41d3-9a0c-0305e82c3301"


def record(record_id: str, *, revision: int = 1, kind: str = "page", title: str = "Alice",
           lifecycle: str = "active", updated_at: str = "2026-01-01T00:00:00Z", body: str = "text",
           **extra: object) -> bytes:
    frontmatter = {"format": RECORD_FORMAT, "id": record_id, "revision": revision, "kind": kind, "title": title,
                   "recorded_at": "2026-01-01T00:00:00Z", "updated_at": updated_at, "scope": "private",
                   "lifecycle": lifecycle, **extra}
    return Record(frontmatter, body).render()


def revised(data: bytes, **changes: object) -> bytes:
    """The next revision of a record's bytes with ``changes`` applied (body through ``body``)."""
    from engine.vault.records import parse_record

    parsed, _ = parse_record(data, "x.md")
    frontmatter = dict(parsed.frontmatter)
    body = changes.pop("body", parsed.body)
    frontmatter["revision"] = frontmatter["revision"] + 1
    frontmatter.update(changes)
    return Record(frontmatter, body).render()
