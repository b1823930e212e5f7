"""What a checkpoint folder is, read from its own files: which families of the default matrix
(matrices/pooling.yaml) it belongs to, and from which file each fact came.

Only files are read (JSON, the safetensors headers); nothing is imported from the model, and
nothing is downloaded. A folder that cannot be read is a CheckError; one that can be read but
matches no family is Unclassified, whose message says what was found, which families were
considered and the matrix entry to write by hand.
"""

from __future__ import annotations

import functools
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_MATRIX = Path(__file__).resolve().parents[2] / "matrices" / "pooling.yaml"

# model_type values of bidirectional encoders (everything else with a head is taken as a decoder,
# whose pairs the reference tokenizes as tokenizer(query, document) and pools at the last token)
ENCODER_TYPES = frozenset(
    {
        "albert",
        "bert",
        "camembert",
        "deberta",
        "deberta-v2",
        "distilbert",
        "electra",
        "ernie",
        "modernbert",
        "mpnet",
        "new",
        "nomic_bert",
        "roberta",
        "xlm-roberta",
    }
)
# architectures whose family the name alone decides: late interaction and multimodal models
BY_ARCHITECTURE: dict[str, tuple[str, ...]] = {
    "HF_ColBERT": ("colbert-token-embed", "colbert-maxsim-score"),
    "ColBERTJinaRobertaModel": ("colbert-token-embed", "colbert-maxsim-score"),
    "ColBERTLfm2Model": ("colbert-token-embed", "colbert-maxsim-score"),
    "ColPaliForRetrieval": ("colpali-token-embed", "colpali-maxsim-score"),
    "CLIPModel": ("clip-embed",),
    "JinaVLForRanking": ("vl-rerank",),
}
# the families considered, in the order the rules try them, each with what selects it
FAMILY_RULES: tuple[tuple[str, str], ...] = (
    *((f, f"config.json architectures == {a}") for a, fs in BY_ARCHITECTURE.items() for f in fs),
    ("bge-m3", "an XLM-RoBERTa with sparse_linear.pt and colbert_linear.pt (BAAI/bge-m3's layout)"),
    ("process-reward", "architecture *ForProcessRewardModel (step tag <extra_0> in the tokenizer)"),
    ("reward", "architecture *ForRewardModel"),
    ("encoder-token-classify", "architecture *ForTokenClassification"),
    ("cross-encoder", "architecture *ForSequenceClassification, 1 label, an encoder"),
    ("decoder-score", "architecture *ForSequenceClassification, 1 label, a decoder"),
    ("encoder-classify", "architecture *ForSequenceClassification, an encoder"),
    ("decoder-classify", "architecture *ForSequenceClassification, a decoder"),
    ("encoder-embed", "modules.json with a Pooling module (mean / cls / ... pooling)"),
    ("decoder-embed", "modules.json with a Pooling module in lasttoken mode"),
)
BGE_M3_HEADS = ("sparse_linear.pt", "colbert_linear.pt")  # FlagEmbedding's head files
STEP_TAG = "<extra_0>"  # the step tag of Qwen's process reward models
VLLM_DEFAULT_STEP_TAG_ID = 151651  # vLLM's hard-coded default: the real Qwen vocabulary's <extra_0>


class CheckError(Exception):
    """The checkpoint cannot be read (no folder, no config, unreadable weights): exit 2."""


class Unclassified(CheckError):
    """The checkpoint was read but matches no family: the message says what to write by hand."""


@dataclass(frozen=True)
class Fact:
    what: str
    value: str
    source: str  # the file it was read from, relative to the checkpoint folder


@dataclass(frozen=True)
class Use:
    """One way the checkpoint is used: a family of the default matrix, and why it was chosen."""

    family: str
    why: str


@dataclass
class Inference:
    folder: Path
    architecture: str
    facts: list[Fact] = field(default_factory=list)
    uses: list[Use] = field(default_factory=list)
    hf: dict[str, Any] = field(default_factory=dict)  # extra reference-recipe options
    engine: dict[str, Any] = field(default_factory=dict)  # extra vLLM engine options
    trust_remote_code: bool = False  # the config names code of its own (auto_map)

    def note(self, what: str, value: Any, source: str) -> None:
        self.facts.append(Fact(what, str(value), source))


@functools.lru_cache(maxsize=1)
def default_families() -> dict[str, dict]:
    """The families of the default matrix, raw (task, reference, inputs, hf, tolerances), with
    the matrix defaults' inputs filled in: the bounds a check applies are the matrix's own."""
    import yaml

    data = yaml.safe_load(DEFAULT_MATRIX.read_text())
    inputs = data.get("defaults", {}).get("inputs", "short-texts")
    return {name: {"inputs": inputs, **fam} for name, fam in data["families"].items()}


def default_expected_auto() -> Any:
    """The default matrix's expected_auto_runner: the runner vLLM should choose by itself."""
    import yaml

    return (
        yaml.safe_load(DEFAULT_MATRIX.read_text()).get("defaults", {}).get("expected_auto_runner")
    )


def _json(folder: Path, name: str, required: bool = False) -> dict | list | None:
    path = folder / name
    if not path.is_file():
        if required:
            raise CheckError(
                f"{folder}: no {name}; a checkpoint folder needs the config.json that "
                "save_pretrained writes (is this the right folder, or one level too high?)"
            )
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckError(f"{path}: not readable JSON: {e}") from None


def _check_weights(folder: Path) -> list[str]:
    """The safetensors files, each header read; a folder without readable ones is an error."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        pickled = sorted(p.name for p in folder.glob("*.bin"))
        also = f" (found {', '.join(pickled)}: pickled weights are not read)" if pickled else ""
        raise CheckError(
            f"{folder}: no *.safetensors weights{also}; save the model with "
            "save_pretrained(safe_serialization=True)"
        )
    for f in files:
        try:
            with open(f, "rb") as fh:
                head = fh.read(8)
                (n,) = struct.unpack("<Q", head)
                if n > 100_000_000:
                    raise ValueError(f"header length {n} is not plausible")
                json.loads(fh.read(n))
        except (OSError, ValueError, struct.error) as e:
            raise CheckError(f"{f}: unreadable safetensors weights: {e}") from None
    return [f.name for f in files]


def _num_labels(config: dict) -> tuple[int, str]:
    if isinstance(config.get("id2label"), dict) and config["id2label"]:
        return len(config["id2label"]), "config.json id2label"
    if isinstance(config.get("num_labels"), int):
        return config["num_labels"], "config.json num_labels"
    return 2, "transformers' default (config.json names no labels)"


def _token_id(folder: Path, token: str) -> int | None:
    """The id of `token` in the checkpoint's tokenizer.json (added tokens, then the vocab)."""
    tok = _json(folder, "tokenizer.json")
    if not isinstance(tok, dict):
        return None
    for added in tok.get("added_tokens") or []:
        if added.get("content") == token:
            return int(added["id"])
    vocab = (tok.get("model") or {}).get("vocab")
    if isinstance(vocab, dict) and token in vocab:
        return int(vocab[token])
    return None


def _pooling(folder: Path, inf: Inference) -> str | None:
    """The sentence-transformers pooling mode, or None when modules.json names no Pooling."""
    modules = _json(folder, "modules.json")
    if modules is None:
        return None
    if not isinstance(modules, list):
        raise CheckError(f"{folder / 'modules.json'}: expected a list of modules")
    types = [str(m.get("type", "")) for m in modules if isinstance(m, dict)]
    inf.note(
        "sentence-transformers modules",
        ", ".join(t.rsplit(".", 1)[-1] for t in types),
        "modules.json",
    )
    pool = [m for m in modules if str(m.get("type", "")).endswith("Pooling")]
    if not pool:
        return None
    rel = f"{pool[0].get('path') or ''}/config.json".lstrip("/")
    cfg = _json(folder, rel)
    if not isinstance(cfg, dict):
        raise CheckError(f"{folder}: modules.json names a Pooling module but {rel} is missing")
    modes = sorted(
        k.removeprefix("pooling_mode_").removesuffix("_tokens").removesuffix("_token")
        for k, v in cfg.items()
        if k.startswith("pooling_mode_") and v is True
    )
    if not modes:
        modes = [str(cfg.get("pooling_mode", "?"))]
    mode = "+".join(modes)
    inf.note("pooling", mode, rel)
    normalize = any(t.endswith("Normalize") for t in types)
    inf.note("normalize", "yes" if normalize else "no", "modules.json")
    return mode


def infer(folder: str | Path) -> Inference:
    """Read a checkpoint folder and say which families of the default matrix it belongs to."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CheckError(f"{folder}: not a folder")
    config = _json(folder, "config.json", required=True)
    if not isinstance(config, dict):
        raise CheckError(f"{folder / 'config.json'}: expected a JSON object")
    weights = _check_weights(folder)
    archs = config.get("architectures") or []
    arch = str(archs[0]) if archs else ""
    inf = Inference(folder=folder, architecture=arch)
    inf.note("architecture", arch or "(none)", "config.json architectures")
    model_type = str(config.get("model_type", ""))
    inf.note("model_type", model_type or "(none)", "config.json")
    inf.note("weights", ", ".join(weights), "*.safetensors headers")
    if "auto_map" in config:
        inf.trust_remote_code = True
        inf.note("remote code", ", ".join(sorted(config["auto_map"])), "config.json auto_map")
    _note_sentence_transformers(folder, config, inf)
    encoder = model_type in ENCODER_TYPES
    kind = "encoder" if encoder else "decoder"
    heads = [h for h in BGE_M3_HEADS if (folder / h).is_file()]
    if model_type == "xlm-roberta" and len(heads) == len(BGE_M3_HEADS):
        inf.note("BGE-M3 heads", ", ".join(heads), "the checkpoint folder")
        # vLLM runs this layout as BgeM3EmbeddingModel (the family's hf_overrides), as its docs do
        inf.architecture = "BgeM3EmbeddingModel"
        inf.uses = [Use("bge-m3", f"{arch} with FlagEmbedding's sparse and ColBERT heads")]
    elif arch in BY_ARCHITECTURE:
        inf.uses = [Use(f, f"architecture {arch}") for f in BY_ARCHITECTURE[arch]]
    elif arch.endswith("ForProcessRewardModel"):
        _process_reward(folder, arch, inf)
    elif arch.endswith("ForRewardModel"):
        inf.uses = [Use("reward", f"architecture {arch}")]
    elif arch.endswith("ForTokenClassification"):
        n, src = _num_labels(config)
        inf.note("num_labels", n, src)
        inf.uses = [Use("encoder-token-classify", f"architecture {arch}, {n} labels")]
    elif arch.endswith("ForSequenceClassification"):
        n, src = _num_labels(config)
        inf.note("num_labels", n, src)
        inf.note("encoder or decoder", kind, f"config.json model_type {model_type!r}")
        classify = Use(f"{kind}-classify", f"{arch}, {n} label(s), {kind}")
        if n == 1:  # a reranker: scores (query, document) pairs; also a 1-label classifier
            score = "cross-encoder" if encoder else "decoder-score"
            inf.uses = [Use(score, f"{arch}, 1 label, {kind}: a reranker"), classify]
        else:
            inf.uses = [classify]
    else:
        mode = _pooling(folder, inf)
        if mode is None:
            raise Unclassified(
                _unclassified(
                    inf,
                    "no task head in the architecture and no sentence-transformers Pooling "
                    "module (modules.json + 1_Pooling/config.json): how to pool is not written "
                    "down, and HF and vLLM may each pick their own default",
                )
            )
        family = "decoder-embed" if mode == "lasttoken" or not encoder else "encoder-embed"
        inf.uses = [Use(family, f"{arch} with sentence-transformers {mode} pooling")]
    families = default_families()
    missing = [u.family for u in inf.uses if u.family not in families]
    if missing:  # a family renamed in the default matrix without this table
        raise CheckError(f"families {missing} are not in {DEFAULT_MATRIX}")
    return inf


def _note_sentence_transformers(folder: Path, config: dict, inf: Inference) -> None:
    """What sentence-transformers saved beside the weights (its own config, CrossEncoder's)."""
    st_cfg = _json(folder, "config_sentence_transformers.json")
    if isinstance(st_cfg, dict):
        version = (st_cfg.get("__version__") or {}).get("sentence_transformers", "?")
        kind = st_cfg.get("model_type", "SentenceTransformer")
        inf.note(
            "sentence-transformers",
            f"{kind} (saved by {version})",
            "config_sentence_transformers.json",
        )
    if isinstance(config.get("sentence_transformers"), dict):
        inf.note(
            "sentence-transformers", "CrossEncoder settings", "config.json sentence_transformers"
        )


def _process_reward(folder: Path, arch: str, inf: Inference) -> None:
    """A process reward model: its step tag's id in this tokenizer, passed to both sides."""
    tag_id = _token_id(folder, STEP_TAG)
    if tag_id is None:
        raise Unclassified(
            _unclassified(
                inf,
                f"a process reward model, but its tokenizer.json has no {STEP_TAG} token: "
                "name the step tag by hand",
            )
        )
    inf.note(f"step tag {STEP_TAG} id", tag_id, "tokenizer.json")
    inf.hf = {"step_tag": STEP_TAG}
    # vLLM only knows the real Qwen vocabulary's id: pass this one, as serving it needs
    inf.engine = {"pooler_config": {"step_tag_id": tag_id}}
    inf.uses = [Use("process-reward", f"architecture {arch}")]


def _unclassified(inf: Inference, why: str) -> str:
    found = "\n".join(f"  {f.what}: {f.value}  ({f.source})" for f in inf.facts)
    considered = "\n".join(f"  {name}: {rule}" for name, rule in FAMILY_RULES)
    entry = (
        "  - id: my-model\n"
        "    family: encoder-embed          # the family whose task and reference recipe fit\n"
        f"    model: {{source: local, path: {inf.folder}}}\n"
        "    engine: {pooler_config: {pooling_type: MEAN}}   # vLLM's pooling, if not its default\n"
        "    inputs: adversarial-texts"
    )
    return (
        f"{inf.folder}: cannot tell what this checkpoint is: {why}.\n"
        f"Found:\n{found}\n"
        f"Families considered (matrices/pooling.yaml):\n{considered}\n"
        f"Write its case by hand in a matrix that includes matrices/pooling.yaml, e.g.:\n{entry}\n"
        "and run it with `parity run -m THAT.yaml` (docs/reference/matrix.md)."
    )
