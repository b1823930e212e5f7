"""Recipes of LLMs used as rerankers through the logits of two tokens: the causal LM itself, run by
transformers, scored as the model's own published code scores it. Qwen3-Reranker ("yes"/"no",
recipe yes-no-reranker) here; mxbai-rerank-v2 ("1"/"0", recipe mxbai-rerank-v2) further down.

From Qwen/Qwen3-Reranker-0.6B's model card, "Transformers Usage"
(https://huggingface.co/Qwen/Qwen3-Reranker-0.6B; the hub is not reachable here: read through the
`search` tool's stored pages, which quote the card's README and its derivatives, e.g.
mlx-community/Qwen3-Reranker-0.6B-4bit's card), not from vLLM:
  prefix = "<|im_start|>system\\nJudge whether the Document meets the requirements based on the
           Query and the Instruct provided. Note that the answer can only be \\"yes\\" or
           \\"no\\".<|im_end|>\\n<|im_start|>user\\n"
  suffix = "<|im_end|>\\n<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n"
  format_instruction: "<Instruct>: {instruction}\\n<Query>: {query}\\n<Document>: {doc}"
  input ids = tokenizer.encode(prefix) + tokenizer(formatted)["input_ids"] + encode(suffix)
  compute_logits: logits[:, -1, :] at token_false_id ("no") and token_true_id ("yes"), stacked
  [no, yes], log_softmax, then exp of the "yes" column.
Not followed: the card batches with left padding (here one unpadded forward per pair, as every
recipe: no padding convention leaks into the reference) and its max_length cut (`truncate` is
not supported by this recipe: a case naming it is refused).

The pairs this recipe reads are the card's prompt split in two as vLLM's own example sends it to
the score API (input set `qwen3-reranker-pairs`): query = prefix + "<Instruct>: ...\\n
<Query>: ...\\n", document = "<Document>: ..." + suffix. The recipe takes the instruction, query
and document back out of them and builds its ids the transformers way above, so the token-id
check compares vLLM's tokenization of the joined text with the card's three-part one.
"""

from __future__ import annotations

import re

import numpy as np

from harness.matrix.request import Request
from harness.runners.hf import HFRunner, recipe

CARD_PREFIX = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query "
    'and the Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n'
    "<|im_start|>user\n"
)
CARD_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
_QUERY = re.compile(r"<Instruct>: (?P<instruction>.*)\n<Query>: (?P<query>.*)\n", re.DOTALL)
_DOCUMENT = re.compile(r"<Document>: (?P<doc>.*)", re.DOTALL)


def format_instruction(instruction: str, query: str, doc: str) -> str:
    """The model card's format_instruction."""
    return f"<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {doc}"


def card_fields(query: str, document: str) -> tuple[str, str, str]:
    """(instruction, query, document) of a pair in the card's vLLM prompt; a pair not in it is an
    error (scoring it would compare something other than the card's prompt)."""
    q = _QUERY.fullmatch(query[len(CARD_PREFIX) :]) if query.startswith(CARD_PREFIX) else None
    d = (
        _DOCUMENT.fullmatch(document[: -len(CARD_SUFFIX)])
        if document.endswith(CARD_SUFFIX)
        else None
    )
    if q is None or d is None:
        raise ValueError(
            "yes-no-reranker: the pair is not in Qwen3-Reranker's prompt (query: the card's "
            "prefix + '<Instruct>: ...\\n<Query>: ...\\n'; document: '<Document>: ...' + the "
            f"card's suffix); use input set qwen3-reranker-pairs. "
            f"Got {(query[:60], document[-60:])!r}"
        )
    return q["instruction"], q["query"], d["doc"]


def card_input_ids(tokenizer, instruction: str, query: str, doc: str) -> list[int]:
    """prefix_tokens + the formatted pair's ids + suffix_tokens, as the card's process_inputs."""
    body = tokenizer(format_instruction(instruction, query, doc))["input_ids"]
    return (
        tokenizer.encode(CARD_PREFIX, add_special_tokens=False)
        + list(body)
        + tokenizer.encode(CARD_SUFFIX, add_special_tokens=False)
    )


def yes_probability(last_logits, no_id: int, yes_id: int):
    """The card's compute_logits for one position: exp(log_softmax([logit_no, logit_yes]))[yes]."""
    import torch

    pair = torch.stack([last_logits[..., no_id], last_logits[..., yes_id]], dim=-1)
    return torch.nn.functional.log_softmax(pair, dim=-1)[..., 1].exp()


@recipe("yes-no-reranker")
def _yes_no_reranker(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """(query, document) in the card's prompt -> P("yes") of the causal LM at the last position,
    softmax over the "no" and "yes" logits only, in the model's dtype as the card computes it.
    One pair per forward."""
    import torch

    if request.truncate:
        raise ValueError("yes-no-reranker does not implement truncate")
    assert runner.req is not None
    model = runner.auto_model("AutoModelForCausalLM")
    tok = runner.tokenizer()
    no_id, yes_id = tok.convert_tokens_to_ids("no"), tok.convert_tokens_to_ids("yes")
    for word, tid in (("no", no_id), ("yes", yes_id)):
        if tid is None or tid == tok.unk_token_id or tok.convert_ids_to_tokens(tid) != word:
            raise ValueError(f"yes-no-reranker: {word!r} is not one token of this tokenizer")
    out = []
    with torch.inference_mode():
        for query, document in items:
            ids = card_input_ids(tok, *card_fields(query, document))
            runner.note_tokens(ids)
            logits = model(torch.tensor([ids], device=runner.req.device)).logits[0, -1]
            score = yes_probability(logits, no_id, yes_id)
            out.append(np.asarray([float(score)], dtype=np.float32))
    return out


# mxbai-rerank-v2 (a Qwen2ForCausalLM), from its own published code, not from vLLM: the package
# mixedbread-ai/mxbai-rerank, mxbai_rerank/mxbai_rerank_v2.py (read through the `search` tool's
# code index): MxbaiRerankV2's sep, query_prompt, doc_prompt, task_prompt and chat_template; its
# prepare_inputs (no instruction): prefix + ids("query: {query}") + ids(sep) + ids("document:
# {document}") + ids(sep) + ids(task_prompt) + ids(suffix), each tokenized apart without special
# tokens; its forward: logits[:, -1, id("1")] - logits[:, -1, id("0")], whose sigmoid is the
# relevance (its predictions are sigmoid(logits) > 0.5). Not followed: its left-padded batches
# and its length limits (one unpadded forward per pair; `truncate` refused).
MXBAI_SEP = "\n"
MXBAI_TASK = (
    "You are a search relevance expert who evaluates how well documents match search queries. "
    "For each query-document pair, carefully analyze the semantic relationship between them, "
    "then provide your binary relevance judgment (0 for not relevant, 1 for relevant).\n"
    "Relevance:"
)
MXBAI_PREFIX = (
    "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    "<|im_end|>\n<|im_start|>user\n"
)
MXBAI_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n"
_MXBAI_QUERY = re.compile(r"query: (?P<query>.*)\n", re.DOTALL)
_MXBAI_DOCUMENT = re.compile(r"document: (?P<doc>.*)\n", re.DOTALL)


def mxbai_fields(query: str, document: str) -> tuple[str, str]:
    """(query, document) of a pair in mxbai-rerank-v2's prompt, split in two at the separator
    between them; any other pair is an error."""
    tail = MXBAI_TASK + MXBAI_SUFFIX
    q = (
        _MXBAI_QUERY.fullmatch(query[len(MXBAI_PREFIX) :])
        if query.startswith(MXBAI_PREFIX)
        else None
    )
    d = _MXBAI_DOCUMENT.fullmatch(document[: -len(tail)]) if document.endswith(tail) else None
    if q is None or d is None:
        raise ValueError(
            "mxbai-rerank-v2: the pair is not in mxbai-rerank-v2's prompt (query: its prefix + "
            "'query: ...\\n'; document: 'document: ...\\n' + its task prompt and suffix); use "
            f"input set mxbai-rerank-v2-pairs. Got {(query[:60], document[-60:])!r}"
        )
    return q["query"], d["doc"]


def mxbai_input_ids(tokenizer, query: str, doc: str) -> list[int]:
    """MxbaiRerankV2.prepare_inputs for one pair, no instruction: each part tokenized apart."""

    def ids(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    return (
        ids(MXBAI_PREFIX)
        + ids(f"query: {query}")
        + ids(MXBAI_SEP)
        + ids(f"document: {doc}")
        + ids(MXBAI_SEP)
        + ids(MXBAI_TASK)
        + ids(MXBAI_SUFFIX)
    )


def mxbai_relevance(last_logits, zero_id: int, one_id: int):
    """MxbaiRerankV2.forward's logit (logit "1" - logit "0") through its sigmoid."""
    import torch

    return torch.sigmoid(last_logits[..., one_id] - last_logits[..., zero_id])


@recipe("mxbai-rerank-v2")
def _mxbai_rerank_v2(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """(query, document) in mxbai-rerank-v2's prompt -> sigmoid(logit "1" - logit "0") of the
    causal LM at the last position. One pair per forward."""
    import torch

    if request.truncate:
        raise ValueError("mxbai-rerank-v2 does not implement truncate")
    assert runner.req is not None
    model = runner.auto_model("AutoModelForCausalLM")
    tok = runner.tokenizer()
    one = tok("1", add_special_tokens=False)["input_ids"]
    zero = tok("0", add_special_tokens=False)["input_ids"]
    if len(one) != 1 or len(zero) != 1:
        raise ValueError("mxbai-rerank-v2: '1' and '0' are not single tokens of this tokenizer")
    out = []
    with torch.inference_mode():
        for query, document in items:
            ids = mxbai_input_ids(tok, *mxbai_fields(query, document))
            runner.note_tokens(ids)
            logits = model(torch.tensor([ids], device=runner.req.device)).logits[0, -1]
            score = mxbai_relevance(logits, zero[0], one[0])
            out.append(np.asarray([float(score)], dtype=np.float32))
    return out
