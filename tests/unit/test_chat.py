"""Chat cases (`chat:`): the conversation each item becomes, the synthetic Qwen chat template held
to a hand-written ChatML rendering, and the reference's rendering through apply_chat_template."""

from pathlib import Path

import pytest

from harness.matrix.chat import conversation, template_options
from harness.matrix.schema import Case
from tests.requests import nest


def _case(**kw) -> Case:
    base = dict(
        id="c",
        family="f",
        task="embed",
        model={"source": "local", "path": "x"},
        inputs="short-texts",
        runners=["hf", "vllm-serve-v1"],
        tolerances={"float32": {"max_abs": 1e-5}},
    )
    return Case.model_validate({**base, **nest(kw)})


def test_conversation_and_options():
    assert conversation("hi", {}) == [{"role": "user", "content": "hi"}]
    assert conversation("hi", {"system": "S"}) == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "hi"},
    ]
    assert template_options({"add_generation_prompt": True}) == {
        "add_generation_prompt": True,
        "continue_final_message": False,
    }


def test_chat_case_keys_are_validated():
    assert _case(chat={"add_generation_prompt": True}).request.chat.add_generation_prompt
    with pytest.raises(ValueError, match="cannot both be true"):
        _case(chat={"add_generation_prompt": True, "continue_final_message": True})
    with pytest.raises(ValueError, match="chat applies to tasks embed and classify"):
        _case(chat={}, task="score", inputs="query-document-pairs")
    with pytest.raises(ValueError, match="without prompt_name"):
        _case(chat={}, prompt_name="query")
    with pytest.raises(ValueError):
        _case(chat={"add_generation_promt": True})  # a misspelt option is refused


def _chatml(conv, gen=False, cont=False, thinking=None) -> str:
    """A second implementation of QWEN_CHAT_TEMPLATE: ChatML by string concatenation, and
    transformers' continue_final_message rule (the rendering cut right after the final content)."""
    out = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in conv)
    if gen:
        out += "<|im_start|>assistant\n" + ("<think>\n\n</think>\n\n" if thinking is False else "")
    if cont:
        out = out[: out.rindex(conv[-1]["content"]) + len(conv[-1]["content"])]
    return out


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from harness.models.synthetic.qwen import qwen_tokenizer

    out: Path = tmp_path_factory.mktemp("qwen-chat")
    qwen_tokenizer(out, {"max_position_embeddings": 512}, chat_template=True)
    return AutoTokenizer.from_pretrained(str(out), local_files_only=True)


@pytest.mark.parametrize(
    "opts",
    [
        {"system": "Represent this."},
        {"add_generation_prompt": True, "chat_template_kwargs": {"enable_thinking": False}},
        {"add_generation_prompt": True},
        {"continue_final_message": True},
    ],
)
def test_the_synthetic_template_renders_chatml_and_the_reference_runs_its_ids(tokenizer, opts):
    from harness.runners.hf import HFRunner

    runner = HFRunner(None)
    runner.loaded = lambda kind, make: tokenizer  # the tokenizer, no model load
    texts = ["The cat sat quietly.", "game send point"]
    rendered = runner.render_chat(texts, opts)
    kwargs = opts.get("chat_template_kwargs", {})
    for text, got in zip(texts, rendered):
        conv = conversation(text, opts)
        want = _chatml(
            conv,
            gen=opts.get("add_generation_prompt", False),
            cont=opts.get("continue_final_message", False),
            thinking=kwargs.get("enable_thinking"),
        )
        assert got == want
        ids = tokenizer(got)["input_ids"]
        assert ids[0] == tokenizer.convert_tokens_to_ids("<|im_start|>")  # a single special id
    # the options change the ids: each rendering differs from the plain one
    if opts != {"system": "Represent this."}:
        assert rendered != runner.render_chat(texts, {})


def test_a_tokenizer_without_a_chat_template_is_refused(tmp_path):
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from harness.models.synthetic.qwen import qwen_tokenizer
    from harness.runners.hf import HFRunner

    qwen_tokenizer(tmp_path, {"max_position_embeddings": 512})
    tok = AutoTokenizer.from_pretrained(str(tmp_path), local_files_only=True)
    runner = HFRunner(None)
    runner.loaded = lambda kind, make: tok
    with pytest.raises(ValueError, match="no chat_template"):
        runner.render_chat(["x"], {})


def test_add_special_tokens_tokenizes_the_rendering_with_the_tokenizers_own_tokens(tmp_path):
    """A tokenizer that appends EOS: with add_special_tokens the reference runs the rendering
    plus EOS; without it, the recipe (which tokenizes with special tokens) is refused."""
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from harness.models.synthetic.qwen import qwen_tokenizer
    from harness.runners.hf import HFRunner

    qwen_tokenizer(tmp_path, {"max_position_embeddings": 512}, append_eos=True, chat_template=True)
    tok = AutoTokenizer.from_pretrained(str(tmp_path), local_files_only=True)
    runner = HFRunner(None)
    runner.loaded = lambda kind, make: tok
    opts = {"system": "S", "add_special_tokens": True}
    (rendered,) = runner.render_chat(["The cat sat."], opts)
    assert rendered == _chatml(conversation("The cat sat.", opts))  # the template's text alone
    ids = tok(rendered)["input_ids"]
    conv = conversation("The cat sat.", opts)
    plain = tok.apply_chat_template(conv, tokenize=True, return_dict=True)["input_ids"]
    assert ids == [*plain, tok.convert_tokens_to_ids("<|endoftext|>")]  # EOS on top
    with pytest.raises(ValueError, match="special tokens on the rendered conversation"):
        runner.render_chat(["The cat sat."], {"system": "S"})


def test_add_special_tokens_is_a_chat_option_off_by_default():
    assert _case(chat={}).request.chat.add_special_tokens is False
    assert _case(chat={"add_special_tokens": True}).request.chat.add_special_tokens is True
