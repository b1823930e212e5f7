"""A case's `chat:` (schema.ChatOptions): the conversation each text item becomes, read by the
reference (transformers' apply_chat_template) and by the server runners (vLLM's `messages`)."""

from __future__ import annotations

from typing import Any


def conversation(text: str, chat: dict[str, Any]) -> list[dict[str, str]]:
    """The messages of one item: the case's system message, if any, then the text as the user's."""
    system = chat.get("system")
    return [
        *([{"role": "system", "content": system}] if system else []),
        {"role": "user", "content": text},
    ]


def template_options(chat: dict[str, Any]) -> dict[str, Any]:
    """The rendering options, named as both transformers' apply_chat_template and vLLM's chat
    requests name them."""
    return {
        "add_generation_prompt": bool(chat.get("add_generation_prompt")),
        "continue_final_message": bool(chat.get("continue_final_message")),
    }
