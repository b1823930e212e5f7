"""The server runner's pieces that need no server: flags, names, the runner read from the log."""

from harness.platform import Platform
from harness.runners import model_runner_variant, runner_kind
from harness.runners.serve import cli_args, free_port, runner_from_log


def test_engine_kwargs_become_server_flags():
    flags = cli_args({"enforce_eager": True, "enable_prefix_caching": False, "kv_cache_memory_bytes": 64,
                      "pooler_config": {"step_tag_id": 4711}, "model_impl": "transformers", "skip": None})
    assert flags == ["--enforce-eager", "--no-enable-prefix-caching", "--kv-cache-memory-bytes", "64",
                     "--pooler-config", '{"step_tag_id": 4711}', "--model-impl", "transformers"]


def test_runner_names_and_environment():
    assert runner_kind("vllm-serve-v2") == ("vllm-serve", "v2") and runner_kind("vllm-v2") == ("vllm", "v2")
    assert model_runner_variant("vllm-serve-auto") == "auto" and model_runner_variant("hf") is None
    env = Platform("cpu").worker_env("vllm-serve-v2")
    assert env["VLLM_USE_V2_MODEL_RUNNER"] == "1" and env["TRITON_INTERPRET"] == "1"
    assert env["VLLM_ENABLE_V1_MULTIPROCESSING"] is None  # a server keeps vLLM's own process layout
    assert Platform("cpu").worker_env("vllm-serve-v1")["VLLM_USE_V2_MODEL_RUNNER"] == "0"
    assert Platform("cpu").runner_label("vllm-serve-v2", "v2") == "vLLM serve V2 on CPU, interpreted Triton kernels"


def test_the_model_runner_is_read_from_the_server_log():
    assert runner_from_log("INFO [cpu_worker.py:162] Using V2 Model Runner")[0] == "v2"
    assert runner_from_log("INFO [cpu_model_runner.py:68] Starting to load model")[0] == "v1"
    assert runner_from_log("nothing useful")[0] == "unknown"


def test_free_port_is_on_loopback_and_bindable():
    import socket

    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
