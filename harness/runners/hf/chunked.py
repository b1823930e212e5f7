"""Long inputs embedded in chunks: vLLM's documented chunk-and-average rule, run on the model's
own sentence-transformers modules.

vLLM documents the rule (pooler_config `enable_chunked_processing` with `max_embed_len`:
vllm/config/pooler.py's field docs, and examples/pooling/embed/openai_embedding_long_text/
README.md, "Chunked Processing Behavior" and "How It Works"): an input longer than the model's
maximum length is split into consecutive chunks of its tokens, each chunk is embedded "using the
model's configured pooling strategy" (within chunks: the model's native pooling), and the chunk
embeddings are combined by "token count-based weighted averaging across all chunks" (cross-chunk
aggregation: always MEAN); inputs over max_embed_len are refused. Written here from that text:
the prompt's token ids (special tokens included, as the tokenizer encodes the whole text) cut
into runs of `chunk_tokens`, the last one shorter; each run through the model's own modules
(Transformer, Pooling, Normalize when it has one: `SentenceTransformer.forward`); the average of
the chunk vectors weighted by their token counts; and, for a model whose pipeline ends with a
Normalize module, that module once more on the average: the model's embedding is a unit vector
(an average of unit vectors is not), so its last module has the last word.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from harness.matrix.request import Request
from harness.runners.hf import HFRunner, recipe


def chunks_of(ids: Sequence[int], size: int) -> list[list[int]]:
    """Consecutive runs of `size` ids, the last one shorter; every id in exactly one run."""
    if size < 1:
        raise ValueError(f"chunk size {size}: must be >= 1")
    ids = list(ids)
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def chunk_and_average(
    ids: Sequence[int], size: int, embed: Callable[[list[int]], "object"], normalize: bool
):
    """The documented rule on one prompt (torch): `embed` each chunk, average the chunk vectors
    weighted by their token counts, L2-normalise the average when `normalize`."""
    import torch

    parts = chunks_of(ids, size)
    vecs = torch.stack([embed(p).to(torch.float32) for p in parts])
    weights = torch.tensor([len(p) for p in parts], dtype=torch.float32)
    avg = (vecs * weights[:, None]).sum(dim=0) / weights.sum()
    return torch.nn.functional.normalize(avg, dim=-1) if normalize else avg


@recipe("st-embed-chunked")
def _st_embed_chunked(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """sentence-transformers' modules per chunk of `hf: {chunk_tokens: N}` tokens (N: the
    engine's max_model_len, the chunk size vLLM documents), combined by the rule above."""
    import torch
    from sentence_transformers.models import Normalize

    size = request.hf.get("chunk_tokens")
    if not isinstance(size, int) or size < 1:
        raise ValueError("st-embed-chunked needs `hf: {chunk_tokens: N}` (the max_model_len)")
    if request.truncate or request.dimensions or request.prompt_forms:
        raise ValueError("st-embed-chunked takes no truncate, dimensions or prompt forms")
    st = runner.sentence_transformer()
    normalize = any(isinstance(m, Normalize) for m in st)
    tok = st.tokenizer
    device = runner.req.device

    def embed(chunk: list[int]):
        t = torch.tensor([chunk], dtype=torch.long, device=device)
        features = {"input_ids": t, "attention_mask": torch.ones_like(t)}
        if "token_type_ids" in tok.model_input_names:
            features["token_type_ids"] = torch.zeros_like(t)
        return st.forward(features)["sentence_embedding"][0]

    outs = []
    with torch.inference_mode():
        for text in items:
            ids = tok(text, truncation=False)["input_ids"]
            runner.note_tokens(ids)
            vec = chunk_and_average(ids, size, embed, normalize)
            outs.append(vec.float().cpu().numpy().astype(np.float32))
    return outs
