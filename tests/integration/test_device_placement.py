"""Every reference recipe keeps every tensor on the case's device.

The recipes run on `meta` (see `offdevice`): a parameter, buffer or intermediate left on the host
(a model never moved, a cos/sin table built on the CPU, a projection weight kept on the CPU) mixes
devices and fails here, as it would fail on `cuda`, on a machine without a GPU. Run in bfloat16,
the CUDA default, so a tensor left in another dtype shows too.
"""

from __future__ import annotations

import pytest
import torch

from harness.matrix.inputs import input_set
from harness.matrix.request import request_of
from harness.models.resolve import resolve
from harness.run.matrices import load_matrix
from harness.runners import LoadRequest
from harness.runners.hf import HFRunner
from tests.conftest import ROOT
from tests.integration.offdevice import DEVICE, MixedDevices, OffDevice, left_behind

MATRIX = ROOT / "matrices" / "pooling.yaml"


def _reference_runs():
    """One per distinct (model, recipe, options, task) of the default matrix's HF rows."""
    seen, runs = set(), []
    for case in load_matrix(MATRIX).cases:
        key = (
            case.model.model_dump_json(),
            case.reference,
            repr(sorted(case.hf.items())),
            case.task,
            case.request.truncate,
        )
        if "hf" in case.runners and case.variant_of is None and key not in seen:
            seen.add(key)
            runs.append(pytest.param(case, id=case.id))
    return runs


def _run_off_device(case, dtype: str = "bfloat16"):
    runner = HFRunner(None)
    runner.load(
        LoadRequest(
            model_dir=str(resolve(case.model, MATRIX.parent).path),
            dtype=dtype,
            device=DEVICE,
            hf=dict(case.hf),
            trust_remote_code=case.trust_remote_code,
        )
    )
    options = request_of(case, for_hf=True)
    items = list(input_set(case.inputs).items)[:3]
    mode = OffDevice()
    with mode:
        outs = runner.run(case.task, items, options).outputs
    return runner, items, outs, mode


@pytest.mark.parametrize("case", _reference_runs())
def test_the_reference_recipe_keeps_every_tensor_on_the_device(case):
    runner, items, outs, mode = _run_off_device(case)
    assert mode.calls > 100, "the recipe ran no torch code under the device watch"
    assert len(outs) == len(items)
    assert not left_behind(runner._st, *runner._loaded.values())


def test_the_watch_refuses_a_tensor_left_on_the_host():
    weight = torch.ones(4, 4, device=DEVICE)
    with OffDevice(), pytest.raises(MixedDevices, match=r"cpu\(4,\)"):
        weight @ torch.ones(4)  # e.g. a table built with torch.arange(n) and no device=


def test_the_watch_gives_data_dependent_code_the_host_values():
    ids = torch.tensor([[5, 9, 5, 7]])
    with OffDevice():
        on_device = ids.to(DEVICE)
        assert (on_device == 5).nonzero().tolist() == [[0, 0], [0, 2]]
        assert torch.tensor([3, 4], device=DEVICE).tolist() == [3, 4]
        assert on_device[0, 1].item() == 9


def test_a_recipe_that_forgets_to_move_its_model_is_caught(monkeypatch):
    """Seeded fault: the model stays on the host while the inputs move (the d6f916d bug)."""
    import harness.models.refmodels as refmodels

    case = next(p.values[0] for p in _reference_runs() if p.values[0].task == "reward")
    real = refmodels.load_reference
    monkeypatch.setattr(
        refmodels,
        "load_reference",
        lambda path, arch, dtype, device="cpu": real(path, arch, dtype, "cpu"),
    )
    with pytest.raises(MixedDevices):
        _run_off_device(case)
