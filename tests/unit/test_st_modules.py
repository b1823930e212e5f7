"""Sentence-Transformers module stacks in synthetic checkpoints (issue #27): Dense modules after
Pooling, Normalize present or absent, prompts in config_sentence_transformers.json; what the
st-embed reference and the runners do with a case's `prompt_name`."""

import json

import numpy as np
import pytest
from pydantic import ValidationError
from safetensors.numpy import load_file

from harness.matrix.schema import MatrixError, SyntheticModel
from harness.models.synthetic import build
from harness.run.matrices import load_matrix
from harness.runners import LoadRequest
from harness.runners.prompt_forms import st_prompt
from tests.requests import req

STACK = SyntheticModel(
    source="synthetic",
    arch="BertModel",
    seed=270,
    pooling="mean",
    normalize=True,
    dense=[
        {"out_features": 96},
        {
            "out_features": 48,
            "bias": False,
            "activation_function": "torch.nn.modules.linear.Identity",
        },
    ],
    prompts={"query": "query: ", "document": "passage: "},
    default_prompt_name="query",
)
TEXTS = ["the cat sat on the mat", "a dog ran", "where is the station?"]


@pytest.fixture(scope="module")
def stack_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("st") / "model"
    build(STACK, d)
    return d


def test_dense_and_prompts_need_pooling_and_a_known_default():
    with pytest.raises(ValidationError, match="need `pooling`"):
        SyntheticModel(source="synthetic", arch="BertModel", dense=[{"out_features": 8}])
    with pytest.raises(ValidationError, match="need `pooling`"):
        SyntheticModel(source="synthetic", arch="BertModel", prompts={"q": "q: "})
    with pytest.raises(ValidationError, match="not one of the prompts"):
        SyntheticModel(
            source="synthetic",
            arch="BertModel",
            pooling="mean",
            prompts={"q": "q: "},
            default_prompt_name="query",
        )
    with pytest.raises(ValidationError):
        SyntheticModel(
            source="synthetic", arch="BertModel", pooling="mean", dense=[{"out_features": 0}]
        )


def test_prompt_name_is_for_embed_cases_sent_as_text(write_matrix):
    head = """
defaults:
  runners: [hf, vllm-v1]
  tolerances: {float32: {cosine_distance: 1.0e-6, max_abs: 1.0e-5, max_rel: 1.0e-4}}
families: {f: {}}
cases:
"""
    ok = load_matrix(
        write_matrix(
            head
            + "  - {id: a, family: f, task: embed, inputs: short-texts, request: {prompt_name: query},"
            " model: {source: synthetic, arch: BertModel, pooling: mean,"
            " prompts: {query: 'query: '}}}\n"
        )
    )
    assert ok.cases[0].request.prompt_name == "query"
    with pytest.raises(MatrixError, match="prompt_name applies to task 'embed'"):
        load_matrix(
            write_matrix(
                head + "  - {id: b, family: f, task: classify, inputs: short-texts,"
                " request: {prompt_name: query}, model: {source: synthetic,"
                " arch: BertForSequenceClassification}}\n",
                name="b.yaml",
            )
        )


def test_the_stack_is_written_as_sentence_transformers_saves_it(stack_dir):
    modules = json.loads((stack_dir / "modules.json").read_text())
    assert [(m["idx"], m["path"], m["type"].rsplit(".", 1)[-1]) for m in modules] == [
        (0, "", "Transformer"),
        (1, "1_Pooling", "Pooling"),
        (2, "2_Dense", "Dense"),
        (3, "3_Dense", "Dense"),
        (4, "4_Normalize", "Normalize"),
    ]
    first = json.loads((stack_dir / "2_Dense" / "config.json").read_text())
    second = json.loads((stack_dir / "3_Dense" / "config.json").read_text())
    assert first == {
        "in_features": 64,
        "out_features": 96,
        "bias": True,
        "activation_function": "torch.nn.modules.activation.Tanh",
    }  # use_residual at its default is omitted, as Dense.get_config_dict does
    assert (second["in_features"], second["out_features"], second["bias"]) == (96, 48, False)
    w1 = load_file(str(stack_dir / "2_Dense" / "model.safetensors"))
    w2 = load_file(str(stack_dir / "3_Dense" / "model.safetensors"))
    assert {k: v.shape for k, v in w1.items()} == {"linear.weight": (96, 64), "linear.bias": (96,)}
    assert {k: v.shape for k, v in w2.items()} == {"linear.weight": (48, 96)}
    cfg = json.loads((stack_dir / "config_sentence_transformers.json").read_text())
    assert cfg["prompts"] == {"query": "query: ", "document": "passage: "}
    assert cfg["default_prompt_name"] == "query"


def test_a_stack_without_dense_or_prompts_keeps_the_old_layout(tmp_path):
    d = tmp_path / "plain"
    build(SyntheticModel(source="synthetic", arch="BertModel", seed=3, pooling="cls"), d)
    paths = [m["path"] for m in json.loads((d / "modules.json").read_text())]
    assert paths == ["", "1_Pooling"]  # no Normalize module: none written
    assert not (d / "config_sentence_transformers.json").exists()
    d2 = tmp_path / "normalized"
    build(
        SyntheticModel(
            source="synthetic", arch="BertModel", seed=3, pooling="mean", normalize=True
        ),
        d2,
    )
    assert [m["path"] for m in json.loads((d2 / "modules.json").read_text())] == [
        "",
        "1_Pooling",
        "2_Normalize",
    ]


def test_sentence_transformers_reads_the_stack_as_numpy_computes_it(stack_dir):
    """A second implementation of the stack: transformers' BertModel hidden states, then numpy
    (mean over the mask, Linear + tanh, Linear, L2 normalise) from the files' own weights,
    against SentenceTransformer.encode: the files mean what the builder says they mean."""
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    st = SentenceTransformer(str(stack_dir), device="cpu", local_files_only=True)
    got = st.encode(TEXTS, prompt="", convert_to_numpy=True)  # no prompt: the plain stack
    tok = AutoTokenizer.from_pretrained(str(stack_dir))
    model = AutoModel.from_pretrained(str(stack_dir)).eval()
    w1 = load_file(str(stack_dir / "2_Dense" / "model.safetensors"))
    w2 = load_file(str(stack_dir / "3_Dense" / "model.safetensors"))
    for text, vec in zip(TEXTS, got):
        enc = tok(text, return_tensors="pt")
        with torch.no_grad():
            hidden = model(**enc).last_hidden_state[0].double().numpy()
        pooled = hidden.mean(axis=0)  # one unpadded text: every token counts
        x = np.tanh(w1["linear.weight"].astype(np.float64) @ pooled + w1["linear.bias"])
        x = w2["linear.weight"].astype(np.float64) @ x
        x = x / np.linalg.norm(x)
        assert vec.shape == (48,)
        np.testing.assert_allclose(vec, x, atol=2e-6)


def test_st_embed_runs_the_named_prompt_and_notes_its_tokens(stack_dir):
    from transformers import AutoTokenizer

    from harness.runners.hf import HFRunner

    runner = HFRunner(None)
    runner.load(LoadRequest(model_dir=str(stack_dir), dtype="float32", device="cpu"))
    tok = AutoTokenizer.from_pretrained(str(stack_dir))
    st = runner.sentence_transformer()
    by_name = runner.run("embed", TEXTS, req(reference="st-embed", prompt_name="document")).outputs
    assert runner.tokens == [tok("passage: " + t)["input_ids"] for t in TEXTS]
    prefixed = st.encode(["passage: " + t for t in TEXTS], prompt="", convert_to_numpy=True)
    np.testing.assert_array_equal(np.stack(by_name), prefixed)
    # no prompt_name: encode applies default_prompt_name, and the noted ids say so
    runner.run("embed", TEXTS, req(reference="st-embed"))
    assert runner.tokens == [tok("query: " + t)["input_ids"] for t in TEXTS]
    with pytest.raises(ValueError, match="has prompts"):
        runner.run("embed", TEXTS, req(reference="st-embed", prompt_name="passage"))
    runner.unload()


def test_a_recipe_without_prompts_refuses_a_prompt_name(stack_dir):
    from harness.runners.hf import HFRunner

    runner = HFRunner(None)
    runner.load(LoadRequest(model_dir=str(stack_dir), dtype="float32", device="cpu"))
    with pytest.raises(ValueError, match="does not implement prompt_name"):
        runner.run("embed", TEXTS, req(reference="splade-max", prompt_name="query"))


def test_st_prompt_reads_the_models_prompt_or_refuses(stack_dir, tmp_path):
    assert st_prompt(str(stack_dir), "query") == "query: "
    with pytest.raises(ValueError, match="has prompts"):
        st_prompt(str(stack_dir), "passage")
    with pytest.raises(ValueError, match="cannot read"):
        st_prompt(str(tmp_path), "query")


def test_pooling_format_compact_writes_the_sentence_transformers_5_4_form(tmp_path):
    """`pooling_format: compact` is the 1_Pooling/config.json sentence-transformers >= 5.4 saves
    (the form vllm#45995 left unread); the default stays the verbose booleans."""
    from sentence_transformers.models import Pooling

    spec = dict(source="synthetic", arch="BertModel", seed=3, pooling="mean")
    build(SyntheticModel(**spec, pooling_format="compact"), tmp_path / "c")
    build(SyntheticModel(**spec), tmp_path / "v")
    compact = json.loads((tmp_path / "c" / "1_Pooling" / "config.json").read_text())
    verbose = json.loads((tmp_path / "v" / "1_Pooling" / "config.json").read_text())
    assert compact == {"embedding_dimension": 64, "pooling_mode": "mean"}
    assert verbose["pooling_mode_mean_tokens"] is True and "pooling_mode" not in verbose
    assert Pooling.load(str(tmp_path / "c" / "1_Pooling")).pooling_mode == "mean"


def test_pooling_format_needs_pooling():
    with pytest.raises(ValidationError, match="pooling_format describes 1_Pooling"):
        SyntheticModel(source="synthetic", arch="BertModel", pooling_format="compact")


def test_a_dense_folder_named_by_its_width_is_what_modules_json_names(tmp_path):
    """stella's layout (vllm#39579): the Dense module saved as `2_Dense_<width>/`, named so in
    modules.json; sentence-transformers loads it from there, with the weights the default folder
    name would hold (seeded by the module's index, not its folder)."""
    from sentence_transformers import SentenceTransformer

    layer = {"out_features": 48, "activation_function": "torch.nn.modules.linear.Identity"}
    spec = dict(source="synthetic", arch="BertModel", seed=4208, pooling="mean")
    build(SyntheticModel(**spec, dense=[{**layer, "folder": "2_Dense_48"}]), tmp_path / "w")
    build(SyntheticModel(**spec, dense=[layer]), tmp_path / "d")
    paths = [m["path"] for m in json.loads((tmp_path / "w" / "modules.json").read_text())]
    assert paths == ["", "1_Pooling", "2_Dense_48"] and not (tmp_path / "w" / "2_Dense").exists()
    assert load_file(str(tmp_path / "w" / "2_Dense_48" / "model.safetensors")).keys() == {
        "linear.weight",
        "linear.bias",
    }
    width = SentenceTransformer(str(tmp_path / "w"), device="cpu").encode(TEXTS)
    plain = SentenceTransformer(str(tmp_path / "d"), device="cpu").encode(TEXTS)
    assert width.shape == (3, 48) and np.array_equal(width, plain)


def test_a_dense_folder_name_must_be_a_dense_module_folder():
    with pytest.raises(ValidationError, match="folder"):
        SyntheticModel(
            source="synthetic",
            arch="BertModel",
            pooling="mean",
            dense=[{"out_features": 8, "folder": "../elsewhere"}],
        )
