"""A score document's content parts (an image, then its text) joined by a line break: the image
placeholder and the caption end up a line apart, a token the model's own prompt never has."""

# vllm#38617 (merged 2026-03-31, "do not add extra linebreak for score/rerank with chat
# template"): the score content parser took the chat parser's default separator, "\n", between a
# document's multimodal placeholder and its text; the fix passes "". This puts the default back.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = "vllm#38617"
MODULE = "vllm.entrypoints.pooling.scoring.utils"
FILES = ["vllm/entrypoints/pooling/scoring/utils.py"]
CASES = ["qwen3-vl-tiny-reranker-captioned-image-score"]  # documents of an image and a caption
MATRIX = "matrices/multimodal.yaml"


def apply(module):
    parse = module._parse_chat_message_content_parts

    def _parse_chat_message_content_parts(*args, **kwargs):
        kwargs["multimodal_content_part_separator"] = "\n"
        return parse(*args, **kwargs)

    module._parse_chat_message_content_parts = _parse_chat_message_content_parts
