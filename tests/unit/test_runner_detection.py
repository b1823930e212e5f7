"""Which model runner ran is read from the engine (#22 item 11), never from the config flag."""

import types

from harness.runners.vllm_load_info import _actual_runner


def _runner_class(module: str):
    base = type("GPUModelRunner", (), {"__module__": module})
    return type("CPUModelRunner", (base,), {"__module__": "vllm.v1.worker.cpu_model_runner"})


def _worker(module: str):
    return types.SimpleNamespace(model_runner=_runner_class(module)())


class _RemoteEngine:
    """An LLM whose engine core lives in another process (vLLM's GPU default): no in-process
    chain, only collective_rpc; its config flag says V2 whatever ran."""

    def __init__(self, workers=None, fails=None):
        self.workers, self.fails = workers, fails
        self.llm_engine = types.SimpleNamespace(
            engine_core=object(), vllm_config=types.SimpleNamespace(use_v2_model_runner=True)
        )

    def collective_rpc(self, method):
        if self.fails:
            raise self.fails
        from harness.runners.vllm_load_info import _runner_of_worker

        assert method is _runner_of_worker
        return [method(w) for w in self.workers]


def test_in_process_engine_is_read_from_its_model_runner_class():
    worker = types.SimpleNamespace(worker=_worker("vllm.v1.worker.gpu_model_runner"))
    core = types.SimpleNamespace(model_executor=types.SimpleNamespace(driver_worker=worker))
    llm = types.SimpleNamespace(
        llm_engine=types.SimpleNamespace(engine_core=types.SimpleNamespace(engine_core=core))
    )
    actual, evidence = _actual_runner(llm)
    assert actual == "v1" and "vllm.v1.worker.cpu_model_runner.CPUModelRunner" in evidence


def test_engine_in_another_process_is_asked_through_its_workers_not_the_flag():
    actual, evidence = _actual_runner(_RemoteEngine([_worker("vllm.v1.worker.gpu_model_runner")]))
    assert actual == "v1" and "asked of vLLM's workers" in evidence  # the flag says V2: not used
    actual, _ = _actual_runner(_RemoteEngine([_worker("vllm.v1.worker.gpu.model_runner")] * 2))
    assert actual == "v2"
    actual, evidence = _actual_runner(
        _RemoteEngine(
            [_worker("vllm.v1.worker.gpu.model_runner"), _worker("vllm.v1.worker.gpu_model_runner")]
        )
    )
    assert actual == "unknown" and "disagree" in evidence


def test_an_engine_that_cannot_be_asked_is_unproven_never_the_flag():
    actual, evidence = _actual_runner(_RemoteEngine(fails=RuntimeError("rpc timed out")))
    assert actual == "unknown" and evidence.startswith("unproven") and "rpc timed out" in evidence


def test_the_rpc_reads_a_wrapped_worker_too():
    from harness.runners.vllm_load_info import _runner_of_worker

    wrapper = types.SimpleNamespace(worker=_worker("vllm.v1.worker.gpu.model_runner"))
    assert "vllm.v1.worker.gpu.model_runner" in _runner_of_worker(wrapper)


def test_a_runner_read_only_from_a_server_log_is_marked_unproven_in_the_report():
    from harness.report.markdown import to_markdown
    from harness.report.model import Report, Result

    def result(runner, proven):
        return Result(
            case_id="c",
            family="f",
            task="embed",
            runner=runner,
            runner_label=f"{runner} label",
            status="pass",
            info={"runner_proven": proven},
        )

    report = Report(
        harness_version="0",
        matrix="m",
        matrix_sha256="0",
        device="cpu",
        started="t",
        results=[result("vllm-serve-v2", False), result("vllm-v2", True)],
    )
    md = to_markdown(report)
    assert "not read from the engine (server log only, unproven) for: vllm-serve-v2 label" in md
    assert "vllm-v2 label" not in md.split("unproven) for:")[1].splitlines()[0]


def test_pickle_is_allowed_only_where_the_probe_crosses_a_process():
    from harness.runners.platform import Platform

    flag = "VLLM_ALLOW_INSECURE_SERIALIZATION"
    assert Platform("cpu").worker_env("vllm-v1")[flag] is None  # in-process engine core: not needed
    assert Platform("cpu", in_process_engine=False).worker_env("vllm-v2")[flag] == "1"
    # CUDA runs the engine core in-process too (the scheduler trace of the checks is in reach)
    assert Platform("cuda").worker_env("vllm-auto")[flag] is None
    assert Platform("cuda").worker_env("vllm-auto")["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert Platform("cuda", in_process_engine=False).worker_env("vllm-auto")[flag] == "1"
    assert Platform("cuda").worker_env("vllm-serve-v1")[flag] is None  # the server never gets it
