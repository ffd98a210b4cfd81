"""Label rules for stored text that reaches a system prompt.

The Knowledge Index (and, later, the recall gate's candidates and the memory
prompt's project key) puts record titles into an agent's prompt.  Titles
are data the agent or a document wrote, so before one is shown it must be a
single clipped line, and a title that contains markup or reads like an
instruction to the model is not shown at all (callers show the record id
instead).  docs/knowledge-index.md explains the rule; the tests pin it.
"""

from __future__ import annotations

import re
import unicodedata

# Characters that are Markdown or HTML syntax wherever they appear.
MARKUP_CHARS = frozenset("<>`[]{}|*\\")
MARKUP_PATTERNS = (
    re.compile(r"^\s*#"),               # a heading or hashtag opener
    re.compile(r"##|__|~~|==|--\s*-"),  # headings, emphasis, strike, rules
    re.compile(r"[a-z][a-z0-9+.-]*://", re.IGNORECASE),  # a link (autolinked by most renderers)
    re.compile(r"^\s*(?:[-+]\s|\d+[.)]\s|>)"),  # a list item or quote opener
)

_ROLE = r"(?:system|assistant|developer|tool|function)"
_MODEL = r"(?:ai|assistant|agent|model|language model|llm|chatbot|bot)"
INSTRUCTION_PATTERNS = tuple(re.compile(pattern) for pattern in (
    # Overriding what the model was told.
    r"\b(?:ignore|disregard|forget|override|bypass)\b.{0,40}?\b(?:instruction|instructions|prompt|prompts"
    r"|rules|guidelines|guardrails|above|previous|prior|earlier|everything)\b",
    r"\b(?:previous|prior|above|earlier|preceding|original|system|developer|new|hidden|secret|real)\s+"
    r"(?:instruction|instructions|prompt|directive|directives|orders)\b",
    # Role markers and chat-template turns.
    rf"(?:^|[.!?;:\"'()\[]\s*){_ROLE}\s*:",
    r"^(?:user|human|ai)\s*:",
    # Sentences addressed to the model.
    r"\byou\s+(?:must|should|shall|will|need to|have to|are required|are now|may not|cannot|can't|are not allowed)\b",
    rf"\byou\s+are\s+(?:an?|the)\s+{_MODEL}\b",
    rf"\bas\s+(?:an?|the)\s+{_MODEL}\b",
    rf"\b(?:the|this)\s+{_MODEL}\s+(?:must|should|shall|will|needs to|has to)\b",
    r"\bfrom now on\b",
    r"\b(?:act|behave|respond)\s+as\s+(?:if|though)\b",
    r"\bpretend\s+(?:to be|you)\b",
    r"\b(?:jailbreak|do anything now|developer mode)\b",
    r"\bdo not\s+(?:tell|reveal|mention|inform)\s+(?:the\s+)?(?:user|owner)\b",
    # Imperatives that open the title and direct the model's own behaviour.
    r"^(?:please\s+)?(?:always|never)\s+(?:respond|reply|answer|say|use|call|run|execute|include|mention|tell"
    r"|follow|obey|ignore|output|print|reveal|send)\b",
    r"^(?:please\s+)?(?:respond|reply|answer)\s+(?:only|always|with|exactly)\b",
    r"^(?:please\s+)?(?:execute|run|call|invoke)\s+(?:the\s+|this\s+)?(?:tool|command|function|shell|script)\b",
    r"^(?:please\s+)?(?:obey|follow)\s+(?:these|this|the following|my)\b",
    r"^(?:please\s+)?(?:reveal|print|output|repeat)\s+(?:the\s+|your\s+)?(?:system|prompt|instructions|secret"
    r"|password|token|key)",
))


def one_line(text: str) -> str:
    """Collapse every run of whitespace (line breaks included) to one space."""
    return " ".join(text.split())


def clip(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters; a clipped line ends with an ellipsis."""
    line = one_line(text)
    if len(line) <= limit:
        return line
    return line[: limit - 1].rstrip() + "…"


def has_hidden_characters(text: str) -> bool:
    """Control, format (zero-width, bidi override) and line or paragraph separator characters."""
    return any(unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp") and char not in " \t"
               for char in text)


def has_markup(text: str) -> bool:
    """Markdown or HTML syntax, links, or characters a reader cannot see."""
    if has_hidden_characters(text) or any(char in MARKUP_CHARS for char in text):
        return True
    return any(pattern.search(text) for pattern in MARKUP_PATTERNS)


def reads_like_instruction(text: str) -> bool:
    """Text addressed to the model: overrides, role markers, orders to the assistant."""
    normalized = one_line(unicodedata.normalize("NFKC", text)).casefold().replace("’", "'")
    return any(pattern.search(normalized) for pattern in INSTRUCTION_PATTERNS)


def is_unsafe_label(text: object) -> bool:
    """Whether stored text must not be shown as a label (callers show the record id instead)."""
    if not isinstance(text, str) or not one_line(text):
        return True
    return has_markup(text) or reads_like_instruction(text)
