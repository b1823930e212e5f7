import re

import pytest

from harness.matrix.schema import MatrixError
from harness.run.matrices import load_matrix
from tests.conftest import ROOT

BASE = """
defaults:
  runners: [hf, vllm-v1]
  inputs: short-texts
  tolerances:
    float32: {cosine_distance: 1.0e-6, max_abs: 1.0e-5}
families:
  bert-embed:
    task: embed
cases:
  - id: one
    family: bert-embed
    model: {source: synthetic, arch: BertModel, pooling: mean}
"""


def test_defaults_family_and_case_merge(write_matrix):
    m = load_matrix(write_matrix(BASE))
    (case,) = m.cases
    assert case.task == "embed"
    assert case.runners == ["hf", "vllm-v1"]
    assert case.tolerance("float32").bounds() == {"cosine_distance": 1e-6, "max_abs": 1e-5}
    assert case.where.endswith("m.yaml:11")
    assert case.compared_runners == ["vllm-v1"]


def test_case_keys_override_family_and_defaults_deeply(write_matrix):
    text = (
        BASE
        + """    tolerances:
      float32: {max_abs: 2.0e-5}
    runners: [hf, vllm-v2]
"""
    )
    (case,) = load_matrix(write_matrix(text)).cases
    assert case.tolerance("float32").bounds() == {"cosine_distance": 1e-6, "max_abs": 2e-5}
    assert case.runners == ["hf", "vllm-v2"]


def test_unknown_family_names_line_and_valid_families(write_matrix):
    p = write_matrix(
        BASE.replace("family: bert-embed\n    model", "family: bert-embedd\n    model")
    )
    with pytest.raises(MatrixError) as e:
        load_matrix(p)
    msg = str(e.value)
    assert (
        f"{p}:12" in msg
        and "'family'" in msg
        and "bert-embedd" in msg
        and "valid families: bert-embed" in msg
    )


def test_unknown_task_lists_valid_tasks_with_line(write_matrix):
    p = write_matrix(BASE.replace("task: embed", "task: embedding"))
    with pytest.raises(MatrixError) as e:
        load_matrix(p)
    msg = str(e.value)
    assert f"{p}:9" in msg  # the family's line, where the bad value is
    assert "'task'" in msg and "'token_classify'" in msg and "'step_reward'" in msg


def test_unknown_runner_lists_valid_runners(write_matrix):
    p = write_matrix(BASE.replace("[hf, vllm-v1]", "[hf, vllm-v3]"))
    with pytest.raises(MatrixError) as e:
        load_matrix(p)
    msg = str(e.value)
    assert "runners.1" in msg and "vllm-v3" not in msg.split("'runners.1'")[0]
    assert "'vllm-v2'" in msg and "'vllm-auto'" in msg and f"{p}:" in msg


def test_unknown_key_lists_valid_keys(write_matrix):
    p = write_matrix(BASE + "    taks: embed\n")
    with pytest.raises(MatrixError) as e:
        load_matrix(p)
    msg = str(e.value)
    assert f"{p}:14" in msg and "'taks'" in msg and "valid keys:" in msg and "tolerances" in msg


def test_wrong_type_is_reported_with_key(write_matrix):
    p = write_matrix(BASE + "    dtype: 32\n")
    with pytest.raises(MatrixError) as e:
        load_matrix(p)
    assert f"{p}:14" in str(e.value) and "'dtype'" in str(e.value) and "'float32'" in str(e.value)


def test_bad_model_source_lists_sources(write_matrix):
    p = write_matrix(BASE.replace("source: synthetic", "source: hub"))
    with pytest.raises(MatrixError) as e:
        load_matrix(p)
    msg = str(e.value)
    assert "'model'" in msg and "synthetic" in msg and "hf_cache" in msg and f"{p}:13" in msg


def test_invalid_yaml_reports_line(write_matrix):
    p = write_matrix("defaults:\n  runners: [hf\ncases: []\n")
    with pytest.raises(MatrixError, match=re.escape(str(p)) + r":\d+: invalid YAML"):
        load_matrix(p)


def test_unknown_top_level_key(write_matrix):
    p = write_matrix(BASE + "extras: 1\n")
    with pytest.raises(MatrixError, match=r"unknown top-level key 'extras'; valid keys: include"):
        load_matrix(p)


def test_missing_tolerance_for_explicit_dtype(write_matrix):
    p = write_matrix(BASE + "    dtype: bfloat16\n")
    with pytest.raises(MatrixError, match=r"no entry for dtype 'bfloat16'"):
        load_matrix(p)


def test_duplicate_ids_and_empty_matrix(write_matrix):
    dup = BASE + "  - id: one\n    family: bert-embed\n    model: {source: local, path: x}\n"
    with pytest.raises(MatrixError, match="case id 'one' already used"):
        load_matrix(write_matrix(dup))
    with pytest.raises(MatrixError, match="has no cases"):
        load_matrix(write_matrix("cases: []\n", "empty.yaml"))


def test_include_and_select(write_matrix, tmp_path):
    write_matrix(BASE, "base.yaml")
    p = write_matrix("include: [base.yaml]\nselect: [one]\n", "sub.yaml")
    assert [c.id for c in load_matrix(p).cases] == ["one"]
    bad = write_matrix("include: [base.yaml]\nselect: [nope]\n", "bad.yaml")
    with pytest.raises(MatrixError, match=r"bad.yaml:2: key 'select': 'nope' matches no case"):
        load_matrix(bad)


def test_all_problems_reported_at_once(write_matrix):
    text = (
        BASE
        + "  - id: two\n    family: nope\n    model: {source: local, path: x}\n  - id: Three\n    family: bert-embed\n    model: {source: local, path: x}\n"
    )
    with pytest.raises(MatrixError) as e:
        load_matrix(write_matrix(text))
    assert str(e.value).startswith("2 problem(s)")


def test_shipped_matrices_load():
    pooling = load_matrix(ROOT / "matrices" / "pooling.yaml")
    ci = load_matrix(ROOT / "matrices" / "ci.yaml")
    assert {c.id for c in ci.cases} <= {c.id for c in pooling.cases}
    assert [c.id for c in pooling.cases] == sorted(c.id for c in pooling.cases)


def test_model_of_another_source_replaces_the_inherited_one(write_matrix):
    text = (
        BASE.replace(
            "  bert-embed:\n    task: embed",
            "  bert-embed:\n    task: embed\n"
            "    model: {source: synthetic, arch: BertModel, pooling: mean}",
        )
        + "  - id: two\n    family: bert-embed\n    model: {source: hf_cache, repo: org/name}\n"
        + "  - id: three\n    family: bert-embed\n    model: {seed: 5}\n"
    )
    cases = {c.id: c for c in load_matrix(write_matrix(text)).cases}
    assert cases["two"].model.source == "hf_cache" and cases["two"].model.repo == "org/name"
    assert (
        cases["three"].model.source == "synthetic" and cases["three"].model.seed == 5
    )  # same source: merged


def test_default_family_applies_to_cases(write_matrix):
    text = BASE.replace(
        "  inputs: short-texts", "  inputs: short-texts\n  family: bert-embed"
    ).replace("    family: bert-embed\n    model", "    model")
    (case,) = load_matrix(write_matrix(text)).cases
    assert case.task == "embed" and case.family == "bert-embed"


@pytest.mark.parametrize(
    "task, bounds, missing",
    [
        (
            "embed",
            "{cosine_distance: 1.0e-6}",
            "float32 has no bound for max_abs",
        ),  # cosine cannot see a lost L2 norm
        ("embed", "{max_abs: 1.0e-5}", "float32 has no bound for cosine_distance"),
        ("score", "{rank_disagreement: 0.0}", "float32 has no bound for max_abs or max_rel"),
        ("token_classify", "{max_rel: 1.0e-4}", "float32 has no bound for max_abs"),
    ],
)
def test_a_required_metric_without_a_bound_is_a_matrix_error(write_matrix, task, bounds, missing):
    text = f"""
families:
  f: {{inputs: short-texts}}
cases:
  - id: one
    family: f
    task: {task}
    runners: [hf, vllm-v1]
    inputs: short-texts
    model: {{source: synthetic, arch: BertModel}}
    tolerances:
      float32: {bounds}
"""
    with pytest.raises(MatrixError) as e:
        load_matrix(write_matrix(text))
    assert re.search(
        rf"m\.yaml:\d+: case 'one', key 'tolerances': task '{task}' must gate", str(e.value)
    )
    assert missing in str(e.value)


def test_mteb_cases_must_bound_the_main_score(write_matrix):
    text = BASE + "    mteb_tasks: [ParitySTS]\n"
    with pytest.raises(MatrixError, match="float32 has no bound for main_score"):
        load_matrix(write_matrix(text))


@pytest.mark.parametrize(
    "key, value, text",
    [
        ("inputs", "my-texts", "unknown input set 'my-texts'; valid: "),
        ("reference", "st-embedd", "unknown reference recipe 'st-embedd'; valid: "),
    ],
)
def test_names_are_checked_when_the_matrix_loads(write_matrix, key, value, text):
    with pytest.raises(MatrixError) as e:
        load_matrix(write_matrix(BASE + f"    {key}: {value}\n"))
    assert re.search(rf"m\.yaml:\d+: case 'one', key '{key}': .*{re.escape(text)}", str(e.value)), (
        str(e.value)
    )


def test_an_unknown_synthetic_architecture_is_a_matrix_error(write_matrix):
    text = BASE.replace("arch: BertModel", "arch: BertModle")
    with pytest.raises(
        MatrixError,
        match=r"m\.yaml:\d+: case 'one', key 'model'.*unknown synthetic arch 'BertModle'; valid: .*BertModel",
    ):
        load_matrix(write_matrix(text))


def test_a_matrix_error_exits_2_before_any_model_is_built(write_matrix, tmp_path):
    import subprocess
    import sys

    bad = write_matrix(BASE + "    inputs: my-texts\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "-m",
            str(bad),
            "--out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**__import__("os").environ, "PARITY_CACHE": str(tmp_path / "cache")},
    )
    assert proc.returncode == 2 and "unknown input set 'my-texts'" in proc.stderr
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize(
    "path",
    sorted(
        [
            *(ROOT / "matrices").glob("*.yaml"),
            *(ROOT / "tests" / "integration" / "data").glob("*.yaml"),
        ]
    ),
    ids=lambda p: p.name,
)
def test_every_shipped_matrix_bounds_every_dtype(path):
    """A GPU run (bfloat16 by default, float16 or float32 by PARITY_DTYPE) finds a bound for every
    required metric of every case: the loader checks required metrics per dtype listed."""
    from harness.runners.platform import DTYPES

    for case in load_matrix(path).cases:
        assert set(case.tolerances) == set(DTYPES), (
            f"{case.where}: {case.id} bounds only {sorted(case.tolerances)}"
        )


@pytest.mark.parametrize(
    "where, bound, text",
    [
        ("tolerances", "max_abs: .inf", "max_abs=inf is not finite"),
        ("tolerances", "max_rel: .nan", "max_rel=nan is not finite"),
        ("tolerances", "max_abs: -1.0e-5", "max_abs=-1e-05 is negative"),
        ("tolerances", "cosine_distance: 2.0", "cosine_distance=2.0 is >= 2"),
        ("tolerances", "rank_disagreement: 1.0", "rank_disagreement=1.0 is >= 1"),
        ("divergence", "max_abs: .inf", "max_abs=inf is not finite"),
        ("divergence", "rank_disagreement: 1.5", "rank_disagreement=1.5 is >= 1"),
    ],
)
def test_a_bound_that_can_never_fail_is_a_matrix_error_with_its_line(
    write_matrix, where, bound, text
):
    """A bound no measurement can exceed (or none can meet) gates nothing: the matrix is refused,
    in tolerances and in a divergence's envelope alike, naming the line and what is valid."""
    if where == "tolerances":
        extra = f"    tolerances:\n      float32: {{cosine_distance: 1.0e-6, {bound}}}\n"
        line = 15
    else:
        extra = (
            f"    divergence:\n      runners: [vllm-v1]\n      reason: known\n"
            f"      bounds: {{cosine_distance: 1.0e-3, {bound}}}\n"
        )
        line = 17
    p = write_matrix(BASE + extra)
    with pytest.raises(MatrixError) as e:
        load_matrix(p)
    msg = str(e.value)
    assert f"{p}:{line}" in msg and text in msg and "valid: " in msg, msg


def test_bounds_at_the_edge_of_what_can_fail_are_accepted(write_matrix):
    extra = (
        "    tolerances:\n"
        "      float32: {cosine_distance: 1.99, max_abs: 0.0, rank_disagreement: 0.5}\n"
    )
    (case,) = load_matrix(write_matrix(BASE + extra)).cases
    assert case.tolerance("float32").bounds() == {
        "cosine_distance": 1.99,
        "max_abs": 0.0,
        "rank_disagreement": 0.5,
    }


def test_a_case_needs_two_distinct_inputs(write_matrix):
    """A single input (or duplicates of one) cannot show the reference varies: refused at load."""
    text = BASE + "    inputs: {texts: [same words, same words]}\n"
    p = write_matrix(text)
    with pytest.raises(MatrixError) as e:
        load_matrix(p)
    assert f"{p}:14" in str(e.value)
    assert "has 1 distinct input(s); a case needs >= 2" in str(e.value)
    two = BASE + "    inputs: {texts: [same words, other words]}\n"
    assert len(load_matrix(write_matrix(two)).cases) == 1


DEFAULTS_AT = """defaults:
  runners: [hf, vllm-v1]
  inputs: short-texts
  dtype: float64
  tolerances:
    float32: {cosine_distance: 1.0e-6, max_abs: not-a-number}
families:
  bert-embed:
    task: embed
cases:
  - id: one
    family: bert-embed
    model: {source: synthetic, arch: BertModel, pooling: mean}
"""


def test_an_error_from_defaults_names_the_defaults_line(write_matrix):
    p = write_matrix(DEFAULTS_AT)
    with pytest.raises(MatrixError) as e:
        load_matrix(p)
    msg = str(e.value)
    assert f"{p}:4: case 'one', key 'dtype':" in msg, msg
    assert f"{p}:6: case 'one', key 'tolerances.float32.max_abs':" in msg, msg


def test_an_error_from_included_defaults_names_the_included_file(write_matrix):
    base = write_matrix(DEFAULTS_AT.split("families:")[0], name="base.yaml")
    top = write_matrix("include: [base.yaml]\n" + "families:" + DEFAULTS_AT.split("families:")[1])
    with pytest.raises(MatrixError) as e:
        load_matrix(top)
    assert f"{base}:4: case 'one', key 'dtype':" in str(e.value), str(e.value)


def test_a_default_the_case_overrides_is_reported_at_the_case(write_matrix):
    p = write_matrix(
        DEFAULTS_AT.replace("max_abs: not-a-number", "max_abs: 1.0e-5") + "    dtype: f8\n"
    )
    with pytest.raises(MatrixError) as e:
        load_matrix(p)
    assert f"{p}:14: case 'one', key 'dtype':" in str(e.value), str(e.value)


def test_a_misfit_check_from_defaults_names_the_defaults_line(write_matrix):
    text = BASE.replace(
        "  inputs: short-texts\n", "  inputs: short-texts\n  checks: [concurrent]\n"
    )
    p = write_matrix(text)
    with pytest.raises(MatrixError) as e:
        load_matrix(p)
    assert f"{p}:5: case 'one', key 'checks': check 'concurrent' runs on" in str(e.value)


def test_an_unknown_family_from_defaults_names_the_defaults_line(write_matrix):
    text = BASE.replace("defaults:\n", "defaults:\n  family: bert-embedd\n")
    p = write_matrix(text.replace("    family: bert-embed\n", ""))
    with pytest.raises(MatrixError) as e:
        load_matrix(p)
    assert f"{p}:3: case 'one', key 'family': unknown family 'bert-embedd'" in str(e.value)


@pytest.mark.parametrize(
    "extra, refused, able",
    [
        # the task's default recipe (st-embed for a BertModel embed case)
        ("    request: {padding: max_length}\n", "st-embed", "padding"),
        # a named one
        (
            "    reference: splade-max\n    request: {use_activation: false}\n",
            "splade-max",
            "use_activation",
        ),
    ],
)
def test_a_request_field_the_reference_does_not_honour_is_refused_when_the_matrix_loads(
    write_matrix, extra, refused, able
):
    """Declared by each recipe (harness.runners.hf.recipe(honours=...)), checked at load: the
    error names the file, the case, the field and the recipes that do honour it."""
    from harness.runners.hf import RECIPE_HONOURS

    with pytest.raises(MatrixError) as e:
        load_matrix(write_matrix(BASE + extra))
    doers = sorted(r for r, fields in RECIPE_HONOURS.items() if able in fields)
    assert doers and refused not in doers
    want = (
        rf"m\.yaml:\d+: case 'one'.*reference recipe '{refused}' does not implement {able}; "
        rf"recipes that do: {re.escape(', '.join(doers))}"
    )
    assert re.search(want, str(e.value)), str(e.value)


def test_a_recipe_declares_only_request_fields_it_could_honour():
    from harness.runners.hf import recipe

    with pytest.raises(ValueError, match=r"honours \['truncate_side'\]: not request fields"):
        recipe("never-registered", honours=["truncate_side"])(lambda runner, items, request: [])


@pytest.mark.parametrize(
    "layer, text",
    [
        ("case", BASE + "    truncate: 8\n"),
        (
            "family",
            BASE.replace("    task: embed\n", "    task: embed\n    serve: {api: pooling}\n"),
        ),
    ],
)
def test_a_request_option_at_the_top_level_is_refused_with_its_new_spelling(
    write_matrix, layer, text
):
    """Request options live under `request:`; the old spelling names file, line, key and the
    new one (wherever it was set: the case or its family)."""
    with pytest.raises(MatrixError) as e:
        load_matrix(write_matrix(text))
    key = "truncate" if layer == "case" else "serve"
    line = text.splitlines().index(f"    {key}: " + text.split(f"    {key}: ")[1].split("\n")[0])
    want = (
        rf"m\.yaml:{line + 1}: case 'one', key '{key}': request options live under `request:` "
        rf"now; write `request: {{{key}: \.\.\.}}`"
    )
    assert re.search(want, str(e.value)), str(e.value)
    # the new spelling loads
    moved = text.replace(f"    {key}: ", f"    request: {{{key}: ", 1).replace(
        "8\n" if layer == "case" else "pooling}\n", "8}\n" if layer == "case" else "pooling}}\n", 1
    )
    assert load_matrix(write_matrix(moved, name="new.yaml")).cases
