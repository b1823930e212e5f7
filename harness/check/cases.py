"""The cases `parity check` runs, built from an Inference, validated as matrix cases and written
as a matrix file that `parity run -m` loads (the check itself runs that very file).

Each use of the checkpoint (a family of the default matrix) becomes one case per input set: the
family's own inputs, the adversarial built-in set of its kind (harness/matrix/inputs.py), and
the user's inputs when they fit the task. Task, reference recipe, reference options and the
bounds of every dtype are the family's, copied from matrices/pooling.yaml.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.check.infer import CheckError, Inference, default_expected_auto, default_families
from harness.matrix.paths import cache_root
from harness.matrix.schema import Case
from harness.matrix.tasks import task_kind

# families whose own inputs are images or image pairs: no text adversarial set applies
OWN_INPUTS_ONLY = {
    "clip-embed": ("texts-and-images",),
    "colpali-token-embed": ("texts-and-images",),
    "colpali-maxsim-score": ("query-image-pairs",),
    "vl-rerank": ("query-image-pairs",),
    "process-reward": ("math-steps",),  # step tags are needed: adversarial texts have none
}
ADVERSARIAL = {True: "adversarial-pairs", False: "adversarial-texts"}  # by "pairs" of the task
IMAGE_FAMILIES = ("clip-embed", "colpali-token-embed")
USER_INPUTS = "your-inputs"


@dataclass(frozen=True)
class ModelRef:
    """Where the checkpoint comes from, as a matrix `model:` entry will name it."""

    source: str  # local | package | hf_cache
    folder: Path  # the folder it resolved to
    package: str = ""
    subpath: str = ""
    repo: str = ""

    def slug(self) -> str:
        raw = self.repo.rsplit("/", 1)[-1] if self.repo else self.package or self.folder.name
        slug = re.sub(r"[^a-z0-9._-]+", "-", raw.lower()).strip("-._")
        return slug or "model"

    def entry(self, matrix_dir: Path) -> tuple[dict, bool]:
        """The `model:` mapping, and whether it needs PARITY_ALLOW_ABSOLUTE_PATHS=1."""
        if self.source == "package":
            return {"source": "package", "package": self.package, "path": self.subpath}, False
        if self.source == "hf_cache":
            return {"source": "hf_cache", "repo": self.repo}, False
        path, outside = portable_path(self.folder, matrix_dir)
        return {"source": "local", "path": path}, outside


def locate(spec: str) -> ModelRef:
    """A folder path, `package:NAME[/SUBPATH]` (weights shipped in an installed package) or a hub
    id `ORG/NAME` (found in the Hugging Face cache only; never downloaded). Raises CheckError
    saying what was looked for, and how to fetch a hub id that is not cached."""
    from harness.matrix.schema import HubCacheModel, PackageModel
    from harness.models.cache import ModelUnavailable
    from harness.models.resolve import stored_model_dir

    path = Path(spec).expanduser()
    if path.exists():
        if not path.is_dir():
            raise CheckError(f"{spec}: a file, not a checkpoint folder")
        return ModelRef("local", path.resolve())
    try:
        if spec.startswith("package:"):
            name, _, sub = spec.removeprefix("package:").partition("/")
            src = PackageModel(source="package", package=name, path=sub)
            return ModelRef("package", stored_model_dir(src, Path.cwd()), package=name, subpath=sub)
        if re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", spec):
            src = HubCacheModel(source="hf_cache", repo=spec)
            return ModelRef("hf_cache", stored_model_dir(src, Path.cwd()), repo=spec)
    except ModelUnavailable as e:
        raise CheckError(f"{spec}: {e}") from None
    raise CheckError(
        f"{spec}: no such folder; give a checkpoint folder, package:NAME[/SUBPATH] or a hub id "
        "ORG/NAME that is in the Hugging Face cache"
    )


def portable_path(path: Path, matrix_dir: Path) -> tuple[str, bool]:
    """`path` as a matrix in `matrix_dir` should name it: relative inside the project (the
    matrix folder's parent), absolute elsewhere; True when that needs
    PARITY_ALLOW_ABSOLUTE_PATHS=1 (harness.matrix.paths.contained_path)."""
    path, matrix_dir = path.resolve(), matrix_dir.resolve()
    project, cache = matrix_dir.parent, cache_root().resolve()
    if path == project or project in path.parents:
        return os.path.relpath(path, matrix_dir), False
    inside_cache = path == cache or cache in path.parents
    return str(path), not inside_cache


def input_kind(items: tuple) -> str:
    """texts | pairs | images: what a set of items holds (a user's set is one kind)."""
    kinds = {
        "pairs" if isinstance(it, tuple) else "images" if isinstance(it, dict) else "texts"
        for it in items
    }
    return "mixed" if len(kinds) > 1 and "pairs" in kinds else sorted(kinds)[-1]


def _fits(family: str, task: str, kind: str) -> bool:
    pairs = task_kind(task).pairs
    if kind == "pairs":
        return pairs
    if kind == "images":
        return family in IMAGE_FAMILIES
    return not pairs


def build_cases(
    inf: Inference,
    model: ModelRef,
    matrix_dir: Path,
    runners: list[str],
    dtype: str | None = None,
    user_inputs: Path | None = None,
) -> tuple[dict[str, dict], list[dict], list[str]]:
    """(families used, raw cases, notes) for the matrix file, each case validated as a Case
    with the loader's vocabulary. Raises CheckError when the user's inputs fit no use."""
    from harness.matrix.input_files import InputError, load
    from harness.matrix.inputs import input_set
    from harness.run.matrices import vocabulary

    families = default_families()
    model_entry, outside = model.entry(matrix_dir)
    notes = []
    if outside:
        notes.append(f"the model folder {model.folder} is outside the project")
    user = None
    if user_inputs is not None:
        path, out = portable_path(user_inputs, matrix_dir)
        try:
            user_set = load({"file": str(user_inputs.resolve())}, matrix_dir)
        except InputError as e:
            raise CheckError(f"--inputs: {e}") from None
        user = ({"file": path}, input_kind(user_set.items), user_set.name)
        if out:
            notes.append(f"the inputs file {user_inputs} is outside the project")
    used: dict[str, dict] = {}
    cases: list[dict] = []
    fitted = False
    for use in inf.uses:
        fam = families[use.family]
        task = fam["task"]
        sets = OWN_INPUTS_ONLY.get(use.family) or (
            fam["inputs"],
            ADVERSARIAL[task_kind(task).pairs],
        )
        plan: list[tuple[str, Any, str]] = [(s, s, s) for s in dict.fromkeys(sets)]
        if user is not None and _fits(use.family, task, user[1]):
            plan.append((USER_INPUTS, user[0], user[2]))
            fitted = True
        for label, spec, name in plan:
            raw: dict[str, Any] = {
                "id": f"{model.slug()}-{use.family}-{label}",
                "family": use.family,
                "model": model_entry,
                "inputs": spec,
                "runners": ["hf", *runners],
            }
            if dtype:
                raw["dtype"] = dtype
            if any(r.endswith("-auto") for r in runners):  # the default-runner audit's expectation
                raw["expected_auto_runner"] = default_expected_auto()
            if inf.hf:
                raw["hf"] = {**fam.get("hf", {}), **inf.hf}
            if inf.engine:
                raw["engine"] = inf.engine
            if inf.trust_remote_code:
                raw["trust_remote_code"] = True
            _validate({**fam, **raw, "inputs": name}, vocabulary(), input_set)
            cases.append(raw)
        used[use.family] = fam
    if user is not None and not fitted:
        tasks = ", ".join(sorted({families[u.family]["task"] for u in inf.uses}))
        raise CheckError(
            f"--inputs {user_inputs}: its items are {user[1]}, which no task of this model takes "
            f"({tasks}); give texts for embed / classify / token tasks, (query, document) pairs "
            "for score"
        )
    return used, cases, notes


def _validate(merged: dict, vocabulary, input_set) -> Case:
    """A case as the matrix loader would build it (its Vocabulary: known recipes and archs)."""
    from pydantic import ValidationError

    try:
        case = Case.model_validate(merged, context={"vocabulary": vocabulary})
    except ValidationError as e:
        raise CheckError(f"the inferred case {merged.get('id')} is not a valid case: {e}") from None
    if case.dtype is not None and case.dtype not in case.tolerances:
        raise CheckError(
            f"family {case.family} has no bounds for dtype {case.dtype}; "
            f"it has {sorted(case.tolerances)}"
        )
    input_set(case.inputs)  # a name the run will find
    return case


def matrix_text(
    inf: Inference,
    families: dict[str, dict],
    cases: list[dict],
    notes: list[str],
    command: str,
) -> str:
    """The matrix file: self-contained (its families copied from the default matrix), with what
    was inferred, and from which file, as comments."""
    import yaml

    head = [
        f"# Written by `{command}` on {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC.",
        f"# Checkpoint: {inf.folder}",
        "# What was inferred, and from which file:",
        *(f"#   {f.what}: {f.value}  ({f.source})" for f in inf.facts),
        *(f"#   use: {u.family} ({u.why})" for u in inf.uses),
        "# Families, with their bounds per dtype, are copied from matrices/pooling.yaml.",
    ]
    if notes:
        head += [
            f"# Note: {n}; `parity run -m` needs PARITY_ALLOW_ABSOLUTE_PATHS=1 for it."
            for n in notes
        ]

    class _Dumper(yaml.SafeDumper):  # every case spells its model out: no &id001 anchors
        def ignore_aliases(self, data: Any) -> bool:
            return True

    body = yaml.dump(
        {"families": families, "cases": cases},
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        width=100,
        default_flow_style=None,
    )
    return "\n".join(head) + "\n" + body
