"""Opening an installed ONNX model on the CPU, written once for the reranker and the embedding model.

Both read the model's verified ``config.json`` for its position window and padding id, open its
``tokenizer.json`` with the file's own padding and truncation switched off (each pads per batch), and
run one ``InferenceSession`` on the CPU with sequential execution, one inter-op thread, every core the
process may use unless told otherwise, and the spinning of idle pool threads chosen by the caller.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from models.installed import InstalledModel

OPTIMIZATION_LEVELS = {"disabled": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED",
                       "all": "ORT_ENABLE_ALL"}


@dataclass(frozen=True)
class Tokenized:
    """A model's tokenizer (padding and truncation off) and what its config says of its inputs."""

    tokenizer: Any
    config: dict[str, Any]
    max_positions: int | None  # ``max_position_embeddings`` where it is a plausible window, else None
    pad_id: int | None  # ``pad_token_id`` where the config gives one
    file_pad_id: int | None  # the padding id the tokenizer file itself set, before its padding was switched off


def padded(rows: list[list[int]], pad_id: int) -> tuple[Any, Any]:
    """``rows`` of token ids padded with ``pad_id`` to the longest, as int64 arrays: the ids and the mask of real
    tokens (1) against padding (0)."""
    import numpy as np

    ids = np.full((len(rows), max(len(row) for row in rows)), pad_id, dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, tokens in enumerate(rows):
        ids[row, :len(tokens)] = tokens
        mask[row, :len(tokens)] = 1
    return ids, mask


def open_tokenizer(model: InstalledModel) -> Tokenized:
    """The model's verified config and its tokenizer, ready for per-batch padding."""
    from tokenizers import Tokenizer

    config = model.verified_config()
    positions = config.get("max_position_embeddings")
    pad = config.get("pad_token_id")
    tokenizer = Tokenizer.from_file(str(model.path(model.tokenizer)))
    file_pad = (tokenizer.padding or {}).get("pad_id")
    tokenizer.no_padding()  # the file's own padding pads every text to its length
    tokenizer.no_truncation()
    return Tokenized(tokenizer, config, positions if _integer(positions) and positions > 8 else None,
                     pad if _integer(pad) else None, file_pad if _integer(file_pad) else None)


def open_session(model: InstalledModel, *, threads: int | None, spinning: bool, optimization: str = "all",
                 graph: bytes | None = None) -> tuple[Any, list[str]]:
    """A CPU session over the model's ONNX graph (or ``graph``, a rewrite of it) and its input names;
    ValueError where the graph takes no ``input_ids``."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads or usable_cores()
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = getattr(onnxruntime.GraphOptimizationLevel,
                                               OPTIMIZATION_LEVELS.get(optimization, "ORT_ENABLE_ALL"))
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(graph if graph is not None else str(model.path(model.onnx or "")),
                                           sess_options=options, providers=["CPUExecutionProvider"])
    inputs = [item.name for item in session.get_inputs()]
    if "input_ids" not in inputs:
        raise ValueError(f"the ONNX graph of {model.name} has no input_ids input ({inputs})")
    return session, inputs


def usable_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
