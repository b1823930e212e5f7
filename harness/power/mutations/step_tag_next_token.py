"""Step pooling (PRM) reads the token after each step tag instead of the tag itself."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.model_executor.layers.pooler.tokwise.methods"
FILES = ["vllm/model_executor/layers/pooler/tokwise/methods.py"]
CASES = ["*prm*"]


def apply(module):
    all_forward = module.AllPool.forward

    def forward(self, hidden_states, pooling_metadata):
        pooled = all_forward(self, hidden_states, pooling_metadata)
        out = []
        for data, ids, param in zip(
            pooled, pooling_metadata.get_prompt_token_ids_cpu(), pooling_metadata.pooling_params
        ):
            if data is None:
                out.append(None)
                continue
            if param.returned_token_ids:
                data = data[:, param.returned_token_ids]
            if param.step_tag_id is not None:
                idx = (ids == param.step_tag_id).nonzero(as_tuple=True)[0]
                data = data[(idx + 1).clamp(max=data.shape[0] - 1).to(data.device)]
            out.append(data)
        return out

    module.StepPool.forward = forward
