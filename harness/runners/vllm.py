"""vLLM offline `LLM` in pooling mode. Which model runner (V1/V2) is chosen by the environment
the worker was started with (harness.runners.platform); which one really ran is read from the
engine."""

from __future__ import annotations

import enum
import gc
import itertools
import os
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

from harness.engine.target import vllm_version
from harness.matrix.evidence import RequestsEvidence, RunEvidence
from harness.matrix.request import Request, offline_kwargs
from harness.matrix.score_templates import SCORE_TEMPLATES
from harness.runners import LoadRequest, RunResult, freeze_what_is_alive
from harness.runners.prompt_forms import (
    digest,
    form_of,
    input_embeddings,
    paired,
    st_prompt,
    token_ids,
)


def _runner_of_worker(worker) -> list[str]:
    """Run inside vLLM's worker (collective_rpc): the module of each class of its model runner."""
    mr = getattr(worker, "model_runner", None) or worker.worker.model_runner
    cls = type(mr)
    return [f"{cls.__module__}.{cls.__qualname__}", *{c.__module__ for c in cls.__mro__}]


def _runner_from_modules(cls: str, mods: set[str]) -> str:
    if "vllm.v1.worker.gpu.model_runner" in mods:
        return "v2"
    if "vllm.v1.worker.gpu_model_runner" in mods:
        return "v1"
    return "unknown"


def _actual_runner(llm) -> tuple[str, str]:
    """('v1'|'v2'|'unknown', evidence), read from the engine's model runner class: in this
    process when the engine core lives here, else asked of vLLM's workers (collective_rpc, as
    on GPU where the engine core has its own process). Never the config flag: a runner not read
    from the engine is 'unknown', and the verdict says so."""
    try:
        core = llm.llm_engine.engine_core.engine_core
        mr = core.model_executor.driver_worker.worker.model_runner
        cls = f"{type(mr).__module__}.{type(mr).__qualname__}"
        mods = {c.__module__ for c in type(mr).__mro__}
        return _runner_from_modules(cls, mods), f"model runner class {cls}"
    except AttributeError:
        pass
    try:
        answers = llm.collective_rpc(_runner_of_worker)
    except Exception as e:  # noqa: BLE001 - the evidence is what failed
        return "unknown", (
            "unproven: the model runner could not be read from the engine "
            f"({type(e).__name__}: {e})"
        )
    kinds = {_runner_from_modules(a[0], set(a[1:])) for a in answers}
    classes = sorted({a[0] for a in answers})
    if len(kinds) != 1:
        return "unknown", f"unproven: the workers' model runners disagree: {classes}"
    return kinds.pop(), f"model runner class {', '.join(classes)} (asked of vLLM's workers)"


def _effective_config(llm) -> dict[str, Any]:
    """What the engine really runs with (a kwarg may be overridden or ignored for a model)."""
    cfg = llm.llm_engine.vllm_config
    out: dict[str, Any] = {}
    for name, obj, attr in (
        ("enable_chunked_prefill", cfg.scheduler_config, "enable_chunked_prefill"),
        ("max_num_batched_tokens", cfg.scheduler_config, "max_num_batched_tokens"),
        ("enable_prefix_caching", cfg.cache_config, "enable_prefix_caching"),
        ("max_model_len", cfg.model_config, "max_model_len"),
        ("kv_cache_memory_bytes", cfg.cache_config, "kv_cache_memory_bytes"),
        ("num_kv_blocks", cfg.cache_config, "num_gpu_blocks"),
        ("block_size", cfg.cache_config, "block_size"),
        ("max_num_seqs", cfg.scheduler_config, "max_num_seqs"),
        ("dtype", cfg.model_config, "dtype"),
        ("async_scheduling", cfg.scheduler_config, "async_scheduling"),
        ("enforce_eager", cfg.model_config, "enforce_eager"),
        ("compilation_mode", cfg.compilation_config, "mode"),
        ("compilation_backend", cfg.compilation_config, "backend"),
        ("tensor_parallel_size", cfg.parallel_config, "tensor_parallel_size"),
        ("pipeline_parallel_size", cfg.parallel_config, "pipeline_parallel_size"),
    ):
        value = getattr(obj, attr, None)
        if isinstance(value, enum.Enum):  # e.g. CompilationMode.NONE: its name, not its number
            value = value.name
        out[name] = value if isinstance(value, (bool, int, float, str, type(None))) else str(value)
    return out


def _why_runner(llm, actual: str) -> str:
    """Why vLLM ended up on this runner, following its own decision in VllmConfig."""
    forced = os.environ.get("VLLM_USE_V2_MODEL_RUNNER")
    if forced is not None:
        return f"forced by VLLM_USE_V2_MODEL_RUNNER={forced}"
    try:
        from vllm.triton_utils.importing import HAS_TRITON
    except ImportError:
        HAS_TRITON = None
    if HAS_TRITON is False:
        return "vLLM's choice: Triton unavailable, so Model Runner V2 is off"
    cfg = llm.llm_engine.vllm_config
    probe = getattr(cfg, "_get_v2_model_runner_unsupported_features", None)
    if probe is None:  # a private vLLM API this explanation relies on (tested with vllm 0.32.0)
        return (
            f"vLLM's choice: {actual.upper()}; why is unknown: "
            "VllmConfig._get_v2_model_runner_unsupported_features "
            f"is gone in vllm {vllm_version()} (the harness was written against 0.32.0)"
        )
    unsupported = probe()
    if unsupported:
        return f"vLLM's choice: V2 does not support {', '.join(unsupported)}"
    default_v2 = getattr(cfg, "_is_default_v2_model_runner_model", None)  # vllm <= 0.30
    if default_v2 is not None and not default_v2():
        return (
            f"vLLM's choice: vllm {vllm_version()} keeps V2 for its default-V2 generate "
            "models (VllmConfig._is_default_v2_model_runner_model is false here) -> "
            f"{actual.upper()}"
        )
    how = (
        " (Triton via the interpreter backend)" if os.environ.get("TRITON_INTERPRET") == "1" else ""
    )
    return f"vLLM's choice: Triton present{how}, no V2-unsupported feature -> {actual.upper()}"


@contextmanager
def heap_kept_frozen(freeze_first: bool) -> Iterator[None]:
    """vLLM's engine start and shutdown without full collections of the worker's whole heap.

    vLLM unfreezes the garbage collector's heap and collects it in full several times per engine
    (model loader, engine-core start, shutdown: 5 collections per V1 start, 8 per V2 start, 3 per
    shutdown), each ~0.3-0.45 s over the ~800k objects torch, transformers and vLLM keep alive.
    Measured here: 1.55 of a 1.82 s V1 start and 2.65 of a 2.72 s V2 start. Before a start
    (`freeze_first`) what is alive is frozen; inside the block vLLM's own freezes and unfreezes do
    nothing, so its collections scan only this engine's objects (transient tensors are still
    freed before weight processing, as vLLM wants), and those are never frozen, so the collection
    after shutdown frees them. Collection timing changes no number an engine computes."""
    if freeze_first:
        freeze_what_is_alive()
    freeze, unfreeze = gc.freeze, gc.unfreeze
    gc.freeze = gc.unfreeze = lambda: None  # type: ignore[assignment]
    try:
        yield
    finally:
        gc.freeze, gc.unfreeze = freeze, unfreeze  # type: ignore[assignment]


class VllmRunner:
    def __init__(self, variant: str | None):
        if variant not in ("v1", "v2", "auto"):
            raise ValueError(f"vllm runner variant must be v1, v2 or auto, got {variant!r}")
        self.variant = variant
        self.llm = None
        self.trace = None
        self.req: LoadRequest | None = None
        self.trust = False
        self._hf: dict[str, Any] = {}  # HF tokenizer and model, for token-id and embeds prompts
        self.lora = None  # the case's LoRARequest, sent with every request

    def load(self, req: LoadRequest) -> dict[str, Any]:
        from vllm import LLM

        self.req, self.trust = req, req.trust_remote_code
        budget, kwargs = engine_kwargs(req)
        self.lora = lora_request(req.lora_dir)

        def start():
            with heap_kept_frozen(freeze_first=True):
                return LLM(
                    model=req.model_dir,
                    runner="pooling",
                    dtype=req.dtype,
                    trust_remote_code=req.trust_remote_code,
                    **kwargs,
                )

        self.llm = explained_start(req.model_dir, start)
        from harness.runners.engine_trace import attach

        self.trace = attach(self.llm)  # what the scheduler did: the checks' proof of effect
        return load_info(self.llm, self.trace, req, kwargs, budget)

    def run(self, task: str, items: list, request: Request) -> RunResult:
        """The request's run options: shuffle_seed (permute the requests, restore the order
        after), one_by_one (one request per call), warm_prefix_cache (send everything twice, keep
        the second answers); truncate (vLLM's truncate_prompt_tokens: keep this many tokens, -1
        for max_model_len), truncation_side (left | right, per request), expect_refusal (each
        item alone, its refusal recorded: harness.runners.options.run_expecting_refusal), colbert
        (each text sent as ColBERT token ids: harness.matrix.colbert)."""
        assert self.llm is not None, "run before load"
        from harness.runners.options import run_expecting_refusal, run_with_options

        tok, params = offline_kwargs(request)  # the request's values (request.TO_VLLM)
        if request.chat is not None:
            raise ValueError(
                "chat: vLLM 0.32's LLM.embed and LLM.classify take no messages (LLM.chat is for "
                "generative models only); a chat case runs on the server runners (vllm-serve-*)"
            )
        if request.prompt_name:  # LLM.embed takes no prompt name: prefix as users do
            prompt = st_prompt(self.req.model_dir, request.prompt_name)
            items = [prompt + it for it in items]
        if request.instruction:  # GritLM-style: the pooler finds it in the token ids
            items = [request.instruction + it for it in items]
        # ColBERT's markers and query expansion
        if request.colbert is not None and request.colbert.send == "token_ids":
            from harness.runners.colbert_ids import colbert_ids

            hf_tok, spec = self._tokenizer(), request.colbert.model_dump()
            items = [
                {"prompt_token_ids": colbert_ids(hf_tok, it, spec, spec["role"])} for it in items
            ]
        template = SCORE_TEMPLATES[request.score_template] if request.score_template else None
        self.trace.reset()
        if request.expect_refusal:
            answered = run_expecting_refusal(
                lambda batch: self._call(task, batch, tok, params, template), list(items)
            )
        else:
            answered = run_with_options(
                lambda batch: self._call(task, batch, tok, params, template),
                paired(list(items), request.prompt_forms),
                request,
            )
        # per request, in input order: what the engine saw (for the checks' proof of effect)
        traced = self.trace.per_request([meta.get("request_id") for _, meta in answered])
        return RunResult(
            [out for out, _ in answered],
            RunEvidence(
                records=[{**meta, **t} for (_, meta), t in zip(answered, traced)],
                # what the engine core did (async scheduling)
                run=RequestsEvidence(**self.trace.run_info()),
            ),
        )

    def _call(
        self, task: str, items: list, tok: dict, params: dict, template: str | None = None
    ) -> list[tuple[np.ndarray, dict]]:
        """One LLM call: `tok` its tokenization_kwargs, `params` its PoolingParams fields (both
        from harness.matrix.request.offline_kwargs; none set: vLLM's defaults); `template` a
        score case's chat template (request.score_template)."""
        kw: dict[str, Any] = {"use_tqdm": False}
        if self.lora is not None:
            kw["lora_request"] = self.lora
        if tok:
            kw["tokenization_kwargs"] = dict(tok)
        if params:
            from vllm import PoolingParams

            kw["pooling_params"] = PoolingParams(**params)
        if task == "embed":
            prompts, sent = self._prompts(items)
            return [
                (np.asarray(o.outputs.embedding, dtype=np.float32), output_meta(o, s))
                for o, s in zip(self.llm.embed(prompts, **kw), sent)
            ]
        if task == "classify":
            prompts, sent = self._prompts(items)
            return [
                (np.asarray(o.outputs.probs, dtype=np.float32), output_meta(o, s))
                for o, s in zip(self.llm.classify(prompts, **kw), sent)
            ]
        if task == "score":
            if template:
                kw["chat_template"] = template
            outs = self.llm.score(
                [_score_input(q) for q, _ in items], [_score_input(d) for _, d in items], **kw
            )
            return [(np.asarray([o.outputs.score], dtype=np.float32), output_meta(o)) for o in outs]
        if task in ("token_classify", "token_embed", "reward", "step_reward"):
            # vLLM has no `reward` task: reward models and PRMs are served as token_classify
            pooling_task = "token_classify" if task in ("reward", "step_reward") else task
            prompts = [engine_prompt(it) for it in items]
            return [
                (to_numpy(o.outputs.data), output_meta(o))
                for o in self.llm.encode(prompts, pooling_task=pooling_task, **kw)
            ]
        if task == "embed&token_classify":
            return self._combined(task, [engine_prompt(it) for it in items], kw)
        raise ValueError(f"the vllm runner does not implement task {task!r}")

    def _combined(self, task: str, prompts: list, kw: dict) -> list[tuple[np.ndarray, dict]]:
        """vLLM 0.32's LLM.encode refuses `embed&token_classify` without an IO-processor plugin
        (UnsupportedCombinedTaskIOProcessor), though the engine computes it (BgeM3Pooler): send
        the requests to the engine itself with the parameters such a plugin sets (vLLM's own
        tests/plugins/bge_m3_sparse_plugin: use_activation defaults to True; PoolingParams.verify
        leaves the combined task's defaults to the plugin)."""
        from vllm import PoolingParams

        if set(kw) - {"use_tqdm", "lora_request"}:
            raise ValueError(f"task {task!r} takes no truncation or dimensions (got {sorted(kw)})")
        engine = self.llm.llm_engine
        ids = [f"combined-{next(_COMBINED_IDS)}" for _ in prompts]
        for rid, prompt in zip(ids, prompts):
            engine.add_request(
                rid,
                prompt,
                PoolingParams(task=task, use_activation=True),
                lora_request=kw.get("lora_request"),
            )
        done: dict[str, Any] = {}
        while engine.has_unfinished_requests():
            done.update({o.request_id: o for o in engine.step() if o.finished})
        return [(to_numpy(done[rid].outputs.data), output_meta(done[rid])) for rid in ids]

    def _prompts(self, items: list) -> tuple[list, list[dict]]:
        """vLLM prompts for the items, and per item what the runner sent: a text as is (an
        image as its multimodal prompt), token ids as TokensPrompt, prompt embeddings as
        EmbedsPrompt (E from harness.runners.prompt_forms, with the ids it was made from)."""
        prompts, sent = [], []
        for it in items:
            form, text = form_of(it)
            if form == "text":
                prompts.append(engine_prompt(text))
                sent.append({"sent_as": "text"} if text is not it else {})
                continue
            ids = token_ids(self._tokenizer(), text)
            if form == "token_ids":
                prompts.append({"prompt_token_ids": ids})  # vllm.inputs.TokensPrompt
                sent.append({"sent_as": "token_ids"})
            elif form == "embeds":
                embeds = input_embeddings(self._input_embedder(), ids)
                prompts.append({"prompt_embeds": embeds})  # vllm.inputs.EmbedsPrompt
                sent.append({"sent_as": "embeds", "ids": ids, "embeds_sha256": digest(embeds)})
            else:
                raise ValueError(f"unknown prompt form {form!r} for item {str(text)[:60]!r}")
        return prompts, sent

    def _tokenizer(self):
        """The checkpoint's HF tokenizer (the reference's), loaded once per model."""
        if self._hf.get("tokenizer") is None:
            from transformers import AutoTokenizer

            self._hf["tokenizer"] = AutoTokenizer.from_pretrained(
                self.req.model_dir, local_files_only=True, trust_remote_code=self.trust
            )
        return self._hf["tokenizer"]

    def _input_embedder(self):
        """The checkpoint as the HF model whose `get_input_embeddings()` makes prompt
        embeddings, in the case's dtype, loaded once per model and freed with it."""
        if self._hf.get("model") is None:
            from transformers import AutoModel

            from harness.runners.hf import torch_dtype

            self._hf["model"] = AutoModel.from_pretrained(
                self.req.model_dir,
                dtype=torch_dtype(self.req.dtype),
                local_files_only=True,
                trust_remote_code=self.trust,
            ).eval()
        return self._hf["model"]

    def unload(self) -> None:
        self._hf.clear()
        self.lora = None
        if self.llm is None:
            return
        try:
            with heap_kept_frozen(
                freeze_first=False
            ):  # shutdown unfreezes and collects in full too
                self.llm.llm_engine.engine_core.shutdown()
        except Exception:  # noqa: BLE001 - best effort: the worker may be reused
            pass
        self.llm = None
        gc.collect()  # the engine's objects, never frozen (see heap_kept_frozen)


_COMBINED_IDS = itertools.count()


def engine_kwargs(req: LoadRequest) -> tuple[Any, dict[str, Any]]:
    """(the KV-cache budget, the engine kwargs) of a load: the platform's defaults, seed 0, a
    LoRA adapter's kwargs, then the case's `engine:` over them."""
    from harness.runners.memory import kv_budget_of
    from harness.runners.platform import Platform

    budget = kv_budget_of(req.model_dir, req.dtype, req.engine)
    kwargs: dict[str, Any] = {
        **Platform(req.device).engine_defaults(budget.bytes),
        "seed": 0,
        **(lora_engine_kwargs(req.lora_dir) if req.lora_dir else {}),
        **req.engine,
    }
    return budget, kwargs


def lora_request(lora_dir: str | None):
    """The case's LoRARequest, sent with every request (None without an adapter)."""
    if not lora_dir:
        return None
    from vllm.lora.request import LoRARequest

    return LoRARequest("case-adapter", 1, lora_dir)


def explained_start(model_dir: str, start):
    """`start()` (an engine's construction); vLLM's "failed to be inspected" names its cause."""
    try:
        return start()
    except Exception as e:
        cause = _inspection_root_cause(model_dir) if "to be inspected" in str(e) else None
        if cause is None:
            raise
        said = next(ln.strip() for ln in str(e).splitlines() if "to be inspected" in ln)
        raise RuntimeError(f"{said} Root cause: {cause}") from e


def load_info(llm, trace, req: LoadRequest, kwargs: dict, budget) -> dict[str, Any]:
    """What a load reports: the model runner that really ran and why, the effective config,
    the engine trace, the KV budget, versions. `llm` is vllm.LLM or anything with its
    `llm_engine.vllm_config` and `collective_rpc` (the AsyncLLM runner's view)."""
    import torch
    import transformers
    import vllm

    from harness.engine.target import vllm_provenance

    actual, evidence = _actual_runner(llm)
    return {
        "actual_runner": actual,
        "runner_evidence": evidence,
        "runner_proven": actual != "unknown",  # read from the engine's model runner class
        "runner_choice": _why_runner(llm, actual),
        "effective": _effective_config(llm),
        "engine_trace": trace.as_info(),
        "device": req.device,
        "engine_kwargs": {k: v for k, v in kwargs.items()},
        **({"lora_adapter": req.lora_dir} if req.lora_dir else {}),
        "kv_budget": {
            **budget.as_info(),
            "overridden_by_case": "kv_cache_memory_bytes" in req.engine,
        },
        "triton_interpreted": os.environ.get("TRITON_INTERPRET") == "1",
        "vllm": vllm_provenance(),  # release, or a checkout's commit and tree state
        "versions": {
            "vllm": vllm.__version__,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
    }


def lora_engine_kwargs(lora_dir: str) -> dict[str, Any]:
    """The engine kwargs that serve one LoRA adapter: enable_lora, max_loras 1 and
    max_lora_rank, the smallest rank vLLM accepts (its LoRAConfig's MaxLoRARanks) that holds the
    adapter's r (its adapter_config.json). A case's `engine:` overrides them."""
    import json
    import typing
    from pathlib import Path

    r = int(json.loads((Path(lora_dir) / "adapter_config.json").read_text())["r"])
    try:
        from vllm.config.lora import MaxLoRARanks  # tested with vllm 0.32.0

        ranks = sorted(int(x) for x in typing.get_args(MaxLoRARanks))
    except ImportError:
        ranks = []
    rank = next((x for x in ranks if x >= r), r)
    return {"enable_lora": True, "max_loras": 1, "max_lora_rank": rank}


def output_meta(output, sent: dict | None = None) -> dict[str, Any]:
    """What vLLM reports of one request: its id, the prompt token ids it ran, prefix-cache hits;
    with `sent`, what the runner sent it as. For prompt embeddings vLLM runs no ids (it reports
    placeholder zeros, kept as `engine_prompt_token_ids`): the ids compared with the reference's
    are those E was made from."""
    ids = getattr(output, "prompt_token_ids", None)
    cached = getattr(output, "num_cached_tokens", None)
    rid = getattr(output, "request_id", None)
    meta = {
        "request_id": str(rid) if rid is not None else None,
        "prompt_token_ids": [int(t) for t in ids] if ids is not None else None,
        "num_cached_tokens": int(cached) if cached is not None else None,
    }
    sent = dict(sent or {})
    if "ids" in sent:
        meta["engine_prompt_token_ids"] = meta["prompt_token_ids"]
        meta["prompt_token_ids"] = sent.pop("ids")
    return {**meta, **sent}


def engine_prompt(item):
    """A text prompt as is; an image reference as vLLM's multimodal prompt, with its text when the
    item holds one ({"text", "image"}), else an empty text."""
    from harness.matrix.images import image, is_image

    if is_image(item):
        return {
            "prompt": str(item.get("text", "")),
            "multi_modal_data": {"image": image(item["image"])},
        }
    return item


def _inspection_root_cause(model_dir: str) -> str | None:
    """vLLM inspects a model's class in a subprocess and reports only "failed to be inspected,
    check the logs". Import the module here to name the real cause (e.g. a missing package)."""
    import importlib
    import json
    from pathlib import Path

    try:
        from vllm.model_executor.models.registry import (
            _VLLM_MODELS,
        )  # private: tested with vllm 0.32.0
    except ImportError:
        return (
            f"(no root cause: vllm {vllm_version()} has no "
            "model_executor.models.registry._VLLM_MODELS)"
        )
    archs = json.loads((Path(model_dir) / "config.json").read_text()).get("architectures") or []
    for arch in archs:
        if arch in _VLLM_MODELS:
            module = f"vllm.model_executor.models.{_VLLM_MODELS[arch][0]}"
            try:
                importlib.import_module(module)
            except Exception as e:  # noqa: BLE001 - this is the diagnosis
                return f"{type(e).__name__}: {e} (importing {module} for {arch})"
    return None


def _score_input(item):
    """A text as is; an image as a score content part (a lossless PNG data URL: vLLM's score API
    takes images as `image_url` parts), followed by a text part when the item holds its prompt
    (a ColQwen3 page: vLLM keeps a prompt that already holds the image placeholder as it is)."""
    import base64
    import io

    from harness.matrix.images import image, is_image

    if not is_image(item):
        return item
    buf = io.BytesIO()
    image(item["image"]).save(buf, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    parts: list[dict] = [{"type": "image_url", "image_url": {"url": url}}]
    if item.get("text"):
        parts.append({"type": "text", "text": str(item["text"])})
    return {"content": parts}


def to_numpy(data) -> np.ndarray:
    if hasattr(data, "detach"):
        return data.detach().float().cpu().numpy().astype(np.float32)
    return np.asarray(data, dtype=np.float32)
