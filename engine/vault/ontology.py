"""The ontology: page types with typed fields and filing prefixes,
relationship types with endpoint constraints, and claim kinds.

The shipped ``ontology.yaml`` applies in every partition.  A vault's own
``vault/ontology.yaml`` extends it for the private partition only: it may
add page types, relationship types, claim kinds and new fields on shipped
page types, but never redefine anything that already exists.  Extension
mistakes become findings and the offending definition is ignored; the rest
of the extension still applies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import date
from importlib import resources
from typing import Any

from ..core.answers import JsonObject, NotRequired, TypedDict
from ..core.errors import InvalidParams, LimitExceeded
from ..core.findings import Finding
from .frontmatter import load_yaml
from ..core.ids import is_record_id

ONTOLOGY_FORMAT = "knowledge-ontology-v1"
ONTOLOGY_MAX_BYTES = 64 * 1024
SHIPPED = "shipped"
ANY_TYPE = "*"

FIELD_TYPES = ("string", "text", "integer", "number", "boolean", "date", "url", "email", "enum", "list", "page")
_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_URL = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://\S+")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


class FieldDefinition(TypedDict):
    """A typed field of a page type, as ``knowledge_ontology`` shows it."""

    type: str
    provenance: str
    description: NotRequired[str]
    values: NotRequired[list[str]]
    items: NotRequired["FieldDefinition"]
    pageTypes: NotRequired[list[str]]


@dataclass(frozen=True)
class FieldSpec:
    name: str
    type: str
    description: str = ""
    values: tuple[str, ...] = ()
    items: "FieldSpec | None" = None
    page_types: tuple[str, ...] = ()
    provenance: str = SHIPPED

    def to_dict(self) -> FieldDefinition:
        data: FieldDefinition = {"type": self.type, "provenance": self.provenance}
        if self.description:
            data["description"] = self.description
        if self.values:
            data["values"] = list(self.values)
        if self.items is not None:
            data["items"] = self.items.to_dict()
        if self.page_types:
            data["pageTypes"] = list(self.page_types)
        return data


@dataclass(frozen=True)
class PageType:
    name: str
    label: str
    description: str = ""
    aliases: tuple[str, ...] = ()
    filing: tuple[str, ...] = ()
    fields: dict[str, FieldSpec] = field(default_factory=dict)
    provenance: str = SHIPPED


@dataclass(frozen=True)
class RelationType:
    name: str
    label: str
    description: str = ""
    from_types: tuple[str, ...] = (ANY_TYPE,)
    to_types: tuple[str, ...] = (ANY_TYPE,)
    provenance: str = SHIPPED


class _Reader:
    """Turns one ontology document into definitions plus findings."""

    def __init__(self, provenance: str) -> None:
        self.provenance = provenance
        self.findings: list[Finding] = []

    def problem(self, message: str, where: str) -> None:
        self.findings.append(Finding("ontology_invalid", message, path=self.provenance, field=where))

    def text(self, value: Any, where: str, default: str = "") -> str:
        if value is None:
            return default
        if not isinstance(value, str):
            self.problem("must be a string", where)
            return default
        return value.strip()

    def names(self, value: Any, where: str, *, allow_any: bool = False) -> tuple[str, ...] | None:
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            self.problem("must be a list of strings", where)
            return None
        bad = [item for item in value if not (_NAME.fullmatch(item) or (allow_any and item == ANY_TYPE))]
        if bad:
            self.problem(f"invalid names {bad}", where)
            return None
        return tuple(value)

    def field_spec(self, name: str, value: Any, where: str) -> FieldSpec | None:
        if isinstance(value, str):
            value = {"type": value}
        if not isinstance(value, dict):
            self.problem("field definition must be a mapping", where)
            return None
        kind = value.get("type")
        if kind not in FIELD_TYPES:
            self.problem(f"field type must be one of {', '.join(FIELD_TYPES)}", where)
            return None
        spec = FieldSpec(name, kind, self.text(value.get("description"), where), provenance=self.provenance)
        if kind == "enum":
            values = value.get("values")
            if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
                self.problem("enum fields need a non-empty list of string values", where)
                return None
            spec = replace(spec, values=tuple(values))
        elif kind == "list":
            items = self.field_spec(name, value.get("items", "string"), f"{where}.items")
            if items is None or items.type == "list":
                self.problem("list items must be a non-list field type", where)
                return None
            spec = replace(spec, items=items)
        elif kind == "page":
            page_types = self.names(value.get("page_types"), f"{where}.page_types")
            if page_types is None:
                return None
            spec = replace(spec, page_types=page_types)
        return spec

    def fields(self, value: Any, where: str) -> dict[str, FieldSpec]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.problem("fields must be a mapping", where)
            return {}
        result = {}
        for name, definition in value.items():
            if not _NAME.fullmatch(name):
                self.problem(f"invalid field name {name!r}", where)
                continue
            spec = self.field_spec(name, definition, f"{where}.{name}")
            if spec is not None:
                result[name] = spec
        return result

    def page_type(self, name: str, value: Any) -> PageType | None:
        where = f"page_types.{name}"
        if not isinstance(value, dict):
            self.problem("page type must be a mapping", where)
            return None
        filing = self.names_or_prefixes(value.get("filing"), f"{where}.filing")
        aliases = value.get("aliases") or []
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            self.problem("aliases must be a list of strings", f"{where}.aliases")
            aliases = []
        return PageType(
            name=name,
            label=self.text(value.get("label"), f"{where}.label", name.replace("_", " ").title()),
            description=self.text(value.get("description"), f"{where}.description"),
            aliases=tuple(aliases),
            filing=filing,
            fields=self.fields(value.get("fields"), f"{where}.fields"),
            provenance=self.provenance,
        )

    def names_or_prefixes(self, value: Any, where: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            self.problem("filing must be a list of path prefixes", where)
            return ()
        prefixes = []
        for item in value:
            if item.startswith("/") or ".." in item.split("/") or not item.endswith("/"):
                self.problem(f"filing prefix {item!r} must be a relative path ending in '/'", where)
                continue
            prefixes.append(item)
        return tuple(prefixes)

    def relation_type(self, name: str, value: Any) -> RelationType | None:
        where = f"relationship_types.{name}"
        if not isinstance(value, dict):
            self.problem("relationship type must be a mapping", where)
            return None
        from_types = self.names(value.get("from", [ANY_TYPE]), f"{where}.from", allow_any=True)
        to_types = self.names(value.get("to", [ANY_TYPE]), f"{where}.to", allow_any=True)
        if not from_types or not to_types:
            if from_types is not None and to_types is not None:
                self.problem("from and to must each name at least one page type or '*'", where)
            return None
        return RelationType(
            name=name,
            label=self.text(value.get("label"), f"{where}.label", name.replace("_", " ")),
            description=self.text(value.get("description"), f"{where}.description"),
            from_types=from_types,
            to_types=to_types,
            provenance=self.provenance,
        )


@dataclass(frozen=True)
class Ontology:
    """An effective ontology: shipped definitions plus any applied extension."""

    page_types: dict[str, PageType]
    relation_types: dict[str, RelationType]
    claim_kinds: dict[str, str]
    default_page_type: str
    findings: tuple[Finding, ...] = ()
    sources: tuple[str, ...] = (SHIPPED,)

    # --- loading -----------------------------------------------------------

    @classmethod
    def shipped(cls) -> "Ontology":
        text = resources.files("engine.vault").joinpath("ontology.yaml").read_text(encoding="utf-8")
        ontology = cls.from_text(text, SHIPPED)
        if ontology.findings:
            raise RuntimeError(f"shipped ontology is invalid: {ontology.findings[0].message}")
        return ontology

    @classmethod
    def from_text(cls, text: str, provenance: str) -> "Ontology":
        document = _load_document(text, provenance)
        reader = _Reader(provenance)
        page_types = {}
        for name, value in (document.get("page_types") or {}).items():
            if _NAME.fullmatch(str(name)):
                page_type = reader.page_type(name, value)
                if page_type is not None:
                    page_types[name] = page_type
            else:
                reader.problem(f"invalid page type name {name!r}", "page_types")
        relation_types = {}
        for name, value in (document.get("relationship_types") or {}).items():
            if not _NAME.fullmatch(str(name)):
                reader.problem(f"invalid relationship type name {name!r}", "relationship_types")
                continue
            relation = reader.relation_type(name, value)
            if relation is not None:
                relation_types[name] = relation
        claim_kinds = {}
        for name, description in (document.get("claim_kinds") or {}).items():
            if _NAME.fullmatch(str(name)):
                claim_kinds[name] = str(description or "")
            else:
                reader.problem(f"invalid claim kind name {name!r}", "claim_kinds")
        default = document.get("default_page_type", "note")
        return cls(page_types, relation_types, claim_kinds, default, tuple(reader.findings), (provenance,))

    def extended(self, text: str, provenance: str) -> "Ontology":
        """This ontology plus a private extension document.

        A document that cannot be read at all leaves the ontology unchanged
        and reports one finding.
        """
        try:
            extension = Ontology.from_text(text, provenance)
        except (InvalidParams, LimitExceeded) as exc:
            finding = Finding("ontology_invalid", exc.message, path=provenance, line=exc.details.get("line"))
            return replace(self, findings=self.findings + (finding,))
        findings = list(self.findings) + list(extension.findings)
        page_types = dict(self.page_types)
        for name, page_type in extension.page_types.items():
            existing = page_types.get(name)
            if existing is None:
                page_types[name] = page_type
                continue
            redefined = {"label", "description", "filing", "aliases"} & _explicit_keys(text, name)
            if redefined:
                findings.append(Finding(
                    "ontology_conflict",
                    f"page type {name!r} is shipped; an extension may only add fields, not {sorted(redefined)}",
                    path=provenance, field=f"page_types.{name}",
                ))
            fields = dict(existing.fields)
            for field_name, spec in page_type.fields.items():
                if field_name in fields:
                    findings.append(Finding(
                        "ontology_conflict", f"field {name}.{field_name} already exists and cannot be redefined",
                        path=provenance, field=f"page_types.{name}.fields.{field_name}",
                    ))
                else:
                    fields[field_name] = spec
            page_types[name] = replace(existing, fields=fields)
        relation_types = dict(self.relation_types)
        for name, relation in extension.relation_types.items():
            if name in relation_types:
                findings.append(Finding(
                    "ontology_conflict", f"relationship type {name!r} already exists and cannot be redefined",
                    path=provenance, field=f"relationship_types.{name}",
                ))
            else:
                relation_types[name] = relation
        claim_kinds = dict(self.claim_kinds)
        for name, description in extension.claim_kinds.items():
            if name in claim_kinds:
                findings.append(Finding(
                    "ontology_conflict", f"claim kind {name!r} already exists and cannot be redefined",
                    path=provenance, field=f"claim_kinds.{name}",
                ))
            else:
                claim_kinds[name] = description
        for relation in relation_types.values():
            unknown = [t for t in relation.from_types + relation.to_types if t != ANY_TYPE and t not in page_types]
            if unknown and relation.provenance == provenance:
                findings.append(Finding(
                    "ontology_invalid", f"relationship type {relation.name!r} names unknown page types {unknown}",
                    path=provenance, field=f"relationship_types.{relation.name}",
                ))
        return Ontology(
            page_types, relation_types, claim_kinds, self.default_page_type,
            tuple(findings), self.sources + (provenance,),
        )

    # --- questions ---------------------------------------------------------

    def classify(self, path: str) -> str:
        """The page type of an untyped page, from the longest matching filing prefix."""
        best, best_length = self.default_page_type, -1
        for page_type in self.page_types.values():
            for prefix in page_type.filing:
                if path.startswith(prefix) and len(prefix) > best_length:
                    best, best_length = page_type.name, len(prefix)
        return best

    def filing_dir(self, page_type: str) -> str:
        """Where new pages of a type are filed (the type's first prefix)."""
        definition = self.page_types.get(page_type)
        if definition is not None and definition.filing:
            return definition.filing[0]
        return f"pages/{page_type}/"

    def check_fields(self, page_type: str, fields: Any) -> list[Finding]:
        definition = self.page_types.get(page_type)
        if definition is None:
            return [Finding("unknown_type", f"page type {page_type!r} is not in the ontology", field="type")]
        if fields is None:
            return []
        if not isinstance(fields, dict):
            return [Finding("invalid_field", "fields must be a mapping", field="fields")]
        findings = []
        for name, value in fields.items():
            spec = definition.fields.get(name)
            if spec is None:
                findings.append(Finding(
                    "unknown_field", f"{page_type} pages have no field {name!r}", field=f"fields.{name}"
                ))
                continue
            problem = _check_value(spec, value)
            if problem:
                findings.append(Finding("invalid_field", problem, field=f"fields.{name}"))
        return findings

    def check_endpoints(self, relation: str, from_type: str | None, to_type: str | None) -> list[Finding]:
        definition = self.relation_types.get(relation)
        if definition is None:
            return [Finding("unknown_relation", f"relationship type {relation!r} is not in the ontology", field="relation")]
        findings = []
        for end, actual, allowed in (("from", from_type, definition.from_types), ("to", to_type, definition.to_types)):
            if actual is not None and ANY_TYPE not in allowed and actual not in allowed:
                findings.append(Finding(
                    "endpoint_type",
                    f"{relation} needs '{end}' to be one of {list(allowed)}, not {actual!r}",
                    field=end,
                ))
        return findings

    def page_field_refs(self, page_type: str, fields: Any) -> list[tuple[str, str, tuple[str, ...]]]:
        """(field, page id, allowed types) for each ``page`` field: cross-checked by the catalog."""
        definition = self.page_types.get(page_type)
        if definition is None or not isinstance(fields, dict):
            return []
        refs = []
        for name, value in fields.items():
            spec = definition.fields.get(name)
            if spec is None:
                continue
            if spec.type == "page" and isinstance(value, str):
                refs.append((name, value, spec.page_types))
            elif spec.type == "list" and spec.items is not None and spec.items.type == "page" and isinstance(value, list):
                refs.extend((name, item, spec.items.page_types) for item in value if isinstance(item, str))
        return refs


def _load_document(text: str, provenance: str) -> JsonObject:
    if len(text.encode("utf-8")) > ONTOLOGY_MAX_BYTES:
        raise InvalidParams(f"ontology file is larger than {ONTOLOGY_MAX_BYTES} bytes", path=provenance)
    document = load_yaml(text, what="ontology") or {}
    if not isinstance(document, dict):
        raise InvalidParams("ontology must be a mapping", path=provenance)
    if document.get("format", ONTOLOGY_FORMAT) != ONTOLOGY_FORMAT:
        raise InvalidParams(f"ontology format must be {ONTOLOGY_FORMAT}", path=provenance)
    for key in ("page_types", "relationship_types", "claim_kinds"):
        if document.get(key) is not None and not isinstance(document[key], dict):
            raise InvalidParams(f"ontology {key} must be a mapping", path=provenance, field=key)
    return document


def _explicit_keys(text: str, page_type: str) -> set[str]:
    document = load_yaml(text, what="ontology") or {}
    definition = (document.get("page_types") or {}).get(page_type)
    return set(definition) if isinstance(definition, dict) else set()


def _check_value(spec: FieldSpec, value: Any) -> str | None:
    """Why ``value`` does not fit ``spec``, or None when it does."""
    kind = spec.type
    if kind == "string":
        if not isinstance(value, str) or "\n" in value:
            return "must be a one-line string"
    elif kind == "text":
        if not isinstance(value, str):
            return "must be a string"
    elif kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            return "must be an integer"
    elif kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "must be a number"
    elif kind == "boolean":
        if not isinstance(value, bool):
            return "must be true or false"
    elif kind == "date":
        if not isinstance(value, str) or not _DATE.fullmatch(value) or not _is_calendar_date(value):
            return "must be a date written YYYY-MM-DD"
    elif kind == "url":
        if not isinstance(value, str) or not _URL.fullmatch(value):
            return "must be a URL"
    elif kind == "email":
        if not isinstance(value, str) or not _EMAIL.fullmatch(value):
            return "must be an email address"
    elif kind == "enum":
        if value not in spec.values:
            return f"must be one of {list(spec.values)}"
    elif kind == "page":
        if not is_record_id(value):
            return "must be a page id"
    elif kind == "list":
        if not isinstance(value, list):
            return "must be a list"
        assert spec.items is not None
        for index, item in enumerate(value):
            problem = _check_value(spec.items, item)
            if problem:
                return f"item {index + 1} {problem}"
    return None


def _is_calendar_date(value: str) -> bool:
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True
