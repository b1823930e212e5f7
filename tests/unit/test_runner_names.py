"""Code asks `runner_info(name)` what kind a runner is; it never tests a name's spelling."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness.matrix.runner_names import RUNNER_NAMES, runner_info

ROOT = Path(__file__).resolve().parents[2]
SPELLINGS = ("hf", "vllm", "vllm-serve", "fake")


def _is_runner(node: ast.AST) -> bool:
    """A runner name by its variable's name: `r`, `runner`, `x.runner` (not e.g. `against`)."""
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return name == "r" or "runner" in name


def spelling_tests(source: str, where: str) -> list[str]:
    """`x.startswith("vllm...")` and `x == "hf"` / `x != "hf"` (a kind tested by its spelling)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "startswith"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).rstrip("-") in SPELLINGS
        ):
            found.append(f"{where}:{node.lineno}: startswith({node.args[0].value!r})")
        if isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Constant) and s.value == "hf" for s in sides) and any(
                _is_runner(s) for s in sides
            ):
                found.append(f"{where}:{node.lineno}: compared with 'hf'")
    return found


def test_no_module_tests_a_runner_name_by_its_spelling():
    found = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        if "data" in path.relative_to(ROOT).parts or path.name == "runner_names.py":
            continue
        found += spelling_tests(path.read_text(), str(path.relative_to(ROOT)))
    assert not found, "ask harness.matrix.runner_names.runner_info instead:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        'ok = runner.startswith("vllm-serve")',
        'ok = runner == "hf"',
        'ok = r != "hf"',
        'x = res.runner == "hf"',
    ],
)
def test_the_spelling_rule_bites_on_a_seeded_breach(source):
    assert spelling_tests(source, "x.py")


def test_runner_info_of_every_name():
    kinds = {n: runner_info(n) for n in RUNNER_NAMES}
    assert [n for n, i in kinds.items() if i.is_server] == [
        "vllm-serve-v1",
        "vllm-serve-v2",
        "vllm-serve-auto",
    ]
    assert [n for n, i in kinds.items() if i.is_offline_vllm] == ["vllm-v1", "vllm-v2", "vllm-auto"]
    assert [n for n, i in kinds.items() if i.is_reference] == ["hf"]
    assert runner_info("hf-fp32").is_hf and not runner_info("hf-fp32").is_reference
    assert not runner_info("fake").is_vllm and not runner_info("fake").is_hf
    with pytest.raises(ValueError, match="unknown runner 'tgi'"):
        runner_info("tgi")
