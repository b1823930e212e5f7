import json
import subprocess
from types import SimpleNamespace

from harness.runners import modelinfo


def test_cache_dir_follows_vllm_cache_root_then_xdg(tmp_path):
    assert modelinfo.cache_dir({"VLLM_CACHE_ROOT": str(tmp_path)}) == tmp_path / "modelinfos"
    assert modelinfo.cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "vllm/modelinfos"


def test_case_archs_from_config_or_the_cases_hf_overrides(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"]}))
    assert modelinfo.case_archs(tmp_path, {}) == ["Qwen3ForCausalLM"]
    over = {"hf_overrides": {"architectures": ["Qwen3ForSequenceClassification"]}}
    assert modelinfo.case_archs(tmp_path, over) == ["Qwen3ForSequenceClassification"]
    assert modelinfo.case_archs(tmp_path / "missing", {}) == []


def test_an_architecture_is_warm_only_when_stamped_for_this_vllm_and_its_file_is_there(tmp_path):
    (tmp_path / "a.json").write_text("{}")
    stamp = {
        "vllm@0.32.0": {"BertModel": "a.json", "Gone": "b.json"},
        "vllm@0.31.0": {"X": "a.json"},
    }
    (tmp_path / modelinfo.STAMP).write_text(json.dumps(stamp))
    got = modelinfo.unwarmed(["BertModel", "Gone", "X", "New"], tmp_path, "vllm@0.32.0")
    assert got == ["Gone", "New", "X"]
    (tmp_path / modelinfo.STAMP).write_text("not json")
    assert modelinfo.unwarmed(["BertModel"], tmp_path, "vllm@0.32.0") == ["BertModel"]


def test_warm_inspects_what_is_missing_stamps_it_and_skips_it_next_time(tmp_path, monkeypatch):
    monkeypatch.setattr(modelinfo, "vllm_key", lambda: "site/vllm@0.32.0")
    env = {"VLLM_CACHE_ROOT": str(tmp_path), "DROPPED": None}
    folder = tmp_path / "modelinfos"
    calls = []

    def fake_run(cmd, **kw):
        calls.append((cmd[3:], kw["env"]))
        folder.mkdir(exist_ok=True)
        (folder / "m-BertEmbeddingModel.json").write_text("{}")
        out = (
            '{"arch": "BertModel", "file": "m-BertEmbeddingModel.json"}\n'
            '{"arch": "Nope", "error": "KeyError: \'Nope\'"}\n'
        )
        return subprocess.CompletedProcess(cmd, 0, stdout=out, stderr="")

    monkeypatch.setattr(modelinfo.subprocess, "run", fake_run)
    info = modelinfo.warm({"BertModel", "Nope"}, env)
    assert calls[0][0] == ["BertModel", "Nope"]
    assert calls[0][1]["VLLM_CACHE_ROOT"] == str(tmp_path) and "DROPPED" not in calls[0][1]
    assert info["inspected"] == ["BertModel"] and "Nope" in info["not_inspected"]
    stamp = json.loads((folder / modelinfo.STAMP).read_text())
    assert stamp == {"site/vllm@0.32.0": {"BertModel": "m-BertEmbeddingModel.json"}}
    calls.clear()
    info = modelinfo.warm({"BertModel", "Nope"}, env)  # Nope is tried again, BertModel is not
    assert calls[0][0] == ["Nope"]
    calls.clear()
    assert modelinfo.warm({"BertModel"}, env) == {"skipped": "every architecture already inspected"}
    assert calls == []


def test_warm_never_raises(tmp_path, monkeypatch):
    monkeypatch.setattr(modelinfo, "vllm_key", lambda: "v")

    def timeout(cmd, **kw):
        raise subprocess.TimeoutExpired(cmd, kw["timeout"])

    monkeypatch.setattr(modelinfo.subprocess, "run", timeout)
    info = modelinfo.warm({"BertModel"}, {"VLLM_CACHE_ROOT": str(tmp_path)}, timeout=1)
    assert info["error"].startswith("TimeoutExpired")
    monkeypatch.setattr(modelinfo, "vllm_key", lambda: None)
    assert "skipped" in modelinfo.warm({"BertModel"}, {})


def test_the_run_warms_the_architectures_of_its_vllm_loads_only(tmp_path, monkeypatch):
    from harness.run import session

    def model(arch):
        folder = tmp_path / arch
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"architectures": [arch]}))
        return SimpleNamespace(path=folder)

    bert, qwen, hf_only = model("BertModel"), model("Qwen3ForCausalLM"), model("HfOnly")
    over = {"hf_overrides": {"architectures": ["Qwen3ForSequenceClassification"]}}
    plan = SimpleNamespace(
        queues={
            "hf": [SimpleNamespace(runner="hf", model=hf_only, engine={})],
            "vllm-v1": [SimpleNamespace(runner="vllm-v1", model=bert, engine={})],
            "vllm-serve-v2": [SimpleNamespace(runner="vllm-serve-v2", model=qwen, engine=over)],
        },
        platform=SimpleNamespace(worker_env=lambda runner: {"RUNNER": runner}),
    )
    seen = []
    monkeypatch.setattr(
        modelinfo, "warm", lambda archs, env: seen.append((sorted(archs), env)) or {"seconds": 1}
    )
    lines = []
    session.warm_vllm_model_info(plan, lambda msg, outcome: lines.append(msg))
    want = ["BertModel", "Qwen3ForSequenceClassification", modelinfo.TRANSFORMERS_BACKEND]
    assert seen == [(want, {"RUNNER": "vllm-v1"})]
    assert lines == ["vLLM inspected 0 model classes in one process (1 s)"]
    plan.queues = {"hf": plan.queues["hf"]}
    assert session.warm_vllm_model_info(plan) == {"skipped": "no vLLM runner"}


def test_transformers_backend_cases_warm_every_transformers_class(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["BertModel"]}))
    got = modelinfo.case_archs(tmp_path, {"model_impl": "transformers"})
    assert got == ["BertModel", modelinfo.TRANSFORMERS_BACKEND]
    known = {"TransformersForCausalLM": 1, "BertModel": 2, "TransformersEmbeddingModel": 3}
    assert modelinfo._backend_classes(known) == [
        "TransformersEmbeddingModel",
        "TransformersForCausalLM",
    ]


def test_an_unregistered_architecture_name_is_mapped_by_vllms_own_rule():
    asked = []

    class Registry:
        models = {"Qwen3ForCausalLM": object()}

        def _normalize_arch(self, arch, model_config):
            asked.append((arch, model_config.runner_type, model_config.convert_type))
            return "Qwen3ForCausalLM"

    assert modelinfo._normalized(Registry(), "Qwen3ForCausalLM") == "Qwen3ForCausalLM"
    assert modelinfo._normalized(Registry(), "Qwen3Model") == "Qwen3ForCausalLM"
    assert asked == [("Qwen3Model", None, None)]  # as vLLM resolves a model given no runner


def test_a_stamp_that_cannot_be_written_or_read_is_no_error(tmp_path, monkeypatch):
    # vLLM only logs a cache it cannot write: the folder may not exist, or be read-only
    monkeypatch.setattr(modelinfo, "vllm_key", lambda: "v")

    def fake_run(cmd, **kw):
        out = '{"arch": "BertModel", "file": "m-BertEmbeddingModel.json"}\n'
        return subprocess.CompletedProcess(cmd, 0, stdout=out, stderr="")

    monkeypatch.setattr(modelinfo.subprocess, "run", fake_run)
    info = modelinfo.warm({"BertModel"}, {"VLLM_CACHE_ROOT": str(tmp_path / "never-made")})
    assert info["inspected"] == ["BertModel"]
    assert info["stamp_not_written"].startswith("FileNotFoundError")
    # a stamp holding something else than this module writes is started again
    folder = tmp_path / "modelinfos"
    folder.mkdir()
    (folder / modelinfo.STAMP).write_text('["not", "a", "mapping"]')
    info = modelinfo.warm({"BertModel"}, {"VLLM_CACHE_ROOT": str(tmp_path)})
    assert "stamp_not_written" not in info
    assert json.loads((folder / modelinfo.STAMP).read_text()) == {
        "v": {"BertModel": "m-BertEmbeddingModel.json"}
    }
