"""Selection by change: which (case, runner) rows a changed file can affect, and why."""

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

from harness.cli import main
from harness.run.matrices import load_matrix
from harness.select.rows import SelectionError, git_changed_files, narrow, select
from harness.select.vllm_source import SourceError, VllmSource
from tests.conftest import ROOT

# A vLLM source tree in miniature: the registry, model modules that import each other, both model
# runners, the two entrypoints. Enough for every rule, without vLLM installed.
FAKE_VLLM = {
    "vllm/__init__.py": "",
    "vllm/model_executor/models/registry.py": (
        '_EMBEDDING_MODELS = {"BertModel": ("bert", "BertEmbeddingModel")}\n'
        '_TEXT_GENERATION_MODELS = {"Qwen2ForCausalLM": ("qwen2", "Qwen2ForCausalLM"),\n'
        '                           "Qwen3ForCausalLM": ("qwen3", "Qwen3ForCausalLM"),\n'
        '                           "LlamaForCausalLM": ("llama", "LlamaForCausalLM")}\n'
        '_LATE_INTERACTION_MODELS = {"HF_ColBERT": ("colbert", "ColBERTModel")}\n'
    ),
    "vllm/config/model.py": '_SUFFIX_TO_DEFAULTS = [("ForCausalLM", ("generate", "none")),\n'
    '    ("ForSequenceClassification", ("pooling", "classify")), ("Model", ("pooling", "embed"))]\n',
    "vllm/model_executor/models/__init__.py": "",
    "vllm/model_executor/models/bert.py": "from .utils import x\n",
    "vllm/model_executor/models/colbert.py": "from vllm.model_executor.models.bert import BertModel\n",
    "vllm/model_executor/models/qwen2.py": "def f():\n    from .utils import y\n",
    "vllm/model_executor/models/llama.py": "",
    "vllm/model_executor/models/qwen3.py": "",
    # read by name (vllm/config/), imported by no model module: MODELS_CONFIG_MAP's keys decide
    "vllm/model_executor/models/config.py": "class Fix:\n    pass\nclass ColFix(Fix):\n    pass\n"
    'MODELS_CONFIG_MAP = {"HF_ColBERT": ColFix,\n'
    '                     "GteModel": Fix}\n',
    "vllm/model_executor/models/loaded_by_name.py": "",  # no registered module imports it
    "vllm/model_executor/models/utils.py": "",
    "vllm/model_executor/models/adapters.py": "",
    "vllm/v1/worker/gpu_model_runner.py": "from vllm.v1.worker.gpu_input_batch import B\n",
    "vllm/v1/worker/gpu_input_batch.py": "",
    "vllm/v1/worker/cpu_worker.py": "",
    "vllm/v1/worker/gpu/model_runner.py": "from vllm.v1.worker.gpu.pool import pooling_runner\n",
    "vllm/v1/worker/gpu/pool/pooling_runner.py": "",
    "vllm/entrypoints/llm.py": "from vllm.entrypoints.pooling.offline import M\n",
    "vllm/entrypoints/pooling/offline.py": "from vllm.entrypoints.pooling.scoring.io_processor import P\n",
    "vllm/entrypoints/pooling/scoring/io_processor.py": "",
    "vllm/entrypoints/pooling/embed/serving.py": "",
    "vllm/entrypoints/openai/api_server.py": "from vllm.entrypoints.pooling.scoring import io_processor\n"
    "from vllm.entrypoints.pooling.embed import serving\n",
}

MATRIX = """
defaults:
  runners: [hf, vllm-v1, vllm-v2, vllm-auto, vllm-serve-v1, vllm-serve-v2]
  expected_auto_runner: v2
  tolerances: {float32: {cosine_distance: 1.0e-6, max_abs: 1.0e-5, max_rel: 1.0e-5}}
cases:
  - id: bert-embed
    task: embed
    family: f
    inputs: short-texts
    model: {source: synthetic, arch: BertModel, seed: 0}
    checks: [shuffle]
  - id: qwen2-rerank
    task: score
    family: f
    inputs: query-document-pairs
    model: {source: synthetic, arch: Qwen2ForSequenceClassification, seed: 1}
  - id: colbert-tokens
    task: token_embed
    family: f
    inputs: short-texts
    model: {source: synthetic, arch: HF_ColBERT, seed: 2}
families: {f: {}}
"""


@pytest.fixture
def fake_vllm(tmp_path):
    for rel, text in FAKE_VLLM.items():
        (tmp_path / "vllm-src" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "vllm-src" / rel).write_text(text)
    return VllmSource(tmp_path / "vllm-src")


@pytest.fixture
def matrix(write_matrix):
    return load_matrix(write_matrix(MATRIX))


def _rows(matrix, source, *files, origin="vllm"):
    return select(matrix, matrix.cases, list(files), origin, source).rows


def _case_ids(rows):
    return {c for c, _ in rows}


def test_model_file_selects_the_cases_whose_module_imports_it(matrix, fake_vllm):
    assert _case_ids(_rows(matrix, fake_vllm, "vllm/model_executor/models/bert.py")) == {
        "bert-embed",
        "bert-embed@shuffle",
        "colbert-tokens",
    }  # colbert.py imports bert.py
    # qwen2.py imports utils.py inside a function; Qwen2ForSequenceClassification is converted
    assert _case_ids(_rows(matrix, fake_vllm, "vllm/model_executor/models/utils.py")) == {
        "bert-embed",
        "bert-embed@shuffle",
        "colbert-tokens",
        "qwen2-rerank",
    }
    assert _case_ids(_rows(matrix, fake_vllm, "vllm/model_executor/models/adapters.py")) == {
        "qwen2-rerank"
    }
    sel = select(matrix, matrix.cases, ["vllm/model_executor/models/llama.py"], "vllm", fake_vllm)
    assert not sel.rows and "no case" in sel.effects[0].reason


def test_an_hf_overrides_architecture_is_the_one_selected_by(write_matrix, fake_vllm):
    """vLLM runs `hf_overrides.architectures`, not config.json's: an original LLM reranker (a
    causal LM converted at load to *ForSequenceClassification) is selected by adapters.py."""
    text = MATRIX.replace("families: {f: {}}\n", "") + (
        "  - id: qwen3-yes-no\n"
        "    task: score\n"
        "    family: f\n"
        "    inputs: query-document-pairs\n"
        "    model: {source: synthetic, arch: Qwen3ForCausalLM, seed: 3}\n"
        "    engine: {hf_overrides: {architectures: [Qwen3ForSequenceClassification]}}\n"
        "families: {f: {}}\n"
    )
    m = load_matrix(write_matrix(text))
    assert _case_ids(_rows(m, fake_vllm, "vllm/model_executor/models/adapters.py")) == {
        "qwen2-rerank",
        "qwen3-yes-no",
    }


def test_a_model_file_a_pooler_imports_selects_that_poolers_cases(matrix, fake_vllm):
    # vLLM 0.32: layers/pooler/seqwise/poolers.py imports adapters._load_st_projector (the
    # sentence-transformers Dense of every embed model), so BertModel's embed case is reached
    # though bert.py never imports adapters.py
    pooler = fake_vllm.root / "vllm/model_executor/layers/pooler/seqwise/poolers.py"
    pooler.parent.mkdir(parents=True)
    pooler.write_text("from vllm.model_executor.models.adapters import _load_st_projector\n")
    sel = select(
        matrix, matrix.cases, ["vllm/model_executor/models/adapters.py"], "vllm", fake_vllm
    )
    assert _case_ids(sel.rows) == {"qwen2-rerank", "bert-embed", "bert-embed@shuffle"}
    assert "seqwise/poolers.py" in sel.effects[0].reason


def test_models_config_py_selects_the_architectures_its_map_names(matrix, fake_vllm):
    sel = select(matrix, matrix.cases, ["vllm/model_executor/models/config.py"], "vllm", fake_vllm)
    assert _case_ids(sel.rows) == {"colbert-tokens"}  # the map's HF_ColBERT (no case is a GteModel)
    assert sel.effects[0].rule == "model-config" and "ColFix" in sel.effects[0].reason


def test_a_model_file_no_registered_module_imports_selects_every_case(matrix, fake_vllm):
    path = "vllm/model_executor/models/loaded_by_name.py"
    sel = select(matrix, matrix.cases, [path], "vllm", fake_vllm)
    assert len(_case_ids(sel.rows)) == 4 and "by name" in sel.effects[0].reason


def test_model_rows_are_vllm_rows_never_the_reference(matrix, fake_vllm):
    rows = _rows(matrix, fake_vllm, "vllm/model_executor/models/qwen2.py")
    assert {r for c, r in rows} == {
        "vllm-v1",
        "vllm-v2",
        "vllm-auto",
        "vllm-serve-v1",
        "vllm-serve-v2",
    }


def test_each_model_runner_selects_its_own_rows(matrix, fake_vllm):
    v1 = _rows(matrix, fake_vllm, "vllm/v1/worker/gpu_model_runner.py")
    assert {r for _, r in v1} == {
        "vllm-v1",
        "vllm-serve-v1",
    }  # vllm-auto is expected to pick V2 here
    v2 = _rows(matrix, fake_vllm, "vllm/v1/worker/gpu/pool/pooling_runner.py")
    assert {r for _, r in v2} == {"vllm-v2", "vllm-auto", "vllm-serve-v2"}
    assert ("bert-embed@shuffle", "vllm-v2") in v2  # derived check cases run on the runners too
    shared = _rows(matrix, fake_vllm, "vllm/v1/worker/cpu_worker.py")
    assert {r for _, r in shared} == {
        "vllm-v1",
        "vllm-v2",
        "vllm-auto",
        "vllm-serve-v1",
        "vllm-serve-v2",
    }


def test_entrypoints_select_their_api_and_offline_or_server_rows(matrix, fake_vllm):
    both = _rows(matrix, fake_vllm, "vllm/entrypoints/pooling/scoring/io_processor.py")
    assert _case_ids(both) == {"qwen2-rerank"} and ("qwen2-rerank", "vllm-v1") in both
    server = _rows(matrix, fake_vllm, "vllm/entrypoints/pooling/embed/serving.py")
    assert set(server) == {("bert-embed", "vllm-serve-v1"), ("bert-embed", "vllm-serve-v2")}
    offline = _rows(matrix, fake_vllm, "vllm/entrypoints/llm.py")
    assert offline and not any(r.startswith("vllm-serve") for _, r in offline)


def test_docs_select_nothing_and_unknown_files_select_everything(matrix, fake_vllm):
    sel = select(
        matrix,
        matrix.cases,
        ["docs/models/pooling.md", "tests/models/test_x.py", ".buildkite/a.yaml"],
        "vllm",
        fake_vllm,
    )
    assert not sel.rows and {e.rule for e in sel.effects} == {"no-behaviour"}
    assert "nothing selected" in sel.summary()
    everything = _rows(matrix, fake_vllm, "vllm/v1/core/sched/scheduler.py")
    vllm_rows = {(c.id, r) for c in matrix.cases for r in c.runners if r != "hf"}
    assert vllm_rows <= set(everything)
    odd = select(matrix, matrix.cases, ["somewhere/new.cfg"], "vllm", fake_vllm)
    assert odd.effects[0].rule == "unknown" and "conservative" in odd.effects[0].reason
    assert ("bert-embed", "hf") in odd.rows


def test_pooler_levels(matrix, fake_vllm):
    seq = _rows(matrix, fake_vllm, "vllm/model_executor/layers/pooler/seqwise/poolers.py")
    tok = _rows(matrix, fake_vllm, "vllm/model_executor/layers/pooler/tokwise/heads.py")
    assert _case_ids(seq) == {"bert-embed", "bert-embed@shuffle", "qwen2-rerank"}
    assert _case_ids(tok) == {"colbert-tokens"}
    assert len(_case_ids(_rows(matrix, fake_vllm, "vllm/pooling_params.py"))) == 4


def test_project_files(matrix, fake_vllm, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    golden = _rows(matrix, fake_vllm, "golden/qwen2-rerank/manifest.json", origin="any")
    assert _case_ids(golden) == {"qwen2-rerank"} and ("qwen2-rerank", "hf") in golden
    assert (
        len(_case_ids(_rows(matrix, fake_vllm, "m.yaml", origin="any"))) == 4
    )  # its defaults reach all
    assert len(_case_ids(_rows(matrix, fake_vllm, "harness/judge/compare.py", origin="any"))) == 4
    monkeypatch.chdir(ROOT)
    ref = _rows(matrix, fake_vllm, "harness/models/refmodels.py", origin="any")
    assert _case_ids(ref) == {
        "colbert-tokens"
    }  # HF_ColBERT is a reference architecture; BERT is not


def test_a_matrix_file_selects_the_cases_it_defines(tmp_path, fake_vllm, monkeypatch):
    head, cases = MATRIX.split("cases:\n")
    (tmp_path / "matrices").mkdir()
    (tmp_path / "matrices" / "top.yaml").write_text(
        "include: [cases.yaml]\nfamilies: {f: {}}\n" + head
    )
    (tmp_path / "matrices" / "cases.yaml").write_text("cases:\n" + cases.split("families:")[0])
    (tmp_path / "matrices" / "other.yaml").write_text("cases: []\n")
    monkeypatch.chdir(tmp_path)
    matrix = load_matrix("matrices/top.yaml")
    assert len(_case_ids(_rows(matrix, fake_vllm, "matrices/cases.yaml", origin="any"))) == 4
    assert len(_case_ids(_rows(matrix, fake_vllm, "matrices/top.yaml", origin="any"))) == 4
    sel = select(matrix, matrix.cases, ["matrices/other.yaml"], "any", fake_vllm)
    assert not sel.rows and "not part of" in sel.effects[0].reason


def test_narrow_keeps_the_reference_and_only_selected_runners(matrix, fake_vllm):
    sel = select(matrix, matrix.cases, ["vllm/v1/worker/gpu_model_runner.py"], "vllm", fake_vllm)
    narrowed = {c.id: c.runners for c in narrow(matrix.cases, sel)}
    assert narrowed["bert-embed"] == ["hf", "vllm-v1", "vllm-serve-v1"]
    assert (
        narrow(matrix.cases, select(matrix, matrix.cases, ["README.md"], "vllm", fake_vllm)) == []
    )


def test_clear_errors(tmp_path):
    with pytest.raises(SourceError, match="no vLLM source"):
        VllmSource(tmp_path)
    with pytest.raises(SelectionError, match="not a git checkout"):
        git_changed_files("HEAD~1..HEAD", tmp_path)
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    with pytest.raises(SelectionError, match="does not know this range"):
        git_changed_files("no-such-ref..HEAD", repo)


def test_vllm_diff_reads_git_and_the_cli_reports_empty_selections(
    tmp_path, fake_vllm, matrix, capsys
):
    repo = fake_vllm.root
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    (repo / "docs").mkdir()
    (repo / "docs" / "x.md").write_text("doc\n")
    (repo / "vllm/model_executor/models/bert.py").write_text("# changed\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "change"], check=True)
    assert git_changed_files("HEAD~1..HEAD", repo) == [
        "docs/x.md",
        "vllm/model_executor/models/bert.py",
    ]
    code = main(
        [
            "select",
            "-m",
            matrix.path,
            "--vllm-diff",
            "HEAD~1..HEAD",
            "--vllm-repo",
            str(repo),
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and {r["case"] for r in out["rows"]} == {
        "bert-embed",
        "bert-embed@shuffle",
        "colbert-tokens",
    }
    assert {f["path"]: f["rule"] for f in out["files"]}["docs/x.md"] == "no-behaviour"
    code = main(
        ["select", "-m", matrix.path, "--changed-files", "docs/x.md", "--vllm-repo", str(repo)]
    )
    assert code == 4 and "NOTHING SELECTED" in capsys.readouterr().out
    code = main(
        [
            "run",
            "-m",
            matrix.path,
            "--changed-files",
            "docs/x.md",
            "--vllm-repo",
            str(repo),
            "--out",
            str(tmp_path / "run"),
        ]
    )
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert code == 4 and report["selection"]["change"]["rows"] == 0 and report["results"] == []
    assert (
        main(["select", "-m", matrix.path, "--vllm-diff", "nope..HEAD", "--vllm-repo", str(repo)])
        == 2
    )


# A real vLLM pull request, read against the installed vLLM's source: #47772 ("Align CrossEncoder
# token type ids after truncation") changed vllm/entrypoints/pooling/scoring/io_processor.py.
@pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None, reason="needs vLLM's source (vllm installed)"
)
def test_pr_47772_selects_the_score_cases_of_the_default_matrix():
    matrix = load_matrix(ROOT / "matrices/pooling.yaml")
    sel = select(
        matrix,
        matrix.cases,
        ["vllm/entrypoints/pooling/scoring/io_processor.py"],
        "vllm",
        VllmSource.locate(None),
    )
    selected = {c for c, _ in sel.rows}
    # score cases with a vLLM row (the ColPali / text VL-rerank ones run HF vs golden only here)
    score_cases = {
        c.id for c in matrix.cases if c.task == "score" and any(r != "hf" for r in c.runners)
    }
    assert {c.split("@")[0] for c in selected} == score_cases
    assert "qwen2-tiny-rerank-score-long" in selected and "bert-tiny-mean-embed" not in selected
    assert {r for _, r in sel.rows} <= {
        "vllm-v1",
        "vllm-v2",
        "vllm-auto",
        "vllm-serve-v1",
        "vllm-serve-v2",
    }  # no hf
    assert (
        "serve-bert-tiny-cross-encoder-rerank",
        "vllm-serve-v2",
    ) in sel.rows  # the /rerank the PR fixed


# vLLM 0.32's vllm/config/{model,vllm}.py look each architecture up in MODELS_CONFIG_MAP
# (models/config.py), and apply its hybrid fix to every hybrid model: no model module imports the
# file for that, so an import graph alone misses the jina-vl, colbert-jina, reward and PRM cases.
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM installed")
def test_models_config_py_selects_exactly_the_cases_it_configures_on_vllm_0_32():
    from vllm.model_executor.models.config import MODELS_CONFIG_MAP  # vLLM's own map, imported
    from vllm.model_executor.models.interfaces import is_hybrid
    from vllm.model_executor.models.registry import ModelRegistry

    from harness.select.facts import case_facts

    matrix = load_matrix(ROOT / "matrices/pooling.yaml")
    source = VllmSource.locate(None)
    sel = select(matrix, matrix.cases, ["vllm/model_executor/models/config.py"], "vllm", source)
    expected = set()
    for case in matrix.cases:
        facts = case_facts(case, source, ROOT / "matrices")
        arch = facts.arch  # config.json's architecture (synthetic cases name it)
        # with model_impl transformers vLLM runs a Transformers* class, not the map's names
        if arch is None or case.engine.get("model_impl") == "transformers":
            configured = False
        else:
            registered = next(
                (
                    a
                    for a in (arch, arch.replace("Model", "ForCausalLM"))
                    if a in ModelRegistry.get_supported_archs()
                ),
                None,
            )
            # the class is imported only when the map does not decide (jina_vl needs torchvision)
            configured = (
                arch in MODELS_CONFIG_MAP
                or registered in MODELS_CONFIG_MAP
                or (
                    registered is not None
                    and is_hybrid(ModelRegistry._try_load_model_cls(registered))
                )
            )
        imports_it = "vllm/model_executor/models/config.py" in (facts.model_files or ())
        if (configured or imports_it) and any(r != "hf" for r in case.runners):  # a vLLM row
            expected.add(case.id)
    assert {c.split("@")[0] for c, _ in sel.rows} == expected
    for must in (
        "jina-vl-tiny-image-rerank",
        "colbert-jina-tiny-token-embed",
        "qwen2-tiny-reward",
        "qwen2-tiny-prm-step-reward",
        "colbert-lfm2-tiny-conv-token-embed",
    ):
        assert must in expected
    assert "bert-tiny-mean-embed" not in expected


def test_a_recipe_or_builder_module_selects_the_cases_it_serves(matrix, fake_vllm, monkeypatch):
    monkeypatch.chdir(ROOT)
    colbert = _rows(matrix, fake_vllm, "harness/runners/hf/colbert.py", origin="any")
    assert _case_ids(colbert) == {"colbert-tokens"} and ("colbert-tokens", "hf") in colbert
    st = _rows(matrix, fake_vllm, "harness/runners/hf/sentence_transformers.py", origin="any")
    assert _case_ids(st) == {"bert-embed", "bert-embed@shuffle", "qwen2-rerank"}
    # qwen.py builds Qwen2 checkpoints; bert.py BERT and HF_ColBERT ones
    qwen = _rows(matrix, fake_vllm, "harness/models/synthetic/qwen.py", origin="any")
    assert _case_ids(qwen) == {"qwen2-rerank"}
    bert = _rows(matrix, fake_vllm, "harness/models/synthetic/bert.py", origin="any")
    assert _case_ids(bert) == {"bert-embed", "bert-embed@shuffle", "colbert-tokens"}
    # the registry itself, and a module the registry does not know, reach every case
    for path in ("harness/runners/hf/__init__.py", "harness/models/synthetic/nosuch.py"):
        assert len(_case_ids(_rows(matrix, fake_vllm, path, origin="any"))) == 4, path


def test_a_shared_helper_module_reaches_what_its_importers_register(tmp_path, monkeypatch):
    from harness.select.project_rules import sibling_users

    pkg = tmp_path / "harness" / "runners" / "hf"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "helper.py").write_text("X = 1\n")
    (pkg / "a.py").write_text("from harness.runners.hf.helper import X\n")
    (pkg / "b.py").write_text("from .a import X\n")
    (pkg / "c.py").write_text("import numpy\n")
    monkeypatch.chdir(tmp_path)
    assert sibling_users(Path("harness/runners/hf"), "helper") == {"helper", "a", "b"}


def test_an_embed_case_sent_to_pooling_is_selected_by_the_pooling_api(write_matrix, fake_vllm):
    """serve.api pooling: the /pooling entrypoint's files select the case, the embed API's not."""
    text = MATRIX.replace(
        "    checks: [shuffle]\n",
        "    checks: [shuffle]\n"
        "  - id: bert-embed-pooled\n"
        "    task: embed\n"
        "    family: f\n"
        "    inputs: short-texts\n"
        "    runners: [hf, vllm-serve-v1]\n"
        "    model: {source: synthetic, arch: BertModel, seed: 0}\n"
        "    request: {serve: {api: pooling}}\n",
    )
    matrix = load_matrix(write_matrix(text))
    pooled = _case_ids(_rows(matrix, fake_vllm, "vllm/entrypoints/pooling/pooling/protocol.py"))
    assert "bert-embed-pooled" in pooled and "bert-embed" not in pooled
    embed = _case_ids(_rows(matrix, fake_vllm, "vllm/entrypoints/pooling/embed/serving.py"))
    assert "bert-embed" in embed and "bert-embed-pooled" not in embed
