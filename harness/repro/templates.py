"""The code a reproduction script is made of: one reference template per recipe kind (the
harness's recipe of harness/runners/hf/, written out as plain transformers / sentence-transformers
code) and one vLLM template per task. Each template is source text that defines `reference(items)`
or `vllm_outputs(items)` over the script's globals (MODEL, DEVICE, DTYPE, OPTIONS, ENGINE,
TRUST_REMOTE_CODE); `OPTIONS` holds only the options a template declares it implements, so a
case whose recipe needs more is refused at export, never reproduced without it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Template:
    code: str
    options: frozenset[str]  # the case options this template implements
    needs: str  # the packages the code imports, for the folder's README


ST_EMBED = Template(
    '''
def reference(items):
    """sentence-transformers encode: the model's own modules (pooling, Dense, Normalize) and
    config_sentence_transformers.json (prompts, default_prompt_name) decide the vector."""
    import torch
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(
        MODEL,
        device=DEVICE,
        trust_remote_code=TRUST_REMOTE_CODE,
        model_kwargs={"dtype": getattr(torch, DTYPE)},
        local_files_only=True,
    )
    if OPTIONS.get("truncate"):
        st.max_seq_length = int(OPTIONS["truncate"])
    out = st.encode(
        list(items),
        batch_size=len(items),
        convert_to_numpy=True,
        show_progress_bar=False,
        truncate_dim=OPTIONS.get("dimensions"),
        normalize_embeddings=bool(OPTIONS.get("normalize_embeddings")),
        prompt_name=OPTIONS.get("prompt_name"),
    )
    return [np.asarray(v, dtype=np.float32) for v in out]
''',
    frozenset({"truncate", "dimensions", "normalize_embeddings", "prompt_name"}),
    "sentence-transformers",
)

ST_CROSS_ENCODER = Template(
    '''
def reference(items):
    """sentence-transformers CrossEncoder.predict on (query, document) pairs (sigmoid for one
    label)."""
    import torch
    from sentence_transformers import CrossEncoder

    ce = CrossEncoder(
        MODEL,
        device=DEVICE,
        local_files_only=True,
        trust_remote_code=TRUST_REMOTE_CODE,
        model_kwargs={"dtype": getattr(torch, DTYPE)},
    )
    if OPTIONS.get("truncate"):
        ce.max_length = int(OPTIONS["truncate"])
    scores = ce.predict(
        [tuple(p) for p in items],
        batch_size=len(items),
        show_progress_bar=False,
        convert_to_numpy=True,
    )
    return [np.asarray(s, dtype=np.float32).reshape(-1) for s in scores]
''',
    frozenset({"truncate"}),
    "sentence-transformers",
)

_PER_ITEM = '''
def per_item(items, forward):
    """One unpadded forward per item (batch of one): no padding convention reaches the output."""
    import torch
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(MODEL, trust_remote_code=TRUST_REMOTE_CODE)
    outs = []
    with torch.inference_mode():
        for it in items:
            enc = tok(
                *(it if isinstance(it, (list, tuple)) else (it,)),
                return_tensors="pt",
                truncation=True,
                max_length=OPTIONS.get("truncate"),
            )
            enc = {k: v.to(DEVICE) for k, v in enc.items()}
            outs.append(forward(enc).float().cpu().numpy().astype(np.float32))
    return outs


def auto_model(cls_name):
    import torch
    import transformers

    cls = getattr(transformers, cls_name)
    model = cls.from_pretrained(
        MODEL, dtype=getattr(torch, DTYPE), trust_remote_code=TRUST_REMOTE_CODE
    )
    return model.to(DEVICE).eval()
'''

HF_SEQUENCE_CLASSIFICATION = Template(
    _PER_ITEM
    + '''

def reference(items):
    """transformers AutoModelForSequenceClassification: logits -> sigmoid (one label) or softmax
    (more), as vLLM's classify and score apply by default."""
    import torch

    model = auto_model("AutoModelForSequenceClassification")
    n = model.config.num_labels

    def forward(enc):
        logits = model(**enc).logits[0]
        return torch.sigmoid(logits) if n == 1 else torch.softmax(logits, dim=-1)

    return per_item(items, forward)
''',
    frozenset({"truncate"}),
    "transformers",
)

SPLADE_MAX = Template(
    _PER_ITEM
    + '''

def reference(items):
    """SPLADE (github.com/naver/splade): AutoModelForMaskedLM logits of every token,
    log(1 + relu(logit)), max over the tokens: one [vocab] vector per text."""
    import torch

    model = auto_model("AutoModelForMaskedLM")
    return per_item(
        items, lambda enc: torch.log1p(torch.relu(model(**enc).logits[0])).max(dim=0).values
    )
''',
    frozenset({"truncate"}),
    "transformers",
)

ST_EMBED_CHUNKED = Template(
    '''
def reference(items):
    """vLLM's documented chunked processing (pooler_config enable_chunked_processing,
    max_embed_len): the prompt's token ids cut into runs of max_model_len (`chunk_tokens`), each
    run through the model's own sentence-transformers modules, the chunk vectors averaged
    weighted by their token counts, L2-normalised again when the model ends with Normalize."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize

    st = SentenceTransformer(
        MODEL,
        device=DEVICE,
        trust_remote_code=TRUST_REMOTE_CODE,
        model_kwargs={"dtype": getattr(torch, DTYPE)},
        local_files_only=True,
    )
    size, tok = int(OPTIONS["chunk_tokens"]), st.tokenizer
    normalize = any(isinstance(m, Normalize) for m in st)

    def embed(chunk):
        t = torch.tensor([chunk], dtype=torch.long, device=DEVICE)
        features = {"input_ids": t, "attention_mask": torch.ones_like(t)}
        if "token_type_ids" in tok.model_input_names:
            features["token_type_ids"] = torch.zeros_like(t)
        return st.forward(features)["sentence_embedding"][0].to(torch.float32)

    outs = []
    with torch.inference_mode():
        for text in items:
            ids = tok(text, truncation=False)["input_ids"]
            parts = [ids[i : i + size] for i in range(0, len(ids), size)]
            vecs = torch.stack([embed(p) for p in parts])
            weights = torch.tensor([len(p) for p in parts], dtype=torch.float32)
            avg = (vecs * weights[:, None]).sum(dim=0) / weights.sum()
            avg = torch.nn.functional.normalize(avg, dim=-1) if normalize else avg
            outs.append(avg.cpu().numpy().astype(np.float32))
    return outs
''',
    frozenset({"chunk_tokens"}),
    "sentence-transformers",
)

COLBERT_TOKEN_EMBED = Template(
    '''
def reference(items):
    """ColBERT token embeddings of a backbone + sentence-transformers Dense (1_Dense): the
    backbone's last hidden state of every token (special tokens included), the projection,
    L2 normalisation per token."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(MODEL, trust_remote_code=TRUST_REMOTE_CODE)
    backbone = AutoModel.from_pretrained(
        MODEL, dtype=getattr(torch, DTYPE), trust_remote_code=TRUST_REMOTE_CODE
    ).to(DEVICE).eval()
    weight = load_file(str(Path(MODEL) / "1_Dense" / "model.safetensors"))["linear.weight"]
    outs = []
    with torch.inference_mode():
        for text in items:
            enc = tok(text, return_tensors="pt", truncation=True,
                      max_length=OPTIONS.get("truncate"))
            enc = {k: v.to(DEVICE) for k, v in enc.items()}
            hidden = backbone(**enc, use_cache=False).last_hidden_state[0]
            projected = hidden @ weight.to(hidden.device, hidden.dtype).T
            vecs = torch.nn.functional.normalize(projected, dim=-1)
            outs.append(vecs.float().cpu().numpy().astype(np.float32))
    return outs
''',
    frozenset({"truncate"}),
    "transformers",
)

COLQWEN3_TOKEN_EMBED = Template(
    '''
def reference(items):
    """ColQwen3 multi-vector embeddings by the model's own published code, colpali-engine's
    ColQwen3 and ColQwen3Processor: a query (the text as process_queries leaves it) through
    process_texts, a page image through process_images; one item per forward."""
    import torch
    from colpali_engine.models import ColQwen3, ColQwen3Processor

    model, info = ColQwen3.from_pretrained(
        MODEL, dtype=getattr(torch, DTYPE), output_loading_info=True
    )
    missing = set(info.get("missing_keys") or ())
    if missing - {"custom_text_proj.bias"}:
        raise ValueError(f"checkpoint does not match colpali-engine's ColQwen3: {missing}")
    if missing:  # a bias-free projection: zero, not transformers' initialisation
        with torch.no_grad():
            model.custom_text_proj.bias.zero_()
    model = model.to(DEVICE).eval()
    proc = ColQwen3Processor.from_pretrained(MODEL)
    outs = []
    for item in items:
        if isinstance(item, dict):  # a page: its prompt is the processor's visual prefix
            assert item.get("text") == proc.visual_prompt_prefix, item.get("text")
            enc = proc.process_images(images=[item["image"]])
            enc["pixel_values"] = enc["pixel_values"].to(model.dtype)
        else:
            enc = proc.process_texts(texts=[item])
        with torch.inference_mode():
            out = model(**{k: v.to(DEVICE) for k, v in enc.items()})
        outs.append(out[0].float().cpu().numpy().astype(np.float32))
    return outs
''',
    frozenset(),
    "transformers and colpali-engine (the model's own code)",
)

# by the harness's recipe name (harness/runners/hf)
REFERENCES: dict[str, Template] = {
    "st-embed": ST_EMBED,
    "st-embed-chunked": ST_EMBED_CHUNKED,
    "st-cross-encoder": ST_CROSS_ENCODER,
    "hf-sequence-classification": HF_SEQUENCE_CLASSIFICATION,
    "splade-max": SPLADE_MAX,
    "colbert-token-embed": COLBERT_TOKEN_EMBED,
    "colqwen3-token-embed": COLQWEN3_TOKEN_EMBED,
}

_LLM = '''
def engine():
    from vllm import LLM

    return LLM(
        model=MODEL,
        runner="pooling",
        dtype=DTYPE,
        trust_remote_code=TRUST_REMOTE_CODE,
        **ENGINE,
    )


def request_kwargs():
    """What every request is sent with: truncation and the pooling parameters of the case."""
    kw = {"use_tqdm": False}
    if OPTIONS.get("truncate"):
        kw["tokenization_kwargs"] = {"truncate_prompt_tokens": int(OPTIONS["truncate"])}
    if OPTIONS.get("dimensions"):
        from vllm import PoolingParams

        kw["pooling_params"] = PoolingParams(dimensions=int(OPTIONS["dimensions"]))
    return kw
'''

_PROMPTED = '''

def prompted(items):
    """LLM.embed takes no prompt name: the model card's prompt is prepended, as users do."""
    name = OPTIONS.get("prompt_name")
    if not name:
        return list(items)
    path = Path(MODEL) / "config_sentence_transformers.json"
    prompt = json.loads(path.read_text())["prompts"][name]
    return [prompt + it for it in items]
'''

VLLM_EMBED = Template(
    _LLM
    + _PROMPTED
    + """

def vllm_outputs(items):
    llm = engine()
    outs = llm.embed(prompted(items), **request_kwargs())
    return [np.asarray(o.outputs.embedding, dtype=np.float32) for o in outs]
""",
    frozenset({"truncate", "dimensions", "prompt_name"}),
    "vllm",
)

VLLM_CLASSIFY = Template(
    _LLM
    + """

def vllm_outputs(items):
    llm = engine()
    outs = llm.classify(list(items), **request_kwargs())
    return [np.asarray(o.outputs.probs, dtype=np.float32) for o in outs]
""",
    frozenset({"truncate"}),
    "vllm",
)

VLLM_SCORE = Template(
    _LLM
    + """

def vllm_outputs(items):
    llm = engine()
    outs = llm.score([q for q, _ in items], [d for _, d in items], **request_kwargs())
    return [np.asarray([o.outputs.score], dtype=np.float32) for o in outs]
""",
    frozenset({"truncate"}),
    "vllm",
)

VLLM_TOKEN_EMBED = Template(
    _LLM
    + """

def vllm_prompt(item):
    # a text as is; a page as vLLM's multimodal prompt (its text holds the image placeholder)
    if isinstance(item, dict):
        return {"prompt": item.get("text", ""), "multi_modal_data": {"image": item["image"]}}
    return item


def vllm_outputs(items):
    llm = engine()
    prompts = [vllm_prompt(it) for it in items]
    outs = llm.encode(prompts, pooling_task="token_embed", **request_kwargs())
    return [np.asarray(o.outputs.data.float(), dtype=np.float32) for o in outs]
""",
    frozenset({"truncate"}),
    "vllm",
)

# by task
VLLM: dict[str, Template] = {
    "embed": VLLM_EMBED,
    "classify": VLLM_CLASSIFY,
    "score": VLLM_SCORE,
    "token_embed": VLLM_TOKEN_EMBED,
}
