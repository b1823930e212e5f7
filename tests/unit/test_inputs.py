from harness.matrix import images
from harness.matrix.inputs import input_set, query_groups


def test_image_documents_are_hashed_over_their_pixels(monkeypatch):
    pairs = input_set("query-image-pairs")
    assert pairs.pairs and all(isinstance(q, str) and images.is_image(d) for q, d in pairs.items)
    before = pairs.sha256
    real = images.synthetic_images()
    changed = (real[0].point(lambda v: 255 - v),) + real[1:]
    monkeypatch.setattr(images, "synthetic_images", lambda: changed)
    assert pairs.sha256 != before  # same references, other pixels


def test_query_image_pairs_group_by_query_with_the_described_image_first():
    items = input_set("query-image-pairs").items
    groups = query_groups(items)
    assert len(groups) == 6 and all(len(g) == 4 for g in groups)
    assert [items[g[0]][1]["image"] for g in groups] == [
        f"synthetic-images/{i}" for i in (0, 3, 4, 5, 6, 7)
    ]
    assert all(len({items[i][1]["image"] for i in g}) == 4 for g in groups)


def test_one_word_texts_start_with_prompts_of_one_content_token_on_the_xlmr_tokenizer(tmp_path):
    """vllm#33873 shows on a prompt of one content token (BGE-M3, the synthetic XLM-R
    tokenizer): the set's words must be one token each there, beside longer texts."""
    from transformers import AutoTokenizer

    from harness.matrix.inputs import input_set
    from harness.models.synthetic.xlm_roberta import xlmr_tokenizer

    xlmr_tokenizer(tmp_path, {"max_position_embeddings": 64})
    tok = AutoTokenizer.from_pretrained(tmp_path)
    lengths = [len(tok(t)["input_ids"]) for t in input_set("one-word-texts").items]
    assert lengths[:6] == [3] * 6  # <s>, the word, </s>
    assert min(lengths[6:]) > 3
