"""The matrix schema: a case and the matrix of cases, validated by pydantic. A case's parts have
modules of their own (model sources, tolerances, divergences, LoRA, request options) and are
importable from here too. Loading YAML into these is harness.matrix.loader's job."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Mapping

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from harness.matrix.colbert import check_colbert
from harness.matrix.divergence import Divergence, Expect, KnownSkip, VllmReleases
from harness.matrix.in_flight import check_in_flight
from harness.matrix.lora import LoraAdapter
from harness.matrix.model_sources import (
    MODEL_SOURCES,
    MODEL_TAGS,
    HubCacheModel,
    LocalModel,
    ModelSource,
    PackageModel,
    StDense,
    SyntheticModel,
)
from harness.matrix.prompt_forms import PromptForm, check_prompt_form
from harness.matrix.request import RequestOptions, request_of, unhonoured
from harness.matrix.request_fit import ACTIVATION_TASKS, check_request, check_serve_api
from harness.matrix.runner_names import REFERENCE_RUNNER, RunnerName
from harness.matrix.strict import Strict
from harness.matrix.tasks import TaskName
from harness.matrix.tolerance import (
    HALF_DTYPES,
    METRIC_CEILINGS,
    Dtype,
    Tolerance,
    bound_problem,
)

# every name other code imports from here, wherever it is defined
__all__ = [
    "ACTIVATION_TASKS",
    "HALF_DTYPES",
    "METRIC_CEILINGS",
    "MODEL_SOURCES",
    "MODEL_TAGS",
    "Case",
    "Divergence",
    "Dtype",
    "Expect",
    "HubCacheModel",
    "KnownSkip",
    "LocalModel",
    "LoraAdapter",
    "Matrix",
    "MatrixError",
    "ModelSource",
    "PackageModel",
    "StDense",
    "SyntheticModel",
    "Tolerance",
    "VllmReleases",
    "Vocabulary",
    "bound_problem",
]


def _known_check(name: str) -> str:
    """An invariance check's name: one of harness.matrix.checks.CHECKS."""
    from harness.matrix.checks import CHECKS

    if name not in CHECKS:
        raise ValueError(f"unknown check {name!r}; valid: {', '.join(CHECKS)}")
    return name


@dataclass(frozen=True)
class Vocabulary:
    """Names a matrix may use that are defined above this layer: the HF reference recipes
    (harness.runners.hf) and the synthetic architectures (harness.models.synthetic).
    harness.run.matrices builds it; a matrix file is always loaded with one."""

    recipes: frozenset[str]
    archs: frozenset[str]
    # what each recipe honours of harness.matrix.request.DECLARED_FIELDS, and the defaults:
    # (architecture, task) -> recipe, and ("", task) -> the task's
    honours: Mapping[str, frozenset[str]] = field(default_factory=dict)
    defaults: Mapping[tuple[str, str], str] = field(default_factory=dict)

    def recipe_of(self, case: "Case") -> str | None:
        """The recipe a case's reference runs, as far as the matrix says it (None: a default
        that depends on the checkpoint's config.json, resolved in the worker)."""
        if case.reference is not None:
            return case.reference
        arch = case.model.arch if isinstance(case.model, SyntheticModel) else None
        if arch is None:
            return None
        return self.defaults.get((arch, case.task)) or self.defaults.get(("", case.task))


class MatrixError(ValueError):
    """A matrix file is malformed. The message says file:line, key and valid choices."""


class Case(Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._@-]*$")
    family: str
    task: TaskName
    model: ModelSource
    hub_id: str | None = None  # the real model this case stands for, for users who have it
    inputs: str
    runners: list[RunnerName]
    dtype: Dtype | None = None  # None: the platform's default (float32 on CPU, bfloat16 on CUDA)
    tolerances: dict[Dtype, Tolerance]
    reference: str | None = None  # HF reference recipe; default chosen by task
    engine: dict[str, Any] = Field(default_factory=dict)  # extra vLLM engine kwargs
    hf: dict[str, Any] = Field(default_factory=dict)  # extra reference-recipe options
    # how the items are sent (harness.matrix.request.RequestOptions): `request:` in a matrix
    request: RequestOptions = Field(default_factory=RequestOptions)
    divergence: Divergence | None = None
    # divergences of the releases that shipped a bug (each with its `vllm_releases`) on a case
    # that has another divergence: on a release inside one of them (the first that holds) it is
    # the case's divergence there, in place of `divergence` (harness.run.plan)
    release_divergences: list[Divergence] = Field(default_factory=list)
    skip_if_error: KnownSkip | None = None
    # the model runner vLLM should choose when left to decide (the `vllm-auto` runner); a case
    # where the live engine chose another fails the default-runner audit. It may depend on the
    # release: a mapping of version specifiers to runners, e.g. {">=0.32": v2, "<0.32": v1}
    expected_auto_runner: Literal["v1", "v2"] | dict[str, Literal["v1", "v2"]] | None = None
    trust_remote_code: bool = False
    # the vLLM releases this case can run on (VllmReleases); elsewhere it is skipped, unplanned
    vllm_releases: VllmReleases | None = None
    # invariance checks (harness.matrix.checks): each becomes a derived case `<id>@<check>`
    # (the names: harness.matrix.checks.CHECKS)
    checks: list[Annotated[str, AfterValidator(_known_check)]] = Field(default_factory=list)
    # MTEB tasks to score this model on (`parity mteb`): our offline ones or cached real ones
    mteb_tasks: list[str] = Field(default_factory=list)
    # the outcome expected instead of outputs, e.g. {refused: "maximum context length"}
    expect: Expect | None = None
    # how each text is sent (harness.matrix.prompt_forms): text, the tokenizer's token ids,
    # prompt embeddings (the model's input embeddings of those ids), or mixed in one batch
    prompt_form: PromptForm = "text"
    # a seeded LoRA adapter on the model (LoraAdapter): the reference runs it through peft, the
    # offline vLLM runners through enable_lora + a LoRARequest on every request
    lora: LoraAdapter | None = None
    where: str = ""  # file:line of the case, filled by the loader
    # set by harness.matrix.checks on derived cases, never in a matrix
    variant_of: str | None = Field(default=None, exclude=True)
    check: str | None = Field(default=None, exclude=True)  # the check a derived case runs
    run_options: dict[str, Any] = Field(default_factory=dict, exclude=True)

    @field_validator("expected_auto_runner")
    @classmethod
    def _version_specifiers(cls, v):
        if isinstance(v, dict):
            from packaging.specifiers import InvalidSpecifier, SpecifierSet

            if not v:
                raise ValueError("an empty mapping; give v1 | v2, or {SPECIFIER: v1 | v2, ...}")
            for key in v:
                try:
                    SpecifierSet(key)
                except InvalidSpecifier:
                    raise ValueError(
                        f"{key!r} is not a version specifier; write e.g. '>=0.32' or "
                        "'>=0.28,<0.32' (PEP 440, as pip takes them)"
                    ) from None
        return v

    def expected_auto_for(self, version: str | None) -> tuple[str | None, str]:
        """(the runner vLLM `version` should choose by default, or None; why none). With a
        mapping, exactly one specifier must match the version."""
        want = self.expected_auto_runner
        if not isinstance(want, dict):
            return want, ""
        from packaging.specifiers import SpecifierSet
        from packaging.version import InvalidVersion, Version

        try:
            v = Version(version or "")
        except InvalidVersion:
            return None, (
                f"the vLLM version {version!r} is unknown, so expected_auto_runner cannot pick"
            )
        hits = [r for k, r in want.items() if SpecifierSet(k).contains(v, prereleases=True)]
        keys = [k for k in want if SpecifierSet(k).contains(v, prereleases=True)]
        if len(hits) != 1:
            return None, (
                f"expected_auto_runner ({self.where or self.id}) has "
                f"{'no entry' if not hits else 'several entries: ' + ', '.join(keys)} "
                f"for vLLM {version}; give exactly one specifier that matches it"
            )
        return hits[0], ""

    @field_validator("runners")
    @classmethod
    def _runners_unique(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"runners listed twice: {v}")
        return v

    # names a worker would only meet minutes later are checked when the matrix loads
    @field_validator("inputs")
    @classmethod
    def _known_inputs(cls, v: str) -> str:
        from harness.matrix.inputs import INPUT_SET_NAMES, is_known

        if not is_known(v):
            raise ValueError(
                f"unknown input set {v!r}; valid: {', '.join(INPUT_SET_NAMES)}, or a mapping "
                f"{{file: PATH}} | {{images: FOLDER}} | {{texts: [...]}} | {{pairs: [[q, d], ...]}}"
            )
        return v

    # names defined above this layer (recipes, synthetic architectures) are checked against the
    # Vocabulary the loader is given (harness.run.matrices); a Case built in code skips this
    @field_validator("reference")
    @classmethod
    def _known_recipe(cls, v: str | None, info: ValidationInfo) -> str | None:
        vocabulary = (info.context or {}).get("vocabulary")
        if v is not None and vocabulary is not None and v not in vocabulary.recipes:
            valid = ", ".join(sorted(vocabulary.recipes))
            raise ValueError(f"unknown reference recipe {v!r}; valid: {valid}")
        return v

    @field_validator("model")
    @classmethod
    def _known_arch(cls, v, info: ValidationInfo):
        vocabulary = (info.context or {}).get("vocabulary")
        if (
            isinstance(v, SyntheticModel)
            and vocabulary is not None
            and v.arch not in vocabulary.archs
        ):
            valid = ", ".join(sorted(vocabulary.archs))
            raise ValueError(f"unknown synthetic arch {v.arch!r}; valid: {valid}")
        return v

    @model_validator(mode="after")
    def _serve_api_fits_task(self) -> "Case":
        """The server options (`request.serve`, the checks' batching) where the task takes them."""
        check_serve_api(self)
        return self

    @model_validator(mode="after")
    def _request_fits_the_task(self) -> "Case":
        """The request options (and an expected refusal) where the task and form take them."""
        check_request(self)
        return self

    @model_validator(mode="after")
    def _forms_and_runners_fit(self) -> "Case":
        """Prompt forms and ColBERT ids where the runners can send them; calibrated tolerances
        in half precision only. (LoRA runs everywhere: offline as a LoRARequest, on a server as
        an adapter of `--lora-modules` that every request names as its model.)"""
        check_prompt_form(self)
        check_colbert(self)
        check_in_flight(self)
        for dtype, tol in self.tolerances.items():
            if tol.k is not None and dtype not in HALF_DTYPES:
                raise ValueError(
                    f"tolerances.{dtype}.k: calibrated bounds (k x the HF reference's "
                    f"own error) apply to {' and '.join(HALF_DTYPES)} only; {dtype} "
                    f"takes plain bounds"
                )
        return self

    @model_validator(mode="after")
    def _release_divergences_name_their_releases(self) -> "Case":
        for i, div in enumerate(self.release_divergences):
            if div.vllm_releases is None:
                raise ValueError(
                    f"release_divergences[{i}] needs vllm_releases (the releases that shipped "
                    f"it); a divergence of every release is `divergence`"
                )
            if div.accepted and self.expect is None:
                raise ValueError(
                    f"release_divergences[{i}].accepted records a refusal not made: it needs "
                    f"expect.refused"
                )
        return self

    @model_validator(mode="after")
    def _reference_honours_the_request(self, info: ValidationInfo) -> "Case":
        """A request field the case's reference recipe does not implement is refused here, with
        the recipes that do, not minutes later in the worker (a refusal case has no reference).
        After the checks above, whose errors are more specific."""
        vocabulary = (info.context or {}).get("vocabulary")
        recipe = vocabulary.recipe_of(self) if vocabulary is not None else None
        if recipe is None or self.expect is not None or recipe not in vocabulary.recipes:
            return self
        refused = unhonoured(request_of(self, for_hf=True), recipe, vocabulary.honours)
        if refused:
            raise ValueError(refused)
        return self

    def tolerance(self, dtype: str) -> Tolerance:
        try:
            return self.tolerances[dtype]  # type: ignore[index]
        except KeyError:
            raise MatrixError(
                f"{self.where}: case {self.id!r} has no tolerances for dtype {dtype!r}; "
                f"it has: {sorted(self.tolerances)}"
            ) from None

    @property
    def compared_runners(self) -> list[str]:
        return [r for r in self.runners if r != REFERENCE_RUNNER]


class Matrix(BaseModel):
    model_config = ConfigDict(frozen=True)
    path: str
    cases: list[Case]
    # over every file read (the matrix and what it includes), in the order read
    sha256: str = ""
    files: list[str] = Field(default_factory=list)  # every file read, resolved, in the order read

    def case(self, case_id: str) -> Case:
        for c in self.cases:
            if c.id == case_id:
                return c
        raise KeyError(f"no case {case_id!r} in {self.path}; cases: {[c.id for c in self.cases]}")
