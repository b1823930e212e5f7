"""How a case's texts reach the model (`prompt_form:`): as text, as the tokenizer's token ids, as
the model's input embeddings of those ids (prompt embeddings), or mixed in one batch.

The forms per item are the one place both sides read: the runners send each item so, the HF
reference runs each item so (token ids; `inputs_embeds`), and the verdict holds the runner's
evidence of what the engine received to the same list (harness.judge.compare.form_problem)."""

from __future__ import annotations

from typing import Literal

PromptForm = Literal["text", "token_ids", "embeds", "mixed"]
ITEM_FORMS = ("text", "token_ids", "embeds")  # what one item is sent as; `mixed` cycles them
FORM_TASKS = ("embed", "classify")  # one text per item, pooled to one vector
# form -> the tasks the server runners send it for (token ids: `input: [[ids]]`, /v1/embeddings)
SERVER_FORMS: dict[str, tuple[str, ...]] = {"text": FORM_TASKS, "token_ids": ("embed",)}


def item_forms(prompt_form: str, n: int) -> list[str]:
    """What each of n items is sent as: `mixed` alternates text, token ids and embeddings, so one
    batch holds all three."""
    if prompt_form == "mixed":
        return [ITEM_FORMS[i % len(ITEM_FORMS)] for i in range(n)]
    if prompt_form not in ITEM_FORMS:
        raise ValueError(f"unknown prompt_form {prompt_form!r}; valid: {ITEM_FORMS + ('mixed',)}")
    return [prompt_form] * n


def sends_embeds(prompt_form: str) -> bool:
    return prompt_form in ("embeds", "mixed")
