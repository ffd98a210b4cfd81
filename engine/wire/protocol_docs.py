"""Generate the tool reference in docs/protocol-tools.md from the served schemas.

    python -m engine.wire.protocol_docs > docs/protocol-tools.md

A test compares the committed file with this output, so the reference can
never drift from what ``tools/list`` publishes.
"""

from __future__ import annotations

import json

from .protocol import ERROR_CODES
from ..core.answers import output_schema
from ..vault.ontology import Ontology
from .tools import CORE_TOOLS, ToolError, with_claim_kinds

RESULTS = """## Results

Every tool publishes an `outputSchema`, generated from the answer its handler declares (a TypedDict,
engine/core/answers.py), and every result carries both forms of its answer:

- `structuredContent`: the answer, conforming to the tool's `outputSchema`.  Every object in an answer is
  closed (`additionalProperties: false`) except values that are JSON by nature (a record's `frontmatter`, a
  page type's field specifications).  Where a tool answers in one of several shapes (`knowledge_record`'s
  record or history, `knowledge_ontology`'s views, `search_knowledge`'s item or search), the schema is an
  object with `anyOf` the shapes.  The test suite validates every result it produces against the schema with
  `jsonschema` (tests/conftest.py), and fails the test that produced one outside it.
- `content`: one text block holding the same answer exactly as JavaScript prints it with
  `JSON.stringify(structuredContent, null, 2)`: two-space indentation, integer-like keys first, numbers
  as a client reads them (`1.0` is `1`), only the escapes JavaScript makes.  Clients that mirror structured
  content to their model (OpenClaw compares the text block with exactly that string and drops it when
  equal) then show the answer once instead of twice; clients that read only text still get all of it.

A tool's own failure is a result with `isError: true` and no `structuredContent`: its one text block is the
error as JSON, in the same form, with its `reason`, `message` and the error's data fields (`field`, `id`,
`revision`, ...), the schema at the end of this page (read it with `JSON.parse` / `json.loads` of the text).
The error does not conform to the tool's `outputSchema`, and MCP asks that structured content conform: a
client that checks error results too (the MCP Inspector CLI 2.12.0 does) showed a schema mismatch in place
of the error while errors carried it as structured content (until 2026-12-05; benchmarks/clients.md).  The
suite holds every error result's text to the error schema and fails one that carries structured content.

A `note` in an answer says what the call read differently from what was sent, without refusing it:
`knowledge_grep` with a `type` the store's ontology does not define (shipped or the vault's own, in the
private partition), whose first page has no hit, says so and names the defined types closest to it (`Person`,
`persons`, `preson`, the alias `people`: "did you mean 'person'?"), or else the types records have, so a typo
reads differently from a type no record has yet; a type the ontology defines answers its hits, none at all
without a note while no record has it; a claim kind asked for with `kind: "page"` is said to be one.
`knowledge_attach`, `knowledge_attach_file`
and a file `knowledge_save_page`'s `evidence` sends, with a `filename` that has folders (`../x.txt`), keep its
last part and say which name they kept (docs/attachments.md).

### Schemas and strict mode

Rules every published schema keeps (tests/engine/wire/test_tool_answers.py checks them on every tool):

- The root of every `inputSchema` and `outputSchema` is `type: object`.
- No type lists: a value that may be null is `anyOf: [{...}, {type: null}]`, which OpenAI's strict mode and
  Gemini's schema subset both read (a `["object", "null"]` type draws warnings in Gemini-style subsets).
- Null is absent.  Every optional parameter, at any depth (an item's, a citation's), admits null: `anyOf`
  its value's schema and `{type: null}`, its `description` beside `anyOf` and its `default` inside the value's
  schema.  The engine reads a null as the parameter left out, on every tool: `knowledge_grep {query: "atlas",
  limit: null, cursor: null}` is `knowledge_grep {query: "atlas"}`.  A required parameter is not nullable and
  its null is refused with `invalid_params` naming it (`query must be a string`, `items[0].text is
  required`), but for `knowledge_recall`'s `recall`, whose null is a value (it removes the recall block), as
  its schema says.  tests/engine/wire/test_tool_nulls.py holds every tool's published schema to this.
- Every input object is closed (`additionalProperties: false`) with its properties declared, and an input
  schema uses only `type`, `properties`, `required`, `additionalProperties`, `items`, `enum`,
  `description`, `title`, `anyOf`, `default`, `minimum`, `maximum`, `minLength`, `maxLength`, `minItems`,
  `maxItems` and `pattern`, and no `$ref`.

Where the tools do not fit OpenAI's strict mode or a Gemini-style subset, and why:

- Strict mode.  OpenAI's strict mode wants every property in `required`, an optional one written as
  nullable; the OpenAI Agents SDK's `convert_schemas_to_strict=True` puts every property in `required` and
  keeps the published `anyOf` with null, so its model sends null for what it leaves out, which the engine
  reads as left out.  With openai-agents 0.24.0, ten tools convert to strict (all but `knowledge_save_page`),
  and each, called with every optional property null, answers as without them (benchmarks/clients.md,
  2026-12-06).  `knowledge_remember`'s claims and relationships share one item schema, so a strict client
  sends the other shape's keys as null: an item is a relationship when it gives a non-null `relation`.
  Until 2026-12-06 the optional parameters were not nullable (and a null `limit` was refused), so a
  strict-mode model had to send a `cursor` on a first search and was refused.
- Other strict decoders and subsets (from documentation and reports, not measured here).  Claude's strict
  tool use reads `anyOf` with null but caps, per request across all strict tools, the optional parameters
  (24) and those using `anyOf` (16), as a third-party library summarises Anthropic's documentation; the ten
  convertible tools hold 56 optional parameters (as many before null was published), so send them without
  `strict` there.
  Gemini's function declarations take an OpenAPI 3.0 subset: a client passes `anyOf` through or turns it
  into `nullable: true`; one that turns it into a list of types is refused (HTTP 400), and Vertex AI refuses
  a `default` beside `anyOf`, which is why the default sits inside the value's schema.
- `knowledge_save_page`'s `fields` is an open object: its keys and types are the page type's, defined by the
  caller's ontology (`knowledge_ontology`, view `definitions`), so no fixed schema can close it.  Strict mode
  needs every object closed; this is the tool that must go without it.
- `knowledge_attach`'s `content`, and the same `content` of a file `knowledge_save_page` retains with a page
  (`evidence[].content`), carry `contentEncoding: base64`, an annotation outside Gemini's subset (the
  description says base64 as well); an adapter that drops unknown keywords loses nothing.
- Output schemas are for clients that validate answers, never for a model's constrained decoding: they keep
  optional keys out of `required` (an answer leaves out what does not apply rather than sending null), use
  `$ref`/`$defs` for shapes used more than once and recursive JSON values, and `anyOf` at the root for
  answers of several shapes: none of which a strict decoder needs.

"""


def render() -> str:
    lines = [
        "# Tool reference",
        "",
        "Generated by `python -m engine.wire.protocol_docs`; the schemas are exactly what `tools/list` publishes.",
        "Tools marked *write* are absent from `tools/list` while `writesEnabled` is false.",
        "",
        "Each tool is listed with its `title` and MCP `annotations`: `readOnlyHint` true for the reads, false for",
        "the writes; `destructiveHint` false (a write publishes a new revision and keeps every earlier one);",
        "`idempotentHint` true (an identical retry returns the first receipt); `openWorldHint` false.",
        "",
    ]
    lines += RESULTS.splitlines()
    shipped = list(Ontology.shipped().claim_kinds)  # what tools/list offers a caller without extensions
    for tool in CORE_TOOLS:
        descriptor = with_claim_kinds(tool.descriptor(), shipped)
        lines += [f"## `{tool.name}`{' (write)' if tool.writes else ''}", "", f"*{tool.title}.* {tool.description}", "",
                  "Input (`inputSchema`):", "",
                  "```json", json.dumps(descriptor["inputSchema"], indent=2, ensure_ascii=False), "```", "",
                  "Answer (`outputSchema`):", "",
                  "```json", json.dumps(descriptor["outputSchema"], indent=2, ensure_ascii=False), "```", ""]
    lines += ["## Error result (`isError: true`)", "",
              "```json", json.dumps(output_schema(ToolError), indent=2, ensure_ascii=False), "```", ""]
    lines += ["## Error reasons", "", "| reason | JSON-RPC code |", "| --- | ---: |"]
    lines += [f"| `{reason}` | {code} |" for reason, code in ERROR_CODES.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
