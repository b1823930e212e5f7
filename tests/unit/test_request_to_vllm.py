"""How a request's values reach vLLM, read from one declaration (harness.matrix.request.TO_VLLM)
by the offline runner, the server runners and the repro export alike."""

from __future__ import annotations

import pytest

from harness.matrix.request import (
    DECLARED_FIELDS,
    TO_VLLM,
    RequestOptions,
    offline_kwargs,
    served_fields,
    tokenize_fields,
)
from harness.repro.export import REQUEST_FIELDS
from tests.requests import req


def test_every_field_set_reaches_its_declared_place_offline_and_served():
    request = req(truncate=16, padding=None, dimensions=8, use_activation=False)
    tok, params = offline_kwargs(request)
    assert tok == {"truncate_prompt_tokens": 16}
    assert params == {"dimensions": 8, "use_activation": False}
    assert served_fields(req(truncate=16, dimensions=8, use_activation=False)) == {
        "truncate_prompt_tokens": 16,
        "dimensions": 8,
        "use_activation": False,
    }


def test_score_caps_go_to_extra_kwargs_offline_and_body_fields_served():
    request = req(max_tokens_per_query=3, max_tokens_per_doc=5)
    tok, params = offline_kwargs(request)
    assert tok == {}
    assert params == {"extra_kwargs": {"max_tokens_per_query": 3, "max_tokens_per_doc": 5}}
    assert served_fields(request) == {"max_tokens_per_query": 3, "max_tokens_per_doc": 5}


def test_a_field_is_sent_only_with_the_field_it_needs():
    assert "truncation_side" not in served_fields(req(truncation_side="left"))
    assert offline_kwargs(req(truncation_side="left")) == ({}, {})


def test_nothing_set_sends_nothing():
    assert offline_kwargs(req()) == ({}, {})
    assert served_fields(req()) == {}
    assert tokenize_fields(req(truncate=8)) == {}  # truncation is not a /tokenize field


def test_every_request_field_is_declared_or_named_a_special_case():
    special = {
        "serve",
        "instruction",
        "prompt_name",
        "colbert",
        "chat",
        "also_in_flight",
        "score_template",
    }
    assert set(TO_VLLM) | special == set(RequestOptions.model_fields)
    assert {n for n, to in TO_VLLM.items() if to.declared} <= set(DECLARED_FIELDS)
    assert set(REQUEST_FIELDS) == set(RequestOptions.model_fields) - {"serve", "chat", "colbert"}


@pytest.mark.parametrize("name", sorted(TO_VLLM))
def test_each_declaration_names_a_place(name):
    to = TO_VLLM[name]
    assert to.offline in (None, "pooling_params", "tokenization_kwargs", "extra_kwargs")
    assert to.offline is not None or to.served is not None, f"{name} reaches vLLM nowhere"
