"""The input sets with images: synthetic images alone, beside and inside texts, query-image
pairs, and the prompts of DSE, GME and ColQwen3 around them. harness.matrix.inputs names,
versions and hashes them."""

from __future__ import annotations

from typing import Callable

import numpy as np

from harness.matrix.text_inputs import Item, shipped_texts


def _images() -> tuple[Item, ...]:
    from harness.matrix.images import synthetic_images

    return tuple({"image": f"synthetic-images/{i}"} for i in range(len(synthetic_images())))


def _texts_and_images() -> tuple[Item, ...]:
    # text and image prompts interleaved in one batch
    texts, images = shipped_texts()[:8], _images()
    return tuple(x for pair in zip(texts, images) for x in pair)


def _texts_with_images() -> tuple[Item, ...]:
    # one prompt each holding a caption AND an image (what a dual encoder such as CLIP refuses)
    texts, images = shipped_texts()[:8], _images()
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


def _query_captioned_image_pairs() -> tuple[Item, ...]:
    # query-image-pairs with a caption in each image document: an image and a text in one
    # document, the shape an image-and-text corpus holds (the described images keep their own
    # captions, the others a generic one)
    captions = dict(zip(_DESCRIBED, _DESCRIPTIONS))
    pairs = []
    for q, doc in _query_image_pairs():
        index = int(str(doc["image"]).rsplit("/", 1)[1])
        pairs.append((q, {**doc, "text": "Figure: " + captions.get(index, "an abstract picture")}))
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
    texts, images = shipped_texts()[:8], _images()
    return tuple(
        x for t, im in zip(texts, images) for x in (t + COLQWEN3_QUERY_SUFFIX, _colqwen3_page(im))
    )


def _colqwen3_query_page_pairs() -> tuple[Item, ...]:
    # query-image-pairs in ColQwen3's prompts: each query meets the page it describes first
    return tuple((q + COLQWEN3_QUERY_SUFFIX, _colqwen3_page(d)) for q, d in _query_image_pairs())


MULTIMODAL_SETS: dict[str, tuple[int, Callable[[], tuple[Item, ...]]]] = {
    "synthetic-images": (1, _images),
    "texts-and-images": (1, _texts_and_images),
    "texts-with-images": (1, _texts_with_images),
    "query-image-pairs": (1, _query_image_pairs),
    "query-captioned-image-pairs": (1, _query_captioned_image_pairs),
    "image-query-pairs": (1, _image_query_pairs),
    "dse-queries-and-pages": (1, _dse_queries_and_pages),
    "gme-text-queries": (1, _gme_text_queries),
    "gme-images": (1, _gme_images),
    "gme-queries-and-images": (1, _gme_queries_and_images),
    "colqwen3-queries-and-pages": (1, _colqwen3_queries_and_pages),
    "colqwen3-query-page-pairs": (1, _colqwen3_query_page_pairs),
}
