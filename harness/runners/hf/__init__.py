"""The reference: transformers / sentence-transformers, one recipe per task (and family quirk).

A recipe is how a family's output is computed in Hugging Face terms; it is the thing vLLM must
reproduce. Add a family by adding, at most, one recipe here.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np

from harness.runners import LoadRequest, freeze_what_is_alive

Recipe = Callable[["HFRunner", list, dict], list[np.ndarray]]
RECIPES: dict[str, Recipe] = {}
DEFAULT_RECIPE = {
    "embed": "st-embed",
    "classify": "hf-sequence-classification",
    "score": "st-cross-encoder",
    "token_classify": "hf-token-classification",
    "reward": "reference-token-reward",
    "step_reward": "reference-step-reward",
    "token_embed": "colbert-token-embed",
}
# a model whose config names one of these architectures gets this recipe for the task by default
DEFAULT_RECIPE_BY_ARCH = {
    ("CLIPModel", "embed"): "clip-embed",
    ("ColPaliForRetrieval", "token_embed"): "colpali-token-embed",
    ("ColPaliForRetrieval", "score"): "colpali-maxsim",
    ("JinaVLForRanking", "score"): "jina-vl-rerank",
}


RECIPE_VERSIONS: dict[str, int] = {}


def recipe(name: str, version: int = 1) -> Callable[[Recipe], Recipe]:
    """Register a reference recipe. Bump `version` whenever what it computes changes: goldens
    record it and are refused when it differs."""

    def deco(fn: Recipe) -> Recipe:
        RECIPES[name] = fn
        RECIPE_VERSIONS[name] = version
        return fn

    return deco


def resolve_recipe(task: str, architecture: str, reference: str | None) -> str | None:
    """The recipe a case runs: the one it names, else the default for its architecture and task."""
    return reference or DEFAULT_RECIPE_BY_ARCH.get((architecture, task)) or DEFAULT_RECIPE.get(task)


def _torch_dtype(dtype: str):
    import torch

    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]


class HFRunner:
    def __init__(self, variant: str | None):
        if variant:
            raise ValueError(f"the hf runner has no variants (got {variant!r})")
        self.req: LoadRequest | None = None
        self._st = None
        self._loaded: dict[str, Any] = {}  # HF objects by kind, so a model loads once per kind
        # the token ids the reference ran, per item, as the recipe tokenized them (None: an item
        # the recipe does not tokenize as one text, e.g. an image or a MaxSim pair)
        self.tokens: list[list[int] | None] = []
        self.last_meta: list[dict] = []

    def note_tokens(self, input_ids) -> None:
        """Called by a recipe once per item, in input order, with the ids the model ran on."""
        ids = input_ids.tolist() if hasattr(input_ids, "tolist") else list(input_ids)
        self.tokens.append([int(t) for t in (ids[0] if ids and isinstance(ids[0], list) else ids)])

    def load(self, req: LoadRequest) -> dict[str, Any]:
        import sentence_transformers
        import torch
        import transformers

        self.req = req
        freeze_what_is_alive()  # the model loads lazily, in the recipes; unload collects it
        return {
            "actual_runner": "hf",
            "device": req.device,
            "versions": {
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "sentence-transformers": sentence_transformers.__version__,
            },
        }

    def sentence_transformer(self):
        if self._st is None:
            from sentence_transformers import SentenceTransformer

            assert self.req is not None
            self._st = SentenceTransformer(
                self.req.model_dir,
                device=self.req.device,
                trust_remote_code=self.req.trust_remote_code,
                model_kwargs={"dtype": _torch_dtype(self.req.dtype)},
                local_files_only=True,
            )
        return self._st

    def loaded(self, kind: str, make: Callable[[], Any]) -> Any:
        if kind not in self._loaded:
            self._loaded[kind] = make()
        return self._loaded[kind]

    def auto_model(self, cls_name: str):
        """transformers.<cls_name>.from_pretrained, eval mode, in the case's dtype and device."""

        def make():
            import transformers

            assert self.req is not None
            cls = getattr(transformers, cls_name)
            return (
                cls.from_pretrained(
                    self.req.model_dir,
                    dtype=_torch_dtype(self.req.dtype),
                    local_files_only=True,
                    trust_remote_code=self.req.trust_remote_code,
                )
                .to(self.req.device)
                .eval()
            )

        return self.loaded(cls_name, make)

    def tokenizer(self):
        def make():
            from transformers import AutoTokenizer

            assert self.req is not None
            return AutoTokenizer.from_pretrained(
                self.req.model_dir,
                local_files_only=True,
                trust_remote_code=self.req.trust_remote_code,
            )

        return self.loaded("tokenizer", make)

    def architecture(self) -> str:
        """The checkpoint's architecture (config.json `architectures[0]`), read once per load."""

        def make():
            import json
            from pathlib import Path

            assert self.req is not None
            return (
                json.loads((Path(self.req.model_dir) / "config.json").read_text()).get(
                    "architectures"
                )
                or [""]
            )[0]

        return self.loaded("architecture", make)

    def run(self, task: str, items: list, options: dict[str, Any]) -> list[np.ndarray]:
        name = options.get("reference") or self._default_recipe(task)
        if name not in RECIPES:
            raise ValueError(
                f"no HF reference recipe {name!r} for task {task!r}; known: {sorted(RECIPES)}"
            )
        self.tokens = []
        outs = RECIPES[name](self, items, options)
        recorded = len(self.tokens) == len(outs)
        self.last_meta = [
            {"prompt_token_ids": self.tokens[i] if recorded else None} for i in range(len(outs))
        ]
        return outs

    def _default_recipe(self, task: str) -> str | None:
        return resolve_recipe(task, self.architecture(), None)

    def unload(self) -> None:
        self._st = None
        self._loaded.clear()
        self.req = None
        gc.collect()


@contextmanager
def _limit(model: Any, attr: str, truncate: int | None) -> Iterator[None]:
    """`model.<attr>` (its max length) set to `truncate` for one call, then put back: a loaded
    model serves the cases of one load key in any order (-k, shards, selection), so a call leaves
    nothing behind that the next case would run with."""
    own = getattr(model, attr)
    if truncate:
        setattr(model, attr, truncate)
    try:
        yield
    finally:
        setattr(model, attr, own)


@recipe("st-embed")
def _st_embed(runner: HFRunner, items: list, options: dict) -> list[np.ndarray]:
    """sentence-transformers encode: its own pooling and normalize modules decide the vector.
    `dimensions` is encode's `truncate_dim`, with its semantics (sentence_transformer/model.py,
    encode): the model's output, Normalize module included, is cut to the first `dimensions`
    values and not normalised again unless the case says `hf: {normalize_embeddings: true}`
    (encode's own option, applied after the cut; what a Matryoshka model card asks for)."""
    st = runner.sentence_transformer()
    dims = int(options["dimensions"]) if options.get("dimensions") else None
    full = st.get_sentence_embedding_dimension()
    if dims is not None and full is not None and dims > full:
        raise ValueError(f"dimensions {dims} is more than the model's {full}")
    with _limit(st, "max_seq_length", options.get("truncate")):
        out = st.encode(
            list(items),
            batch_size=len(items),
            convert_to_numpy=True,
            show_progress_bar=False,
            truncate_dim=dims,
            normalize_embeddings=bool(options.get("normalize_embeddings")),
        )
        for it in items:  # preprocess is what encode tokenizes with
            runner.note_tokens(st.preprocess([it])["input_ids"][0])
    return [np.asarray(v, dtype=np.float32) for v in out]


def _activation(logits, num_labels: int):
    """What vLLM's classify/score apply by default: sigmoid for one label, softmax for more."""
    import torch

    return torch.sigmoid(logits) if num_labels == 1 else torch.softmax(logits, dim=-1)


def _per_item(
    runner: HFRunner, items: list, forward, max_length: int | None = None
) -> list[np.ndarray]:
    """One unpadded forward per item: no padding conventions can leak into the reference."""
    import torch

    tok = runner.tokenizer()
    outs = []
    with torch.inference_mode():
        for it in items:
            enc = tok(
                *(it if isinstance(it, (list, tuple)) else (it,)),
                return_tensors="pt",
                truncation=True,
                max_length=max_length,
            )
            runner.note_tokens(enc["input_ids"][0])
            enc = {k: v.to(runner.req.device) for k, v in enc.items()}
            outs.append(forward(enc).float().cpu().numpy().astype(np.float32))
    return outs


@recipe("hf-sequence-classification")
def _seq_classify(runner: HFRunner, items: list, options: dict) -> list[np.ndarray]:
    """AutoModelForSequenceClassification logits -> sigmoid (1 label) or softmax (n labels)."""
    model = runner.auto_model("AutoModelForSequenceClassification")
    n = model.config.num_labels
    return _per_item(
        runner, items, lambda enc: _activation(model(**enc).logits[0], n), options.get("truncate")
    )


@recipe("st-cross-encoder")
def _cross_encoder(runner: HFRunner, items: list, options: dict) -> list[np.ndarray]:
    """sentence-transformers CrossEncoder.predict on (query, document) pairs; sigmoid for 1 label."""

    def make():
        from sentence_transformers import CrossEncoder

        assert runner.req is not None
        # in the case's dtype, as every other recipe (without it a half-precision run compared
        # vLLM in bf16 with a float32 CrossEncoder: HF's own half error read as 0)
        return CrossEncoder(
            runner.req.model_dir,
            device=runner.req.device,
            local_files_only=True,
            trust_remote_code=runner.req.trust_remote_code,
            model_kwargs={"dtype": _torch_dtype(runner.req.dtype)},
        )

    ce = runner.loaded("CrossEncoder", make)
    with _limit(ce, "max_length", options.get("truncate")):
        scores = ce.predict(
            [tuple(p) for p in items],
            batch_size=len(items),
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        for p in items:  # preprocess is what predict tokenizes with
            runner.note_tokens(ce.preprocess([tuple(p)])["input_ids"][0])
    return [np.asarray(s, dtype=np.float32).reshape(-1) for s in scores]


@recipe("hf-token-classification")
def _token_classify(runner: HFRunner, items: list, options: dict) -> list[np.ndarray]:
    """AutoModelForTokenClassification logits -> softmax per token (special tokens included)."""
    import torch

    model = runner.auto_model("AutoModelForTokenClassification")
    return _per_item(
        runner,
        items,
        lambda enc: torch.softmax(model(**enc).logits[0], dim=-1),
        options.get("truncate"),
    )


def _reference_model(runner: HFRunner):
    """A harness.models.refmodels architecture (transformers lacks it), loaded from the checkpoint."""
    from harness.models.refmodels import load_reference

    assert runner.req is not None
    return runner.loaded(
        "reference",
        lambda: load_reference(
            runner.req.model_dir,
            runner.architecture(),
            _torch_dtype(runner.req.dtype),
            runner.req.device,
        ),
    )


@recipe("reference-token-reward")
def _token_reward(runner: HFRunner, items: list, options: dict) -> list[np.ndarray]:
    """Outcome reward model: the head's raw output at every token, [tokens, 1] (vLLM's default)."""
    model = _reference_model(runner)
    return _per_item(
        runner,
        items,
        lambda enc: model(enc["input_ids"], enc.get("attention_mask"))[0],
        options.get("truncate"),
    )


@recipe("reference-step-reward")
def _step_reward(runner: HFRunner, items: list, options: dict) -> list[np.ndarray]:
    """Process reward model: softmax of the head at the step-tag tokens only, [steps, 2]."""
    import torch

    model = _reference_model(runner)
    tag = options.get("step_tag")
    if not tag:
        raise ValueError(
            "the step-reward recipe needs `hf: {step_tag: <token>}` in the matrix case"
        )
    tag_id = runner.tokenizer().convert_tokens_to_ids(tag)

    def forward(enc):
        logits = model(enc["input_ids"], enc.get("attention_mask"))[0]
        return torch.softmax(logits[enc["input_ids"][0] == tag_id], dim=-1)

    return _per_item(runner, items, forward, options.get("truncate"))


def _colbert_encoder(runner: HFRunner):
    """text -> [tokens, dim] L2-normalised token embeddings, for both ColBERT layouts:
    `HF_ColBERT` (bert.* + linear, harness.models.refmodels) or a backbone + sentence-transformers 1_Dense."""
    from pathlib import Path

    import torch

    from harness.models.refmodels import REFERENCE_ARCHS

    assert runner.req is not None
    d = Path(runner.req.model_dir)
    tok = runner.tokenizer()
    if runner.architecture() in REFERENCE_ARCHS:
        model = _reference_model(runner)
        forward = lambda enc: model(**enc)[0]  # noqa: E731
    else:
        from safetensors.torch import load_file

        backbone = runner.auto_model("AutoModel")
        weight = runner.loaded(
            "dense", lambda: load_file(str(d / "1_Dense" / "model.safetensors"))["linear.weight"]
        )

        def forward(enc):
            hidden = backbone(**enc, use_cache=False).last_hidden_state[0]
            return torch.nn.functional.normalize(
                hidden @ weight.to(hidden.device, hidden.dtype).T, dim=-1
            )

    def encode(text: str, max_length: int | None = None, note: bool = False):
        with torch.inference_mode():
            enc = tok(text, return_tensors="pt", truncation=True, max_length=max_length)
            if note:  # one item as the model ran it (not the texts of MaxSim pairs)
                runner.note_tokens(enc["input_ids"][0])
            return forward({k: v.to(runner.req.device) for k, v in enc.items()}).float()

    return encode


@recipe("colbert-token-embed")
def _colbert_tokens(runner: HFRunner, items: list, options: dict) -> list[np.ndarray]:
    """Every token (special tokens included): projection, then per-token L2 normalisation."""
    encode = _colbert_encoder(runner)
    return [
        encode(t, options.get("truncate"), note=True).cpu().numpy().astype(np.float32)
        for t in items
    ]


def _once_per_item(encode: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`encode` memoised per item within one call: a query meets several documents (and a
    document several queries), and its embedding does not depend on the partner."""
    import json

    memo: dict[str, Any] = {}

    def cached(item):
        key = json.dumps(item, sort_keys=True)
        if key not in memo:
            memo[key] = encode(item)
        return memo[key]

    return cached


@recipe("colbert-maxsim")
def _colbert_maxsim(runner: HFRunner, items: list, options: dict) -> list[np.ndarray]:
    """Late interaction: sum over query tokens of the max dot product over document tokens."""
    colbert = _colbert_encoder(runner)
    encode = _once_per_item(lambda text: colbert(text, options.get("truncate")))
    out = []
    for q, d in items:
        sim = encode(q) @ encode(d).T
        out.append(np.asarray([float(sim.max(dim=1).values.sum())], dtype=np.float32))
    return out


@recipe("clip-embed")
def _clip_embed(runner: HFRunner, items: list, options: dict) -> list[np.ndarray]:
    """CLIP dual encoder: get_text_features for texts, get_image_features for images (processed
    by the checkpoint's image processor), each L2-normalised (vLLM's `embed` default)."""
    import torch
    from transformers import AutoProcessor

    from harness.matrix.images import image, is_image

    assert runner.req is not None
    model = runner.auto_model("CLIPModel")
    proc = runner.loaded(
        "processor",
        lambda: AutoProcessor.from_pretrained(runner.req.model_dir, local_files_only=True),
    )
    outs = []
    with torch.inference_mode():
        for it in items:
            if is_image(it):
                pixels = proc.image_processor(images=[image(it["image"])], return_tensors="pt")[
                    "pixel_values"
                ]
                feats = model.get_image_features(pixel_values=pixels.to(runner.req.device))
            else:
                enc = proc.tokenizer(
                    [it], return_tensors="pt", truncation=True, max_length=options.get("truncate")
                )
                feats = model.get_text_features(
                    **{k: v.to(runner.req.device) for k, v in enc.items()}
                )
            feats = getattr(feats, "pooler_output", feats)  # transformers 5 returns a model output
            outs.append(torch.nn.functional.normalize(feats[0].float(), dim=-1).cpu().numpy())
    return outs


def _colpali_encoder(runner: HFRunner, options: dict):
    """(encode, processor): encode maps an item to its [tokens, dim] ColPali embeddings, one item
    per forward, as ColPaliProcessor prepares it: a text is a query (`<bos>Question: {text}` + 10 pad tokens + `\\n`), an image a page
    (image tokens + `<bos>Describe the image.\\n`). One at a time: a batch left-pads the queries.
    Options: truncate; image_processor_kwargs (e.g. image_mean / image_std, as vLLM's
    mm_processor_kwargs)."""
    import torch
    from transformers import ColPaliProcessor

    from harness.matrix.images import image, is_image

    assert runner.req is not None
    model = runner.auto_model("ColPaliForRetrieval")
    proc = runner.loaded(
        "processor",
        lambda: ColPaliProcessor.from_pretrained(runner.req.model_dir, local_files_only=True),
    )
    truncate = options.get("truncate")
    text_kwargs = {"truncation": True, "max_length": truncate} if truncate else {}
    image_kwargs = dict(options.get("image_processor_kwargs") or {})

    def encode(item):
        with torch.inference_mode():
            if is_image(item):
                enc = proc.process_images(images=[image(item["image"])], **image_kwargs)
            else:
                enc = proc.process_queries(text=[item], **text_kwargs)
            enc = {k: v.to(runner.req.device) for k, v in enc.items() if k != "labels"}
            return model(**enc).embeddings[0].float()  # L2-normalised per token, padding zeroed

    return encode, proc


@recipe("colpali-token-embed")
def _colpali_tokens(runner: HFRunner, items: list, options: dict) -> list[np.ndarray]:
    """ColPali multi-vector embeddings of texts (queries) and images (pages)."""
    encode, _ = _colpali_encoder(runner, options)
    return [encode(it).cpu().numpy().astype(np.float32) for it in items]


@recipe("colpali-maxsim")
def _colpali_maxsim(runner: HFRunner, items: list, options: dict) -> list[np.ndarray]:
    """(query text, page image) -> ColPaliProcessor.score_retrieval: sum over query tokens of the
    best page-token dot product."""
    encode, proc = _colpali_encoder(runner, options)
    encode = _once_per_item(encode)
    return [
        np.asarray([float(proc.score_retrieval([encode(q)], [encode(d)])[0, 0])], dtype=np.float32)
        for q, d in items
    ]


# From jina-reranker-m0's own published code, not vLLM's: its modeling.py
# (https://huggingface.co/jinaai/jina-reranker-m0/blob/main/modeling.py; the hub is not reachable
# here, its text was read through the `search` tool's code index, a stored copy of that file):
# `LOGIT_BIAS = 2.65` and forward's `torch.sigmoid(pooled_logits - LOGIT_BIAS)`;
# `self.score_token_id = 100`, appended to every prompt by compute_score; and
# `formatting_prompts_func`: "**Document**:\n{doc}" + "\n" + "**Query**:\n{query}", an image
# document as "<|vision_start|><|image_pad|><|vision_end|>". The model card of
# jinaai/jina-reranker-m0-GGUF states the same prompt and `sigmoid(mlp(h_last) - logit_bias)`.
# Not followed: compute_score's separate query/document length limits (`truncate` cuts the prompt).
JINA_VL_LOGIT_MEAN = 2.65
JINA_VL_SCORE_TOKEN = 100
JINA_VL_IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"


@recipe("jina-vl-rerank")
def _jina_vl_rerank(runner: HFRunner, items: list, options: dict) -> list[np.ndarray]:
    """(query, document) -> sigmoid(score head(last token) - 2.65) over the prompt
    `**Document**:\n{document}\n**Query**:\n{query}` + token 100, where an image document is the
    vision placeholder, its image pad expanded to one token per merged patch (grid_t*h*w / merge^2).
    One pair per forward."""
    import torch
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from harness.matrix.images import image, is_image

    assert runner.req is not None
    model = _reference_model(runner)
    tok = runner.tokenizer()
    images = runner.loaded(
        "image_processor",
        lambda: Qwen2VLImageProcessorPil.from_pretrained(
            runner.req.model_dir, local_files_only=True
        ),
    )
    pad = model.config.image_token_id
    out = []
    with torch.inference_mode():
        for query, doc in items:
            kw = {}
            ids = tok(
                f"**Document**:\n{JINA_VL_IMAGE if is_image(doc) else doc}\n**Query**:\n{query}",
                truncation=bool(options.get("truncate")),
                max_length=options.get("truncate"),
            )["input_ids"]
            if is_image(doc):
                enc = images(images=[image(doc["image"])], return_tensors="pt")
                n = int(enc["image_grid_thw"][0].prod()) // images.merge_size**2
                i = ids.index(pad)
                ids = ids[:i] + [pad] * n + ids[i + 1 :]
                kw = {
                    "pixel_values": enc["pixel_values"].to(
                        runner.req.device, model.score[0].weight.dtype
                    ),
                    "image_grid_thw": enc["image_grid_thw"].to(runner.req.device),
                }
            input_ids = torch.tensor([ids + [JINA_VL_SCORE_TOKEN]], device=runner.req.device)
            logit = model(input_ids, **kw)[0, 0].float()
            out.append(
                np.asarray([float(torch.sigmoid(logit - JINA_VL_LOGIT_MEAN))], dtype=np.float32)
            )
    return out
