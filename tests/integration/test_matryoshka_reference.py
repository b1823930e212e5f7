"""`dimensions` in the reference follows sentence-transformers' own `truncate_dim` semantics.

encode(truncate_dim=N) cuts the model's output (its Normalize module included) to N values and
does not normalise again; encode(..., normalize_embeddings=True) normalises after the cut. vLLM
re-normalises after `dimensions`: the reference must not copy that, a case states it.
"""

from __future__ import annotations

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from harness.matrix.request import Request
from harness.models.resolve import resolve
from harness.run.matrices import load_matrix
from harness.runners import LoadRequest
from harness.runners.hf import HFRunner
from tests.conftest import ROOT
from tests.requests import req

MATRIX = ROOT / "matrices" / "serve.yaml"
TEXTS = ["a short text", "a somewhat longer text about Matryoshka embeddings", "x"]


@pytest.fixture(scope="module")
def model_dir():
    cases = load_matrix(MATRIX).cases
    case = next(c for c in cases if c.id == "serve-bert-tiny-matryoshka-embed-dims16")
    return str(resolve(case.model, MATRIX.parent).path)


@pytest.fixture
def runner(model_dir):
    runner = HFRunner(None)
    runner.load(LoadRequest(model_dir=model_dir, dtype="float32", device="cpu"))
    yield runner
    runner.unload()


@pytest.mark.parametrize("normalize", [False, True])
def test_the_cut_is_sentence_transformers_truncate_dim(runner, model_dir, normalize):
    options = Request(dimensions=16, hf={"normalize_embeddings": True} if normalize else {})
    ours = np.stack(runner.run("embed", TEXTS, options).outputs)
    st = SentenceTransformer(model_dir, device="cpu", local_files_only=True)
    theirs = st.encode(
        TEXTS, truncate_dim=16, normalize_embeddings=normalize, convert_to_numpy=True
    )
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-7)
    norms = np.linalg.norm(ours, axis=-1)
    # the model normalises its 64 values: the first 16 alone are shorter unless normalised again
    if normalize:
        np.testing.assert_allclose(norms, 1.0, atol=1e-6)
    else:
        assert (norms < 1 - 1e-3).all(), norms


def test_more_dimensions_than_the_model_has_is_an_error(runner):
    with pytest.raises(ValueError, match="dimensions 65 is more than the model's 64"):
        runner.run("embed", TEXTS, req(dimensions=65))
