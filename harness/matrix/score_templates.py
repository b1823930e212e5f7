"""Score templates vLLM is given by name (a case's `request: {score_template: NAME}`, LLM.score's
chat_template): vLLM renders a (query, document) pair through a template only when given one,
as the messages "query" and "document" whose contents are strings (an image as its
placeholder). Each is an LLM reranker's published prompt; the reference builds that prompt from
the model's own code, never from these. Imported by worker processes: no dependencies."""

from __future__ import annotations

# Qwen3-VL-Reranker's prompt, as its published scoring code builds it (format_mm_instruction,
# harness/runners/hf/qwen3_vl_reranker.py): the judge system turn, then one user turn holding
# the instruction (a template variable `instruction` replaces the default), the query and the
# document, then the assistant header
_QWEN3_VL_RERANKER = (
    '{%- set query = messages | selectattr("role", "eq", "query")'
    ' | map(attribute="content") | first -%}'
    '{%- set document = messages | selectattr("role", "eq", "document")'
    ' | map(attribute="content") | first -%}'
    '{%- set instruct = instruction | default("Given a search query, retrieve relevant '
    'candidates that answer the query.", true) -%}'
    "{{- '<|im_start|>system\\nJudge whether the Document meets the requirements based on the "
    'Query and the Instruct provided. Note that the answer can only be "yes" or "no".'
    "<|im_end|>\\n' -}}"
    "{{- '<|im_start|>user\\n<Instruct>: ' + instruct + '<Query>:' + query + '\\n<Document>:'"
    " + document + '<|im_end|>\\n' -}}"
    "{{- '<|im_start|>assistant\\n' -}}"
)

SCORE_TEMPLATES: dict[str, str] = {"qwen3-vl-reranker": _QWEN3_VL_RERANKER}
