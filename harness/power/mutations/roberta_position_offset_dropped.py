"""RoBERTa / XLM-RoBERTa embeddings read position rows from 0, not from pad_token_id + 1 (the
offset transformers' create_position_ids_from_input_ids gives): every token gets a shifted
position embedding."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.model_executor.models.roberta"
FILES = ["vllm/model_executor/models/roberta.py"]
CASES = ["xlmr-*"]  # the standalone XLM-R cases of issue #27 (RobertaEmbedding)
MATRIX = "matrices/extended.yaml"


def apply(module):
    def forward(self, input_ids, position_ids, inputs_embeds=None):
        token_type_ids = module._decode_token_type_ids(input_ids)
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)
        position_embeddings = self.position_embeddings(position_ids)  # offset dropped
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        return self.LayerNorm(inputs_embeds + token_type_embeddings + position_embeddings)

    module.RobertaEmbedding.forward = forward
