"""vLLM offline `LLM` in pooling mode. Which model runner (V1/V2) is chosen by the environment
the worker was started with (harness.runners.platform); which one really ran is read from the
engine (harness.runners.vllm_load_info). The engine's construction is harness.runners.vllm_engine,
what goes into its calls and comes out harness.runners.vllm_io."""

from __future__ import annotations

import gc
import itertools
from typing import Any

import numpy as np

from harness.matrix.evidence import RequestsEvidence, RunEvidence
from harness.matrix.request import Request, offline_kwargs
from harness.matrix.score_templates import SCORE_TEMPLATES
from harness.runners import LoadRequest, RunResult
from harness.runners.prompt_forms import (
    digest,
    form_of,
    input_embeddings,
    paired,
    st_prompt,
    token_ids,
)
from harness.runners.vllm_engine import (
    engine_kwargs,
    explained_start,
    heap_kept_frozen,
    lora_request,
)
from harness.runners.vllm_io import engine_prompt, output_meta, score_input, to_numpy
from harness.runners.vllm_load_info import load_info


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
                [score_input(q) for q, _ in items], [score_input(d) for _, d in items], **kw
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
