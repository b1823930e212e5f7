"""bge-reranker-v2-gemma (a GemmaForCausalLM) scored as FlagEmbedding's FlagLLMReranker scores it:
the "Yes" logit at the last position of its prompt, through a sigmoid (compute_score's
normalize=True). Recipe `flag-llm-reranker`.

From FlagEmbedding 1.4.2 (the package on PyPI; read from its wheel, not installed in the engine
environment), FlagEmbedding/inference/reranker/decoder_only/base.py, BaseLLMReranker, not from
vLLM:
  query_instruction_for_rerank "A: ", passage_instruction_for_rerank "B: " (format "{}{}"), so
  the query is "A: " + query and the passage "B: " + passage (AbsReranker.get_detailed_instruct);
  prompt default "Given a query A and a passage B, determine whether the passage contains an
  answer to the query by providing a prediction of either 'Yes' or 'No'."; sep = "\\n";
  every part tokenized apart with add_special_tokens=False; input ids =
  [bos] (when bos_token_id is set and differs from pad_token_id) + ids(query)
  + ids(sep) + ids(passage) (prepare_for_model, truncation only_second) + ids(sep) + ids(prompt);
  yes_loc = tokenizer('Yes', add_special_tokens=False)['input_ids'][0];
  score = logits[last, yes_loc], sigmoid when normalize.
The model card of BAAI/bge-reranker-v2-gemma gives the same get_inputs for plain transformers.
Not followed: its length-sorted, padded batches and its max_length cut (here one unpadded
forward per pair; `truncate` is refused).

The pairs are the prompt split as vLLM's MTEB test of the model sends them to the score API
(input set `bge-reranker-v2-gemma-pairs`: "A: {query}\\n", "B: {doc}\\n{prompt}"); the recipe
takes query and passage back out and builds its ids the FlagEmbedding way, so the token-id check
holds vLLM's tokenization of the joined text to FlagEmbedding's part-by-part one.
"""

from __future__ import annotations

import re

import numpy as np

from harness.matrix.request import Request
from harness.runners.hf import HFRunner, recipe

FLAG_PROMPT = (
    "Given a query A and a passage B, determine whether the passage contains an answer to the "
    "query by providing a prediction of either 'Yes' or 'No'."
)
FLAG_SEP = "\n"
FLAG_QUERY_INSTRUCTION = "A: "
FLAG_PASSAGE_INSTRUCTION = "B: "
_QUERY = re.compile(r"A: (?P<query>.*)\n", re.DOTALL)
_PASSAGE = re.compile(r"B: (?P<passage>.*)\n", re.DOTALL)


def flag_fields(query: str, document: str) -> tuple[str, str]:
    """(query, passage) of a pair in bge-reranker-v2-gemma's prompt; any other pair is an error
    (scoring it would compare something other than FlagEmbedding's prompt)."""
    q = _QUERY.fullmatch(query)
    p = (
        _PASSAGE.fullmatch(document[: -len(FLAG_PROMPT)])
        if document.endswith(FLAG_PROMPT)
        else None
    )
    if q is None or p is None:
        raise ValueError(
            "flag-llm-reranker: the pair is not in bge-reranker-v2-gemma's prompt (query: "
            "'A: ...\\n'; document: 'B: ...\\n' + FlagLLMReranker's prompt); use input set "
            f"bge-reranker-v2-gemma-pairs. Got {(query[:60], document[-60:])!r}"
        )
    return q["query"], p["passage"]


def flag_input_ids(tokenizer, query: str, passage: str) -> list[int]:
    """BaseLLMReranker.compute_score_single_gpu's ids for one pair (no truncation reached)."""

    def ids(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    bos = tokenizer.bos_token_id
    head = [bos] if bos is not None and bos != tokenizer.pad_token_id else []
    sep = ids(FLAG_SEP)
    return (
        head
        + ids(FLAG_QUERY_INSTRUCTION + query)
        + sep
        + ids(FLAG_PASSAGE_INSTRUCTION + passage)
        + sep
        + ids(FLAG_PROMPT)
    )


@recipe("flag-llm-reranker")
def _flag_llm_reranker(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """(query, document) in bge-reranker-v2-gemma's prompt -> sigmoid(logit "Yes") of the causal
    LM at the last position. One pair per forward."""
    import torch

    if request.truncate:
        raise ValueError("flag-llm-reranker does not implement truncate")
    assert runner.req is not None
    model = runner.auto_model("AutoModelForCausalLM")
    tok = runner.tokenizer()
    yes_loc = tok("Yes", add_special_tokens=False)["input_ids"][0]
    out = []
    with torch.inference_mode():
        for query, document in items:
            ids = flag_input_ids(tok, *flag_fields(query, document))
            runner.note_tokens(ids)
            logits = model(torch.tensor([ids], device=runner.req.device)).logits[0, -1]
            out.append(np.asarray([float(torch.sigmoid(logits[yes_loc].float()))], np.float32))
    return out
