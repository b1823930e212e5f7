"""The recipe of Qwen3-VL-Reranker (a Qwen3VLForConditionalGeneration scored by its "yes"/"no"
logits): text or image documents against a text query.

From the model's own published scoring code, not vLLM's: QwenLM/Qwen3-VL-Embedding,
src/models/qwen3_vl_reranker.py (`Qwen3VLReranker`; read through the `search` tool's code index,
a stored fork of that file):
  messages = [system: 'Judge whether the Document meets the requirements based on the Query and
              the Instruct provided. Note that the answer can only be "yes" or "no".',
              user: ['<Instruct>: ' + instruction, '<Query>:', <query parts>,
                     '\\n<Document>:', <document parts>]]
  (format_mm_instruction; format_mm_content puts a side's images before its texts and "NULL"
  for an empty side), default instruction "Given a search query, retrieve relevant candidates
  that answer the query.";
  text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True);
  inputs = processor(text=text, images=...); h = model.model(**inputs).last_hidden_state[:, -1];
  score = sigmoid(h @ (lm_head[yes] - lm_head[no])) (get_binary_linear, compute_scores).
Not followed: qwen_vl_utils.process_vision_info (not installed here; its resize keeps the
harness's 64x64 images as they are: min_pixels is 4 tiles of 32x32), the left-padded batches
(one pair per forward, as every recipe) and max_length (`truncate` refused).
"""

from __future__ import annotations

import numpy as np

from harness.matrix.request import Request
from harness.runners.hf import HFRunner, recipe

SYSTEM = (
    "Judge whether the Document meets the requirements based on the Query and the Instruct "
    'provided. Note that the answer can only be "yes" or "no".'
)
DEFAULT_INSTRUCTION = "Given a search query, retrieve relevant candidates that answer the query."


def content_parts(item, prefix: str) -> list[dict]:
    """format_mm_content for one side: its prefix, then its image (if any), then its text."""
    from harness.matrix.images import is_image

    parts: list[dict] = [{"type": "text", "text": prefix}]
    if is_image(item):
        parts.append({"type": "image"})
        if item.get("text"):
            parts.append({"type": "text", "text": str(item["text"])})
    elif item:
        parts.append({"type": "text", "text": str(item)})
    else:
        parts.append({"type": "text", "text": "NULL"})
    return parts


def reranker_messages(query, document, instruction: str = DEFAULT_INSTRUCTION) -> list[dict]:
    """format_mm_instruction: the system judge prompt, then the instruction, query and document
    as one user turn."""
    user = [{"type": "text", "text": "<Instruct>: " + instruction}]
    user += content_parts(query, "<Query>:") + content_parts(document, "\n<Document>:")
    return [
        {"role": "system", "content": [{"type": "text", "text": SYSTEM}]},
        {"role": "user", "content": user},
    ]


@recipe(
    "qwen3-vl-reranker",
    default_for=[("Qwen3VLForConditionalGeneration", "score")],
    honours=["score_template_kwargs"],
)
def _qwen3_vl_reranker(runner: HFRunner, items: list, request: Request) -> list[np.ndarray]:
    """(query, document) -> sigmoid(last hidden state . (lm_head["yes"] - lm_head["no"])) over
    the published prompt, rendered by the checkpoint's chat template; images through the
    checkpoint's processor. One pair per forward. The published code's one input beside the
    pairs, `instruction`, is the request's score_template_kwargs of that name."""
    import torch
    from transformers import AutoProcessor

    from harness.matrix.images import image, is_image

    if request.truncate:
        raise ValueError("qwen3-vl-reranker does not implement truncate")
    variables = dict(request.score_template_kwargs or {})
    instruction = variables.pop("instruction", DEFAULT_INSTRUCTION)
    if variables:
        raise ValueError(
            f"qwen3-vl-reranker: the published code takes `instruction` only, not "
            f"{', '.join(sorted(variables))} (score_template_kwargs)"
        )
    assert runner.req is not None
    req = runner.req
    lm = runner.auto_model("Qwen3VLForConditionalGeneration")
    processor = runner.loaded(
        "processor", lambda: AutoProcessor.from_pretrained(req.model_dir, local_files_only=True)
    )
    if not processor.chat_template:
        raise ValueError(
            "qwen3-vl-reranker: the checkpoint has no chat template (the published code renders "
            "its prompt with it); build it with `tokenizer: {chat_template: true}`"
        )
    vocab = processor.tokenizer.get_vocab()
    if "yes" not in vocab or "no" not in vocab:
        raise ValueError("qwen3-vl-reranker: 'yes' / 'no' are not tokens of this tokenizer")
    head = lm.lm_head.weight
    direction = (head[vocab["yes"]] - head[vocab["no"]]).to(head.dtype)
    out = []
    with torch.inference_mode():
        for query, document in items:
            text = processor.apply_chat_template(
                reranker_messages(query, document, instruction),
                tokenize=False,
                add_generation_prompt=True,
            )
            pictures = [image(x["image"]) for x in (query, document) if is_image(x)]
            enc = processor(text=[text], images=pictures or None, return_tensors="pt")
            runner.note_tokens(enc["input_ids"][0].tolist())
            enc = {k: v.to(req.device) for k, v in enc.items()}
            if "pixel_values" in enc:
                enc["pixel_values"] = enc["pixel_values"].to(head.dtype)
            hidden = lm.model(**enc).last_hidden_state[0, -1]
            score = torch.sigmoid((hidden * direction).sum().float())
            out.append(np.asarray([float(score)], dtype=np.float32))
    return out


# A Qwen3-VL sequence classifier as vLLM's converter (examples/pooling/score/
# convert_model_to_seq_cls.py) and its users save one: the VLM's backbone (model.visual,
# model.language_model) and a `score.weight` [num_labels, hidden], num_labels on the top-level
# config. transformers has no Qwen3VLForSequenceClassification; the recipe is its
# *ForSequenceClassification convention (Qwen3ForSequenceClassification's): the score head on
# the last token's final hidden state, softmax over the labels (sigmoid for one).
@recipe(
    "qwen3-vl-sequence-classification",
    default_for=[("Qwen3VLForSequenceClassification", "classify")],
)
def _qwen3_vl_sequence_classification(
    runner: HFRunner, items: list, request: Request
) -> list[np.ndarray]:
    """text -> softmax(score . h_last) of Qwen3VLModel, the head read from the checkpoint."""
    import torch
    from transformers import AutoTokenizer, Qwen3VLModel

    from harness.runners.hf import torch_dtype

    if request.truncate:
        raise ValueError("qwen3-vl-sequence-classification does not implement truncate")
    assert runner.req is not None
    req = runner.req
    model = runner.loaded(
        "qwen3-vl-backbone",
        lambda: (
            Qwen3VLModel.from_pretrained(
                req.model_dir, dtype=torch_dtype(req.dtype), local_files_only=True
            )
            .to(req.device)
            .eval()
        ),
    )
    head = runner.loaded("score", lambda: _score_head(req.model_dir, model.dtype, req.device))
    tok = runner.loaded(
        "tokenizer", lambda: AutoTokenizer.from_pretrained(req.model_dir, local_files_only=True)
    )
    out = []
    with torch.inference_mode():
        for text in items:
            ids = tok(text)["input_ids"]
            runner.note_tokens(ids)
            hidden = model(input_ids=torch.tensor([ids], device=req.device)).last_hidden_state
            logits = (hidden[0, -1] @ head.T).float()
            probs = torch.sigmoid(logits) if logits.numel() == 1 else torch.softmax(logits, -1)
            out.append(probs.cpu().numpy().astype(np.float32))
    return out


def _score_head(model_dir: str, dtype, device):
    """The checkpoint's `score.weight` (transformers' Qwen3VLModel does not read it)."""
    from pathlib import Path

    import torch
    from safetensors.torch import load_file

    weights = load_file(str(Path(model_dir) / "model.safetensors"))
    if "score.weight" not in weights:
        raise ValueError(f"{model_dir}: no score.weight (not a sequence-classification checkpoint)")
    return weights["score.weight"].to(device=device, dtype=dtype or torch.float32)
