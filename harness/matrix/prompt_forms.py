"""How a case's texts reach the model (`prompt_form:`): as text, as the tokenizer's token ids, as
the model's input embeddings of those ids (prompt embeddings), or mixed in one batch.

The forms per item are the one place both sides read: the runners send each item so, the HF
reference runs each item so (token ids; `inputs_embeds`), and the verdict holds the runner's
evidence of what the engine received to the same list (harness.judge.compare.form_problem).
Where a case may use a form other than text is checked when the matrix loads
(check_prompt_form)."""

from __future__ import annotations

from typing import Any, Literal

from harness.matrix.runner_names import runner_info

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


def check_prompt_form(case: Any) -> None:
    """A prompt form other than text only where the task, the inputs and the runners can take it
    (raised as a ValueError: the loader reports it at the case's file:line)."""
    from harness.matrix.inputs import input_set

    form = case.prompt_form
    if form == "text":
        return
    if case.task not in FORM_TASKS:
        raise ValueError(
            f"prompt_form {form!r} applies to tasks {', '.join(FORM_TASKS)} (one text per item), "
            f"not {case.task!r}"
        )
    items = input_set(case.inputs).items
    odd = next((i for i, it in enumerate(items) if not isinstance(it, str)), None)
    if odd is not None:
        raise ValueError(
            f"prompt_form {form!r} sends texts as token ids or embeddings, but input "
            f"{case.inputs!r} item {odd} is not a text ({str(items[odd])[:60]!r})"
        )
    if form == "mixed" and len(items) < 3:
        raise ValueError(
            f"prompt_form 'mixed' alternates text, token_ids and embeds: it needs >= 3 "
            f"items, {case.inputs!r} has {len(items)}"
        )
    if case.mteb_tasks:
        raise ValueError(
            f"prompt_form {form!r} with mteb_tasks: MTEB sends its own texts as text; "
            f"give the prompt forms a case of their own"
        )
    if case.request.truncate is not None:
        raise ValueError(
            f"prompt_form {form!r} with truncate: token-id and embedding prompts are sent whole "
            f"(vLLM does not truncate them as it truncates text); drop one of them"
        )
    servers = [r for r in case.runners if runner_info(r).is_server]
    for f in sorted(set(item_forms(form, 3))):
        if servers and case.task not in SERVER_FORMS.get(f, ()):
            why = (
                "prompt embeddings go to vLLM's offline LLM API only (its server takes them "
                "only as torch.save payloads, which the harness does not send)"
                if f == "embeds"
                else f"the server runners send {f} for tasks {', '.join(SERVER_FORMS[f])} only"
            )
            raise ValueError(
                f"prompt_form {form!r} on {', '.join(servers)}: {why}; use offline runners "
                f"(hf, vllm-v1, vllm-v2, vllm-auto)"
            )
    if sends_embeds(form) and case.engine.get("enable_prompt_embeds") is not True:
        raise ValueError(
            f"prompt_form {form!r} sends prompt embeddings: vLLM refuses them unless the engine "
            f"has them on; add `engine: {{enable_prompt_embeds: true}}`"
        )
