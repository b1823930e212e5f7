"""Prompt forms (`prompt_form:`): texts sent as token ids and prompt embeddings. What the matrix
accepts, what the runner hands the engine (read back by the engine trace), the verdict's check
of that evidence (a runner that sends text instead fails), the golden key, and the HF reference
on inputs_embeds cross-checked against HF on the text."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from harness.judge import golden
from harness.judge.compare import compare, form_problem
from harness.matrix.prompt_forms import item_forms
from harness.matrix.schema import MatrixError
from harness.run.matrices import load_matrix
from harness.runners.engine_trace import attach
from harness.runners.vllm import VllmRunner
from tests.requests import req
from tests.unit.test_compare import TOL, make_case

torch = pytest.importorskip("torch")

TEXTS = ["the cat sat", "a dog ran far", "the mat", "a cat sat on the mat"]
WORDS = ["[UNK]", "[PAD]", "the", "cat", "sat", "on", "mat", "a", "dog", "ran", "far"]


def test_mixed_alternates_the_three_forms_and_others_repeat():
    assert item_forms("mixed", 5) == ["text", "token_ids", "embeds", "text", "token_ids"]
    assert item_forms("embeds", 2) == ["embeds", "embeds"]
    with pytest.raises(ValueError, match="unknown prompt_form 'ids'"):
        item_forms("ids", 2)


BASE = """
defaults:
  runners: [hf, vllm-v1]
  inputs: short-texts
families:
  dec:
    task: embed
    tolerances:
      float32: {cosine_distance: 1.0e-6, max_abs: 1.0e-5}
cases:
  - id: one
    family: dec
    model: {source: synthetic, arch: Qwen3Model, pooling: lasttoken}
"""


@pytest.mark.parametrize(
    "extra, says",
    [
        ("    prompt_form: mixed\n", "add `engine: {enable_prompt_embeds: true}`"),
        ("    prompt_form: token_ids\n    task: score\n", "applies to tasks embed, classify"),
        (
            "    prompt_form: token_ids\n    inputs: query-document-pairs\n",
            "item 0 is not a text",
        ),
        (
            "    prompt_form: mixed\n    engine: {enable_prompt_embeds: true}\n"
            "    inputs: {texts: [one, two]}\n",
            "needs >= 3 items",
        ),
        ("    prompt_form: token_ids\n    request: {truncate: 8}\n", "drop one of them"),
        (
            "    prompt_form: embeds\n    engine: {enable_prompt_embeds: true}\n"
            "    runners: [hf, vllm-serve-v1]\n",
            "prompt embeddings go to vLLM's offline LLM API only",
        ),
        ("    prompt_form: ids\n", "prompt_form"),
        ("    prompt_form: token_ids\n    mteb_tasks: [ParitySTS]\n", "with mteb_tasks"),
    ],
)
def test_a_prompt_form_where_it_cannot_go_is_a_matrix_error_at_the_case(write_matrix, extra, says):
    p = write_matrix(BASE + extra)
    with pytest.raises(MatrixError) as e:
        load_matrix(p)
    assert says in str(e.value) and f"{p}:" in str(e.value)


def test_a_prompt_form_case_loads_with_its_engine_switch(write_matrix):
    text = BASE + "    prompt_form: mixed\n    engine: {enable_prompt_embeds: true}\n"
    (case,) = load_matrix(write_matrix(text)).cases
    assert case.prompt_form == "mixed" and case.engine == {"enable_prompt_embeds": True}


# --- the runner, on a fake engine that renders prompts as vLLM 0.32's LLM does --------------


class FakeTokenizer:
    def __call__(self, text):
        return {"input_ids": [WORDS.index(w) if w in WORDS else 0 for w in text.split()]}


class FakeEngine:
    """LLMEngine.add_request(request_id, engine_input, params) as the LLM entry point calls it,
    with what vLLM's renderer made of each prompt; the model reads the engine input."""

    def __init__(self, embed_table):
        self.table, self.seen = embed_table, {}

    def add_request(self, request_id, prompt, params=None):
        self.seen[request_id] = prompt


class FakeLLM:
    def __init__(self, table, corrupt=None, render_tokens_as_text=False):
        self.llm_engine = FakeEngine(table)
        self.corrupt = corrupt  # what the renderer does to prompt embeddings (a seeded bug)
        self.counter = itertools.count()
        self.text_always = render_tokens_as_text

    def _render(self, p):
        if isinstance(p, str):
            return {
                "type": "token",
                "prompt_token_ids": FakeTokenizer()(p)["input_ids"],
                "prompt": p,
            }
        if "prompt_embeds" in p:
            embeds = self.corrupt(p["prompt_embeds"]) if self.corrupt else p["prompt_embeds"]
            return {"type": "embeds", "prompt_embeds": embeds}
        out = {"type": "token", "prompt_token_ids": p["prompt_token_ids"]}
        return {**out, "prompt": "decoded text"} if self.text_always else out

    def embed(self, prompts, **_):
        outs = []
        for p in prompts:
            rid = str(next(self.counter))
            self.llm_engine.add_request(rid, self._render(p))
            seen = self.llm_engine.seen[rid]
            if seen["type"] == "embeds":
                rows = seen["prompt_embeds"]
                ids = [0] * len(rows)
            else:
                ids = seen["prompt_token_ids"]
                rows = self.llm_engine.table[torch.tensor(ids)]
            vec = rows[-1].float().numpy()  # last-token pooling of the inputs themselves
            outs.append(
                SimpleNamespace(
                    request_id=rid,
                    prompt_token_ids=ids,
                    num_cached_tokens=0,
                    outputs=SimpleNamespace(embedding=vec.tolist()),
                )
            )
        return outs


def _runner(**fake) -> VllmRunner:
    emb = torch.nn.Embedding(len(WORDS), 4)
    with torch.no_grad():
        emb.weight.copy_(torch.arange(len(WORDS) * 4, dtype=torch.float32).reshape(-1, 4))
    runner = VllmRunner("v1")
    runner.llm = FakeLLM(emb.weight.detach(), **fake)
    runner.trace = attach(runner.llm)
    runner._hf = {
        "tokenizer": FakeTokenizer(),
        "model": SimpleNamespace(get_input_embeddings=lambda: emb),
    }
    return runner


def _reference_meta(forms):
    """What the HF reference records for the same items: ids, and E's digest for embeds."""
    from harness.runners.prompt_forms import digest

    runner = _runner()
    out = []
    for text, form in zip(TEXTS, forms):
        ids = FakeTokenizer()(text)["input_ids"]
        m = {"prompt_token_ids": ids, "engine_input": form}
        if form == "embeds":
            emb = runner._hf["model"].get_input_embeddings()
            m["embeds_sha256"] = digest(emb(torch.tensor(ids)).detach())
        out.append(m)
    return out


def _judge(runner, forms):
    result = runner.run("embed", TEXTS, req(prompt_forms=forms))
    got, records = result.outputs, result.evidence.records
    ref_meta = _reference_meta(forms)
    ref = [np.asarray(g, dtype=np.float32) for g in got]  # the numbers agree by construction
    v = compare(
        make_case(),
        "vllm-v1",
        TOL,
        ("cosine_distance", "max_abs"),
        ref,
        got,
        tuple(TEXTS),
        ref_ids=[m["prompt_token_ids"] for m in ref_meta],
        got_ids=[m["prompt_token_ids"] for m in records],
        got_meta=records,
        forms=forms,
        ref_meta=ref_meta,
    )
    return v, records


def test_each_item_reaches_the_engine_in_its_form_and_the_verdict_reads_it():
    forms = item_forms("mixed", len(TEXTS))
    v, meta = _judge(_runner(), forms)
    assert v.status == "pass", v.reason
    assert [m["engine_input"] for m in meta] == forms
    assert meta[2]["engine_prompt_token_ids"] == [0, 0]  # vLLM's placeholders for embeddings
    assert meta[2]["prompt_token_ids"] == [2, 6]  # the ids E was made from, checked against HF's
    assert "text 2, token_ids 1, embeds 1" in v.notes["prompt_form"]
    assert "identical to the reference's for 1 of 1" in v.notes["prompt_form"]


def test_a_runner_that_sends_text_instead_fails(monkeypatch):
    """Seeded mutation: the runner drops the forms and sends every item as text."""
    runner = _runner()
    monkeypatch.setattr(runner, "_prompts", lambda items: ([i["text"] for i in items], [{}] * 4))
    v, _ = _judge(runner, item_forms("mixed", len(TEXTS)))
    assert v.status == "fail"
    assert "item 1 was to reach the model as token_ids; the engine was handed text" in v.reason


def test_token_ids_rendered_as_text_fail():
    """Seeded mutation: the entry point re-renders bare token ids as a text prompt."""
    v, _ = _judge(_runner(render_tokens_as_text=True), ["token_ids"] * 4)
    assert v.status == "fail" and "item 0 was to reach the model as token_ids" in v.reason


def test_embeddings_changed_on_the_way_to_the_engine_fail():
    """Seeded mutation: the renderer hands the engine E with its rows rolled by one (a change
    after the engine has it is the metrics' to see: prompt_embeds_rows_shifted)."""
    v, _ = _judge(_runner(corrupt=lambda e: e.roll(1, dims=0)), ["embeds"] * 4)
    assert v.status == "fail" and "the engine received other prompt embeddings" in v.reason


def test_embeddings_other_than_the_references_fail():
    forms = ["embeds"] * 4
    runner = _runner()
    result = runner.run("embed", TEXTS, req(prompt_forms=forms))
    got = result.outputs
    ref_meta = _reference_meta(forms)
    ref_meta[3]["embeds_sha256"] = "0" * 64
    problem, _ = form_problem(forms, result.evidence.records, ref_meta)
    assert "item 3: the runner's prompt embeddings" in problem
    assert len(got) == 4


def test_no_evidence_of_what_the_engine_was_handed_fails():
    problem, _ = form_problem(["embeds"], [{"prompt_token_ids": [1]}], None)
    assert "prompt form not proven at item 0" in problem
    problem, _ = form_problem(["text", "embeds"], None, None)
    assert "prompt forms not proven: the runner recorded none" in problem
    # against a golden (ids, no digest): E is held to the runner's own digest and the ids
    meta = [{"engine_input": "embeds", "embeds_sha256": "a", "engine_embeds_sha256": "a"}]
    problem, note = form_problem(["embeds"], meta, [{"prompt_token_ids": [1]}])
    assert problem is None and "the reference recorded no embeddings digest" in note
    problem, _ = form_problem(["text", "embeds"], None, None)
    assert "prompt forms not proven: the runner recorded none" in problem
    assert form_problem(None, None, None) == (None, "")  # a text case checks nothing here


def test_golden_key_names_the_prompt_form_only_when_not_text(tmp_path):
    (tmp_path / "config.json").write_text('{"architectures": ["Qwen3Model"]}')
    plain = golden.reference_key(make_case(), tmp_path, "float32", "cpu")
    assert "prompt_form" not in plain  # committed goldens keep their keys
    mixed = make_case(prompt_form="mixed", engine={"enable_prompt_embeds": True})
    assert golden.reference_key(mixed, tmp_path, "float32", "cpu")["prompt_form"] == "mixed"


# --- the HF reference: inputs_embeds against HF's own text path -----------------------------


def _tiny_hf_classifier():
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers

    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]"
    )
    cfg = transformers.Qwen3Config(
        vocab_size=len(WORDS),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        num_labels=3,
        pad_token_id=1,
    )
    torch.manual_seed(0)
    return tok, transformers.Qwen3ForSequenceClassification(cfg).eval()


def test_hf_reference_on_inputs_embeds_equals_hf_on_the_text():
    """The reference's embeds path (E = get_input_embeddings()(ids), inputs_embeds=E) against
    transformers' own lookup inside forward on the text: a second implementation of the same
    numbers. A shifted E (the seeded bug) does not match."""
    from harness.runners import LoadRequest
    from harness.runners.hf import HFRunner

    tok, model = _tiny_hf_classifier()
    hf = HFRunner(None)
    hf.req = LoadRequest(model_dir="unused", dtype="float32", device="cpu")
    hf._loaded.update(
        {
            "tokenizer": tok,
            "AutoModelForSequenceClassification": model,
            "architecture": "Qwen3ForSequenceClassification",
        }
    )
    opts = req(reference="hf-sequence-classification")
    first = hf.run("classify", TEXTS, opts)
    text = first.outputs
    text_ids = [m["prompt_token_ids"] for m in first.evidence.records]
    forms = item_forms("mixed", len(TEXTS))
    second = hf.run("classify", TEXTS, opts.model_copy(update={"prompt_forms": forms}))
    mixed = second.outputs
    assert [m["prompt_token_ids"] for m in second.evidence.records] == text_ids
    assert [m["engine_input"] for m in second.evidence.records] == forms
    assert max(float(np.abs(a - b).max()) for a, b in zip(text, mixed)) <= 1e-6
    embeds = hf.run(
        "classify", TEXTS, opts.model_copy(update={"prompt_forms": ["embeds"] * 4})
    ).outputs
    assert max(float(np.abs(a - b).max()) for a, b in zip(text, embeds)) <= 1e-6

    emb = model.get_input_embeddings()
    shifted = emb(torch.tensor(text_ids[3])).roll(1, dims=0)[None]
    with torch.inference_mode():
        bad = torch.softmax(model(inputs_embeds=shifted).logits[0], -1).numpy()
    assert float(np.abs(bad - text[3]).max()) > 1e-3


# --- the server: token ids as `input: [[ids]]` on /v1/embeddings ----------------------------


def _served_token_ids(send_text: bool = False):
    import json

    httpx = pytest.importorskip("httpx")
    from tests.fake_server import served

    bodies = []

    def handler(request):
        body = json.loads(request.content)
        bodies.append((request.url.path, body))
        got = body.get("input", body.get("prompt"))
        n = len(got[0]) if isinstance(got, list) else len(got.split())
        return httpx.Response(
            200,
            json={"tokens": list(range(n))}
            if request.url.path == "/tokenize"
            else {"data": [{"embedding": [float(n), 1.0]}], "usage": {"prompt_tokens": n}},
        )

    runner = served(handler)
    runner._tokenizers = {"m": FakeTokenizer()}
    forms = ["token_ids"] * len(TEXTS)
    opts = req() if send_text else req(prompt_forms=forms)
    result = runner.run("embed", TEXTS, opts)
    return result.evidence.records, result.outputs, bodies, forms


def test_the_server_gets_token_ids_as_a_list_of_one_id_list():
    records, got, bodies, forms = _served_token_ids()
    sent = [b["input"] for path, b in bodies if path == "/v1/embeddings"]
    assert sorted(map(str, sent)) == sorted(str([FakeTokenizer()(t)["input_ids"]]) for t in TEXTS)
    assert not [p for p, _ in bodies if p == "/tokenize"]  # the ids are the HF tokenizer's
    ref_ids = [FakeTokenizer()(t)["input_ids"] for t in TEXTS]
    v = compare(
        make_case(),
        "vllm-serve-v1",
        TOL,
        ("cosine_distance", "max_abs"),
        got,
        got,
        tuple(TEXTS),
        ref_ids=ref_ids,
        got_ids=[m["prompt_token_ids"] for m in records],
        got_meta=records,
        forms=forms,
    )
    assert v.status == "pass", v.reason
    assert "read from the HTTP request, not from the engine" in v.notes["prompt_form"]
    assert "equal to the reference's token count for 4 of 4" in v.notes["usage"]


def test_a_server_runner_that_sends_text_fails_the_prompt_form_check():
    """Seeded mutation: the runner ignores the forms and sends each text."""
    records, got, _, forms = _served_token_ids(send_text=True)
    problem, _ = form_problem(forms, records, None)
    assert "prompt form not proven at item 0" in problem
