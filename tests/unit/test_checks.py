import pytest

from harness.matrix.checks import CHECKS, expand_checks
from harness.runners.options import run_with_options
from tests.requests import req
from tests.unit.test_compare import make_case


def test_each_check_becomes_a_derived_case_on_the_vllm_runners():
    base = make_case(
        runners=["hf", "vllm-v1", "vllm-v2", "vllm-auto"],
        checks=["shuffle", "chunked_prefill"],
        engine={"max_model_len": 64},
    )
    out = expand_checks([base], seed=7)
    assert [c.id for c in out] == ["c", "c@shuffle", "c@chunked_prefill"]
    shuffle, chunked = out[1], out[2]
    assert shuffle.runners == ["vllm-v1", "vllm-v2"] and shuffle.variant_of == "c"
    assert shuffle.run_options == {"shuffle_seed": 7}
    assert chunked.engine == {
        "max_model_len": 64,
        "enable_chunked_prefill": True,
        "max_num_batched_tokens": 16,
        "max_num_seqs": 16,
    }
    assert set(CHECKS) >= {
        "shuffle",
        "one_by_one",
        "prefix_cache",
        "no_prefix_cache",
        "no_chunked_prefill",
    }


def test_run_with_options_restores_order_and_counts_calls():
    calls = []

    def call(batch):
        calls.append(list(batch))
        return [f"out:{x}" for x in batch]

    items = list("abcdefgh")
    assert run_with_options(call, items, req(shuffle_seed=3)) == [f"out:{x}" for x in items]
    assert calls[-1] != items and sorted(calls[-1]) == items  # really sent in another order
    calls.clear()
    assert run_with_options(call, items, req(one_by_one=True)) == [f"out:{x}" for x in items]
    assert len(calls) == 8 and all(len(c) == 1 for c in calls)
    calls.clear()
    run_with_options(call, items, req(warm_prefix_cache=True))
    assert len(calls) == 2


def test_a_runner_that_loses_an_item_is_not_hidden_by_reordering():
    out = run_with_options(lambda batch: batch[:-1], list("abcd"), req(shuffle_seed=1))
    assert len(out) == 3


def test_matrix_rejects_internal_keys_and_at_in_ids(write_matrix):
    import pytest

    from harness.matrix.schema import MatrixError
    from harness.run.matrices import load_matrix
    from tests.unit.test_matrix import BASE

    with pytest.raises(MatrixError, match="'variant_of' is set by the harness"):
        load_matrix(write_matrix(BASE + "    variant_of: x\n"))
    with pytest.raises(MatrixError, match="'@' is reserved"):
        load_matrix(write_matrix(BASE.replace("id: one", "id: one@shuffle")))


@pytest.mark.parametrize(
    "runners, check, fits",
    [
        ("[hf, vllm-auto]", "shuffle", "vllm-v1, vllm-v2"),
        ("[hf, vllm-v1]", "concurrent", "vllm-serve-v1, vllm-serve-v2, vllm-serve-auto"),
        ("[hf, vllm-serve-v1]", "chunked_prefill", "vllm-v1, vllm-v2"),
    ],
)
def test_a_check_that_fits_none_of_the_case_runners_is_a_matrix_error(
    write_matrix, capsys, runners, check, fits
):
    from harness.cli import main
    from harness.matrix.schema import MatrixError
    from harness.run.matrices import load_matrix
    from tests.unit.test_matrix import BASE

    text = BASE.replace("runners: [hf, vllm-v1]", f"runners: {runners}")
    text += f"    checks: [{check}]\n"
    path = write_matrix(text)
    with pytest.raises(MatrixError) as e:
        load_matrix(path)
    expected = f"{path}:14: case 'one', key 'checks': check {check!r} runs on {fits}, none of which"
    assert expected in str(e.value)
    assert main(["run", "-m", str(path), "--out", str(path.parent / "run")]) == 2
    assert "remove the check" in capsys.readouterr().err


def test_a_check_on_one_fitting_runner_loads(write_matrix):
    from harness.run.matrices import load_matrix
    from tests.unit.test_matrix import BASE

    (case,) = load_matrix(write_matrix(BASE + "    checks: [shuffle]\n")).cases
    assert [c.runners for c in expand_checks([case])] == [["hf", "vllm-v1"], ["vllm-v1"]]


def test_an_including_matrix_that_selects_away_a_misfit_case_loads(write_matrix):
    from harness.run.matrices import load_matrix
    from tests.unit.test_matrix import BASE

    write_matrix(BASE + "    checks: [shuffle]\n", name="base.yaml")
    top = (
        "include: [base.yaml]\nselect: [two]\ndefaults:\n  runners: [hf, vllm-serve-v1]\n"
        "cases:\n  - {id: two, family: bert-embed,\n"
        "     model: {source: synthetic, arch: BertModel, pooling: mean}}\n"
    )
    assert [c.id for c in load_matrix(write_matrix(top)).cases] == ["two"]


def test_a_new_check_is_one_registry_entry(monkeypatch):
    """A check made here and registered once: the schema accepts its name, expand_checks applies
    its settings on its runners, misfit_checks reads its runners and the verdict asks its proof."""
    from harness.judge.verdict import check_not_in_effect
    from harness.matrix.checks import CHECKS, InvarianceCheck

    def proof(ev):
        return None if ev.effective.get("max_num_seqs") == 2 else f"{ev.head}: seqs not 2"

    new = InvarianceCheck(
        "two_seqs",
        "at most two sequences per step",
        ("vllm-v2",),
        proof,
        engine={"max_num_seqs": 2},
        run_options={"shuffle_seed": "{seed}"},
        serve={"max_in_flight": 3},
    )
    with pytest.raises(ValueError, match="unknown check 'two_seqs'; valid: shuffle, one_by_one"):
        make_case(checks=["two_seqs"])
    monkeypatch.setitem(CHECKS, "two_seqs", new)
    base = make_case(runners=["hf", "vllm-v1", "vllm-v2"], checks=["two_seqs"])
    (derived,) = expand_checks([base], seed=5)[1:]
    assert derived.id == "c@two_seqs" and derived.check == "two_seqs"
    assert derived.runners == ["vllm-v2"] and derived.engine == {"max_num_seqs": 2}
    assert derived.run_options == {"shuffle_seed": 5} and derived.request.serve.max_in_flight == 3
    assert "check" not in derived.model_dump() and base.check is None
    assert check_not_in_effect(derived, {"effective": {"max_num_seqs": 2}}) is None
    reason = check_not_in_effect(derived, {"effective": {"max_num_seqs": 8}})
    assert reason == "invariance check two_seqs did not take effect: seqs not 2"
    assert check_not_in_effect(base, {"effective": {}}) is None  # a base case proves nothing
    from harness.matrix.checks import misfit_checks

    misfit = make_case(runners=["hf", "vllm-v1"], checks=["two_seqs"])
    assert misfit_checks(misfit) == [
        "check 'two_seqs' runs on vllm-v2, none of which the case runs (runners: hf, vllm-v1): "
        "add one of them or remove the check"
    ]


def test_the_verdict_finds_the_check_by_its_field_not_the_id():
    """Seeded: a derived case whose id no longer spells its check is still held to its proof."""
    from harness.judge.verdict import check_not_in_effect

    (derived,) = expand_checks([make_case(checks=["one_by_one"])])[1:]
    renamed = derived.model_copy(update={"id": "c-renamed"})
    reason = check_not_in_effect(renamed, {"requests": {"peak_batch": 4, "count": 4}})
    assert reason.startswith("invariance check one_by_one did not take effect"), reason


def test_every_check_has_runners_settings_and_a_proof():
    from harness.matrix.checks import CHECKS
    from harness.matrix.runner_names import RUNNER_NAMES

    for name, check in CHECKS.items():
        assert check.name == name and check.doc and callable(check.proof)
        assert check.runners and set(check.runners) <= set(RUNNER_NAMES)
        assert check.engine or check.run_options or check.serve, name
