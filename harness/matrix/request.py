"""A case's request: every option that says how its items are sent, as one frozen object built
once from the case (`request_of`), carried to the worker as JSON and read there by every runner
(the reference recipes, vLLM offline, the server runners, the test double). Imported by worker
processes: no matrix schema, no yaml here."""

from __future__ import annotations

from dataclasses import dataclass
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
    # the tokenizer's special tokens ([CLS]/[SEP], BOS/EOS) added to each text or not (vLLM's
    # tokenization_kwargs offline, the request field of /v1/embeddings on a server; the reference
    # is the tokenizer called with add_special_tokens); None: added, everyone's default
    add_special_tokens: bool | None = None
    # ColBERT query / document markers and query [MASK] expansion (harness.matrix.colbert): the
    # reference builds the ids as the model's published code does, vLLM is sent them as token ids
    colbert: ColbertIds | None = None
    # embed / classify: each text sent as a chat conversation (ChatOptions; server runners only)
    chat: ChatOptions | None = None
    # one model serving several tasks at once: each item is also sent once per task named here,
    # in flight with the case's own requests (AsyncLLM and server runners; vLLM's offline LLM
    # serves one task per engine); only the case's own answers are compared, the others must
    # come back. vLLM's only: the reference never sees it
    also_in_flight: list[Literal["embed", "classify", "token_classify", "token_embed"]] | None = (
        None
    )
    # score: the score template vLLM is given (LLM.score's chat_template offline; a server's
    # --chat-template at start), by name: harness.matrix.score_templates. vLLM renders a pair
    # through a template only when given one (an LLM reranker's published prompt, e.g.
    # Qwen3-VL-Reranker's); the reference builds that prompt from the model's own code instead
    score_template: str | None = None
    # score, with a score_template: the template's variables for this request (vLLM's
    # `chat_template_kwargs`: the /score and /rerank request field; offline, LLM.score's
    # PoolingParams(extra_kwargs={"chat_template_kwargs": ...}), which vLLM 0.32's scoring
    # io_processor reads), e.g. Qwen3-VL-Reranker's `instruction`; the reference recipe builds
    # the published prompt with the same values
    score_template_kwargs: dict[str, str] | None = None

    @field_validator("score_template_kwargs")
    @classmethod
    def _template_kwargs(cls, v: dict[str, str] | None) -> dict[str, str] | None:
        reserved = {"chat_template", "tools", "tokenize"} & set(v or {})
        if v is not None and (not v or reserved):
            raise ValueError(
                "score_template_kwargs: name the template's variables (not empty; not "
                f"{', '.join(sorted(reserved)) or 'chat_template, tools or tokenize'}: vLLM "
                "passes those itself)"
            )
        return v

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
            if name in ("serve", "truncate", "also_in_flight") or value is None:
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


@dataclass(frozen=True)
class ToVllm:
    """How one request field reaches vLLM, read by every vLLM runner alike (harness.runners.vllm
    offline, harness.runners.serve_endpoints and serve_batched on a server) and by the repro
    export. `offline`: where LLM takes it (a PoolingParams field, a tokenization_kwargs key, a
    PoolingParams.extra_kwargs key), `key` its name there; None: the offline runner refuses it.
    `served`: the field of the server's request body; None: the server runners refuse it.
    `needs`: sent only when that other field is set too. `declared`: only the reference recipes
    that declare it (harness.runners.hf.recipe(honours=...)) may run a case that sets it.
    `tokenize`: it shapes the prompt's token ids, so the server runners send it to /tokenize too
    when they ask for the ids the server ran."""

    offline: Literal["pooling_params", "tokenization_kwargs", "extra_kwargs"] | None
    key: str
    served: str | None
    needs: str | None = None
    declared: bool = False
    tokenize: bool = False


# Every request field that travels to vLLM as a value, by name. Fields not named here travel as
# code of each runner, since they change what is sent rather than adding a value to it:
# `instruction` and `prompt_name` (a prefix; /v2/embed), `colbert` (token ids), `chat`
# (messages), `also_in_flight` (more requests), `score_template` (LLM.score's chat_template),
# `serve` (the server runners' own).
TO_VLLM: dict[str, ToVllm] = {
    # vLLM's truncate_prompt_tokens: N tokens, or -1 for max_model_len
    "truncate": ToVllm("tokenization_kwargs", "truncate_prompt_tokens", "truncate_prompt_tokens"),
    "truncation_side": ToVllm(
        "tokenization_kwargs", "truncation_side", "truncation_side", "truncate", declared=True
    ),
    # vLLM pads to max_model_len, after any truncation; the server runners do not send it
    "padding": ToVllm("tokenization_kwargs", "padding", None, declared=True),
    "dimensions": ToVllm("pooling_params", "dimensions", "dimensions"),
    "use_activation": ToVllm("pooling_params", "use_activation", "use_activation", declared=True),
    # vLLM 0.32's scoring io_processor reads them from PoolingParams.extra_kwargs
    # (entrypoints/pooling/scoring/io_processor.py, `_get_token_limits`)
    "max_tokens_per_query": ToVllm(
        "extra_kwargs", "max_tokens_per_query", "max_tokens_per_query", declared=True
    ),
    "max_tokens_per_doc": ToVllm(
        "extra_kwargs", "max_tokens_per_doc", "max_tokens_per_doc", declared=True
    ),
    "add_special_tokens": ToVllm(
        "tokenization_kwargs",
        "add_special_tokens",
        "add_special_tokens",
        declared=True,
        tokenize=True,
    ),
    # the score template's variables: read from PoolingParams.extra_kwargs offline and from the
    # /score and /rerank body on a server (entrypoints/pooling/scoring/io_processor.py)
    "score_template_kwargs": ToVllm(
        "extra_kwargs", "chat_template_kwargs", "chat_template_kwargs", declared=True
    ),
}
_SPECIAL = (
    "serve",
    "instruction",
    "prompt_name",
    "colbert",
    "chat",
    "also_in_flight",
    "score_template",
)
if set(TO_VLLM) | set(_SPECIAL) != set(RequestOptions.model_fields):
    raise TypeError(  # a new request field says how it reaches vLLM, or is a special case
        "harness.matrix.request.TO_VLLM: every request field but "
        f"{', '.join(_SPECIAL)} needs its row; missing: "
        f"{sorted(set(RequestOptions.model_fields) - set(TO_VLLM) - set(_SPECIAL))}"
    )

# Request fields only some reference recipes implement: each recipe declares the ones it honours
# (harness.runners.hf.recipe(honours=...)); one set on a recipe that does not is refused, when
# the matrix loads (harness.matrix.schema) and again in the worker, never silently ignored.
DECLARED_FIELDS = (
    *(name for name, to in TO_VLLM.items() if to.declared),
    "prompt_name",
    "instruction",
)


def _sent(request: RequestOptions) -> list[tuple[str, ToVllm, Any]]:
    """The TO_VLLM fields this request sets (and whose `needs` it sets), with their values."""
    out = []
    for name, to in TO_VLLM.items():
        value = getattr(request, name)
        if value is not None and (to.needs is None or getattr(request, to.needs) is not None):
            out.append((name, to, value))
    return out


def offline_kwargs(request: RequestOptions) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tokenization_kwargs, PoolingParams kwargs, with `extra_kwargs` inside when any) of the
    request for vLLM's offline LLM; a field the offline runner does not send is refused."""
    tok: dict[str, Any] = {}
    params: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    where = {"tokenization_kwargs": tok, "pooling_params": params, "extra_kwargs": extra}
    for name, to, value in _sent(request):
        if to.offline is None:
            raise ValueError(f"the offline vLLM runners do not send a request's {name}")
        where[to.offline][to.key] = value
    if extra:
        params["extra_kwargs"] = extra
    return tok, params


def served_fields(request: RequestOptions) -> dict[str, Any]:
    """The request body fields of the request's values on vLLM's server (every endpoint takes
    them beside its own); a field the server runners do not send is refused."""
    body: dict[str, Any] = {}
    for name, to, value in _sent(request):
        if to.served is None:
            raise ValueError(f"the vllm-serve runner does not implement a case's {name}")
        body[to.served] = value
    return body


def tokenize_fields(request: RequestOptions) -> dict[str, Any]:
    """The served fields that shape the token ids, for the server's /tokenize of the same text."""
    return {to.served: v for _, to, v in _sent(request) if to.tokenize and to.served}


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
