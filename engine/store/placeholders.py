"""Placeholder values: what documentation writes where a credential would go, so it is no credential.

Owners' notes quote API docs and config files: ``"SecretAccessKey": "value"``, ``api_key = "YOUR_API_KEY"``,
``password: "changeme"``, ``token = "xxxxxxxx"``, ``api_key: "sk-..."``.  The credential scan asks
``is_placeholder`` of every value a detector finds (see docs/secrets.md, "Placeholders").  Beside a
fixed list of words and 1Password references, the shapes (`YOUR_...`, `..._here`, masks, templates) accept
only values without a digit, and a mask's key prefix is at most eight letters, so a key-shaped value, or
any value of a known key format, is never taken for a placeholder.
"""

from __future__ import annotations

import re

__all__ = ["is_placeholder"]

# Whole values that stand for a secret in examples; compared lowercased, with `-`, `_`, `.` and spaces removed.
PLACEHOLDER_WORDS = frozenset({
    # what the value is called (`scheme://user:pass@host` in a doc)
    "pass", "password", "passwd", "pwd", "secret", "token", "apikey", "key", "accesskey", "secretkey",
    "clientsecret", "accesstoken", "authtoken", "credential", "credentials",
    # what an example says in its place
    "value", "example", "sample", "dummy", "fake", "placeholder", "changeme", "changeit", "replaceme",
    "redacted", "removed", "hidden", "masked", "notreal", "none", "null", "nil", "undefined", "empty",
    "todo", "tbd", "fixme", "xxx", "secrethere", "tokenhere", "keyhere", "passwordhere",
})

# `YOUR_API_KEY`, `your-password`, `Your Token`, `your_api_key_here`, `insert-key-here`: letters in words,
# the first `your` or the last `here`.
_YOUR_OR_HERE = re.compile(r"your(?:[_\-. ][a-z]+)+|(?:[a-z]+[_\-. ])+here", re.IGNORECASE)
# A mask: at most a short key prefix of letters (`sk-`, `ghp_`, `xoxb-`, `AKIA`), then only mask characters:
# an ellipsis, asterisks, or three or more x's (`...`, `…`, `****`, `xxxx-xxxx`, `sk-...`, `ghp_xxxxxxxx`).
_MASK = re.compile(r"[a-z]{0,8}[_\-]?(?:\.{2,}|…|\*+|x{3,})(?:[_\-. ]*(?:\.{2,}|…|\*+|x{3,}))*", re.IGNORECASE)
# Wrapped, as a template or a form leaves a value to fill in: `<...>`, `[...]`, `{...}`, `{{...}}`, `${...}`,
# `$(...)`, `%...%`.
_WRAPPED = re.compile(r"<[^<>]*>|\[[^\[\]]*\]|\{\{?[^{}]*\}\}?|\$\{[^{}]*\}|\$\([^()]*\)|%[A-Za-z_]+%")
# A 1Password secret reference (`op://vault/item/field`): where the secret lies, not the secret.
_SECRET_REFERENCE = re.compile(r"op://[\w.\- /]+", re.ASCII)


def is_placeholder(value: str) -> bool:
    """True for a value that stands in for a credential in an example rather than being one."""
    value = value.strip().strip("\"'`").strip()
    if not value:
        return True
    folded = re.sub(r"[-_. ]", "", value.lower())
    if folded in PLACEHOLDER_WORDS or len(set(folded)) <= 1:
        return True
    if _SECRET_REFERENCE.fullmatch(value) is not None:
        return True
    if any(ch.isdigit() for ch in value):
        return False
    return any(pattern.fullmatch(value) is not None for pattern in (_YOUR_OR_HERE, _MASK, _WRAPPED))
