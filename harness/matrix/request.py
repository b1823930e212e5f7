"""A case's request: every option that says how its items are sent, as one frozen object built
once from the case (`request_of`), carried to the worker as JSON and read there by every runner
(the reference recipes, vLLM offline, the server runners, the test double). Imported by worker
processes: no matrix schema, no yaml here."""

from __future__ import annotations

from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harness.matrix.colbert import ColbertIds


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ChatOptions(_Strict):
    """`chat:` each text item sent as a chat conversation rendered by the model's chat template
    (harness.matrix.chat.conversation: an optional system message, then the text as the user's).
    The reference renders it with transformers' `tokenizer.apply_chat_template` and these options;
    vLLM is sent `messages` with the same options (the server's /v1/embeddings and /classify; its
    offline LLM.embed/classify take no messages in 0.32)."""

    system: str | None = None  # a system message before the user's text
    add_generation_prompt: bool = False  # the template's assistant header after the messages
    # the final message left open (the template's end-of-turn after it cut off)
    continue_final_message: bool = False
    # extra variables of the template (e.g. {enable_thinking: false})
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    # the tokenizer's own special tokens (e.g. an appended EOS) added on top of the rendered
    # conversation's: vLLM's request field, transformers' tokenizer(add_special_tokens=...)
    add_special_tokens: bool = False

    @model_validator(mode="after")
    def _one_ending(self) -> "ChatOptions":
        if self.add_generation_prompt and self.continue_final_message:
            raise ValueError(
                "chat: add_generation_prompt and continue_final_message cannot both be true"
            )
        return self


class ServeOptions(_Strict):
    """How the server runners (`vllm-serve-*`) send a case's requests."""

    # /v1/embeddings answers: JSON floats, base64 of the values, or the values as the response
    # body (`bytes`: with a `metadata` header saying dtype, order, span and shape; `bytes_only`:
    # without); the binary ones in `embed_dtype` and `endianness`, which the request names
    encoding_format: Literal["float", "base64", "bytes", "bytes_only"] = "float"
    embed_dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    endianness: Literal["little", "big"] = "little"
    # score cases: `score` sends each pair to /score; `rerank` sends each query with its documents
    # to /rerank (the ranking, the returned indices and, with top_n, the truncation are checked);
    # embed and classify cases: `pooling` sends each item to /pooling with the case's task
    # instead of /v1/embeddings or /classify
    api: Literal["default", "rerank", "pooling"] = "default"
    top_n: int | None = Field(default=None, gt=0)  # rerank: also ask for only the top n documents
    max_in_flight: int = Field(default=16, gt=0)  # concurrent requests: the server batches them
    # how many items each request carries (1: every item its own request; `all`: one request):
    # embed and classify as a list `input`, score as /score's text_1 and text_2 lists (N:N);
    # `query` (score): each query with all its documents, text_1 one text (1:N). The answer's
    # `data` is matched to the items by index
    items_per_request: int | Literal["all", "query"] = 1
    request_timeout: float = Field(default=120.0, gt=0)

    @model_validator(mode="after")
    def _binary_options_need_a_binary_format(self) -> "ServeOptions":
        if self.encoding_format == "float" and (
            self.embed_dtype != "float32" or self.endianness != "little"
        ):
            raise ValueError(
                "serve.embed_dtype and serve.endianness apply to a binary encoding_format "
                "(base64, bytes, bytes_only), not float"
            )
        return self

    @field_validator("items_per_request")
    @classmethod
    def _positive(cls, v):
        if isinstance(v, int) and v < 1:
            raise ValueError(f"items_per_request must be at least 1 or 'all', got {v}")
        return v


class RequestOptions(_Strict):
    """A case's `request:` in a matrix: how its items are sent, to the reference and to vLLM
    alike. Which tasks and runners each applies to is checked by the case
    (harness.matrix.schema.Case); which reference recipes honour the DECLARED_FIELDS, by the
    recipes' own declarations."""

    serve: ServeOptions = Field(default_factory=ServeOptions)  # the server runners' own
    # embed: a GritLM-style instruction prefix ("<|user|>\n...\n<|embed|>\n"). vLLM is sent the
    # instruction + text (its pooler finds the instruction in the token ids); the reference is
    # given the two apart and must implement it (gritlm-embed: GritLM.encode(instruction=...))
    instruction: str | None = None
    # truncate every input to this many tokens, in the reference and in the runners alike (vLLM's
    # truncate_prompt_tokens); -1: to the model's maximum (vLLM: max_model_len; the reference:
    # the tokenizer's model_max_length)
    truncate: int | None = None
    # which side `truncate` cuts, asked per request (vLLM's truncation_side): `left` keeps the
    # last `truncate` tokens of the whole encoded prompt (a pair's included), special tokens too
    truncation_side: Literal["left", "right"] | None = None
    # `max_length`: texts padded to the model's maximum length, as models trained on padded texts
    # are used (SigLIP); vLLM is asked for it per request (tokenization_kwargs padding), the
    # reference recipe must be one that pads (e.g. siglip-embed, per its model card)
    padding: Literal["max_length"] | None = None
    # score: limit the query (first text) and the document (second text) each to this many of
    # its own tokens before they are paired (the /score and /rerank request fields of these
    # names; offline, LLM.score's PoolingParams(extra_kwargs={...}) of the same names, which
    # vLLM 0.32's scoring io_processor reads); the reference cuts the HF tokenizer's ids of each
    # text alike (st-cross-encoder)
    max_tokens_per_query: int | None = Field(default=None, gt=0)
    max_tokens_per_doc: int | None = Field(default=None, gt=0)
    # embed: keep this many leading dimensions (Matryoshka): the reference is sentence-transformers'
    # encode(truncate_dim) (no re-normalising unless `hf: {normalize_embeddings: true}`); vLLM is
    # asked for `dimensions`
    dimensions: int | None = Field(default=None, gt=0)
    # embed: a sentence-transformers prompt by name (the model's config_sentence_transformers.json
    # `prompts`): the reference is encode(prompt_name=...); vLLM's offline runners are sent the
    # prompt + text (LLM.embed takes no prompt name in 0.32); its server runners ask /v2/embed
    # with input_type=<name>, which vLLM resolves from that file itself
    prompt_name: str | None = None
    # vLLM's per-request `use_activation` (PoolingParams offline; the request field of
    # /v1/embeddings, /classify and /pooling on a server) on or off: embed and token_embed, the L2
    # normalisation; classify and token_classify, the softmax / sigmoid; reward, the sigmoid
    # (off by default). The reference computes the same post-processing (raw logits when off,
    # the vector without its Normalize module when off). Engine-wide, the same setting is
    # `engine: {pooler_config: {use_activation: ...}}`, which the reference does not follow by
    # itself (an engine setting alone is how tests/integration/data/faults.yaml injects a fault):
    # a case that means it says so with `hf: {use_activation: ...}`
    use_activation: bool | None = None
    # ColBERT query / document markers and query [MASK] expansion (harness.matrix.colbert): the
    # reference builds the ids as the model's published code does, vLLM is sent them as token ids
    colbert: ColbertIds | None = None
    # embed / classify: each text sent as a chat conversation (ChatOptions; server runners only)
    chat: ChatOptions | None = None
    # score, vLLM's offline runners only: the score template vLLM is given (LLM.score's
    # chat_template), by name: harness.matrix.score_templates. vLLM renders a pair through a
    # template only when given one (an LLM reranker's published prompt, e.g.
    # Qwen3-VL-Reranker's); the reference builds that prompt from the model's own code instead
    score_template: str | None = None

    @field_validator("score_template")
    @classmethod
    def _known_template(cls, v: str | None) -> str | None:
        from harness.matrix.score_templates import SCORE_TEMPLATES

        if v is not None and v not in SCORE_TEMPLATES:
            raise ValueError(f"unknown score_template {v!r}; valid: {', '.join(SCORE_TEMPLATES)}")
        return v

    @field_validator("truncate")
    @classmethod
    def _truncate_value(cls, v: int | None) -> int | None:
        if v is not None and v != -1 and v < 2:
            raise ValueError(
                f"truncate {v}: valid: a number of tokens >= 2, or -1 (the model's maximum)"
            )
        return v

    def text_caps(self) -> dict[str, int]:
        """max_tokens_per_query / max_tokens_per_doc, the ones set, by name: the /score and
        /rerank request fields; offline, vLLM 0.32 takes them as PoolingParams.extra_kwargs of
        the same names (entrypoints/pooling/scoring/io_processor.py, `_get_token_limits`)."""
        caps = {"max_tokens_per_query": self.max_tokens_per_query}
        caps["max_tokens_per_doc"] = self.max_tokens_per_doc
        return {k: int(v) for k, v in caps.items() if v}

    def reference_key(self) -> dict[str, Any]:
        """What of the request shapes the reference's answers, as a golden records it (harness.
        judge.golden): `truncate` always, every other field only when set, so the keys recorded
        before a field existed stay valid; the server's `serve` options never (vLLM's only)."""
        key: dict[str, Any] = {"truncate": self.truncate}
        for name, value in self:
            if name in ("serve", "truncate") or value is None:
                continue
            if name == "dimensions":  # the cut follows sentence-transformers' truncate_dim
                key.update(dimensions=value, truncate_dim="sentence-transformers")
            elif name == "chat":  # add_special_tokens only when asked, as recorded before it
                key["chat"] = value.model_dump(
                    exclude=set() if value.add_special_tokens else {"add_special_tokens"}
                )
            else:
                key[name] = value.model_dump() if isinstance(value, BaseModel) else value
        return key


class Request(RequestOptions):
    """How a case's items are sent, for one runner: its `request:` options, plus `hf` (the
    reference recipe's own options, `hf:` in the matrix, e.g. normalize_embeddings), the recipe
    named, and what the harness adds (refusal, prompt forms, a check's run options)."""

    reference: str | None = None  # the HF reference recipe the case names (None: the default)
    hf: dict[str, Any] = Field(default_factory=dict)
    # every item must be refused (the case's `expect: {refused: ...}`): each is sent alone
    expect_refusal: bool = False
    # what each item is sent as (harness.matrix.prompt_forms), one per item; None: all text
    prompt_forms: list[str] | None = None
    # run options of the invariance checks (harness.matrix.checks; applied by
    # harness.runners.options.run_with_options)
    shuffle_seed: int | None = None
    one_by_one: bool = False
    warm_prefix_cache: bool = False

    def wire(self) -> dict[str, Any]:
        """The request as JSON-able data, for the worker's `run` message (Request(**wire) back)."""
        return self.model_dump(mode="json", exclude_defaults=True)


# Request fields only some reference recipes implement: each recipe declares the ones it honours
# (harness.runners.hf.recipe(honours=...)); one set on a recipe that does not is refused, when
# the matrix loads (harness.matrix.schema) and again in the worker, never silently ignored.
DECLARED_FIELDS = (
    "truncation_side",
    "padding",
    "prompt_name",
    "instruction",
    "use_activation",
    "max_tokens_per_query",
    "max_tokens_per_doc",
)


def unhonoured(request: Request, recipe: str, honours: Mapping[str, frozenset[str]]) -> str | None:
    """Why reference recipe `recipe` cannot run `request` (None: it can): the declared fields the
    request sets that the recipe does not honour, and the recipes that do honour them."""
    own = honours.get(recipe, frozenset())
    refused = [f for f in DECLARED_FIELDS if getattr(request, f) is not None and f not in own]
    if not refused:
        return None
    able = sorted(r for r, fields in honours.items() if set(refused) <= fields)
    return (
        f"reference recipe {recipe!r} does not implement {', '.join(refused)}; recipes that "
        f"do: {', '.join(able) or 'none'}"
    )


def request_of(case: Any, for_hf: bool, prompt_forms: list[str] | None = None) -> Request:
    """The request of `case` (harness.matrix.schema.Case) for one runner: Hugging Face (the
    reference) gets the recipe and its `hf` options (`hf: {use_activation}` as its
    use_activation), the vLLM runners the check's run options."""
    fields: dict[str, Any] = dict(case.request)
    if for_hf:
        fields.update(reference=case.reference, hf=dict(case.hf))
        if case.request.use_activation is None:  # an engine-wide one the reference follows
            fields["use_activation"] = case.hf.get("use_activation")
    else:
        fields.update(case.run_options)
    return Request(
        **fields,
        expect_refusal=case.expect is not None and bool(case.expect.refused),
        prompt_forms=prompt_forms,
    )
