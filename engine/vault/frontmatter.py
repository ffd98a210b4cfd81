"""Markdown documents with a closed ``---`` YAML frontmatter block.

The YAML subset is deliberately small and safe: JSON-compatible values only,
string keys, no duplicate keys, no anchors or aliases (no billion laughs),
timestamps stay strings, and nesting is bounded before anything is built.

``load_yaml`` is where every vault file's YAML (records, source descriptors,
ontology extensions) becomes data, so it is the one boundary that turns
whatever a parser raises on hostile input into ``DocumentSyntaxError`` or
``LimitExceeded``, and it only ever returns values every later consumer can
hold: integers within 64 bits (SQLite, tantivy), finite floats, strings
without lone surrogates (UTF-8 for SQLite, tantivy and JSON replies).
"""

from __future__ import annotations

import io
import re
from typing import Any

import yaml

from ..core.answers import JsonObject, JsonValue
from ..core.errors import InvalidParams, LimitExceeded

MAX_NESTING = 20
RECORD_MAX_BYTES = 5_000_000
# No 64-bit integer or finite float needs more characters; longer ones (a 5,000-digit integer) are refused
# before conversion, which Python limits (int max-str-digits) and which is quadratic for sexagesimal forms.
NUMBER_MAX_CHARS = 100
INT_MIN, INT_MAX = -(2**63), 2**63 - 1

# What PyYAML's constructors raise on scalars they cannot convert: ValueError (int('abc'), float('abc'),
# and UnicodeError), KeyError (!!bool abc), OverflowError (a huge sexagesimal float), TypeError.
# MemoryError is deliberately absent: running out of memory is not one file's problem.
CONSTRUCTOR_ERRORS = (ValueError, LookupError, TypeError, ArithmeticError)
_SURROGATE = re.compile("[\ud800-\udfff]")

_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BaseDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_DELIMITER = "---"


class DocumentSyntaxError(InvalidParams):
    """The text is not a frontmatter document we can read."""


def _without_timestamps(resolvers: dict) -> dict:
    return {
        first: [(tag, regexp) for tag, regexp in entries if tag != "tag:yaml.org,2002:timestamp"]
        for first, entries in resolvers.items()
    }


class _Refused(Exception):
    def __init__(self, message: str, yaml_line: int) -> None:
        super().__init__(message)
        self.yaml_line = yaml_line


def _short_number(loader: Any, node: yaml.ScalarNode, what: str) -> None:
    if len(loader.construct_scalar(node).replace("_", "")) > NUMBER_MAX_CHARS:
        raise _Refused(f"{what} longer than {NUMBER_MAX_CHARS} digits", node.start_mark.line)


def _bounded_int(loader: Any, node: yaml.ScalarNode) -> int:
    _short_number(loader, node, "an integer")
    value = loader.construct_yaml_int(node)
    if not INT_MIN <= value <= INT_MAX:
        raise _Refused("an integer outside the 64-bit range", node.start_mark.line)
    return value


def _finite_float(loader: Any, node: yaml.ScalarNode) -> float:
    _short_number(loader, node, "a number")
    value = loader.construct_yaml_float(node)
    if value != value or value in (float("inf"), float("-inf")):
        raise _Refused("a non-finite number (.nan or .inf)", node.start_mark.line)
    return value


def _whole_str(loader: Any, node: yaml.ScalarNode) -> str:
    # libyaml refuses "\ud800" escapes; PyYAML's pure-Python scanner builds the lone surrogate.
    value = loader.construct_yaml_str(node)
    if _SURROGATE.search(value):
        raise _Refused("a lone UTF-16 surrogate in a string", node.start_mark.line)
    return value


# Only JSON-compatible values: explicit tags such as !!binary, !!set, !!timestamp or !!omap are refused.
_JSON_TAGS = ("null", "bool", "int", "float", "str", "seq", "map")


def _strict_loader(base: type) -> type:
    """A loader over ``base`` (libyaml's or PyYAML's pure-Python one) that builds only the subset above."""

    class Loader(base):  # type: ignore[misc, valid-type]
        yaml_implicit_resolvers = _without_timestamps(base.yaml_implicit_resolvers)

        def construct_object(self, node, deep=False):  # noqa: D401 - PyYAML hook
            try:
                return super().construct_object(node, deep=deep)
            except CONSTRUCTOR_ERRORS as exc:  # a scalar its tag's constructor cannot convert
                tag = node.tag.rsplit(":", 1)[-1]
                raise _Refused(f"a value that cannot be read as {tag}", node.start_mark.line) from exc

        def construct_mapping(self, node, deep=False):  # noqa: D401 - PyYAML hook
            if not isinstance(node, yaml.MappingNode):
                return super().construct_mapping(node, deep=deep)
            mapping: dict[str, Any] = {}
            for key_node, value_node in node.value:
                key = self.construct_object(key_node, deep=True)
                if not isinstance(key, str):
                    raise _Refused("a non-string key", key_node.start_mark.line)
                if key in mapping:
                    raise _Refused(f"a duplicate key {key!r}", key_node.start_mark.line)
                mapping[key] = self.construct_object(value_node, deep=True)
            return mapping

    Loader.yaml_constructors = {
        tag: constructor for tag, constructor in base.yaml_constructors.items()
        if tag is None or tag.rsplit(":", 1)[-1] in _JSON_TAGS
    }
    Loader.add_constructor("tag:yaml.org,2002:map", Loader.construct_mapping)
    Loader.add_constructor("tag:yaml.org,2002:int", _bounded_int)
    Loader.add_constructor("tag:yaml.org,2002:float", _finite_float)
    Loader.add_constructor("tag:yaml.org,2002:str", _whole_str)
    Loader.claims = _claims(Loader.yaml_implicit_resolvers)
    return Loader


def _claims(resolvers: dict) -> dict[str, re.Pattern[str]]:
    """For each first character the resolvers know, one pattern that matches a plain scalar whenever one of that
    character's resolvers does: whether any resolver claims a scalar, in one match (``_FlatReader``)."""
    return {first: re.compile("|".join(_scoped(regexp) for _, regexp in entries))
            for first, entries in resolvers.items() if entries}


_SCOPED_FLAGS = ((re.ASCII, "a"), (re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"), (re.VERBOSE, "x"))


def _scoped(regexp: re.Pattern[str]) -> str:
    """``regexp`` as a group of a larger pattern, with its own flags (a verbose one's comment ends at a newline)."""
    letters = "".join(letter for flag, letter in _SCOPED_FLAGS if regexp.flags & flag)
    end = "\n" if regexp.flags & re.VERBOSE else ""
    return f"(?{letters}:{regexp.pattern}{end})"


_Loader = _strict_loader(_BaseLoader)


class _Dumper(_BaseDumper):  # type: ignore[misc, valid-type]
    yaml_implicit_resolvers = _without_timestamps(_BaseDumper.yaml_implicit_resolvers)


def _anchored(event: yaml.Event, line_offset: int) -> DocumentSyntaxError | None:
    if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
        return DocumentSyntaxError(
            "YAML anchors and aliases are not allowed", line=event.start_mark.line + 1 + line_offset
        )
    return None


def _check_events(text: str, *, max_nesting: int, line_offset: int, what: str) -> None:
    depth = 0
    for event in yaml.parse(text, Loader=_BaseLoader):
        refused = _anchored(event, line_offset)
        if refused is not None:
            raise refused
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > max_nesting:
                raise _too_deep(event, what, max_nesting, line_offset)
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def _too_deep(event: yaml.Event, what: str, max_nesting: int, line_offset: int) -> LimitExceeded:
    return LimitExceeded(f"{what} nests deeper than {max_nesting} levels",
                         line=event.start_mark.line + 1 + line_offset, limit=max_nesting)


class _Unusual(Exception):
    """What the one-pass reader leaves to the full loader, which says exactly what is wrong with it."""


_STR_TAG = "tag:yaml.org,2002:str"
_SCALAR_TAGS = tuple(f"tag:yaml.org,2002:{name}" for name in ("null", "bool", "int", "float", "str"))
_NO_KEY = object()


def _scalar(loader: Any, event: yaml.ScalarEvent) -> JsonValue:
    """A scalar resolved and converted as the full loader would (its tag from the same resolvers)."""
    if event.tag not in (None, "!"):
        raise _Unusual
    tag = loader.resolve(yaml.ScalarNode, event.value, event.implicit)
    if tag == _STR_TAG:
        if _SURROGATE.search(event.value):
            raise _Unusual
        return event.value
    if tag not in _SCALAR_TAGS:
        raise _Unusual
    try:
        return loader.yaml_constructors[tag](loader, yaml.ScalarNode(tag, event.value, event.start_mark,
                                                                     event.end_mark, event.style))
    except (_Refused, yaml.YAMLError, *CONSTRUCTOR_ERRORS) as exc:
        raise _Unusual from exc


# The frontmatter the engine writes for an ordinary record: one "key: value" line per key, each value a plain
# or single-quoted scalar on that line or a flow list or mapping of them (dump_yaml's output for flat values).
# Only characters libyaml reads as themselves are taken: printable ones but line separators (NEL, U+2028,
# U+2029) and the byte-order mark; a plain scalar starts with a letter, a digit or "_" (never an indicator),
# holds no "#" (a comment) and a ":" only between two other characters (never a mapping), and in a flow
# collection none of ":?,[]{}" (where libyaml and PyYAML's own scanner differ).  Keys are plain names.
_PRINTABLE = "\x21-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff"
_ONLY_PRINTABLE = re.compile(rf"[ {_PRINTABLE}\n]*")
_PLAIN_START = "A-Za-z0-9_\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff"
_BLOCK_WORD = r"[^\s#:]+(?::+[^\s#:]+)*"  # colons only between other characters
_FLOW_CHAR = r"[^\s#:?,\[\]{}]"
_QUOTED = r"'((?:[^'\n]|'')*)'"  # what it may hold besides "''" is limited by _ONLY_PRINTABLE
_KEY = r"([A-Za-z_][A-Za-z0-9_]{0,99}): "  # libyaml takes simple keys up to 1,024 characters
# A line's match starts at a line's start and ends at its "\n", which no group holds: a text is read whole when
# there are as many matches as lines.
_FLAT_LINE = re.compile(
    rf"^{_KEY}(?:{_QUOTED}|((?=[{_PLAIN_START}]){_BLOCK_WORD}(?: +{_BLOCK_WORD})*)|([\[{{][^\n]*))\n", re.MULTILINE)
_FLOW_ITEM = re.compile(rf"(?:{_KEY})?(?:{_QUOTED}|([{_PLAIN_START}]{_FLOW_CHAR}*(?: +{_FLOW_CHAR}+)*))(, |[\]}}])")
# A plain decimal integer with no sign, underscore or leading zero, well inside 64 bits (a revision): the int
# resolver claims it, no other resolver does, and _bounded_int would build int(plain) from it.
_PLAIN_DECIMAL = re.compile(r"0|[1-9][0-9]{0,17}")


class _FlatReader:
    """``dump_yaml``'s output for flat frontmatter, read without libyaml: the value the full loader builds
    from the same text (the loader's own resolvers and constructors type each plain scalar), or
    ``_Unusual`` for any text outside that shape.  Most scalars are claimed by no resolver (``claims``, one
    match each), so they are strings at once."""

    def __init__(self) -> None:
        self.resolvers = _Loader.yaml_implicit_resolvers
        if None in self.resolvers:  # resolvers for any first character: not the loader this mirrors
            raise _Unusual
        self.claims = _Loader.claims
        self.loader: Any = None

    def read(self, text: str) -> JsonObject:
        if _ONLY_PRINTABLE.fullmatch(text) is None:
            raise _Unusual
        lines = _FLAT_LINE.findall(text)
        if not lines or len(lines) != text.count("\n") or text[-1] != "\n":
            raise _Unusual
        claims = self.claims
        try:
            document: dict[str, Any] = {}
            for name, quoted, plain, collection in lines:
                claim = claims.get(name[0])
                if claim is not None and claim.match(name):
                    raise _Unusual
                if plain:
                    claim = claims.get(plain[0])
                    document[name] = plain if claim is None or claim.match(plain) is None else self._typed(plain)
                elif collection:
                    document[name] = self._flow(collection)
                else:  # a quoted scalar, the one group that may match empty
                    document[name] = quoted.replace("''", "'")
            if len(document) != len(lines):
                raise _Unusual  # a key given twice
            return document
        finally:
            if self.loader is not None:
                self.loader.dispose()

    def _tag(self, plain: str) -> str:
        """The tag of a plain scalar (as ``BaseResolver.resolve`` gives it)."""
        for tag, regexp in self.resolvers.get(plain[0], ()):
            if regexp.match(plain):
                return tag
        return _STR_TAG

    def _typed(self, plain: str) -> JsonValue:
        if _PLAIN_DECIMAL.fullmatch(plain):
            return int(plain)  # without a loader: building one per document cost more than the rest of the read
        tag = self._tag(plain)
        if tag == _STR_TAG:
            return plain
        if tag not in _SCALAR_TAGS:
            raise _Unusual
        if self.loader is None:
            self.loader = _Loader("")
        mark = yaml.Mark("<frontmatter>", 0, 0, 0, None, None)
        try:
            return self.loader.yaml_constructors[tag](self.loader, yaml.ScalarNode(tag, plain, mark, mark))
        except (_Refused, yaml.YAMLError, *CONSTRUCTOR_ERRORS) as exc:
            raise _Unusual from exc

    def _flow(self, text: str) -> JsonValue:
        claims = self.claims  # as in ``read``: a scalar or key no resolver claims is text
        mapping = text[0] == "{"
        closer = "}" if mapping else "]"
        collection: Any = {} if mapping else []
        if text[1:] == closer:
            return collection
        at, separator = 1, ", "
        while separator == ", ":
            match = _FLOW_ITEM.match(text, at)
            if match is None:
                raise _Unusual
            name, quoted, plain, separator = match.groups()
            if quoted is not None:
                value = quoted.replace("''", "'")
            else:
                claim = claims.get(plain[0])
                value = plain if claim is None or claim.match(plain) is None else self._typed(plain)
            if not mapping:
                if name is not None:
                    raise _Unusual
                collection.append(value)
            elif name is None or name in collection or (
                    (claim := claims.get(name[0])) is not None and claim.match(name)):
                raise _Unusual
            else:
                collection[name] = value
            at = match.end()
        if separator != closer or at != len(text):
            raise _Unusual
        return collection


def _read_once(text: str, *, max_nesting: int, line_offset: int, what: str) -> JsonValue:
    """Check and build in one pass over the events: the checks of ``_check_events``, event by event, and
    the value ``yaml.load`` would build.  Anything beyond plain mappings, lists and JSON scalars in one
    document (an explicit tag, a duplicate or non-string key, a scalar its constructor refuses) raises
    ``_Unusual`` for the full loader to read again."""
    loader = _Loader(text)
    try:
        root: Any = None
        documents = depth = 0
        opened: list[list[Any]] = []  # each open collection: [the list or dict, its key awaiting a value]
        while loader.check_event():
            event = loader.get_event()
            refused = _anchored(event, line_offset)
            if refused is not None:
                raise refused
            kind = type(event)
            if kind is yaml.ScalarEvent:
                value = _scalar(loader, event)
            elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                depth += 1
                if depth > max_nesting:
                    raise _too_deep(event, what, max_nesting, line_offset)
                if event.tag not in (None, "!"):
                    raise _Unusual
                opened.append([{} if kind is yaml.MappingStartEvent else [], _NO_KEY])
                continue
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                depth -= 1
                value = opened.pop()[0]
            else:
                if kind is yaml.DocumentStartEvent:
                    documents += 1
                    if documents > 1:
                        raise _Unusual
                continue
            if not opened:
                root = value
                continue
            parent = opened[-1]
            if type(parent[0]) is list:
                parent[0].append(value)
            elif parent[1] is _NO_KEY:
                if type(value) is not str or value in parent[0]:
                    raise _Unusual
                parent[1] = value
            else:
                parent[0][parent[1]] = value
                parent[1] = _NO_KEY
        return root
    finally:
        loader.dispose()


def load_yaml(
    text: str, *, max_nesting: int = MAX_NESTING, what: str = "frontmatter", line_offset: int = 0
) -> JsonValue:
    """Parse safe YAML text; raises DocumentSyntaxError or LimitExceeded, never anything else
    (but MemoryError).

    ``line_offset`` maps YAML line numbers to the enclosing file's lines.  Flat frontmatter as the engine
    writes it is read without libyaml (``_FlatReader``), other ordinary documents in one pass over libyaml's
    events (``_read_once``); the rest are checked event by event and then loaded by the full loader.
    """
    try:
        try:
            if max_nesting >= 2:
                try:
                    return _FlatReader().read(text)
                except _Unusual:
                    pass
            return _read_once(text, max_nesting=max_nesting, line_offset=line_offset, what=what)
        except _Unusual:
            _check_events(text, max_nesting=max_nesting, line_offset=line_offset, what=what)
            return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 + line_offset if mark is not None else None
        problem = exc.problem or exc.context or "invalid YAML"
        raise DocumentSyntaxError(f"{what} is not valid YAML: {problem}", line=line) from exc
    except _Refused as exc:
        raise DocumentSyntaxError(f"{what} has {exc}", line=exc.yaml_line + 1 + line_offset) from exc
    except yaml.YAMLError as exc:
        raise DocumentSyntaxError(f"{what} is not valid YAML: {exc}") from exc
    except RecursionError as exc:
        raise LimitExceeded(f"{what} nests too deeply", limit=max_nesting) from exc
    except CONSTRUCTOR_ERRORS as exc:  # e.g. text libyaml cannot encode: one file's problem, never the caller's
        raise DocumentSyntaxError(f"{what} cannot be read ({type(exc).__name__})") from exc


def dump_yaml(value: Any) -> str:
    flat = _flat_yaml(value)
    return flat if flat is not None else _pyyaml_dump(value)


def _pyyaml_dump(value: Any) -> str:
    return yaml.dump(
        value, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=None, width=100
    )


# PyYAML's output for the frontmatter of an ordinary record, written without building its node tree (a page's
# YAML cost more of the lane's CPU than anything else but SQLite): one "key: value" line per key, each value a
# scalar or a flow list or mapping of scalars.  Texts are taken only in a shape whose style PyYAML's emitter
# decides by the resolver alone: ASCII, a letter, digit or "_" first, no "#", single inner spaces, a ":" only
# before another character, and in a flow collection no ",", "?" or ":"; plain where the dumper's resolvers read them as text, else single-quoted.
# Lines stay well under the width at which PyYAML folds.  Anything else goes to PyYAML.
_FLAT_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,59}")
_FLAT_BLOCK_TEXT = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.,'()/!?&+-]|[ :](?=[^ ]))*")
_FLAT_FLOW_TEXT = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.'()/!&+-]| (?=[^ ]))*")
_FLAT_LINE_MAX = 80


def _flat_yaml(value: Any) -> str | None:
    """``dump_yaml``'s text for flat frontmatter, or None for PyYAML to write."""
    if type(value) is not dict or not any(type(item) in (list, dict) for item in value.values()):
        return None  # PyYAML writes a mapping of scalars alone in flow style, on one line: {a: b}
    lines = _flat_lines(value, "", "")
    return None if lines is None else "".join(lines)


def _flat_lines(mapping: dict[Any, Any], first: str, indent: str) -> list[str] | None:
    """A block mapping's lines, the first after ``first`` and the rest after ``indent``.  A value is a scalar,
    a flow collection of scalars, or (at the top only) a list of such mappings, one block item each as
    PyYAML writes a claim's evidence: "- source: ..." then "  lines: [1, 2]"."""
    lines = []
    for key, item in mapping.items():
        if not _flat_key(key):
            return None
        kind = type(item)
        text = None
        if kind is list and item and all(type(element) is dict for element in item) and not indent:
            lines.append(f"{first if not lines else indent}{key}:\n")
            for element in item:
                block = any(type(inner) in (list, dict) for inner in element.values())
                items = _flat_lines(element, "- ", "  ") if block else _flat_value(element, "- ", "")
                if items is None:
                    return None
                lines += items
            continue
        if kind is list or kind is dict:
            text = _flat_collection(item)
        else:
            text = _flat_scalar(item, _FLAT_BLOCK_TEXT)
        if text is None:
            return None
        line = f"{first if not lines else indent}{key}: {text}\n"
        if len(line) > _FLAT_LINE_MAX:
            return None
        lines.append(line)
    return lines


def _flat_value(mapping: dict[Any, Any], first: str, indent: str) -> list[str] | None:
    """A mapping of scalars alone, as a sequence item: PyYAML writes it in flow style."""
    text = _flat_collection(mapping)
    line = None if text is None else f"{first}{text}\n"
    return None if line is None or len(line) > _FLAT_LINE_MAX else [line]


def _flat_collection(item: list[Any] | dict[Any, Any]) -> str | None:
    """A flow list or mapping of scalars: [a, b] or {k: v}."""
    if type(item) is list:
        parts = [_flat_scalar(element, _FLAT_FLOW_TEXT) for element in item]
        return None if None in parts else f"[{', '.join(parts)}]"  # type: ignore[arg-type]
    entries = []
    for name, element in item.items():
        text = _flat_scalar(element, _FLAT_FLOW_TEXT) if _flat_key(name) else None
        if text is None:
            return None
        entries.append(f"{name}: {text}")
    return f"{{{', '.join(entries)}}}"


def _flat_key(key: Any) -> bool:
    return type(key) is str and _FLAT_KEY.fullmatch(key) is not None and _dumped_tag(key) == _STR_TAG


def _flat_scalar(value: Any, shape: re.Pattern[str]) -> str | None:
    kind = type(value)
    if kind is str:
        if shape.fullmatch(value) is None:
            return _single_quoted(value, flow=shape is _FLAT_FLOW_TEXT)
        return value if _dumped_tag(value) == _STR_TAG else "'" + value.replace("'", "''") + "'"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value) if INT_MIN <= value <= INT_MAX else None  # the reader refuses the rest
    return "null" if value is None else None


# Printable ASCII outside the shapes above ("[[Note 12]]", a link's quote): single-quoted where PyYAML's own analysis
# of the text allows no plain scalar there and allows a single-quoted one, which reads back as written whatever the
# text; where it might be plain, PyYAML decides.
_PRINTABLE_ASCII = re.compile(r"[ -~]+")
_ANALYSIS = yaml.emitter.Emitter(io.StringIO(), allow_unicode=True)  # analyze_scalar reads no emitter state


def _single_quoted(text: str, *, flow: bool) -> str | None:
    if _PRINTABLE_ASCII.fullmatch(text) is None:
        return None
    analysis = _ANALYSIS.analyze_scalar(text)
    plain = analysis.allow_flow_plain if flow else analysis.allow_block_plain
    if (plain and _dumped_tag(text) == _STR_TAG) or not analysis.allow_single_quoted:
        return None
    return "'" + text.replace("'", "''") + "'"


def _copy_flat(value: Any) -> Any:
    """A copy of what ``_flat_yaml`` wrote, which is what reading its text gives (a test holds the two together)."""
    kind = type(value)
    if kind is dict:
        return {key: _copy_flat(item) for key, item in value.items()}
    return [_copy_flat(item) for item in value] if kind is list else value


def _dumped_tag(text: str) -> str:
    """The tag the dumper's resolvers give a plain scalar (``BaseResolver.resolve``), never empty here."""
    for tag, regexp in _Dumper.yaml_implicit_resolvers.get(text[0], ()):
        if regexp.match(text):
            return tag
    return _STR_TAG


def split_document(text: str) -> tuple[str, str]:
    """Split ``text`` into (frontmatter YAML, body); the block must be closed.

    Lines end at "\n"; a delimiter line is ``---`` and any "\r"s.  Only lines starting with ``---`` are
    looked at, so a long body is not split into lines.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    first_end = text.find("\n")
    if (text if first_end < 0 else text[:first_end]).rstrip("\r") != _DELIMITER:
        raise DocumentSyntaxError("document does not start with a '---' frontmatter block", line=1)
    start = at = first_end + 1
    while first_end >= 0:
        if text.startswith(_DELIMITER, at):
            end = text.find("\n", at)
            if not (text[at + 3:] if end < 0 else text[at + 3:end]).strip("\r"):
                return text[start:at] or "\n", "" if end < 0 else text[end + 1:]
        at = text.find("\n" + _DELIMITER, at) + 1
        if at == 0:
            break
    raise DocumentSyntaxError("frontmatter block is not closed with '---'", line=1)


def parse_document(data: bytes) -> tuple[dict[str, Any], str]:
    """Decode and parse a record file into (frontmatter mapping, body)."""
    if len(data) > RECORD_MAX_BYTES:
        raise LimitExceeded(
            f"record is larger than {RECORD_MAX_BYTES} bytes", limit=RECORD_MAX_BYTES, size=len(data)
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentSyntaxError(f"record is not valid UTF-8 (byte {exc.start})") from exc
    if "\x00" in text:
        raise DocumentSyntaxError("record contains a NUL character")
    head, body = split_document(text)
    frontmatter = load_yaml(head, line_offset=1)
    if not isinstance(frontmatter, dict):
        raise DocumentSyntaxError("frontmatter must be a mapping", line=2)
    return frontmatter, body


def render_document(frontmatter: dict[str, Any], body: str) -> bytes:
    """Render frontmatter and body to the exact bytes a record file holds.

    Refuses what ``parse_document`` would refuse to read back.
    """
    return render_and_read(frontmatter, body)[0]


def render_and_read(frontmatter: dict[str, Any], body: str) -> tuple[bytes, tuple[dict[str, Any], str] | None]:
    """``render_document``'s bytes, with what ``parse_document`` reads back from them: the rendering already
    reads its YAML back to check it, so a publication can catalogue the file without parsing it again.  The
    second item is None where the bytes would not split back into the same text (then parse them)."""
    data, read, _ = render_and_copy(frontmatter, body)
    return data, read


def render_and_copy(frontmatter: dict[str, Any], body: str
                    ) -> tuple[bytes, tuple[dict[str, Any], str] | None, bool]:
    """``render_and_read``, and whether what it reads back is a copy of ``frontmatter`` itself (the flat
    writer's output, which reads back as written): the same keys in the same order, values of the same types
    and equal, so whatever was derived from ``frontmatter`` holds for the read too."""
    if "\x00" in body:
        raise DocumentSyntaxError("record body contains a NUL character")
    if _SURROGATE.search(body):
        raise DocumentSyntaxError("record body contains a lone UTF-16 surrogate")
    if body and not body.endswith("\n"):
        body += "\n"
    head = _flat_yaml(frontmatter)
    flat = head is not None
    if flat:  # ASCII, shallow, 64-bit integers: within the reader's rules, and read back as written
        read: Any = _copy_flat(frontmatter)
    else:
        try:
            head = _pyyaml_dump(frontmatter)
        except UnicodeEncodeError as exc:  # libyaml's emitter cannot encode a lone surrogate
            raise DocumentSyntaxError("frontmatter has a lone UTF-16 surrogate in a string") from exc
        read = load_yaml(head, line_offset=1)  # the reader's own rules (nesting, 64-bit integers, no surrogates)
    text = f"{_DELIMITER}\n{head}{_DELIMITER}\n{body}"
    data = text.encode("utf-8")
    if len(data) > RECORD_MAX_BYTES:
        raise LimitExceeded(
            f"record would be larger than {RECORD_MAX_BYTES} bytes", limit=RECORD_MAX_BYTES, size=len(data)
        )
    # parse_document's own steps on the same text: no NUL, the same split, the same YAML text read alike.
    same = isinstance(read, dict) and "\x00" not in head and split_document(text) == (head, body)
    return data, (read, body) if same else None, same and flat
