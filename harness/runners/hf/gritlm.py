"""The recipe of GritLM embeddings: the model's own published package, `gritlm` (pinned, installed
with --no-deps beside every engine: harness.engine.env.NO_DEPS_REFERENCES)."""

from __future__ import annotations

import numpy as np

from harness.matrix.request import Request
from harness.runners.hf import HFRunner, recipe, torch_dtype

# GritLM.encode's own defaults, kept: mean pooling, L2-normalised, attn "bbcc" (bidirectional
# attention when embedding: encode passes `is_causal=False` to the model's forward, which
# transformers >= 5 honours for its decoders, padded batches included), the instruction's tokens
# (its BOS too) left out of the mean, right padding, max_length 512.
MAX_LENGTH = 512


@recipe("gritlm-embed", default_for=[("GritLM", "embed")], honours=["instruction"])
def _gritlm_embed(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """`gritlm.GritLM(model_dir).encode(texts, instruction=...)`, as the GritLM README embeds;
    the case gives the instruction already in GritLM's format ("<|user|>\\n{instruction}\\n
    <|embed|>\\n", the README's gritlm_instruction), and vLLM is sent instruction + text."""
    from harness.engine.env import no_deps_pin
    from harness.runners.hf.packages import pinned_package

    if request.truncate:
        raise ValueError("gritlm-embed: truncation would cut the instruction's pattern")
    gritlm = pinned_package("gritlm", no_deps_pin("gritlm"))
    assert runner.req is not None
    req = runner.req
    model = runner.loaded(
        "gritlm",
        lambda: gritlm.GritLM(req.model_dir, device=req.device, dtype=torch_dtype(req.dtype)),
    )
    instruction = str(request.instruction or "")
    for text in items:  # the ids encode runs: its tokenizer over instruction + text
        ids = model.tokenizer(instruction + text, truncation=True, max_length=MAX_LENGTH)
        runner.note_tokens(ids["input_ids"])
    out = model.encode(list(items), instruction=instruction, max_length=MAX_LENGTH)
    return [np.asarray(row, dtype=np.float32) for row in out]
