"""Which (case, runner) rows a change can affect, and why: `parity select` and `parity run
--changed-files / --vllm-diff`.

Each changed file gets one rule and one reason. vLLM files are mapped with what vLLM's own source
says (`harness.select.vllm_rules`): a model file selects the cases whose architecture's module
imports it; pooler files select the cases of their pooling level; runner code selects the rows of
its model runner; entrypoints select offline or server rows. Docs, tests and CI files select
nothing. This project's files (`harness.select.project_rules`): a matrix its cases, a golden its
case, refmodels the cases built on it, a recipe module the cases of its recipes, a synthetic
builder module the cases of its architectures, anything else in harness/ every row. A file no
rule knows selects every row, and says so.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from harness.engine import target
from harness.matrix.checks import expand_checks
from harness.matrix.runner_names import REFERENCE_RUNNER
from harness.matrix.schema import Case, Matrix
from harness.select.facts import Context, Effect, case_facts
from harness.select.project_rules import project_effect
from harness.select.vllm_rules import vllm_effect
from harness.select.vllm_source import VllmSource

Origin = Literal[
    "any", "vllm"
]  # `--vllm-diff` names only vLLM files; `--changed-files` either kind
NO_BEHAVIOUR_DIRS = (
    "docs/",
    "tests/",
    ".buildkite/",
    ".github/",
    ".ci/",
    "benchmarks/",
    "examples/",
    "vllm/benchmarks/",
)
NO_BEHAVIOUR_FILES = (
    "LICENSE",
    "CODEOWNERS",
    "MANIFEST.in",
    ".gitignore",
    ".pre-commit-config.yaml",
    "mkdocs.yaml",
    ".readthedocs.yaml",
    ".markdownlint.yaml",
    ".shellcheckrc",
)
BUILD = (
    "csrc/",
    "cmake/",
    "requirements/",
    "CMakeLists.txt",
    "setup.py",
    "pyproject.toml",
    "noxfile.py",
    "ci/",
    "harness/",
)


class SelectionError(ValueError):
    """The change cannot be read (a git range unknown to git, a folder that is not a checkout)."""


def effect_of(path: str, origin: Origin, ctx: Context) -> Effect:
    path = path.strip().removeprefix("./")
    name = path.rsplit("/", 1)[-1]
    if (
        path.startswith(NO_BEHAVIOUR_DIRS)
        or path.endswith((".md", ".rst"))
        or name in NO_BEHAVIOUR_FILES
    ):
        return Effect(
            path,
            "no-behaviour",
            "docs, tests or CI configuration: cannot change what a case computes",
        )
    if path.startswith("vllm/"):
        return vllm_effect(path, ctx)
    project = project_effect(path, ctx) if origin == "any" else None
    if project is not None:
        return project
    if path.startswith(BUILD):
        return Effect(
            path, "build", "kernels, build, dependencies or harness code: every row", None, "all"
        )
    return Effect(path, "unknown", "no rule knows this file: every row (conservative)", None, "all")


@dataclass
class Selection:
    effects: list[Effect]
    rows: dict[tuple[str, str], list[Effect]] = field(
        default_factory=dict
    )  # (case id, runner) -> why
    vllm_source: str = ""
    vllm_range: str | None = None
    # the vLLM under test, and the selected cases its version is outside the `vllm_releases` of
    # (case id -> why): a run plans them as skips
    vllm_version: str | None = None
    skipped: dict[str, str] = field(default_factory=dict)

    def runners_of(self, case_id: str) -> list[str]:
        return [r for (c, r) in self.rows if c == case_id]

    def to_json(self) -> dict:
        return {
            "vllm_source": self.vllm_source,
            "vllm_range": self.vllm_range,
            "files": [
                {
                    "path": e.path,
                    "rule": e.rule,
                    "reason": e.reason,
                    "rows": sum(e in why for why in self.rows.values()),
                }
                for e in self.effects
            ],
            "vllm_version": self.vllm_version,
            "rows": [
                {
                    "case": c,
                    "runner": r,
                    "because": [e.path for e in why],
                    **({"skip": self.skipped[c]} if c in self.skipped else {}),
                }
                for (c, r), why in sorted(self.rows.items())
            ],
        }

    def summary(self) -> str:
        """One line a log or report can carry: how many rows, from how many files."""
        cases = {c for c, _ in self.rows}
        return (
            f"{len(self.rows)} row(s) of {len(cases)} case(s) selected by "
            f"{len(self.effects)} changed file(s)"
            if self.rows
            else f"nothing selected: none of the {len(self.effects)} changed file(s) can affect "
            f"a case"
        )


def to_text(sel: Selection) -> str:
    """The selection for a terminal or a CI log: each file's rule and reason, then each row's
    files."""
    lines = [
        f"vLLM source read: {sel.vllm_source}"
        + (f" · range {sel.vllm_range}" if sel.vllm_range else "")
    ]
    for f in sel.to_json()["files"]:
        lines.append(f"  {f['path']}  [{f['rule']}] {f['reason']} -> {f['rows']} row(s)")
    if sel.rows:
        width = max(len(c) for c, _ in sel.rows)
        lines.append("selected (case, runner) <- changed file(s):")
        lines += [
            f"  {c:<{width}}  {r:<15} <- {', '.join(e.path for e in why)}"
            for (c, r), why in sorted(sel.rows.items())
        ]
    lines += [f"  skipped: {c}: {why}" for c, why in sorted(sel.skipped.items())]
    lines.append(sel.summary().upper() if not sel.rows else sel.summary())
    return "\n".join(lines) + "\n"


def select(
    matrix: Matrix,
    cases: list[Case],
    changed: list[str],
    origin: Origin,
    source: VllmSource,
    vllm_range: str | None = None,
) -> Selection:
    """The rows of `cases` (invariance checks expanded) that the changed files can affect."""
    expanded = expand_checks(cases)
    base_dir = Path(matrix.path).parent
    facts = {c.id: case_facts(c, source, base_dir) for c in expanded if c.variant_of is None}
    ctx = Context(matrix, expanded, facts, source)
    effects = [effect_of(p, origin, ctx) for p in dict.fromkeys(p for p in changed if p.strip())]
    sel = Selection(effects, vllm_source=str(source.root), vllm_range=vllm_range)
    sel.vllm_version = target.vllm_version()
    for case in expanded:
        for runner in case.runners:
            why = [e for e in effects if e.picks(case, runner)]
            if why:
                sel.rows[(case.id, runner)] = why
        gate = case.vllm_releases.skip_reason(sel.vllm_version) if case.vllm_releases else None
        if gate and sel.runners_of(case.id):
            sel.skipped[case.id] = gate
    return sel


def narrow(cases: list[Case], sel: Selection) -> list[Case]:
    """The cases with only their selected runners (the reference kept where a row needs it)."""
    out = []
    for case in cases:
        picked = set(sel.runners_of(case.id))
        if picked:
            keep = [
                r for r in case.runners if r in picked or (r == REFERENCE_RUNNER and picked - {r})
            ]
            out.append(case.model_copy(update={"runners": keep}))
    return out


def git_changed_files(vllm_range: str, repo: str | Path) -> list[str]:
    """`git -C repo diff --name-only RANGE`, with errors that say what was wrong."""
    repo = Path(repo)
    if not repo.is_dir():
        raise SelectionError(f"--vllm-repo {repo}: no such folder")
    probe = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--show-toplevel"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        raise SelectionError(f"--vllm-repo {repo}: not a git checkout ({probe.stderr.strip()})")
    proc = subprocess.run(
        ["git", "-C", str(repo), "diff", "--name-only", vllm_range, "--"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SelectionError(
            f"--vllm-diff {vllm_range!r}: git in {repo} does not know this range "
            f"({proc.stderr.strip().splitlines()[0] if proc.stderr.strip() else 'no message'}); "
            f"give A..B or A...B of commits the checkout has (fetch them first)"
        )
    return [line for line in proc.stdout.splitlines() if line.strip()]
