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


def test_captioned_image_documents_hold_an_image_and_its_caption():
    """Each document of query-captioned-image-pairs is one image AND a text (a content part of
    each kind in one document), the images and order of query-image-pairs."""
    plain = input_set("query-image-pairs").items
    captioned = input_set("query-captioned-image-pairs").items
    assert [(q, d["image"]) for q, d in captioned] == [(q, d["image"]) for q, d in plain]
    assert all(images.is_image(d) and d["text"].startswith("Figure: ") for _, d in captioned)
    # a described image carries the caption its own query was written from
    assert captioned[0] == (plain[0][0], {**plain[0][1], "text": "Figure: " + plain[0][0]})


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
