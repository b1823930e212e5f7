from transformers import PretrainedConfig


class XLMRobertaFlashConfig(PretrainedConfig):
    """parity-harness stand-in for the config class of Jina's XLM-RoBERTa flash implementation
    (remote code, unavailable offline). vLLM checks the class *name* and reads lora_rank and
    lora_alpha; this file is copied into synthetic Jina ColBERT checkpoints (trust_remote_code
    opted into per matrix case)."""

    model_type = "xlm-roberta"

    def __init__(self, vocab_size=250002, hidden_size=1024, num_hidden_layers=24,
                 num_attention_heads=16, intermediate_size=4096, hidden_act="gelu",
                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                 max_position_embeddings=8194, type_vocab_size=1, initializer_range=0.02,
                 layer_norm_eps=1e-05, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                 position_embedding_type="rotary", rotary_emb_base=10000.0,
                 lora_rank=4, lora_alpha=1, **kwargs):
        super().__init__(pad_token_id=pad_token_id, bos_token_id=bos_token_id,
                         eos_token_id=eos_token_id, **kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.position_embedding_type = position_embedding_type
        self.rotary_emb_base = rotary_emb_base
        self.lora_rank = lora_rank
        self.lora_alpha = lora_alpha
