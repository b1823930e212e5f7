"""A model serving several pooling tasks hands each task's sub-pooler the whole batch's hidden
states: with classify and token_classify requests in one step, the token pooler splits tokens
that are not its requests' (a crash, or another request's tokens)."""

# replays vllm#36614 (reported on 0.17.0: /pooling token_classify and /classify in flight together
# on one Qwen3 sequence classifier crash, "hidden_states and num_scheduled_tokens_cpu mismatched"):
# DispatchPooler.forward passed the whole batch's hidden_states to every task group's pooler, so
# AllPool split the batch by one group's token counts. Replayed by the pre-fix forward: no slicing
# per group, no shifted indices.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "batching/order"
REPLAYS = "vllm#36614"
MODULE = "vllm.model_executor.layers.pooler.special"
FILES = ["vllm/model_executor/layers/pooler/special.py"]
CASES = ["async-*-in-flight"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    from itertools import groupby

    def forward(self, hidden_states, pooling_metadata):
        outputs = []
        offset = 0
        for task, group in groupby(pooling_metadata.tasks):
            pooler = self.poolers_by_task.get(task)
            if pooler is None:
                raise ValueError(f"Unsupported task: {task!r}")
            num_items = len(list(group))
            group_metadata = pooling_metadata[offset : offset + num_items]
            outputs.extend(pooler(hidden_states, group_metadata))
            offset += num_items
        return outputs

    module.DispatchPooler.forward = forward
