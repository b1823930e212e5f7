"""Engine memory is sized from the case's config and engine settings, never from the host."""

import pytest

from harness.models.synthetic import ARCHS
from harness.runners import memory as em
from harness.runners.memory import FLOOR_BYTES, MIB, kv_budget, language_config, resource_hint
from harness.runners.platform import Platform

# a real decoder's shape (Qwen3-Embedding-8B's config.json): 36 layers, 8 KV heads, head dim 128
QWEN3_8B = dict(
    num_hidden_layers=36,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=128,
    hidden_size=4096,
    max_position_embeddings=40960,
)


@pytest.fixture(autouse=True)
def _no_override(monkeypatch):
    monkeypatch.delenv(em.OVERRIDE_ENV, raising=False)


@pytest.mark.parametrize("name", sorted(ARCHS))
def test_every_synthetic_architecture_gets_a_budget_from_its_config(name):
    b = kv_budget(ARCHS[name].config, "float32", {})
    text = language_config(ARCHS[name].config)
    assert b.bytes >= FLOOR_BYTES and b.bytes % MIB == 0
    assert b.max_model_len == text["max_position_embeddings"]
    assert b.tokens >= b.max_model_len  # vLLM refuses a cache that cannot hold one full context
    assert b.per_token_bytes > 0


def test_per_token_bytes_follow_layers_kv_heads_head_dim_and_dtype():
    b32 = kv_budget(QWEN3_8B, "float32", {"max_model_len": 4096})
    b16 = kv_budget(QWEN3_8B, "bfloat16", {"max_model_len": 4096})
    assert b32.per_token_bytes == 2 * 36 * 8 * 128 * 4
    assert b16.per_token_bytes == b32.per_token_bytes // 2
    # GQA: KV heads, not attention heads; without num_key_value_heads every head keeps KV
    mha = kv_budget(
        {k: v for k, v in QWEN3_8B.items() if k != "num_key_value_heads"},
        "bfloat16",
        {"max_model_len": 4096},
    )
    assert mha.per_token_bytes == 4 * b16.per_token_bytes


def test_a_long_context_model_is_sized_for_one_full_context_not_max_num_seqs_of_them():
    b = kv_budget(QWEN3_8B, "bfloat16", {})
    assert b.max_model_len == 40960 and b.tokens == 40960
    assert b.bytes == pytest.approx(b.per_token_bytes * 40960 * em.MARGIN, rel=0.01)
    short = kv_budget(QWEN3_8B, "bfloat16", {"max_model_len": 512, "max_num_seqs": 4})
    assert short.tokens == 2048  # 4 sequences of 512, fewer than TOKENS_IN_FLIGHT


def test_the_budget_does_not_depend_on_the_host(monkeypatch):
    import os

    before = kv_budget(QWEN3_8B, "bfloat16", {"max_model_len": 8192})
    monkeypatch.setattr(os, "cpu_count", lambda: 256)
    monkeypatch.setattr(os, "sysconf", lambda name: 1 << 40)
    assert kv_budget(QWEN3_8B, "bfloat16", {"max_model_len": 8192}) == before


def test_the_text_tower_of_a_multimodal_config_is_the_one_sized():
    cfg = {
        "vlm_config": {"text_config": dict(QWEN3_8B), "vision_config": {"num_hidden_layers": 27}}
    }
    assert language_config(cfg)["num_hidden_layers"] == 36
    with pytest.raises(ValueError, match="num_hidden_layers"):
        language_config({"vision_config": {"hidden_size": 8}})


def test_override_env_wins_and_is_validated(monkeypatch):
    monkeypatch.setenv(em.OVERRIDE_ENV, "512")
    assert kv_budget(QWEN3_8B, "float32", {}).bytes == 512 * MIB
    monkeypatch.setenv(em.OVERRIDE_ENV, "lots")
    with pytest.raises(ValueError, match="PARITY_KV_CACHE_MIB"):
        kv_budget(QWEN3_8B, "float32", {})


def test_engine_defaults_pass_the_explicit_size_on_both_devices():
    cpu = Platform("cpu").engine_defaults(96 * MIB)
    cuda = Platform("cuda").engine_defaults(96 * MIB)
    assert cpu["kv_cache_memory_bytes"] == cuda["kv_cache_memory_bytes"] == 96 * MIB
    assert (
        "gpu_memory_utilization" not in cpu
    )  # on CPU that fraction of the node is what refused loads
    assert Platform("cuda").max_lanes(8) == 1 and Platform("cpu").max_lanes(2) == 2


def test_cuda_engines_compile_unless_told_to_run_eager(monkeypatch):
    assert Platform("cpu").engine_defaults(MIB)["enforce_eager"] is True
    monkeypatch.delenv("PARITY_ENFORCE_EAGER", raising=False)
    assert (
        Platform("cuda").engine_defaults(MIB)["enforce_eager"] is False
    )  # CUDA graphs, as users serve
    monkeypatch.setenv("PARITY_ENFORCE_EAGER", "1")
    assert Platform("cuda").engine_defaults(MIB)["enforce_eager"] is True
    monkeypatch.setenv("PARITY_ENFORCE_EAGER", "yes")
    with pytest.raises(ValueError, match="PARITY_ENFORCE_EAGER='yes'; valid: 0, 1"):
        Platform("cuda").engine_defaults(MIB)


def test_resource_refusals_get_a_hint_and_other_errors_do_not():
    vllm_cpu = (
        "ValueError: Available memory on node 0 (6.19/7.59 GiB) on kv cache allocation is less than "
        "requested memory for kv (-0.2/0.76 GiB). Reduce CPU memory used by other processes."
    )
    hint = resource_hint(vllm_cpu)
    assert hint and "kv_cache_memory_bytes" in hint and em.OVERRIDE_ENV in hint
    assert resource_hint("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert resource_hint("ModuleNotFoundError: No module named 'torchvision'") is None
    assert resource_hint("ValueError: memory layout of the weights is wrong") is None


def test_a_gpu_host_with_a_cpu_torch_is_a_clear_error(monkeypatch, tmp_path):
    from pathlib import Path

    from harness.runners import platform

    monkeypatch.delenv("PARITY_DEVICE", raising=False)
    real_exists = Path.exists
    monkeypatch.setattr(
        Path,
        "exists",
        lambda self: True if str(self) == "/proc/driver/nvidia/version" else real_exists(self),
    )
    monkeypatch.setattr(
        platform, "torch_cuda", lambda: (False, "torch 2.13.0+cpu, CUDA build None")
    )
    with pytest.raises(
        RuntimeError, match=r"torch 2.13.0\+cpu.*PARITY_BACKEND=cuda.*PARITY_DEVICE=cpu"
    ):
        platform.detect_device()
    monkeypatch.setattr(
        platform, "torch_cuda", lambda: (True, "torch 2.13.0+cu128, CUDA build 12.8")
    )
    assert platform.detect_device() == "cuda"
    monkeypatch.setenv("PARITY_DEVICE", "cpu")
    assert platform.detect_device() == "cpu"


def test_the_installed_torch_is_asked_for_cuda():
    from harness.runners.platform import torch_cuda

    usable, build = torch_cuda()
    assert build.startswith("torch ") and isinstance(usable, bool)


def test_parity_dtype_overrides_the_platform_default(monkeypatch):
    monkeypatch.delenv("PARITY_DTYPE", raising=False)
    assert (
        Platform("cpu").default_dtype == "float32" and Platform("cuda").default_dtype == "bfloat16"
    )
    monkeypatch.setenv("PARITY_DTYPE", "float32")
    assert Platform("cuda").default_dtype == "float32"
    monkeypatch.setenv("PARITY_DTYPE", "fp8")
    with pytest.raises(ValueError, match="PARITY_DTYPE='fp8'; valid: float32, bfloat16, float16"):
        Platform("cuda").default_dtype


def test_every_shipped_and_test_matrix_bounds_every_dtype():
    """A GPU run (bfloat16 by default) of any matrix must find bounds: no case lists only float32."""
    from pathlib import Path

    from harness.run.matrices import load_matrix

    root = Path(__file__).resolve().parents[2]
    paths = [
        *sorted((root / "matrices").glob("*.yaml")),
        *sorted((root / "tests" / "integration" / "data").glob("*.yaml")),
        root / "benchmarks" / "subset.yaml",
    ]
    for path in paths:
        for case in load_matrix(path).cases:
            assert {"float32", "bfloat16", "float16"} <= set(case.tolerances), (
                f"{path.name}: {case.id} {sorted(case.tolerances)}"
            )
