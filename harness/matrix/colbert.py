"""ColBERT conventions a case asks for (`colbert:`): the query / document marker tokens and the
query's [MASK] expansion that ColBERT checkpoints are trained with (pylate's
`ColBERT.tokenize`; colbert-ai's QueryTokenizer / DocTokenizer).

vLLM 0.32 applies neither (it tokenizes a ColBERT text as the tokenizer does: no marker, no
expansion). A user who wants them sends token-id prompts built the way the model's code builds
them; this key tells both sides how to build those ids. The reference builds them with the
published code path (harness.runners.hf.colbert); the vLLM runners with an independent builder
(harness.runners.colbert_ids), and the token-id check holds the two to each other on every item.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

COLBERT_TASKS = ("token_embed", "score")
# the reference recipes that build the ids (harness.runners.hf.colbert)
COLBERT_RECIPES = {"token_embed": "pylate-colbert-token-embed", "score": "pylate-colbert-maxsim"}


class ColbertIds(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # the marker tokens (a token of the vocabulary, as pylate's query_prefix / document_prefix:
    # "[unused0]" / "[unused1]" in colbertv2.0, "[QueryMarker]" / "[DocumentMarker]" in
    # jina-colbert-v2), inserted after the first token ([CLS] / <s>)
    query_prefix: str = Field(min_length=1)
    document_prefix: str = Field(min_length=1)
    # a query is cut to, and padded with [MASK] up to, this many tokens (marker included)
    query_length: int = Field(default=32, gt=3)
    # a document is cut to this many tokens (marker included); None: the tokenizer's maximum
    document_length: int | None = Field(default=None, gt=3)
    # the query's [MASK] expansion tokens take part in attention (pylate's
    # attend_to_expansion_tokens, colbert-ai's attend_to_mask_tokens); False masks them out
    attend_to_expansion_tokens: bool = False
    # token_embed: what each text is (score cases: the first text is the query, the second the
    # document, so no role)
    role: Literal["query", "document"] | None = None
    # score: document tokens left out of MaxSim (pylate's skiplist_words, its default the
    # punctuation; colbert-ai's mask_punctuation), each a token of the vocabulary
    skiplist: list[str] = Field(default_factory=list)
    # what the vLLM runners send: the ids built as above (`token_ids`) or the bare text, as a
    # user who does not build them does (`text`)
    send: Literal["token_ids", "text"] = "token_ids"


def check_colbert(case) -> None:
    """A `colbert:` key only where both sides can follow it (raised as ValueError: the loader
    reports it at the case's file:line)."""
    spec: ColbertIds | None = case.request.colbert
    if spec is None:
        return
    if case.task not in COLBERT_TASKS:
        raise ValueError(f"colbert applies to tasks {', '.join(COLBERT_TASKS)}, not {case.task!r}")
    if case.task == "token_embed" and spec.role is None:
        raise ValueError("colbert on token_embed: say what each text is, role: query | document")
    if case.task == "token_embed" and spec.skiplist:
        raise ValueError(
            "colbert skiplist applies to score (MaxSim); token_embed compares every token"
        )
    if case.reference != COLBERT_RECIPES[case.task]:
        raise ValueError(
            f"colbert on {case.task}: the reference must build the ids, "
            f"reference: {COLBERT_RECIPES[case.task]} (not {case.reference!r})"
        )
    if case.task == "score":
        if spec.role is not None:
            raise ValueError("colbert on score: a pair is (query, document); drop `role`")
        if spec.send != "text":
            raise ValueError(
                "colbert on score: vLLM's LLM.score is sent the texts (send: text); the "
                "token-id form of each side is a token_embed case"
            )
    others = [
        name
        for name, on in (
            ("prompt_form", case.prompt_form != "text"),
            ("truncate", case.request.truncate is not None),
            ("prompt_name", case.request.prompt_name is not None),
            ("chat", case.request.chat is not None),
        )
        if on
    ]
    if others:
        raise ValueError(f"colbert builds the ids itself: drop {', '.join(others)}")
    from harness.matrix.runner_names import runner_info

    servers = [r for r in case.runners if runner_info(r).is_server]
    if servers:
        raise ValueError(
            f"colbert on {', '.join(servers)}: the ids are sent through vLLM's offline LLM API "
            f"only; use hf, vllm-v1, vllm-v2, vllm-auto"
        )
