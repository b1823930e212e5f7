"""The text and text-pair input sets: the shipped texts and word list, seeded word sequences,
ranked query-document pairs (also in the prompts of LLM rerankers), adversarial texts and math
steps. harness.matrix.inputs names, versions and hashes them."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Union

import numpy as np

DATA = Path(__file__).parent.parent / "data"
# text, (query, document), {"image": "<set>/<i>"} (also as a document), or one prompt holding a
# text and an image: {"text": "...", "image": "<set>/<i>"}
Item = Union[str, tuple, dict]


def shipped_texts() -> list[str]:
    """The shipped texts (data/texts.txt), one a line."""
    return [line for line in (DATA / "texts.txt").read_text().splitlines() if line.strip()]


def _words() -> list[str]:
    return (DATA / "words.txt").read_text().split()


def _short_texts() -> tuple[Item, ...]:
    return tuple(shipped_texts())


def _word_salad(seed: int, low: int, high: int, count: int = 8) -> tuple[Item, ...]:
    """`count` seeded word sequences of low..high words from the shipped word list."""
    rng = np.random.default_rng(seed)
    words = _words()
    return tuple(
        " ".join(words[i] for i in rng.integers(0, len(words), int(rng.integers(low, high)))) + "."
        for _ in range(count)
    )


def _long_texts() -> tuple[Item, ...]:
    # 40..90 words: long enough to exercise many positions (and ModernBERT's sliding window)
    return _word_salad(20261129, 40, 90)


def _overlong_texts() -> tuple[Item, ...]:
    # 150..250 words: longer than the synthetic models' context, for truncation checks
    return _word_salad(11, 150, 250)


def _one_word_texts() -> tuple[Item, ...]:
    # single words of the shipped list (one token each in the synthetic Unigram XLM-R vocabulary,
    # which holds every listed word whole), then two sentences: a prompt of one content token
    # beside longer ones (vllm#33873: BGE-M3's sparse weights of one token came back a scalar)
    words = _words()
    return (*(words[i] for i in (40, 56, 80, 120, 200, 300)), *shipped_texts()[:2])


def _mixed_length_texts() -> tuple[Item, ...]:
    # short texts (7-26 tokens) interleaved with over-long ones (truncated by the case to its
    # max_model_len): prompts at the context limit chunked beside short ones in one batch
    short, long = shipped_texts(), _overlong_texts()
    return tuple(x for pair in zip(short[:4], long[:4]) for x in pair)


def _ranked_pairs(
    docs: list[str], owners: list[int], make_query: Callable[[str], str], seed: int
) -> tuple[Item, ...]:
    """Each query meets 4 documents: the one it was made from first, then 3 others (seeded), so
    rankings can be compared."""
    rng = np.random.default_rng(seed)
    pairs = []
    for own in owners:
        others = [
            docs[j] for j in rng.choice([j for j in range(len(docs)) if j != own], 3, replace=False)
        ]
        pairs += [(make_query(docs[own]), d) for d in [docs[own], *others]]
    return tuple(pairs)


def _query_document_pairs() -> tuple[Item, ...]:
    return _ranked_pairs(
        shipped_texts(),
        [qi * 4 for qi in range(6)],
        lambda doc: " ".join(doc.lower().rstrip(".?!").split()[1:5]),
        seed=7,
    )


def _long_query_document_pairs() -> tuple[Item, ...]:
    # 4 queries x 4 long documents (40..90 words): prompts longer than a prefix-cache block
    return _ranked_pairs(
        list(_long_texts()),
        [qi * 2 for qi in range(4)],
        lambda doc: " ".join(doc.rstrip(".").split()[:4]),
        seed=8,
    )


def _long_document_query_pairs() -> tuple[Item, ...]:
    # the pairs above with their texts swapped: a long first text (54-91 tokens) and a 4-word
    # second one, so a left cut to a few dozen tokens keeps the end of the first text (token
    # type 0), the boundary and the whole second text (type 1): every pair stays distinct
    return tuple((d, q) for q, d in _long_query_document_pairs())


# Qwen3-Reranker's prompt (its model card, https://huggingface.co/Qwen/Qwen3-Reranker-0.6B),
# split in two as vLLM's own example sends it to the score API
# (examples/offline_inference/qwen3_reranker.py, query_template and document_template): the query
# carries the chat prefix, the instruction and the query, the document carries the document and
# the assistant's empty think block. Only how the text is sent comes from vLLM; the reference
# (harness/runners/hf/yes_no_reranker.py) transcribes the card's transformers usage on its own,
# and the token-id check holds the two to the same ids.
QWEN3_RERANKER_PREFIX = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query "
    'and the Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n'
    "<|im_start|>user\n"
)
QWEN3_RERANKER_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
QWEN3_RERANKER_INSTRUCTION = (
    "Given a web search query, retrieve relevant passages that answer the query"
)


def _qwen3_reranker_pairs() -> tuple[Item, ...]:
    """query-document-pairs in Qwen3-Reranker's prompt, split as vLLM's example splits it:
    (prefix + "<Instruct>: {instruction}\\n<Query>: {query}\\n", "<Document>: {doc}" + suffix)."""
    return tuple(
        (
            f"{QWEN3_RERANKER_PREFIX}<Instruct>: {QWEN3_RERANKER_INSTRUCTION}\n<Query>: {q}\n",
            f"<Document>: {d}{QWEN3_RERANKER_SUFFIX}",
        )
        for q, d in _query_document_pairs()
    )


# mxbai-rerank-v2's prompt (its published code, mixedbread-ai/mxbai-rerank's
# mxbai_rerank_v2.py: chat prefix, "query: ...", separator, "document: ...", separator, task
# prompt, chat suffix), split in two at the separator between query and document, as vLLM's
# score API joins an LLM reranker's pair (query + document). The recipe
# (harness/runners/hf/yes_no_reranker.py) transcribes the same code on its own.
MXBAI_RERANK_V2_PREFIX = (
    "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    "<|im_end|>\n<|im_start|>user\n"
)
MXBAI_RERANK_V2_TAIL = (
    "You are a search relevance expert who evaluates how well documents match search queries. "
    "For each query-document pair, carefully analyze the semantic relationship between them, "
    "then provide your binary relevance judgment (0 for not relevant, 1 for relevant).\n"
    "Relevance:<|im_end|>\n<|im_start|>assistant\n"
)


def _mxbai_rerank_v2_pairs() -> tuple[Item, ...]:
    """query-document-pairs in mxbai-rerank-v2's prompt (no instruction):
    (prefix + "query: {query}\\n", "document: {doc}\\n" + task prompt + suffix)."""
    return tuple(
        (f"{MXBAI_RERANK_V2_PREFIX}query: {q}\n", f"document: {d}\n{MXBAI_RERANK_V2_TAIL}")
        for q, d in _query_document_pairs()
    )


# bge-reranker-v2-gemma's prompt (FlagEmbedding's FlagLLMReranker defaults: "A: " before the
# query, "B: " before the passage, "\n" between them and before its task prompt), split in two
# as vLLM's own MTEB test of the model sends it to the score API (query "A: {query}\n", document
# "B: {doc}\n{prompt}"), which joins an LLM reranker's pair without a separator. The recipe
# (harness/runners/hf/flag_llm_reranker.py) transcribes FlagEmbedding's code on its own.
BGE_RERANKER_GEMMA_PROMPT = (
    "Given a query A and a passage B, determine whether the passage contains an answer to the "
    "query by providing a prediction of either 'Yes' or 'No'."
)


def _bge_reranker_gemma_pairs() -> tuple[Item, ...]:
    """query-document-pairs in bge-reranker-v2-gemma's prompt:
    ("A: {query}\n", "B: {doc}\n" + task prompt)."""
    return tuple(
        (f"A: {q}\n", f"B: {d}\n{BGE_RERANKER_GEMMA_PROMPT}") for q, d in _query_document_pairs()
    )


def _adversarial_texts() -> tuple[Item, ...]:
    """Inputs where engines break: scripts and normalisation, whitespace, text that spells special
    tokens, duplicates and equal lengths in one batch, and one token beside a long input."""
    cafe_nfc, cafe_nfd = (
        "caf\u00e9 au lait",
        "cafe\u0301 au lait",
    )  # the same word, composed and decomposed
    long = (
        " ".join(_words()[i % 60] for i in range(90)) + "."
    )  # about 100 tokens: inside 128 positions
    return (
        "\u732b\u304c\u9759\u304b\u306b\u5ea7\u3063\u3066\u3044\u308b\u3002",  # Japanese
        # Arabic (RTL)
        "\u0627\u0644\u0642\u0637\u0629 \u062a\u062c\u0644\u0633 \u0628\u0647\u062f\u0648\u0621",
        # emoji, ZWJ sequence
        "family \U0001f468\u200d\U0001f469\u200d\U0001f467 and a cat \U0001f408",
        cafe_nfc,
        cafe_nfd,
        "  leading and trailing spaces  ",
        "tabs\tand\nnew\nlines",
        "a",
        "cat",
        "the [SEP] token and [CLS] spelled out",
        "ends with <|endoftext|> and <pad> as text",
        "The cat sat quietly on the warm stone near the river.",
        "The cat sat quietly on the warm stone near the river.",  # a duplicate in the same batch
        "red fox runs",
        "old map fades",
        "big dog barks",  # equal lengths
        long,
        "x",  # one token beside a long input
    )


def _adversarial_pairs() -> tuple[Item, ...]:
    texts = _adversarial_texts()
    doc = "The cat sat quietly on the warm stone near the river."
    return tuple([("where does the cat sit", t) for t in texts[:9]] + [(t, doc) for t in texts[9:]])


def _math_steps() -> tuple[Item, ...]:
    # Qwen2.5-Math-PRM format: each step ends with the step tag <extra_0>
    lines = [ln for ln in (DATA / "math_steps.txt").read_text().splitlines() if ln.strip()]
    return tuple("".join(step.strip() + "<extra_0>" for step in ln.split("|")) for ln in lines)


TEXT_SETS: dict[str, tuple[int, Callable[[], tuple[Item, ...]]]] = {
    "short-texts": (1, _short_texts),
    "long-texts": (1, _long_texts),
    "overlong-texts": (1, _overlong_texts),
    "mixed-length-texts": (1, _mixed_length_texts),
    "one-word-texts": (1, _one_word_texts),
    "query-document-pairs": (1, _query_document_pairs),
    "long-query-document-pairs": (1, _long_query_document_pairs),
    "long-document-query-pairs": (1, _long_document_query_pairs),
    "qwen3-reranker-pairs": (1, _qwen3_reranker_pairs),
    "mxbai-rerank-v2-pairs": (1, _mxbai_rerank_v2_pairs),
    "math-steps": (1, _math_steps),
    "adversarial-texts": (1, _adversarial_texts),
    "adversarial-pairs": (1, _adversarial_pairs),
    "bge-reranker-v2-gemma-pairs": (1, _bge_reranker_gemma_pairs),
}
