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


class Request(_Strict):
    """How a case's items are sent, for one runner. `hf` holds the reference recipe's own options
    (`hf:` in the matrix, e.g. normalize_embeddings); `serve` the server runners'; the others are
    read by every runner that honours them (the reference recipes declare which they do)."""

    reference: str | None = None  # the HF reference recipe the case names (None: the default)
    hf: dict[str, Any] = Field(default_factory=dict)
    serve: ServeOptions = Field(default_factory=ServeOptions)
    truncate: int | None = None  # tokens kept; -1 the model's maximum
    truncation_side: Literal["left", "right"] | None = None
    padding: Literal["max_length"] | None = None
    dimensions: int | None = None
    prompt_name: str | None = None
    instruction: str | None = None
    use_activation: bool | None = None
    chat: ChatOptions | None = None
    colbert: ColbertIds | None = None
    max_tokens_per_query: int | None = None
    max_tokens_per_doc: int | None = None
    # every item must be refused (the case's `expect: {refused: ...}`): each is sent alone
    expect_refusal: bool = False
    # what each item is sent as (harness.matrix.prompt_forms), one per item; None: all text
    prompt_forms: list[str] | None = None
    # run options of the invariance checks (harness.matrix.checks; applied by
    # harness.runners.options.run_with_options)
    shuffle_seed: int | None = None
    one_by_one: bool = False
    warm_prefix_cache: bool = False

    def text_caps(self) -> dict[str, int]:
        """max_tokens_per_query / max_tokens_per_doc, the ones set, by name: the /score and
        /rerank request fields; offline, vLLM 0.32 takes them as PoolingParams.extra_kwargs of
        the same names (entrypoints/pooling/scoring/io_processor.py, `_get_token_limits`)."""
        caps = {"max_tokens_per_query": self.max_tokens_per_query}
        caps["max_tokens_per_doc"] = self.max_tokens_per_doc
        return {k: int(v) for k, v in caps.items() if v}

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


# the case fields a request copies as they are (the rest: reference/hf, serve, expect, run
# options and prompt forms, built in request_of)
CASE_FIELDS = (
    "truncate",
    "truncation_side",
    "padding",
    "dimensions",
    "prompt_name",
    "instruction",
    "use_activation",
    "chat",
    "colbert",
    "max_tokens_per_query",
    "max_tokens_per_doc",
)


def request_of(case: Any, for_hf: bool, prompt_forms: list[str] | None = None) -> Request:
    """The request of `case` (harness.matrix.schema.Case) for one runner: Hugging Face (the
    reference) gets the recipe and its `hf` options (`hf: {use_activation}` as its
    use_activation), the vLLM runners the check's run options."""
    fields: dict[str, Any] = {k: getattr(case, k) for k in CASE_FIELDS}
    if for_hf:
        fields.update(reference=case.reference, hf=dict(case.hf))
        if case.use_activation is None:  # an engine-wide setting the reference is told to follow
            fields["use_activation"] = case.hf.get("use_activation")
    else:
        fields.update(case.run_options)
    return Request(
        **fields,
        serve=case.serve,
        expect_refusal=case.expect is not None and bool(case.expect.refused),
        prompt_forms=prompt_forms,
    )
