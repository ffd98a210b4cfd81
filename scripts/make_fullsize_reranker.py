"""Generate a full-size ModernBERT-base cross-encoder with random weights, for ``knowledge bench gate``.

Run it in a scratch virtual environment (torch and transformers are never
project dependencies), and never commit its output (about 1.2 GB):

    /work/scratch-venv/bin/python scripts/make_fullsize_reranker.py OUT_DIR [--corpus locomo10.json]

It writes, in the Hugging Face layout both the engine and sentence-transformers read:

    config.json              ModernBertForSequenceClassification, the base size (22 layers,
                             768 hidden, 8,192 positions), one label, mean pooling; no remote code
    model.safetensors        the weights (seeded random), for the PyTorch baseline
    onnx/model.onnx          the same weights exported (inputs input_ids, attention_mask;
                             output logits [batch, 1]), for the engine's onnx provider
    tokenizer.json           a byte-level BPE of ModernBERT's vocabulary size with its special
                             tokens and pair template, trained on the corpus (the real tokenizer
                             cannot be fetched here); tokenizer_config.json for transformers

Random weights cost exactly what the real weights cost, so latency and
throughput measured with this model are the real model's; its scores mean
nothing.  The ONNX export is checked against PyTorch before the script ends.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Iterator

SEED = 0
VOCAB_SIZE = 50368          # ModernBERT-base's embedding rows
SPECIALS = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
MAX_POSITIONS = 8192


def corpus_texts(path: Path) -> Iterator[str]:
    """Every string in the LoCoMo file (turns, summaries, observations, questions)."""
    def walk(value: object) -> Iterator[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for item in value.values():
                yield from walk(item)
        elif isinstance(value, list):
            for item in value:
                yield from walk(item)
    yield from walk(json.loads(path.read_text(encoding="utf-8")))


def build_tokenizer(corpus: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIALS, show_progress=False,
                                  min_frequency=2, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(corpus_texts(corpus), trainer=trainer)
    cls_id, sep_id, pad_id = (tokenizer.token_to_id(token) for token in ("[CLS]", "[SEP]", "[PAD]"))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:0 [SEP]:0",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    tokenizer.enable_truncation(max_length=MAX_POSITIONS)
    tokenizer.enable_padding(pad_id=pad_id, pad_token="[PAD]")
    return tokenizer, cls_id, sep_id, pad_id


def main(argv: list[str]) -> int:
    import numpy as np
    import onnxruntime
    import torch
    from transformers import ModernBertConfig, ModernBertForSequenceClassification

    out = Path(argv[1])
    corpus = Path(argv[argv.index("--corpus") + 1]) if "--corpus" in argv else \
        Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo10.json"
    out.mkdir(parents=True, exist_ok=True)
    tokenizer, cls_id, sep_id, pad_id = build_tokenizer(corpus)
    tokenizer.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": MAX_POSITIONS,
        "cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]",
        "mask_token": "[MASK]"}, indent=2) + "\n", encoding="utf-8")

    torch.manual_seed(SEED)
    config = ModernBertConfig(vocab_size=VOCAB_SIZE, max_position_embeddings=MAX_POSITIONS, pad_token_id=pad_id,
                              cls_token_id=cls_id, sep_token_id=sep_id, bos_token_id=cls_id, eos_token_id=sep_id,
                              num_labels=1, classifier_pooling="mean",
                              architectures=["ModernBertForSequenceClassification"])
    config._attn_implementation = "eager"   # exportable; sentence-transformers picks its own when loading
    model = ModernBertForSequenceClassification(config).eval()
    model.save_pretrained(str(out), safe_serialization=True)

    ids = torch.randint(100, 1000, (2, 24), dtype=torch.int64)
    mask = torch.ones_like(ids)
    mask[1, 17:] = 0
    (out / "onnx").mkdir(exist_ok=True)
    torch.onnx.export(
        model, (ids, mask), str(out / "onnx" / "model.onnx"), input_names=["input_ids", "attention_mask"],
        output_names=["logits"], opset_version=17, dynamo=False,
        dynamic_axes={"input_ids": {0: "batch_size", 1: "sequence_length"},
                      "attention_mask": {0: "batch_size", 1: "sequence_length"}, "logits": {0: "batch_size"}})

    session = onnxruntime.InferenceSession(str(out / "onnx" / "model.onnx"), providers=["CPUExecutionProvider"])
    check = tokenizer.encode_batch([("who went to the concert", "Caroline went to a concert on Friday."),
                                    ("budget", "The report is due next week, after the meeting.")])
    batch_ids = np.array([e.ids for e in check], dtype=np.int64)
    batch_mask = np.array([e.attention_mask for e in check], dtype=np.int64)
    exported = session.run(None, {"input_ids": batch_ids, "attention_mask": batch_mask})[0]
    with torch.no_grad():
        reference = model(input_ids=torch.from_numpy(batch_ids), attention_mask=torch.from_numpy(batch_mask)).logits
    assert np.allclose(exported, reference.numpy(), atol=1e-3), (exported, reference)
    print(f"wrote {out}: vocabulary {tokenizer.get_vocab_size()}, export matches PyTorch")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
