"""What a run proves about itself, as typed objects: the summary of its requests that a worker
sends back with its outputs (an outcome's `info.requests`) and what a runner hands the worker to
build it (RunEvidence). The invariance checks (harness.matrix.checks) read these fields, never a
dict's keys: a key the worker writes and no field declares is refused when the evidence is read.
On the wire and in report.json the summary is the JSON object of the fields a run set, in the
order declared here (the order the worker has always written them). Imported by worker
processes: pydantic and the standard library only."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class _Evidence(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def wire(self) -> dict[str, Any]:
        """The JSON object sent across the worker boundary and kept in the report: the fields
        this run set, nothing else (an absent key and a None stay distinct)."""
        return self.model_dump(exclude_unset=True)


class ServerMetrics(_Evidence):
    """What a server's /metrics counted during one run (harness.runners.serve_process
    metrics_delta), or why it could not be read (`error`)."""

    error: str | None = None
    engine_steps: int | None = None  # engine steps that finished requests
    requests_finished: int | None = None
    peak_batch_at_least: int | None = None  # ceil(requests / steps)


class Batching(_Evidence):
    """Several items per HTTP request, in both sides' words: as the harness sent them and as the
    server's access log answered them."""

    endpoint: str | None = None
    items_per_request: list[int] | None = None  # as the harness sent them
    http_requests: int | None = None
    server_log_requests: int | None = None  # `POST <endpoint>` answered 200 in the server log
    server_log_error: str | None = None  # why the log could not be read


class RequestsEvidence(_Evidence):
    """A run's requests summed up (the worker's answer, an outcome's `info.requests`): prompt
    lengths and prefix-cache hits per request, what vLLM's scheduler did (runners.engine_trace
    summarize and run_info) and, for a server, its own metrics and the batching that ran."""

    count: int | None = None  # requests the runner recorded
    max_prompt_tokens: int | None = None
    min_prompt_tokens: int | None = None
    cached_tokens: int | None = None  # prompt tokens read from the prefix cache, in all
    requests_with_cache_hits: int | None = None
    peak_in_flight: int | None = None  # most requests outstanding at once (a server's client)
    server_restarts: int | None = None
    # engine_trace.summarize: only when every request was traced
    arrival_order: list[int] | None = None  # input indices in the order the engine received them
    peak_batch: int | None = None  # most requests scheduled in one engine step
    engine_steps: int | None = None
    split_prompts: int | None = None  # requests scheduled over more than one step
    tokens_scheduled: int | None = None
    longest_prompt_steps: int | None = None
    shared_long_short_steps: int | None = None
    waited: int | None = None  # requests first scheduled after the run's first step
    # engine_trace.run_info: the engine core's batch queue (async scheduling)
    batch_queue_size: int | None = None
    queued_steps: int | None = None
    peak_batch_queue: int | None = None
    # a server runner's own
    server_metrics: ServerMetrics | None = None
    batching: Batching | None = None

    @classmethod
    def read(cls, data: dict[str, Any] | None, where: str = "info.requests") -> RequestsEvidence:
        """The summary from its JSON object; a key no field declares is an error naming it."""
        try:
            return cls.model_validate(data or {})
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()
            )
            raise ValueError(f"{where}: not a run's requests evidence ({problems})") from None


class RunEvidence(_Evidence):
    """What a runner hands its worker after a run, with the outputs: one record per request in
    input order (prompt token ids, cache hits, scheduler trace, a server's answer; kept beside
    the outputs as `<out>.requests.json`) and what the run did as a whole."""

    records: list[dict[str, Any]] = Field(default_factory=list)
    run: RequestsEvidence = Field(default_factory=RequestsEvidence)


class RerankAnswer(_Evidence):
    """What a server's /rerank said of one document (harness.runners.serve_decode.match_rerank):
    its query group, its rank among the group's documents, whether the result carried its own
    text; with top_n, its rank in the shortened answer (None: left out)."""

    group: int
    rank: int
    document_matches: bool
    prompt_tokens: int | None = None  # the whole group's request
    top_n: int | None = None
    top_rank: int | None = None
    top_score: float | None = None


class BatchShare(_Evidence):
    """An item's share of a request that carried several (items_per_request)."""

    request: int
    items: int
    prompt_tokens: int | None = None  # the request's, all its items'


class RequestRecord(_Evidence):
    """What a runner recorded of one item's request, beside its output (`<out>.requests.json`,
    a golden's token ids): the checks read these fields; a key no field declares is refused when
    the record is read, never ignored."""

    request_id: str | None = None
    prompt_token_ids: list[int] | None = None  # the ids the model ran (a golden's: recorded)
    num_cached_tokens: int | None = None  # prompt tokens read from the prefix cache
    engine_prompt_token_ids: list[int] | None = None  # prompt embeddings: vLLM's placeholders
    # prompt forms (harness.matrix.prompt_forms): what the runner sent, and what the engine
    # was handed (harness.runners.engine_trace), embeddings by their digest and shape
    sent_as: str | None = None
    request_input: str | None = None  # a server: the form of the request body's input
    embeds_sha256: str | None = None
    engine_input: str | None = None
    engine_embeds_shape: list[int] | None = None
    engine_embeds_sha256: str | None = None
    # vLLM's scheduler (engine_trace.per_request): arrival rank, [step, tokens, batch] per step
    engine_arrival: int | None = None
    scheduled: list[list[int]] | None = None
    refused: str | None = None  # an expected refusal: the error the item got (None: answered)
    # a server's client and answer
    in_flight: int | None = None
    server_restarts: int | None = None
    usage_prompt_tokens: int | None = None
    rerank: RerankAnswer | None = None
    batch: BatchShare | None = None

    @classmethod
    def read_all(cls, data: list, where: str = "requests") -> list[RequestRecord]:
        """Records from their JSON objects (records stay as they are); a key no field declares
        is an error naming it and the item."""
        out = []
        for i, m in enumerate(data):
            if isinstance(m, cls):
                out.append(m)
                continue
            try:
                out.append(cls.model_validate(m or {}))
            except ValidationError as e:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()
                )
                raise ValueError(f"{where} item {i}: not a request record ({problems})") from None
        return out
