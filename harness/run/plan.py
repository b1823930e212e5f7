"""Cases x runners -> a plan: per runner, an ordered list of model loads, each serving every case
that shares its weights and engine settings (so a model loads once per runner)."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from harness.engine.description import ENGINE
from harness.matrix.runner_names import REFERENCE_RUNNER, runner_info
from harness.matrix.schema import HALF_DTYPES, Case, Divergence, SyntheticModel
from harness.models.resolve import (
    ModelUnavailable,
    ResolvedModel,
    build_synthetics,
    resolve,
    with_adapter,
)
from harness.runners.modelinfo import case_archs
from harness.runners.platform import Platform

# the HF reference run again in float32 beside a half-precision run: the yardstick its
# calibrated bounds are measured from (runs in the `hf` worker; outcomes are keyed by this name)
REFERENCE_FP32 = "hf-fp32"


@dataclass(frozen=True)
class ModelProblem:
    status: str  # "skip" (unavailable here) or "error" (broken)
    reason: str


@dataclass
class Load:
    runner: str
    model: ResolvedModel
    dtype: str
    engine: dict
    hf: dict
    trust_remote_code: bool
    cases: list[Case] = field(default_factory=list)
    label: str = ""  # what its outcomes are recorded as, when not `runner` (REFERENCE_FP32)

    @property
    def name(self) -> str:
        return self.label or self.runner

    @property
    def key(self) -> str:
        return f"{self.name}:{self.model.fingerprint[:12]}:{self.dtype}"


@dataclass
class Plan:
    platform: Platform
    cases: list[Case]
    runners: list[str]  # every runner some case uses, reference first
    models: dict[str, ResolvedModel | ModelProblem]  # by case id
    dtypes: dict[str, str]  # by case id
    queues: dict[str, list[Load]]  # by runner
    # by case id: its bounds are calibrated against HF in float32 (needs_fp32_reference), decided
    # once here for every path that runs or judges it
    calibrated: dict[str, bool] = field(default_factory=dict)
    # by (case id, runner): what this platform cannot run faithfully (Platform.cannot_run), and a
    # reference no row needs because of that (idle_references): a skip with its reason, never
    # queued
    limits: dict[tuple[str, str], str] = field(default_factory=dict)

    def runners_of(self, case: Case) -> list[str]:
        return [r for r in case.runners if r in self.runners]


def load_engine(runner: str, case: Case) -> dict:
    """The engine settings `runner` loads `case`'s model with: its `engine:`, and on a server
    the score template it renders pairs with (`vllm serve --chat-template`; offline, LLM.score
    takes it per call), so cases of other templates never share a server."""
    engine = dict(case.engine)
    if case.request.score_template is not None and runner_info(runner).is_server:
        from harness.matrix.score_templates import SCORE_TEMPLATES

        engine["chat_template"] = SCORE_TEMPLATES[case.request.score_template]
    return engine


def _load_key(runner: str, case: Case, model: ResolvedModel, dtype: str) -> str:
    # the reference does not see vLLM engine kwargs, so cases differing only there share a load
    knobs = case.hf if runner == REFERENCE_RUNNER else load_engine(runner, case)
    return json.dumps(
        [runner, model.fingerprint, dtype, knobs, case.trust_remote_code],
        sort_keys=True,
        default=str,
    )


def _prepare(src, base_dir: Path) -> ResolvedModel | ModelProblem:
    try:
        return resolve(src, base_dir)
    except ModelUnavailable as e:
        return ModelProblem("skip", f"model unavailable: {e}")
    except Exception as e:  # noqa: BLE001 - one broken model never stops the run
        return ModelProblem("error", f"model could not be prepared: {e}")


def prepare_models(cases: list[Case], base_dir: Path) -> dict[str, ResolvedModel | ModelProblem]:
    """Each case's model, found or built: synthetic checkpoints first, in one batch per core
    (`build_synthetics`), then every model resolved side by side, one per core. A model that
    cannot be prepared is a problem of its cases only."""
    sources = {case.model.model_dump_json(): case.model for case in cases}
    cores = os.cpu_count() or 1
    build_synthetics([s for s in sources.values() if isinstance(s, SyntheticModel)], cores)
    with ThreadPoolExecutor(max_workers=max(1, min(len(sources), cores))) as pool:
        prepared = dict(
            zip(sources, pool.map(lambda src: _prepare(src, base_dir), sources.values()))
        )
    models = {case.id: prepared[case.model.model_dump_json()] for case in cases}
    for case in cases:  # a LoRA case runs its model with the adapter built beside it
        model = models[case.id]
        if case.lora is not None and isinstance(model, ResolvedModel):
            try:
                models[case.id] = with_adapter(model, case.lora)
            except Exception as e:  # noqa: BLE001 - a broken adapter fails its case only
                models[case.id] = ModelProblem("error", f"LoRA adapter could not be built: {e}")
    return models


UNDER_TEST = "under test"  # build_plan's default: the engine this environment would import


def release_skips(cases: list[Case], version: str | None) -> dict[str, ModelProblem]:
    """The cases that cannot run on vLLM `version` (their `vllm_releases`), each as a skip with
    its reason: nothing of theirs is built or started."""
    out = {}
    for case in cases:
        why = ENGINE.release_gate(case, version)
        if why:
            out[case.id] = ModelProblem("skip", why)
    return out


def _scoped(case: Case) -> bool:
    return bool(case.release_divergences) or (
        case.divergence is not None and case.divergence.vllm_releases is not None
    )


def _divergence_on(
    case: Case, version: str | None, cpu_flags: frozenset[str] | None
) -> Divergence | None:
    for div in case.release_divergences:
        if div.holds_on(version, cpu_flags):
            return div
    div = case.divergence
    return div if div is not None and div.holds_on(version, cpu_flags) else None


def release_divergences(
    cases: list[Case], version: str | None, cpu_flags: frozenset[str] | None = None
) -> list[Case]:
    """The cases as judged on vLLM `version`: a divergence recorded for the releases that shipped
    a bug (its `vllm_releases`) is dropped on any other, so the case is held to its bounds there
    and the bug coming back fails; on a release of one of its `release_divergences`, that one is
    the case's divergence, in place of the one it has elsewhere."""
    return [
        c.model_copy(update={"divergence": _divergence_on(c, version, cpu_flags)})
        if c.divergence is not None or c.release_divergences
        else c
        for c in cases
    ]


def _queue(
    queue: dict[str, Load],
    runner: str,
    case: Case,
    model: ResolvedModel,
    dtype: str,
    label: str,
    one_load_per_case: bool,
) -> None:
    """Add `case` to the load of `runner`'s queue that shares its weights and settings."""
    k = _load_key(runner, case, model, dtype) + label + (case.id if one_load_per_case else "")
    load = queue.get(k)
    if load is None:
        load = Load(
            runner,
            model,
            dtype,
            load_engine(runner, case),
            dict(case.hf),
            case.trust_remote_code,
            label=label,
        )
        queue[k] = load
    load.cases.append(case)


def build_plan(
    cases: list[Case],
    platform: Platform,
    base_dir: Path,
    runners: list[str] | None = None,
    dtype: str | None = None,
    with_reference: bool = True,
    one_load_per_case: bool = False,
    fp32_reference: bool = False,
    engine_version: str | None = UNDER_TEST,
    reference_judged: bool = False,
) -> Plan:
    """Resolve every case's model (building synthetic ones) and group work per runner.
    `one_load_per_case` is the naive layout (a fresh load for every case), for benchmarks.
    `fp32_reference`: a case run in half precision whose bounds are calibrated (`k`) also runs
    the reference in float32 (REFERENCE_FP32, in the `hf` queue); float32 runs are unchanged.
    `engine_version`: the engine the cases run on (default: the one under test here); a case whose
    `vllm_releases` exclude it is a skip, its model never built (release_skips).
    `reference_judged`: the reference's own outputs are judged too (MTEB: against stored scores),
    so it runs even when no vLLM row needs it (idle_references)."""
    version = engine_version
    if engine_version == UNDER_TEST:  # asked only when a case depends on it
        depends = any(ENGINE.gated(c) or _scoped(c) for c in cases)
        version = ENGINE.version_here() if depends else None
    gated = release_skips(cases, version)
    cases = release_divergences(cases, version, platform.cpu_flags())
    models: dict[str, ResolvedModel | ModelProblem] = dict(gated)
    models.update(prepare_models([c for c in cases if c.id not in gated], base_dir))
    wanted = set(runners) if runners else None
    used: list[str] = []
    dtypes: dict[str, str] = {}
    calibrated: dict[str, bool] = {}
    limits: dict[tuple[str, str], str] = {}
    rows: list[tuple[Case, str, ResolvedModel]] = []  # what runs: (case, runner, model)
    for case in cases:
        dtypes[case.id] = dtype or case.dtype or platform.default_dtype
        calibrated[case.id] = needs_fp32_reference(case, dtypes[case.id])
        for runner in case.runners:
            if runner == REFERENCE_RUNNER and not with_reference:
                continue
            if wanted is not None and runner not in wanted and runner != REFERENCE_RUNNER:
                continue
            if runner not in used:
                used.append(runner)
            model = models[case.id]
            if isinstance(model, ModelProblem):
                continue
            limit = platform.cannot_run(
                runner, dtypes[case.id], case_archs(model.path, case.engine)
            )
            if limit:
                limits[(case.id, runner)] = limit
                continue
            rows.append((case, runner, model))
    idle = {} if reference_judged else idle_references(rows, limits, {c.id: c for c in cases})
    queues: dict[str, dict[str, Load]] = {}
    for case, runner, model in rows:
        jobs = [(dtypes[case.id], runner)]
        if runner == REFERENCE_RUNNER and fp32_reference and calibrated[case.id]:
            jobs.append(("float32", REFERENCE_FP32))
        for job_dtype, name in jobs:
            if (case.id, runner) in idle:  # the float32 reference is left out with it
                limits[(case.id, name)] = idle[(case.id, runner)]
                continue
            label = "" if name == runner else name
            queue = queues.setdefault(runner, {})
            _queue(queue, runner, case, model, job_dtype, label, one_load_per_case)
    used.sort(key=lambda r: (r != REFERENCE_RUNNER, r))
    return Plan(
        platform=platform,
        cases=list(cases),
        runners=used,
        models=models,
        dtypes=dtypes,
        queues={r: list(q.values()) for r, q in queues.items()},
        calibrated=calibrated,
        limits=limits,
    )


def idle_references(
    rows: list[tuple[Case, str, ResolvedModel]],
    limits: dict[tuple[str, str], str],
    by_id: dict[str, Case],
) -> dict[tuple[str, str], str]:
    """The reference rows among `rows` that nothing would be judged against: every vLLM row of
    the case, and of the variants that read its reference (`variant_of`), is a platform skip
    (`limits`). Each as a skip with its reason. A case with no vLLM row selected (a golden
    recorded from HF alone, `--runners hf`) keeps its reference: it is what was asked for."""

    def base(case_id: str) -> str:
        return by_id[case_id].variant_of or case_id

    needed = {base(case.id) for case, runner, _ in rows if runner != REFERENCE_RUNNER}
    skipped: dict[str, list[str]] = {}
    for case_id, runner in limits:
        if runner != REFERENCE_RUNNER:
            skipped.setdefault(base(case_id), []).append(f"{case_id} [{runner}]")
    idle = {}
    for case, runner, _ in rows:
        key = base(case.id)
        if runner == REFERENCE_RUNNER and key in skipped and key not in needed:
            rows_skipped = ", ".join(skipped[key])
            idle[(case.id, runner)] = (
                f"not run: no row is judged against it here (each is a platform skip: "
                f"{rows_skipped})"
            )
    return idle


def needs_fp32_reference(case: Case, dtype: str) -> bool:
    """A half-precision run of a case whose bounds in that dtype are calibrated (`k`)."""
    tol = case.tolerances.get(dtype)  # type: ignore[call-overload]
    return dtype in HALF_DTYPES and tol is not None and tol.k is not None
