"""The reference: transformers / sentence-transformers, one recipe per task (and family quirk).

A recipe is how a family's output is computed in Hugging Face terms; it is the thing vLLM must
reproduce. This module is the runner, the recipe registry and the helpers recipes share; the
recipes live in the other modules of this package, one per family (sentence_transformers,
sequence, reward, colbert, clip, siglip, colpali, jina_vl, bge_m3, splade, yes_no_reranker,
qwen2_vl_embed, gme, flag_llm_reranker, masked_lm, chunked, fp32_head, gritlm), found by
`discover()` the first time the registry is read. Add a family by adding, at most, one module
here (docs/contributing/). A recipe module imports numpy at most at module level (torch and
transformers inside its functions): the parent process reads the registry to validate matrices.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from harness.matrix.evidence import RunEvidence
from harness.matrix.request import DECLARED_FIELDS, Request, unhonoured
from harness.plugins import Discovery
from harness.runners import LoadRequest, RunResult, freeze_what_is_alive

Recipe = Callable[["HFRunner", list, Request], list[np.ndarray]]
# The registry, filled by the recipe modules of this package as discovery imports them; read it
# through RECIPES, RECIPE_VERSIONS, RECIPE_HONOURS, DEFAULT_RECIPE, DEFAULT_RECIPE_BY_ARCH
# (module attributes that discover first) or resolve_recipe.
_RECIPES: dict[str, Recipe] = {}
_VERSIONS: dict[str, int] = {}
_BY_TASK: dict[str, str] = {}  # task -> its default recipe
_BY_ARCH: dict[tuple[str, str], str] = {}  # (config architecture, task) -> its default recipe
# what each recipe declares it honours: request fields of harness.matrix.request.DECLARED_FIELDS
_HONOURS: dict[str, frozenset[str]] = {}
LAZY = {
    "RECIPES": _RECIPES,
    "RECIPE_VERSIONS": _VERSIONS,
    "RECIPE_HONOURS": _HONOURS,
    "DEFAULT_RECIPE": _BY_TASK,
    "DEFAULT_RECIPE_BY_ARCH": _BY_ARCH,
}


def recipe(
    name: str,
    version: int = 1,
    default_for: Iterable[str | tuple[str, str]] = (),
    honours: Iterable[str] = (),
) -> Callable[[Recipe], Recipe]:
    """Register a reference recipe. Bump `version` whenever what it computes changes: goldens
    record it and are refused when it differs. `default_for` names what runs it when a case
    names no `reference`: a task ("embed": every model's default for the task) or an
    (architecture, task) pair (a model whose config.json names that architecture; it wins over
    the task's default). `honours`: the request fields of harness.matrix.request.DECLARED_FIELDS
    the recipe implements (e.g. truncation_side, use_activation: computed with its
    post-processing on and off); a case setting another one on it is refused when the matrix
    loads, never silently ignored."""

    def deco(fn: Recipe) -> Recipe:
        where = f"{fn.__module__}.{fn.__qualname__}"
        if name in _RECIPES and _RECIPES[name] is not fn:
            old = _RECIPES[name]
            raise ValueError(
                f"{where}: recipe {name!r} is already registered by "
                f"{old.__module__}.{old.__qualname__}; give one of them another name"
            )
        unknown = sorted(set(honours) - set(DECLARED_FIELDS))
        if unknown:
            raise ValueError(
                f"{where}: recipe {name!r} honours {unknown}: not request fields a recipe "
                f"declares; valid: {', '.join(DECLARED_FIELDS)}"
            )
        claims = [
            (_BY_TASK, key) if isinstance(key, str) else (_BY_ARCH, tuple(key))
            for key in default_for
        ]
        for table, key in claims:
            if table.get(key, name) != name:
                raise ValueError(
                    f"{where}: recipe {name!r} claims the default for {key!r}, which "
                    f"{table[key]!r} already is; a task or (architecture, task) has one default"
                )
        for table, key in claims:
            table[key] = name
        _RECIPES[name] = fn
        _VERSIONS[name] = version
        _HONOURS[name] = frozenset(honours)
        return fn

    return deco


discover = Discovery(__name__)


def __getattr__(name: str) -> Any:
    if name in LAZY:
        discover()
        return LAZY[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def resolve_recipe(task: str, architecture: str, reference: str | None) -> str | None:
    """The recipe a case runs: the one it names, else the default for its architecture and task."""
    discover()
    return reference or _BY_ARCH.get((architecture, task)) or _BY_TASK.get(task)


def torch_dtype(dtype: str):
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
        self.sent: list[
            dict
        ] = []  # per item, for prompt forms: what the model ran on (form_inputs)
        self.adapter_applied = False  # a case's LoRA adapter was put on a model (auto_model)

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
        versions = {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "sentence-transformers": sentence_transformers.__version__,
        }
        if req.lora_dir:  # the reference of a LoRA case is peft
            import peft

            versions["peft"] = peft.__version__
        return {
            "actual_runner": "hf",
            "device": req.device,
            "versions": versions,
            **({"lora_adapter": req.lora_dir} if req.lora_dir else {}),
        }

    def sentence_transformer(self):
        if self._st is None:
            from sentence_transformers import SentenceTransformer

            assert self.req is not None
            self._st = SentenceTransformer(
                self.req.model_dir,
                device=self.req.device,
                trust_remote_code=self.req.trust_remote_code,
                model_kwargs={"dtype": torch_dtype(self.req.dtype)},
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
            model = (
                cls.from_pretrained(
                    self.req.model_dir,
                    dtype=torch_dtype(self.req.dtype),
                    local_files_only=True,
                    trust_remote_code=self.req.trust_remote_code,
                )
                .to(self.req.device)
                .eval()
            )
            if self.req.lora_dir:  # peft runs the adapter on the base: the LoRA reference
                from peft import PeftModel

                model = PeftModel.from_pretrained(model, self.req.lora_dir).eval()
                self.adapter_applied = True
            return model

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

    def model_max_length(self) -> int:
        """The tokenizer's `model_max_length`: where transformers truncates with
        `truncation=True` and no `max_length` (what `truncate: -1` means for the reference)."""
        n = self.tokenizer().model_max_length
        if not isinstance(n, int) or n <= 0 or n >= 10**9:  # transformers' "unset" is 1e30
            raise ValueError(
                f"truncate -1: the tokenizer of {self.req.model_dir if self.req else '?'} "
                f"declares no model_max_length ({n!r}); give truncate a number of tokens"
            )
        return n

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

    def run(self, task: str, items: list, request: Request) -> RunResult:
        """The recipe's outputs, and per item the token ids it ran and what it was sent."""
        discover()  # a named recipe is looked up too, in a worker that has not read the registry
        name = request.reference or resolve_recipe(task, self.architecture(), None)
        if name not in _RECIPES:
            raise ValueError(
                f"no HF reference recipe {name!r} for task {task!r}; known: {sorted(_RECIPES)}"
            )
        self.tokens, self.sent = [], []
        refused = unhonoured(request, name, _HONOURS)  # the matrix loader refuses it first
        if refused:
            raise ValueError(refused)
        if request.chat is not None:
            items = self.render_chat(items, request.chat.model_dump())
        if request.truncate == -1:  # as tokenizer(truncation=True) without max_length
            request = request.model_copy(update={"truncate": self.model_max_length()})
        outs = _RECIPES[name](self, items, request)
        if self.req is not None and self.req.lora_dir and not self.adapter_applied:
            raise ValueError(
                f"reference recipe {name!r} does not run the case's LoRA adapter (only models "
                f"loaded through HFRunner.auto_model get it, e.g. hf-sequence-classification)"
            )
        if request.prompt_forms and len(self.sent) != len(outs):
            raise ValueError(
                f"recipe {name!r} does not run prompt forms (token ids, inputs_embeds); "
                f"the case's prompt_form needs one that does (st-embed, "
                f"hf-sequence-classification)"
            )
        recorded = len(self.tokens) == len(outs)
        records = [
            {
                "prompt_token_ids": self.tokens[i] if recorded else None,
                **(self.sent[i] if self.sent else {}),
            }
            for i in range(len(outs))
        ]
        return RunResult(outs, RunEvidence(records=records))

    def render_chat(self, items: list, chat: dict[str, Any]) -> list[str]:
        """Each text as the case's conversation rendered by transformers'
        `tokenizer.apply_chat_template` (the model's own template, the case's options). The recipe
        then tokenizes the rendered text; that must give the ids apply_chat_template(tokenize=True)
        gives (no special tokens added on top of the template's), or, with the case's
        add_special_tokens, the tokenizer's ids of the rendered text with its special tokens,
        else this refuses."""
        from harness.matrix.chat import conversation, template_options

        tok = self.tokenizer()
        if not getattr(tok, "chat_template", None):
            raise ValueError("chat: the model's tokenizer has no chat_template")
        kw = {**template_options(chat), **chat.get("chat_template_kwargs", {})}
        out = []
        for text in items:
            conv = conversation(str(text), chat)
            rendered = tok.apply_chat_template(conv, tokenize=False, **kw)
            if chat.get("add_special_tokens"):
                want = tok(rendered, add_special_tokens=True)["input_ids"]
            else:
                want = tok.apply_chat_template(conv, tokenize=True, return_dict=True, **kw)
                want = want["input_ids"]
            if list(tok(rendered)["input_ids"]) != list(want):
                raise ValueError(
                    "chat: the tokenizer's special tokens on the rendered conversation are not "
                    "the case's add_special_tokens; the recipe would not run the ids asked for"
                )
            out.append(rendered)
        return out

    def unload(self) -> None:
        self._st = None
        self._loaded.clear()
        self.adapter_applied = False
        self.req = None
        gc.collect()


@contextmanager
def limit(model: Any, attr: str, truncate: int | None) -> Iterator[None]:
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


def per_item(
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


def form_inputs(runner: HFRunner, model, items: list, forms: list[str]) -> Iterator[dict]:
    """Per item, the model inputs of its prompt form (harness.matrix.prompt_forms), batch of one:
    a text tokenized as the recipe would (`input_ids`), token ids as they are, or the model's
    input embeddings of those ids (`inputs_embeds`, E from harness.runners.prompt_forms, with the
    attention mask). Notes the ids and, for E, its digest, so the verdict holds the runner to the
    same ids and the same E."""
    import torch

    from harness.runners.prompt_forms import digest, input_embeddings, token_ids

    assert runner.req is not None
    if len(forms) != len(items):
        raise ValueError(f"{len(forms)} prompt forms for {len(items)} items")
    tok = runner.tokenizer()
    for text, form in zip(items, forms):
        ids = token_ids(tok, text)
        runner.note_tokens(ids)
        mask = torch.ones((1, len(ids)), dtype=torch.long, device=runner.req.device)
        if form == "embeds":
            embeds = input_embeddings(model, ids)
            sha = digest(embeds)  # transformers is this side's engine: it runs E as given
            runner.sent.append(
                {"engine_input": "embeds", "embeds_sha256": sha, "engine_embeds_sha256": sha}
            )
            yield {"inputs_embeds": embeds[None], "attention_mask": mask}
        elif form in ("text", "token_ids"):
            runner.sent.append({"engine_input": form})  # input_ids either way
            yield {
                "input_ids": torch.tensor([ids], device=runner.req.device),
                "attention_mask": mask,
            }
        else:
            raise ValueError(f"unknown prompt form {form!r} for item {str(text)[:60]!r}")


def reference_model(runner: HFRunner):
    """A harness.models.refmodels architecture (transformers lacks it), loaded from the
    checkpoint."""
    from harness.models.refmodels import load_reference

    assert runner.req is not None
    return runner.loaded(
        "reference",
        lambda: load_reference(
            runner.req.model_dir,
            runner.architecture(),
            torch_dtype(runner.req.dtype),
            runner.req.device,
        ),
    )


def once_per_item(encode: Callable[[Any], Any]) -> Callable[[Any], Any]:
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
