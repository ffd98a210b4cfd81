"""The ``onnx`` Decision provider: a cross-encoder run in-process with onnxruntime + tokenizers.

Loading (hash check, session, tokenizer, a short timed warm-up) happens once,
on a background thread, never on a request. A scoring call encodes each
(query, document) pair with the model's own pair template and special tokens,
truncated to the caller's per-pair token budget; groups pairs of similar
length into batches (so little is padded); and, before each batch, checks
that the batch fits before the deadline at the measured throughput. A batch
too big for the time left is cut to its highest-priority pairs that fit (the
rest, and every later batch, are not started); one that overruns its
estimate is terminated at the deadline. Either way the pairs not run come
back unscored, never as partial scores. Scores are ``sigmoid(logit)`` and are cached per
(model, token budget, query, document).
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from models.errors import ModelError
from models.installed import InstalledModel

from ..state.config import Settings
from ..core.errors import DecisionUnavailable, InvalidParams
from .onnx_session import open_session, open_tokenizer, padded
from .provider import FAILED, LOADING, READY, PairScores

if TYPE_CHECKING:  # numpy is imported when a model loads
    import numpy

log = logging.getLogger(__name__)

DEFAULT_MAX_POSITIONS = 512


@dataclass(frozen=True)
class OnnxOptions:
    """Session and batching settings (docs/models.md has the measurements behind the defaults)."""

    intra_op_threads: int = 0            # 0: every core the process may use
    graph_optimization: str = "all"      # disabled | basic | extended | all
    spinning: bool = True                # idle intra-op threads spin for work (onnxruntime's default); off was faster
                                         # only while other work kept the cores busy (docs/benchmarks/gate-int8.md)
    max_batch_rows: int = 4              # small batches stay in the cores' caches (docs/benchmarks/gate-int8.md)
    max_batch_tokens: int = 4096         # rows x padded length of one batch
    max_padding_share: float = 0.25      # a batch is closed before padding would exceed this share
    cache_entries: int = 4096
    warmup_tokens: int = 128
    safety: float = 1.2                  # the cost estimate of a batch is stretched by this
    fixed_overhead_s: float = 0.001      # per batch, beyond tokens / throughput
    tokens_per_second: float | None = None  # fixes the throughput instead of measuring it (benchmarks, tests)


class OnnxReranker:
    """One loaded model; thread-safe, one scoring call at a time (the CPU is the limit anyway).

    A ``ScoringProvider`` (provider.py) with a tokenizer and a measured throughput.
    """

    def __init__(self, model: InstalledModel, options: OnnxOptions | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.model = model
        self.clock = clock                   # what deadlines are measured on
        self.options = options or OnnxOptions()
        self.state = LOADING
        self.reason: str | None = None
        self.tokens_per_second: float | None = None
        self.max_pair_tokens = DEFAULT_MAX_POSITIONS
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: list[str] = []
        self._specials = 0
        self._pad_id = 0
        self._run_lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, int, str, str], float] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._loaded = threading.Event()

    # --- loading --------------------------------------------------------------------------

    def load(self) -> None:
        """Verify, open and warm up the model; sets ``state`` to ready or failed (never raises)."""
        try:
            self._load()
            self.state = READY
            log.info("decision model onnx/%s ready: %.0f tokens/s", self.model.name, self.tokens_per_second or 0)
        except (ModelError, OSError, ValueError, RuntimeError) as exc:
            self.state, self.reason = FAILED, getattr(exc, "message", None) or str(exc) or type(exc).__name__
            log.warning("decision model onnx/%s failed to load: %s", self.model.name, self.reason)
        except Exception as exc:  # onnxruntime and tokenizers raise their own exception types
            self.state, self.reason = FAILED, f"{type(exc).__name__}: {exc}"
            log.warning("decision model onnx/%s failed to load: %s", self.model.name, self.reason)
        finally:
            self._loaded.set()

    def wait_loaded(self, timeout: float | None = None) -> bool:
        return self._loaded.wait(timeout)

    def serves(self, settings: Settings) -> bool:
        return True   # the model file is named by decisionModel alone

    def _load(self) -> None:
        if not self.model.runnable:
            raise ValueError(f"model {self.model.name} has no ONNX graph; the onnx provider runs ONNX only")
        tokenized = open_tokenizer(self.model)
        if tokenized.max_positions is not None:
            self.max_pair_tokens = tokenized.max_positions
        tokenizer = tokenized.tokenizer
        self._pad_id = next((pad for pad in (tokenized.pad_id, tokenized.file_pad_id) if pad is not None), 0)
        self._specials = tokenizer.num_special_tokens_to_add(True)
        self._tokenizer = tokenizer
        self._session, self._inputs = open_session(self.model, threads=self.options.intra_op_threads or None,
                                                   spinning=self.options.spinning,
                                                   optimization=self.options.graph_optimization)
        self.tokens_per_second = self.options.tokens_per_second or self._warm_up()

    def _warm_up(self) -> float:
        """Throughput in tokens per second of a batch of typical pairs (the first run only allocates)."""
        import numpy as np

        length = max(self._specials + 2, min(self.options.warmup_tokens, self.max_pair_tokens))
        ids = np.full((4, length), self._tokenizer.token_to_id("[SEP]") or self._pad_id + 1, dtype=np.int64)
        self._run(ids, np.ones_like(ids), None)
        started = time.perf_counter()
        self._run(ids, np.ones_like(ids), None)
        elapsed = max(time.perf_counter() - started, 1e-6)
        return ids.size / elapsed

    # --- scoring ---------------------------------------------------------------------------

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text without special tokens (for sizing windows to a token budget)."""
        self._require_ready()
        return [len(encoding.ids) for encoding in self._tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def pair_tokens(self, query: str, documents: Sequence[str], max_pair_tokens: int | None = None) -> list[int]:
        """The token count of each (query, document) pair as it would be scored, special tokens included."""
        self._require_ready()
        return [len(ids) for ids in self._encode(query, list(documents), self._budget(max_pair_tokens))]

    def _budget(self, max_pair_tokens: int | None) -> int:
        budget = min(max_pair_tokens or self.max_pair_tokens, self.max_pair_tokens)
        if budget < self._specials + 2:
            raise InvalidParams(f"a pair needs at least {self._specials + 2} tokens", field="maxPairTokens")
        return budget

    def score_pairs(self, query: str, documents: Sequence[str], *, deadline: float,
                    max_pair_tokens: int | None = None,
                    before_dispatch: Callable[[], None] | None = None) -> PairScores:
        self._require_ready()
        budget = self._budget(max_pair_tokens)
        result = PairScores(scores=[None] * len(documents), batches=[])
        query_hash = _digest(query)
        keys = [(self.model.fingerprint, budget, query_hash, _digest(document)) for document in documents]
        pending = []
        for index, key in enumerate(keys):
            cached = self._cache_get(key)
            if cached is None:
                pending.append(index)
            else:
                result.scores[index] = cached
                result.cached.add(index)
        if not pending:
            return result
        if not self._run_lock.acquire(timeout=max(0.0, deadline - self.clock())):
            return result   # another call holds the model until after our deadline
        try:
            encoded = self._encode(query, [documents[i] for i in pending], budget)
            for planned in self.plan_batches([len(ids) for ids in encoded]):
                batch = self._fitting(planned, encoded, deadline)
                if not batch:
                    break
                if before_dispatch is not None:
                    before_dispatch()
                logits = self._run_batch([encoded[i] for i in batch], deadline)
                if logits is None:
                    break
                for position, logit in zip(batch, logits):
                    index = pending[position]
                    result.scores[index] = probability = _sigmoid(float(logit))
                    self._cache_put(keys[index], probability)
                result.tokens += sum(len(encoded[i]) for i in batch)
                assert result.batches is not None
                result.batches.append([pending[i] for i in batch])
                if len(batch) < len(planned):
                    break   # the deadline cut this batch: nothing later fits either
        finally:
            self._run_lock.release()
        return result

    def _require_ready(self) -> None:
        if self.state != READY:
            raise DecisionUnavailable(f"decision model onnx/{self.model.name} is {self.state}"
                                      + (f": {self.reason}" if self.reason else ""), kind=self.state,
                                      model=f"onnx/{self.model.name}")

    def _encode(self, query: str, documents: list[str], budget: int) -> list[list[int]]:
        """Pair token ids: the model's template around the query and the document, within ``budget``."""
        tokenizer = self._tokenizer
        content = budget - self._specials
        whole_query = tokenizer.encode(query, add_special_tokens=False)   # post_process leaves it as it is
        query_tokens = len(whole_query.ids)
        pairs = []
        for document in tokenizer.encode_batch(documents, add_special_tokens=False):
            doc_tokens = len(document.ids)
            if query_tokens + doc_tokens > content:
                # The query stays whole unless it would leave the document less than half of the budget.
                doc_keep = max(content - query_tokens, min(doc_tokens, content // 2))
                query_keep = content - doc_keep
                document.truncate(doc_keep)
            else:
                query_keep = query_tokens
            query_part = whole_query
            if query_keep < query_tokens:
                query_part = tokenizer.encode(query, add_special_tokens=False)
                query_part.truncate(query_keep)
            pairs.append(list(tokenizer.post_process(query_part, document, add_special_tokens=True).ids))
        return pairs

    def plan_batches(self, lengths: Sequence[int]) -> list[list[int]]:
        """Positions grouped by similar length; batches ordered by the earliest (highest-priority) position."""
        options = self.options
        order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
        batches: list[list[int]] = []
        current: list[int] = []
        for position in order:
            if current:
                rows, longest = len(current) + 1, lengths[position]
                real = sum(lengths[i] for i in current) + longest
                if (rows > options.max_batch_rows or rows * longest > options.max_batch_tokens
                        or (rows * longest - real) > options.max_padding_share * rows * longest):
                    batches.append(current)
                    current = []
            current.append(position)
        if current:
            batches.append(current)
        return sorted(batches, key=min)

    def estimate_seconds(self, rows: int, longest: int) -> float:
        rate = self.tokens_per_second or 1.0
        return rows * longest / rate * self.options.safety + self.options.fixed_overhead_s

    def seconds_to_score(self, pair_tokens: Sequence[int]) -> float:
        return sum(self.estimate_seconds(1, tokens) for tokens in pair_tokens)

    def _fitting(self, batch: list[int], encoded: list[list[int]], deadline: float) -> list[int]:
        """The rows of ``batch`` that fit before ``deadline``, highest priority (lowest position) first.

        Cutting a batch instead of skipping it matters when one batch holds a whole turn: a plan made a
        moment earlier at a throughput that has since dipped still scores its best candidates.
        """
        rows = sorted(batch)
        left = deadline - self.clock()
        while rows and self.estimate_seconds(len(rows), max(len(encoded[i]) for i in rows)) > left:
            rows.pop()
        return rows

    def _run_batch(self, rows: list[list[int]], deadline: float) -> list[float] | None:
        ids, mask = padded(rows, self._pad_id)
        started = time.perf_counter()
        logits = self._run(ids, mask, deadline)
        if logits is None:
            return None
        elapsed = time.perf_counter() - started
        if self.options.tokens_per_second is None and elapsed > 0:
            observed = ids.size / elapsed   # keep the estimate honest as lengths and load change
            self.tokens_per_second = 0.7 * (self.tokens_per_second or observed) + 0.3 * observed
        return [float(value) for value in logits]

    def _run(self, ids: Any, mask: Any, deadline: float | None) -> numpy.ndarray | None:
        """One session run: a logit per row; terminated (returning None) if it is still running at the deadline."""
        import numpy as np
        import onnxruntime

        feeds = {"input_ids": ids}
        if "attention_mask" in self._inputs:
            feeds["attention_mask"] = mask
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        run_options = onnxruntime.RunOptions()
        timer = None
        if deadline is not None:
            left = deadline - self.clock()
            if left <= 0:
                run_options.terminate = True   # already late: onnxruntime refuses at once, no thread to race
            else:
                timer = threading.Timer(left, _terminate, (run_options,))
                timer.name = "decision-deadline"
                timer.daemon = True
                timer.start()
        try:
            output = self._session.run(None, feeds, run_options)[0]
        except Exception as exc:
            if run_options.terminate:
                return None
            raise DecisionUnavailable(f"onnx/{self.model.name} failed to score: {exc}", kind="failed",
                                      model=f"onnx/{self.model.name}") from exc
        finally:
            if timer is not None:
                timer.cancel()
        if output.ndim != 2 or output.shape[0] != ids.shape[0] or output.shape[1] != 1:
            raise DecisionUnavailable(f"onnx/{self.model.name} answered logits of shape {output.shape}, "
                                      "not [batch, 1]", kind="failed", model=f"onnx/{self.model.name}")
        return output[:, 0]

    # --- cache -------------------------------------------------------------------------------

    def _cache_get(self, key: tuple[str, int, str, str]) -> float | None:
        with self._cache_lock:
            value = self._cache.get(key)
            if value is not None:
                self._cache.move_to_end(key)
            return value

    def _cache_put(self, key: tuple[str, int, str, str], value: float) -> None:
        with self._cache_lock:
            self._cache[key] = value
            self._cache.move_to_end(key)
            while len(self._cache) > self.options.cache_entries:
                self._cache.popitem(last=False)


def _terminate(run_options: Any) -> None:
    run_options.terminate = True


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _sigmoid(logit: float) -> float:
    if logit >= 0:
        return 1.0 / (1.0 + math.exp(-logit))
    exp = math.exp(logit)
    return exp / (1.0 + exp)
