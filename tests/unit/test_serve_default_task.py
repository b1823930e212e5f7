"""BGE-M3's default pooling task through the server (issue #42, vllm#51801): sent to /pooling
with no `task`, as users send it, so the server resolves its own default; a refusal is recorded
in the server's words, for the verdict to hold to the case's expected one."""

import json

import httpx

from tests.fake_server import served
from tests.requests import req

REFUSAL = (
    "The 'embed&token_classify' pooling task is only available through an IO processor "
    "plugin. Send a plugin request with a 'data' field, or select a concrete task with "
    "--pooler-config.task."
)


def _run(status: int, message: str):
    sent = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append((request.url.path, json.loads(request.content)))
        return httpx.Response(status, json={"error": {"message": message, "code": status}})

    runner = served(handler)
    result = runner.run("embed&token_classify", ["Hi", "a text"], req(expect_refusal=True))
    return sent, result.outputs, [meta["refused"] for meta in result.evidence.records]


def test_the_combined_task_goes_to_pooling_without_a_task_and_its_refusal_is_recorded():
    sent, out, refused = _run(400, REFUSAL)
    assert [path for path, _ in sent] == ["/pooling", "/pooling"]  # each item alone
    assert all("task" not in body and body["model"] == "m" for _, body in sent)
    assert [body["input"] for _, body in sent] == ["Hi", "a text"]
    assert all(o.size == 0 for o in out)
    assert all("HTTP 400 from /pooling" in r and "IO processor plugin" in r for r in refused)


def test_a_server_error_in_place_of_the_refusal_is_recorded_as_its_own_words():
    _, _, refused = _run(500, "KeyError: 'embed&token_classify'")
    assert all("HTTP 500 from /pooling" in r and "KeyError" in r for r in refused)
    assert not any("IO processor plugin" in r for r in refused)
