"""Model Runner V2 accepts `--enable-prompt-embeds` on an encoder-only model (BERT) instead of
refusing it at start: the runner then hands the model inputs_embeds with input_ids=None, and
BertEmbedding, which decodes token types from the high bits of input_ids, fails every request
(text ones too) with an opaque error."""

# replays vllm#55050 (a live 0.32 bug on V1, whose refusal #55233 was open when crawled): V2
# refuses the flag through EncoderOnlyModelState.supports_prompt_embeds = False (#42963), the
# refusal V1 lacks. Replayed on V2 by removing that refusal, which leaves V2 with V1's path: the
# recorded V2 refusal row (bert-tiny-mean-embed-prompt-embeds-enabled-v2) must turn red.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "engine start"
REPLAYS = "vllm#55050"
MODULE = "vllm.v1.worker.gpu.model_states.encoder_only"
FILES = ["vllm/v1/worker/gpu/model_states/encoder_only.py"]
CASES = ["bert-tiny-mean-embed-prompt-embeds-enabled-v2"]
MATRIX = "matrices/real-bugs.yaml"


def apply(module):
    module.EncoderOnlyModelState.supports_prompt_embeds = True
