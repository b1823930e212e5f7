"""Image queries on the VL reranker (jina-reranker-m0): the `image-query-pairs` set, the
reference's image pads expanded in prompt order, and the case of matrices/multimodal.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.matrix import images
from harness.matrix.inputs import input_set, query_groups
from harness.runners.hf.jina_vl import expand_image_pads

ROOT = Path(__file__).resolve().parents[2]


def test_each_image_query_meets_its_caption_first_another_caption_and_two_other_images():
    items = input_set("image-query-pairs").items
    groups = query_groups(items)
    assert len(items) == 16 and len(groups) == 4 and all(len(g) == 4 for g in groups)
    captions = dict(zip((0, 3, 4, 5, 6, 7), input_set("query-image-pairs").items[::4]))
    for g in groups:
        query = items[g[0]][0]
        assert images.is_image(query) and all(items[i][0] == query for i in g)
        docs = [items[i][1] for i in g]
        own = int(query["image"].rsplit("/", 1)[1])
        assert docs[0] == captions[own][0]  # the caption the text queries use for that image
        assert isinstance(docs[1], str) and docs[1] != docs[0]
        assert all(images.is_image(d) and d != query for d in docs[2:]) and docs[2] != docs[3]


def test_the_text_query_set_is_unchanged_so_its_goldens_stay_valid():
    import json

    manifest = json.loads((ROOT / "golden/jina-vl-tiny-image-rerank/manifest.json").read_text())
    assert manifest["inputs"]["sha256"] == input_set("query-image-pairs").sha256


def test_image_pads_expand_in_prompt_order_each_to_its_own_image():
    pad = 9
    ids = [1, pad, 2, 3, pad, 4]
    # the document's image (first pad) is 2x4 patches, the query's 2x2: merge 2 -> 2 and 1 tokens
    assert expand_image_pads(ids, pad, [[1, 2, 4], [1, 2, 2]], 2) == [1, pad, pad, 2, 3, pad, 4]
    assert expand_image_pads([1, pad], pad, [[1, 4, 4]], 2) == [1] + [pad] * 4
    assert expand_image_pads([1, 2], pad, [], 2) == [1, 2]
    with pytest.raises(ValueError, match="2 image pad"):
        expand_image_pads(ids, pad, [[1, 2, 2]], 2)


def test_the_multimodal_matrix_reranks_image_queries_on_hf_v1_and_v2():
    from harness.run.matrices import load_matrix

    cases = {c.id: c for c in load_matrix(ROOT / "matrices/multimodal.yaml").cases}
    case = cases["jina-vl-tiny-image-query-rerank"]
    assert case.inputs == "image-query-pairs" and case.task == "score"
    assert case.runners == ["hf", "vllm-v1", "vllm-v2"]
    assert case.family == "vl-rerank" and case.divergence is not None  # recipe: jina-vl-rerank
