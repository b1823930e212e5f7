"""Prompt sets: named, seeded, versioned and hashed, so goldens know what they were made from."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Union

import numpy as np

DATA = Path(__file__).parent.parent / "data"
# text, (query, document), {"image": "<set>/<i>"} (also as a document), or one prompt holding a
# text and an image: {"text": "...", "image": "<set>/<i>"}
Item = Union[str, tuple, dict]


@dataclass(frozen=True)
class InputSet:
    name: str
    version: int
    items: tuple[Item, ...]
    # what the hash sees when items hold machine-specific paths (files users bring)
    hash_items: tuple | None = None

    @property
    def sha256(self) -> str:
        items = self.hash_items if self.hash_items is not None else self.items
        payload = json.dumps({"name": self.name, "version": self.version, "items": items})
        parts = [x for it in self.items for x in (it if isinstance(it, tuple) else (it,))]
        refs = [x["image"] for x in parts if isinstance(x, dict) and "image" in x]
        if refs:  # images are hashed over their pixels, not over their references
            from harness.matrix.images import pixels_sha256

            payload += pixels_sha256(refs)
        return hashlib.sha256(payload.encode()).hexdigest()

    @property
    def pairs(self) -> bool:
        return bool(self.items) and isinstance(self.items[0], tuple)


def _texts() -> list[str]:
    return [line for line in (DATA / "texts.txt").read_text().splitlines() if line.strip()]


def _words() -> list[str]:
    return (DATA / "words.txt").read_text().split()


def _short_texts() -> tuple[Item, ...]:
    return tuple(_texts())


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
    return (*(words[i] for i in (40, 56, 80, 120, 200, 300)), *_texts()[:2])


def _mixed_length_texts() -> tuple[Item, ...]:
    # short texts (7-26 tokens) interleaved with over-long ones (truncated by the case to its
    # max_model_len): prompts at the context limit chunked beside short ones in one batch
    short, long = _texts(), _overlong_texts()
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
        _texts(),
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


def _images() -> tuple[Item, ...]:
    from harness.matrix.images import synthetic_images

    return tuple({"image": f"synthetic-images/{i}"} for i in range(len(synthetic_images())))


def _texts_and_images() -> tuple[Item, ...]:
    # text and image prompts interleaved in one batch
    texts, images = _texts()[:8], _images()
    return tuple(x for pair in zip(texts, images) for x in pair)


def _texts_with_images() -> tuple[Item, ...]:
    # one prompt each holding a caption AND an image (what a dual encoder such as CLIP refuses)
    texts, images = _texts()[:8], _images()
    return tuple({"text": t, **im} for t, im in zip(texts, images))


# captions of synthetic images (harness/matrix/images.py), by image index
_DESCRIPTIONS = (
    "a smooth colour gradient",
    "black and white checkerboard squares",
    "a red circle and a green box",
    "a blue triangle crossed by a line",
    "the word cat in black letters",
    "yellow digits on dark blue",
)
_DESCRIBED = (0, 3, 4, 5, 6, 7)


def _query_image_pairs() -> tuple[Item, ...]:
    # each text query meets 4 images: the one it describes first, then 3 others (rankings are
    # checked)
    queries, described = _DESCRIPTIONS, _DESCRIBED
    rng = np.random.default_rng(5)
    images = _images()
    pairs = []
    for q, own in zip(queries, described):
        others = rng.choice([j for j in range(len(images)) if j != own], 3, replace=False)
        pairs += [(q, images[j]) for j in [own, *others]]
    return tuple(pairs)


def _image_query_pairs() -> tuple[Item, ...]:
    # each image query meets 4 documents: the caption describing it first, another caption, then
    # 2 other images (seeded): image->text and image->image pairs, two images in one prompt
    captions = dict(zip(_DESCRIBED, _DESCRIPTIONS))
    rng = np.random.default_rng(6)
    images = _images()
    pairs = []
    for own in (0, 3, 5, 6):
        other_caption = captions[int(rng.choice([j for j in captions if j != own]))]
        others = rng.choice([j for j in range(len(images)) if j != own], 2, replace=False)
        docs = [captions[own], other_caption, *(images[j] for j in others)]
        pairs += [(images[own], d) for d in docs]
    return tuple(pairs)


# The prompts of the DSE model card (MrLight/dse-qwen2-2b-mrl-v1): Qwen2-VL's chat template with
# add_generation_prompt (its default system message), then "<|endoftext|>", whose last hidden state
# is the embedding. A query carries the card's dummy image (Image.new("RGB", (28, 28))).
DSE_QUERY = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
    "<|vision_start|><|image_pad|><|vision_end|>Query: {}<|im_end|>\n"
    "<|im_start|>assistant\n<|endoftext|>"
)
DSE_DOCUMENT = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
    "<|vision_start|><|image_pad|><|vision_end|>What is shown in this image?<|im_end|>\n"
    "<|im_start|>assistant\n<|endoftext|>"
)


def _dse_queries_and_pages() -> tuple[Item, ...]:
    # DSE-style retrieval prompts, queries and page images interleaved in one batch: each caption
    # as a query (with the dummy image), each described image as a document
    images = _images()
    queries = [{"text": DSE_QUERY.format(q), "image": "blank/28"} for q in _DESCRIPTIONS]
    pages = [{"text": DSE_DOCUMENT, **images[i]} for i in _DESCRIBED]
    return tuple(x for pair in zip(queries, pages) for x in pair)


# The prompt of GME's published inference code (Alibaba-NLP/gme-Qwen2-VL-2B-Instruct,
# gme_inference.py, GmeQwen2VL.embed): the instruction as the system message, the user turn the
# image placeholder (when there is an image) then the text, and "<|endoftext|>" after the
# assistant header, whose last hidden state is the embedding. A query takes the caller's
# instruction; a corpus item (is_query=False) always the default one.
GME_DEFAULT_INSTRUCTION = "You are a helpful assistant."
GME_QUERY_INSTRUCTION = "Find an image that matches the given text."  # the card's example
GME_IMAGE_PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"


def gme_prompt(text: str | None, image: bool, instruction: str = GME_DEFAULT_INSTRUCTION) -> str:
    user = (GME_IMAGE_PLACEHOLDER if image else "") + (text or "")
    return (
        f"<|im_start|>system\n{instruction}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
        "<|im_start|>assistant\n<|endoftext|>"
    )


def _gme_text_queries() -> tuple[Item, ...]:
    # text-only queries (get_text_embeddings with the card's example instruction)
    return tuple(gme_prompt(q, False, GME_QUERY_INSTRUCTION) for q in _DESCRIPTIONS)


def _gme_images() -> tuple[Item, ...]:
    # images as corpus items (get_image_embeddings, is_query=False): no text, the default
    # instruction; 56x56 images, so the card's own pre-resize to multiples of 28 changes nothing
    return tuple(
        {"text": gme_prompt(None, True), "image": f"synthetic-images-56/{i}"} for i in _DESCRIBED
    )


def _gme_queries_and_images() -> tuple[Item, ...]:
    # the two above interleaved in one batch: text-only prompts beside image prompts
    return tuple(x for pair in zip(_gme_text_queries(), _gme_images()) for x in pair)


# ColQwen3's prompts as colpali-engine 0.3.18 writes them (ColQwen3Processor, not vLLM): a query
# is its text then the query augmentation token 10 times (process_queries), a page the image in
# visual_prompt_prefix (process_images). The reference checks them against the package.
COLQWEN3_QUERY_SUFFIX = "<|endoftext|>" * 10
COLQWEN3_PAGE = (
    "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Describe the image.<|im_end|>"
    "<|endoftext|>"
)


def _colqwen3_page(image: Item) -> Item:
    return {"text": COLQWEN3_PAGE, **image}


def _colqwen3_queries_and_pages() -> tuple[Item, ...]:
    # ColQwen3 queries and pages interleaved in one batch, every synthetic image a page
    texts, images = _texts()[:8], _images()
    return tuple(
        x for t, im in zip(texts, images) for x in (t + COLQWEN3_QUERY_SUFFIX, _colqwen3_page(im))
    )


def _colqwen3_query_page_pairs() -> tuple[Item, ...]:
    # query-image-pairs in ColQwen3's prompts: each query meets the page it describes first
    return tuple((q + COLQWEN3_QUERY_SUFFIX, _colqwen3_page(d)) for q, d in _query_image_pairs())


_SETS: dict[str, tuple[int, Callable[[], tuple[Item, ...]]]] = {
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
    "synthetic-images": (1, _images),
    "texts-and-images": (1, _texts_and_images),
    "texts-with-images": (1, _texts_with_images),
    "query-image-pairs": (1, _query_image_pairs),
    "image-query-pairs": (1, _image_query_pairs),
    "dse-queries-and-pages": (1, _dse_queries_and_pages),
    "gme-text-queries": (1, _gme_text_queries),
    "gme-images": (1, _gme_images),
    "gme-queries-and-images": (1, _gme_queries_and_images),
    "colqwen3-queries-and-pages": (1, _colqwen3_queries_and_pages),
    "colqwen3-query-page-pairs": (1, _colqwen3_query_page_pairs),
    "bge-reranker-v2-gemma-pairs": (1, _bge_reranker_gemma_pairs),
}
INPUT_SET_NAMES = tuple(sorted(_SETS))


_REGISTERED: dict[
    str, InputSet
] = {}  # sets read from files or the matrix (harness.matrix.input_files)


def register(inputs: InputSet) -> InputSet:
    _REGISTERED[inputs.name] = inputs
    return inputs


def input_set(name: str) -> InputSet:
    if name in _REGISTERED:
        return _REGISTERED[name]
    return _builtin(name)


def is_known(name: str) -> bool:
    return name in _SETS or name in _REGISTERED


@lru_cache(maxsize=None)
def _builtin(name: str) -> InputSet:
    try:
        version, make = _SETS[name]
    except KeyError:
        raise ValueError(
            f"unknown input set {name!r}; valid: {', '.join(INPUT_SET_NAMES)}"
        ) from None
    return InputSet(name, version, make())


def distinct_inputs(items: tuple[Item, ...]) -> int:
    """How many different inputs a set holds (a duplicate counts once)."""
    return len({json.dumps(it, sort_keys=True, default=str) for it in items})


def query_groups(items: tuple[Item, ...]) -> list[list[int]]:
    """Indices of pairs grouped by query, in order: the unit a ranking is compared on."""
    groups: dict[str, list[int]] = {}
    for i, it in enumerate(items):
        groups.setdefault(str(it[0] if isinstance(it, tuple) else it), []).append(i)
    return list(groups.values())
