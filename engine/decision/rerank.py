"""The ``rerank`` Decision provider: any ``POST <baseUrl>/rerank`` endpoint.

The request is ``{"model", "query", "documents"}``. An endpoint that rejects it
(a 4xx other than auth, timeout or rate limit) gets the same request once
more with ``texts`` instead of ``documents`` (TEI's form), and the form that
worked is remembered per endpoint. Answers are read in the Cohere / Jina /
vLLM / Infinity shape (``results[].relevance_score``), Voyage's
(``data[].relevance_score``) or TEI's bare ``[{index, score}]``. Every
document must come back exactly once with a score in 0..1; anything else is
``invalid-response``, never rescaled. The request's timeout is what is left
of the caller's deadline.
"""

from __future__ import annotations

import http.client
import json
import math
import socket
import threading
import time
from typing import Any, Callable, Sequence
from urllib.parse import urlsplit

from ..state.config import Settings
from .provider import READY, PairScores, Untokenized
from ..core.errors import DecisionUnavailable, InvalidResponse
from ..core.words import for_count

MAX_RESPONSE_BYTES = 8 * 1024 * 1024
FORMS = ("documents", "texts")
# 4xx answers that say nothing about the request's shape: no retry with the other form.
_NOT_A_REJECTION = {401: "unauthorized", 403: "forbidden", 408: "timeout", 429: "overloaded"}


class EndpointForms:
    """Which request form each endpoint accepted last (shared by every rerank provider of an engine)."""

    def __init__(self) -> None:
        self._forms: dict[str, str] = {}
        self._lock = threading.Lock()

    def get(self, endpoint: str) -> str:
        with self._lock:
            return self._forms.get(endpoint, FORMS[0])

    def remember(self, endpoint: str, form: str) -> None:
        with self._lock:
            self._forms[endpoint] = form


class RerankProvider(Untokenized):
    """A ``ScoringProvider`` (provider.py) without a tokenizer or a throughput model: nothing to plan with."""

    state = READY
    reason: str | None = None
    tokens_per_second: float | None = None
    max_pair_tokens: int | None = None

    def __init__(self, base_url: str, model_id: str, forms: EndpointForms,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock                   # what deadlines are measured on
        self.base_url = base_url.rstrip("/")
        self.model_id = model_id
        self.forms = forms
        self.name = f"rerank/{model_id}"

    def serves(self, settings: Settings) -> bool:
        return self.base_url == settings.rerank_base_url   # the owner moved the endpoint: a new provider

    def score_pairs(self, query: str, documents: Sequence[str], *, deadline: float,
                    max_pair_tokens: int | None = None,
                    before_dispatch: Callable[[], None] | None = None) -> PairScores:
        """Scores for every document, or an error; with no time left nothing is sent (all unscored)."""
        result = PairScores(scores=[None] * len(documents), batches=[])
        if not documents or deadline - self.clock() <= 0:
            return result
        form = self.forms.get(self.base_url)
        for attempt in range(2):
            if before_dispatch is not None:
                before_dispatch()
            status, body = self._post(form, query, documents, deadline)
            if 200 <= status < 300:
                scores = parse_rerank_response(body, len(documents))
                self.forms.remember(self.base_url, form)
                result.scores = list(scores)
                result.batches = [list(range(len(documents)))]
                return result
            if 400 <= status < 500 and status not in _NOT_A_REJECTION and attempt == 0:
                form = FORMS[1] if form == FORMS[0] else FORMS[0]
                continue
            kind = _NOT_A_REJECTION.get(status, "rejected" if status < 500 else "http")
            raise DecisionUnavailable(f"{self.base_url}/rerank answered HTTP {status}", kind=kind, status=status,
                                      model=self.name)
        raise AssertionError("unreachable")

    def _post(self, form: str, query: str, documents: Sequence[str], deadline: float) -> tuple[int, bytes]:
        remaining = deadline - self.clock()
        if remaining <= 0:
            raise DecisionUnavailable(f"no time left for {self.base_url}/rerank", kind="timeout", model=self.name)
        parts = urlsplit(self.base_url)
        connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        path = (parts.path or "") + "/rerank"
        body = json.dumps({"model": self.model_id, "query": query, form: list(documents)}).encode("utf-8")
        connection = connection_class(parts.hostname or "", parts.port, timeout=remaining)
        try:
            connection.request("POST", path, body=body, headers={
                "Content-Type": "application/json", "Accept": "application/json"})
            response = connection.getresponse()
            data = response.read(MAX_RESPONSE_BYTES + 1)
            if self.clock() > deadline:
                raise TimeoutError
        except (TimeoutError, socket.timeout) as exc:
            raise DecisionUnavailable(f"{self.base_url}/rerank did not answer before the deadline", kind="timeout",
                                      model=self.name) from exc
        except (OSError, http.client.HTTPException) as exc:
            raise DecisionUnavailable(f"cannot reach {self.base_url}/rerank: {exc}", kind="unreachable",
                                      model=self.name) from exc
        finally:
            connection.close()
        if len(data) > MAX_RESPONSE_BYTES:
            raise InvalidResponse(f"{self.base_url}/rerank answered more than {MAX_RESPONSE_BYTES} bytes",
                                  model=self.name)
        return response.status, data


def parse_rerank_response(body: bytes, count: int) -> list[float]:
    """Scores by document index from a Cohere, Voyage or TEI answer; raises InvalidResponse otherwise."""
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidResponse("the rerank endpoint did not answer JSON") from exc
    if isinstance(data, list):
        items = data                                   # TEI: [{index, score}]
    elif isinstance(data, dict) and isinstance(data.get("results"), list):
        items = data["results"]                        # Cohere, Jina, vLLM, Infinity
    elif isinstance(data, dict) and isinstance(data.get("data"), list):
        items = data["data"]                           # Voyage
    else:
        raise InvalidResponse("the rerank answer has neither results[], data[] nor a bare list")
    scores: list[float | None] = [None] * count
    for item in items:
        if not isinstance(item, dict):
            raise InvalidResponse("a rerank result is not an object")
        index = item.get("index")
        score = item.get("relevance_score", item.get("score"))
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            raise InvalidResponse(f"a rerank result has no valid index ({index!r})")
        if scores[index] is not None:
            raise InvalidResponse(f"the rerank answer lists document {index} twice")
        scores[index] = _probability(score, index)
    missing = [index for index, score in enumerate(scores) if score is None]
    if missing:
        raise InvalidResponse(f"the rerank answer has no score for {for_count(len(missing), 'document', 'documents')} "
                              f"{missing[:10]}")
    return [float(score) for score in scores if score is not None]


def _probability(score: Any, index: int) -> float:
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        raise InvalidResponse(f"document {index} has no numeric score ({score!r})")
    if not 0.0 <= score <= 1.0:
        raise InvalidResponse(f"document {index} scored {score}, outside 0..1 (raw logits are never rescaled)")
    return float(score)
