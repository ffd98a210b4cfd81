"""Documentation examples with placeholder values are no credentials; a real key beside them still is.

A Logseq graph of 4,791 pages was refused for ten notes quoting API docs (`"SecretAccessKey": "value"`).
"""

from __future__ import annotations

import random
import string

import pytest

from engine.access.authority import AgentCaller
from engine.core.errors import SecretDetected
from engine.service import Engine
from engine.store.credentials import DETECTORS, find_secret
from engine.store.placeholders import is_placeholder
from tests.engine.store.test_secrets import CREDENTIALS

# Each of these was refused before placeholders were told from credentials.
PLACEHOLDER_EXAMPLES = [
    '"SecretAccessKey": "value"',
    '"secret": "value"',
    '"aws_secret_access_key": "value"',
    'api_key = "YOUR_API_KEY"',
    'api_key = "your_api_key_here"',
    '"client_secret": "YOUR_CLIENT_SECRET"',
    'aws_secret_access_key = "YOUR_SECRET_KEY"',
    'password = "your-password"',
    "password = 'insert-password-here'",
    'password = "changeme"',
    "secret = 'example'",
    '"password": "placeholder"',
    'api_key: "sk-..."',
    'api_key: "sk-xxxxxxxxxxxxxxxx"',
    'secret_key = "ghp_xxxxxxxxxxxx"',
    'api_key = "xoxb-xxxxxxxxxx"',
    'password = "xxxx-xxxx-xxxx"',
    '"password": "REDACTED"',
    'OPENAI_API_KEY = "op://Private/OpenAI/credential"',
]

# A note of the kind the graph held: API docs and config snippets, every value a placeholder.
DOCS_NOTE = """- AWS credentials file, as the CLI docs show it
\t- ```json
\t  {"AccessKeyId": "value", "SecretAccessKey": "value", "SessionToken": "value"}
\t  ```
\t- `aws_secret_access_key = "YOUR_SECRET_KEY"` and `AWS_SECRET_ACCESS_KEY=...`
- Config for the client
\t- api_key = "YOUR_API_KEY"
\t- password: <password>
\t- token="xxxxxxxx"
\t- password = "********"
\t- "secret": "${TOKEN}" or api_key = "{{ api_key }}"
"""


def _rand(rng: random.Random, count: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(rng.choice(alphabet) for _ in range(count))


@pytest.mark.parametrize("text", PLACEHOLDER_EXAMPLES)
def test_a_placeholder_value_is_no_credential(text):
    assert find_secret(text) is None


def test_a_note_of_documentation_examples_is_no_credential():
    assert find_secret(DOCS_NOTE) is None


@pytest.mark.parametrize("name", sorted(CREDENTIALS))
def test_a_credential_beside_placeholders_in_the_same_note_is_still_refused_for_its_kind(name):
    text, kind = CREDENTIALS[name]
    found = find_secret(f"{DOCS_NOTE}\n{text}\n")
    assert found is not None and found[0] == kind
    found = find_secret(f'"SecretAccessKey": "value", then {text}')
    assert found is not None and found[0] == kind


@pytest.mark.parametrize("name", sorted(CREDENTIALS))
def test_no_value_a_detector_finds_in_a_real_credential_is_a_placeholder(name):
    text, _ = CREDENTIALS[name]
    values = [value for detector in DETECTORS for value in detector.find(text)]
    assert values
    assert not any(is_placeholder(value) for value in values)


@pytest.mark.parametrize("template", [
    'password = "{}"', '"SecretAccessKey": "{}"', 'api_key = "YOUR_API_KEY_{}"', 'secret = "example{}"',
    'api_key: "sk-{}"', 'password = "your-{}"', 'api_key = "{}..."',
])
def test_a_key_shaped_value_is_refused_whatever_placeholder_word_it_holds(template):
    rng = random.Random(template)
    value = _rand(rng, 6) + "7" + _rand(rng, 10, string.ascii_lowercase) + "Q" + _rand(rng, 24)
    assert find_secret(template.format(value)) is not None


def test_a_real_looking_value_in_a_placeholders_shape_without_a_digit_is_still_refused():
    """Only the shapes examples use pass: a mixed-case word run is a password, not `YOUR_...`."""
    for text in ['password = "YourHorseBatteryStaple"', 'password = "valuedCustomer"', 'secret = "xxxKqTzRw"',
                 'api_key = "sk-abcdefgh..."', 'password = "hunter2x"']:
        assert find_secret(text) is not None, text


def test_placeholders_are_saved_and_a_real_key_beside_them_refused(engine: Engine, owner: AgentCaller) -> None:
    saved = engine.save_page(owner, {"requestId": "aws-docs", "type": "note", "title": "AWS credentials",
                                     "body": DOCS_NOTE})
    assert saved["id"]

    key_text, _ = CREDENTIALS["AWS secret access key"]
    with pytest.raises(SecretDetected) as caught:
        engine.save_page(owner, {"requestId": "aws-keys", "type": "note", "title": "AWS keys",
                                 "body": f"{DOCS_NOTE}\n{key_text}\n"})
    assert caught.value.details["field"] == "body"
    assert key_text.rsplit(" ", 1)[1] not in caught.value.message
