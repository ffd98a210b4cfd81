"""Sentence embeddings in-process: an ONNX encoder run with onnxruntime + tokenizers.

The model is the installed one ``embeddingModel`` names (default
``onnx/all-minilm-l6-v2-int8``, see docs/knowledge-base.md). Its graph takes
``input_ids``, ``attention_mask`` (and ``token_type_ids`` when it has that
input) and answers ``last_hidden_state`` ``[batch, sequence, dimensions]``,
which is mean-pooled over the real tokens and normalised to unit length, so a
dot product is the cosine similarity. (A graph that already answers pooled
``[batch, dimensions]`` vectors is normalised only.)

The tokenizer file's own padding and truncation are switched off (the
all-MiniLM-L6-v2 file pads every text to 128 tokens); texts are truncated to
``MAX_TOKENS`` and padded per batch, batches grouped by length so little is
padded. Loading (hash check of every file, session, tokenizer, one warm-up
run) happens on first use; a model that is not configured, not installed or
fails to load makes the runtime answer ``None`` with the reason, and
semantic search falls back to lexical.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from models.errors import ModelError
from models.installed import InstalledModel, ModelStore

from ..core.answers import NotRequired, TypedDict
from ..decision.onnx_session import open_session, open_tokenizer, padded
from ..state.config import Settings
from .int8_graph import int8_products

log = logging.getLogger(__name__)

# all-MiniLM-L6-v2 was trained on sequences of at most 256 word pieces (its sentence_bert_config.json).
MAX_TOKENS = 256


@dataclass(frozen=True)
class RunSettings:
    """How the model runs; the defaults are the measured best on a 2-core machine (docs/models.md,
    "Embedding throughput", from ``python -m engine.bench.embedding``)."""

    threads: int | None = None  # intra-op threads; None: every core this process may use
    spinning: bool = False      # idle pool threads spin for work: they take the core from the lane
    int8: bool = True           # multiply int8 weights in int8 (engine/index/int8_graph.py)
    rows: int = 32              # texts per run at most
    tokens: int = 512           # rows x padded length of one run at most



class TokenStates(NamedTuple):
    """One text's word pieces, their vocabulary ids and unit-length states ``[pieces, dimensions]``."""

    pieces: list[str]
    ids: list[int]
    states: np.ndarray


NOT_CONFIGURED, NOT_INSTALLED, FAILED, READY = "not_configured", "not_installed", "failed", "ready"


def text_digest(text: str) -> str:
    """The cache key of a text's vector (with the model's fingerprint)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class EmbeddingStopped(Exception):
    """``Embedder.embed`` was asked to stop between two of its batches: ``vectors`` holds what the batches run
    so far gave, in the order of the texts (None for a text not run)."""

    def __init__(self, message: str, vectors: list[np.ndarray | None]) -> None:
        super().__init__(message)
        self.vectors = vectors


class Embedder:
    """One loaded embedding model; ``embed`` is thread-safe.

    One batch runs at a time (the CPU is the limit), so a search's query waits for the batch in progress,
    never for the rest of a catch-up's texts.
    """

    def __init__(self, model: InstalledModel, *, max_tokens: int = MAX_TOKENS,
                 settings: RunSettings = RunSettings()) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.settings = settings
        self.dimensions = 0
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: list[str] = []
        self._pad_id = 0
        self._lock = threading.Lock()
        self.int8_products = 0  # weight products rewritten to multiply in int8 (engine/index/int8_graph.py)

    @property
    def name(self) -> str:
        return f"onnx/{self.model.name}"

    @property
    def fingerprint(self) -> str:
        """The exact weights (the ONNX file's sha256), the token window and the arithmetic: vectors are
        cached under it."""
        arithmetic = "-int8" if self.int8_products else ""
        return f"{self.model.fingerprint[:32]}-{self.max_tokens}{arithmetic}"

    def load(self) -> None:
        """Verify the files, open the session and tokenizer, and learn the dimensions from one run."""
        if not self.model.runnable:
            raise ValueError(f"model {self.model.name} has no ONNX graph")
        tokenized = open_tokenizer(self.model)
        if tokenized.max_positions is not None:
            self.max_tokens = min(self.max_tokens, tokenized.max_positions)
        self._pad_id = tokenized.pad_id or 0
        tokenized.tokenizer.enable_truncation(max_length=self.max_tokens)
        self._tokenizer = tokenized.tokenizer
        graph = self.model.path(self.model.onnx or "").read_bytes()
        if self.settings.int8:
            graph, self.int8_products = int8_products(graph)
        self._session, self._inputs = open_session(self.model, threads=self.settings.threads,
                                                   spinning=self.settings.spinning, graph=graph)
        self.dimensions = int(self.embed(["warm up"]).shape[1])

    def embed(self, texts: Sequence[str], *, stop: Callable[[], bool] | None = None) -> np.ndarray:
        """Unit vectors ``[len(texts), dimensions]`` (float32), in the order of ``texts``.  ``stop`` is asked
        before each batch the model runs: True raises ``EmbeddingStopped`` there, with the vectors run so far (a
        long run is left between batches, never inside one: a deadline, or a close whose process must not exit
        with the model's threads running)."""
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        encoded = [encoding.ids for encoding in self._tokenizer.encode_batch(list(texts))]
        vectors: list[np.ndarray | None] = [None] * len(texts)
        for batch in plan_batches([len(ids) for ids in encoded], rows=self.settings.rows,
                                  tokens=self.settings.tokens):
            if stop is not None and stop():
                raise EmbeddingStopped(f"stopped with {sum(v is None for v in vectors)} of {len(texts)} texts left",
                                       vectors)
            for position, vector in zip(batch, self._run([encoded[i] for i in batch])):
                vectors[position] = vector
        return np.stack(vectors).astype(np.float32, copy=False)  # type: ignore[arg-type]

    def token_states(self, texts: Sequence[str]) -> tuple[np.ndarray, list[TokenStates]]:
        """``embed(texts)`` and, from the same run, each text's word pieces with their unit-length last hidden
        states (``[CLS]`` and ``[SEP]`` included): what late interaction compares token by token."""
        encodings = self._tokenizer.encode_batch(list(texts)) if texts else []
        vectors = np.zeros((len(encodings), self.dimensions), dtype=np.float32)
        states: list[TokenStates | None] = [None] * len(encodings)
        for batch in plan_batches([len(e.ids) for e in encodings], rows=self.settings.rows,
                                  tokens=self.settings.tokens):
            hidden, mask = self._hidden([encodings[i].ids for i in batch])
            if hidden.ndim != 3:
                raise ValueError(f"onnx/{self.model.name} answers pooled vectors, not token states")
            vectors[batch] = self._pool(hidden, mask)
            for row, position in enumerate(batch):
                token = hidden[row, :len(encodings[position].ids)]
                norms = np.linalg.norm(token, axis=1, keepdims=True)
                encoding = encodings[position]
                states[position] = TokenStates(list(encoding.tokens), list(encoding.ids),
                                               token / np.maximum(norms, 1e-12))
        return vectors, states  # type: ignore[return-value]

    def _hidden(self, rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """The graph's output for ``rows`` padded to one length, and the mask of real tokens."""
        ids, mask = padded(rows, self._pad_id)
        feeds = {"input_ids": ids}
        if "attention_mask" in self._inputs:
            feeds["attention_mask"] = mask
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        with self._lock:
            output = np.asarray(self._session.run(None, feeds)[0], dtype=np.float32)
        return output, mask

    def _run(self, rows: list[list[int]]) -> np.ndarray:
        return self._pool(*self._hidden(rows))

    def _pool(self, output: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Unit vectors: the mean of the real tokens' states (or the graph's own pooled output)."""
        if output.ndim == 3 and output.shape[:2] == mask.shape:
            weights = mask[:, :, None].astype(np.float32)
            pooled = (output * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        elif output.ndim == 2 and output.shape[0] == len(mask):
            pooled = output
        else:
            raise ValueError(f"onnx/{self.model.name} answered shape {output.shape}, not [batch, sequence, "
                             "dimensions] or [batch, dimensions]")
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)


def plan_batches(lengths: Sequence[int], *, rows: int = RunSettings.rows,
                 tokens: int = RunSettings.tokens) -> list[list[int]]:
    """Positions sorted by length, cut into runs of at most ``rows`` rows and ``tokens`` padded tokens."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for position in order:
        if current and (len(current) + 1 > rows or (len(current) + 1) * lengths[position] > tokens):
            batches.append(current)
            current = []
        current.append(position)
    if current:
        batches.append(current)
    return batches


class EmbeddingStatusData(TypedDict):
    state: str
    model: NotRequired[str]
    reason: NotRequired[str]


@dataclass(frozen=True)
class EmbeddingStatus:
    state: str                  # not_configured | not_installed | failed | ready
    model: str | None = None    # the embeddingModel value
    reason: str | None = None

    def to_dict(self) -> EmbeddingStatusData:
        return {key: value for key, value in (("state", self.state), ("model", self.model),  # type: ignore[return-value]
                                              ("reason", self.reason)) if value is not None}


class EmbeddingRuntime:
    """The engine's embedding model: what ``embeddingModel`` names, loaded on first use.

    ``current()`` answers the loaded model or None; ``status()`` says why not.
    A model installed (or fixed) later is picked up on the next use: the
    installed-model manifest is looked at again whenever it changes.
    """

    def __init__(self, settings: Callable[[], Settings], models: ModelStore) -> None:
        self._settings = settings
        self._models = models
        self._lock = threading.Lock()
        self._key: tuple[Any, ...] | None = None
        self._embedder: Embedder | None = None
        self._status = EmbeddingStatus(NOT_CONFIGURED)

    def current(self) -> Embedder | None:
        with self._lock:
            wanted = self._settings().embedding_model
            key = (wanted, _stamp(self._models.manifest_path))
            if key != self._key:
                self._key = key
                self._embedder, self._status = self._load(wanted)
            return self._embedder

    def status(self) -> EmbeddingStatus:
        self.current()
        return self._status

    def _load(self, wanted: str | None) -> tuple[Embedder | None, EmbeddingStatus]:
        if wanted is None:
            return None, EmbeddingStatus(NOT_CONFIGURED, None, "embeddingModel is null")
        name = wanted.partition("/")[2]
        try:
            model = self._models.installed().get(name)
        except ModelError as exc:
            return None, EmbeddingStatus(FAILED, wanted, exc.message)
        if model is None:
            return None, EmbeddingStatus(NOT_INSTALLED, wanted, f"no installed model named {name!r} (knowledge "
                                         f"models pull {name}, or add-local)")
        embedder = Embedder(model)
        try:
            embedder.load()
        except (ModelError, OSError, ValueError, RuntimeError) as exc:
            reason = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            log.warning("embedding model %s failed to load: %s", wanted, reason)
            return None, EmbeddingStatus(FAILED, wanted, reason)
        except Exception as exc:  # onnxruntime and tokenizers raise their own exception types
            log.warning("embedding model %s failed to load: %s", wanted, exc)
            return None, EmbeddingStatus(FAILED, wanted, f"{type(exc).__name__}: {exc}")
        log.info("embedding model %s ready: %d dimensions", wanted, embedder.dimensions)
        return embedder, EmbeddingStatus(READY, wanted)


def _stamp(path: Any) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_mtime_ns, info.st_size)
