"""BGE-M3's sparse weights (token_classify) of a prompt with one content token come back as a
scalar: after the BOS/EOS filter strips <s> and </s>, every size-1 dimension is squeezed, the
token's own with the label's, and the server's /pooling answer fails its schema (HTTP 400)."""

# replays vllm#33873 (reported on 0.15.0: "Hi" -> [CLS, Hi, SEP] -> a float, not a list): the
# label dimension and then the one remaining token dimension squeezed away. 0.32's
# BOSEOSFilter (model_executor/layers/pooler/special.py) squeezes the label dimension only
# (squeeze(-1)); this squeezes every size-1 dimension of the filtered output.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = "vllm#33873"
MODULE = "vllm.model_executor.layers.pooler.special"
FILES = ["vllm/model_executor/layers/pooler/special.py"]
MATRIX = "matrices/serve.yaml"
CASES = ["serve-bge-m3-tiny-sparse-token-classify-one-word"]


def apply(module):
    original = module.BOSEOSFilter.forward

    def forward(self, hidden_states, pooling_metadata):
        return [out.squeeze() for out in original(self, hidden_states, pooling_metadata)]

    module.BOSEOSFilter.forward = forward
