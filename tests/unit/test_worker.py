"""The worker machinery, driven by the fake runner (same process and protocol as real runners)."""

from dataclasses import asdict

import pytest

from harness.runners import LoadRequest
from harness.runners.outputs import load_items
from harness.runners.pool import Worker, WorkerFailure, WorkerTimeout


@pytest.fixture
def worker(tmp_path):
    w = Worker("fake", {}, tmp_path / "fake.log")
    yield w
    w.kill()


def _load(w, **opts):
    req = LoadRequest(model_dir="/nonexistent", dtype="float32", device="cpu", hf=opts)
    return w.request({"op": "load", "request": asdict(req)}, 60, "load")


def _run(w, tmp_path, timeout=60, **opts):
    return w.request(
        {
            "op": "run",
            "task": "embed",
            "items": ["a", "b", "c"],
            "request": {"hf": opts},
            "out": str(tmp_path / "out.safetensors"),
        },
        timeout,
        "case x",
    )


def test_echo_round_trip_writes_outputs(worker, tmp_path):
    assert _load(worker)["ok"]
    ans = _run(worker, tmp_path)
    assert ans["ok"] and ans["n"] == 3
    items, meta = load_items(tmp_path / "out.safetensors")
    assert len(items) == 3 and items[0].shape == (8,) and meta["runner"] == "fake"


def test_raise_is_reported_and_worker_keeps_serving(worker, tmp_path):
    _load(worker)
    ans = _run(worker, tmp_path, behaviour="raise")
    assert not ans["ok"] and "ValueError: fake runner raised on purpose" in ans["error"]
    assert _run(worker, tmp_path)["ok"]
    assert worker.starts == 1


def test_a_case_the_runner_cannot_run_here_is_answered_as_a_skip(worker, tmp_path):
    """SkipCase (a pinned reference package not installed) is told apart from a failure."""
    _load(worker)
    ans = _run(worker, tmp_path, behaviour="skip")
    assert not ans["ok"] and ans["skip"] is True
    assert ans["error"] == "SkipCase: fake runner cannot run this case here"
    assert _run(worker, tmp_path, behaviour="raise")["skip"] is False


def test_failed_load_is_reported(worker):
    ans = _load(worker, behaviour="fail-load")
    assert not ans["ok"] and "engine refused to start" in ans["error"]


@pytest.mark.parametrize(
    "behaviour, expected", [("crash", "killed by SIGABRT"), ("exit", "exit code 3")]
)
def test_dying_worker_raises_with_exit_and_log_tail(worker, tmp_path, behaviour, expected):
    _load(worker)
    with pytest.raises(WorkerFailure) as e:
        _run(worker, tmp_path, behaviour=behaviour)
    msg = str(e.value)
    assert "worker died during case x" in msg and expected in msg and "worker log tail" in msg
    # the next request starts a fresh worker
    _load(worker)
    assert _run(worker, tmp_path)["ok"] and worker.starts == 2


def test_hang_times_out_and_kills(worker, tmp_path):
    _load(worker)
    with pytest.raises(WorkerTimeout, match=r"timed out after 2 s during case x; killed") as e:
        _run(worker, tmp_path, timeout=2, behaviour="hang")
    assert not worker.alive and e.value.timed_out and isinstance(e.value, WorkerFailure)


def test_a_worker_whose_parent_is_gone_unloads_its_model(worker, tmp_path):
    """The harness killed (stdin at EOF) while a model is loaded: the worker unloads it before it
    exits, so a `vllm serve` it started does not outlive the run (it did: orphaned servers)."""
    marker = tmp_path / "unloaded.txt"
    assert _load(worker, unload_marker=str(marker))["ok"]
    worker.proc.stdin.close()  # what the parent's death does to the pipe
    assert worker.proc.wait(timeout=30) == 0
    assert marker.read_text() == "unloaded\n"
