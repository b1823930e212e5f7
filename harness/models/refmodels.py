"""Reference definitions of architectures that transformers does not ship (their hub checkpoints
use remote code, which is unavailable offline). Each mirrors the published modeling code and is
used both to build synthetic checkpoints and as the HF-side reference, so each is checked against
a second, independent implementation (numpy heads, a numpy Jina encoder) in
tests/unit/test_refmodels.py."""

from __future__ import annotations

import torch
import transformers


class Qwen2RewardModel(torch.nn.Module):
    """Qwen2ForRewardModel / Qwen2ForProcessRewardModel: Qwen2Model, then a two-layer head
    `score = Linear(h, h) -> ReLU -> Linear(h, num_labels)` applied to every token."""

    def __init__(self, config: transformers.PretrainedConfig):
        super().__init__()
        self.config = config
        h = config.hidden_size
        self.model = transformers.Qwen2Model(config)
        self.score = torch.nn.Sequential(
            torch.nn.Linear(h, h), torch.nn.ReLU(), torch.nn.Linear(h, config.num_labels)
        )

    def forward(self, input_ids, attention_mask=None):
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.score(hidden)


class BertColBERT(torch.nn.Module):
    """ColBERT's `HF_ColBERT` layout: `bert.*` plus a bias-free `linear` projection; the output of
    every token is the projected last hidden state, L2-normalised."""

    projection_dim = 32

    def __init__(self, config: transformers.PretrainedConfig):
        super().__init__()
        self.config = config
        self.bert = transformers.BertModel(config, add_pooling_layer=False)
        self.linear = torch.nn.Linear(config.hidden_size, self.projection_dim, bias=False)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, normalize=True):
        hidden = self.bert(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
        projected = self.linear(hidden)  # normalize False: the projection alone
        return torch.nn.functional.normalize(projected, dim=-1) if normalize else projected


class _JinaLayer(torch.nn.Module):
    def __init__(self, h: int, inter: int):
        super().__init__()
        self.mixer = torch.nn.Module()
        self.mixer.Wqkv = torch.nn.Linear(h, 3 * h)
        self.mixer.out_proj = torch.nn.Linear(h, h)
        self.norm1 = torch.nn.LayerNorm(h)
        self.mlp = torch.nn.Module()
        self.mlp.fc1 = torch.nn.Linear(h, inter)
        self.mlp.fc2 = torch.nn.Linear(inter, h)
        self.norm2 = torch.nn.LayerNorm(h)


def _rotate_neox(x: torch.Tensor, base: float) -> torch.Tensor:
    """GPT-NeoX (non-interleaved) rotary embedding over the full head dim; x is [heads, n, hd]."""
    hd, n = x.shape[-1], x.shape[-2]
    inv = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.float32, device=x.device) / hd))
    f = torch.outer(torch.arange(n, dtype=torch.float32, device=x.device), inv)
    cos, sin = (
        torch.cat([f.cos(), f.cos()], -1).to(x.dtype),
        torch.cat([f.sin(), f.sin()], -1).to(x.dtype),
    )
    x1, x2 = x[..., : hd // 2], x[..., hd // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class JinaColBERT(torch.nn.Module):
    """Jina ColBERT (`ColBERTJinaRobertaModel`): XLM-RoBERTa in Jina's flash layout (fused Wqkv,
    rotary positions, post-LayerNorm blocks), a bias-free `linear` projection, per-token L2.
    Written from the published architecture, since Jina's modeling code is remote code."""

    projection_dim = 32

    def __init__(self, config: transformers.PretrainedConfig):
        super().__init__()
        self.config = config
        h = config.hidden_size
        self.roberta = torch.nn.Module()
        self.roberta.embeddings = torch.nn.Module()
        self.roberta.embeddings.word_embeddings = torch.nn.Embedding(config.vocab_size, h)
        self.roberta.embeddings.token_type_embeddings = torch.nn.Embedding(
            config.type_vocab_size, h
        )
        self.roberta.emb_ln = torch.nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.roberta.encoder = torch.nn.Module()
        self.roberta.encoder.layers = torch.nn.ModuleList(
            _JinaLayer(h, config.intermediate_size) for _ in range(config.num_hidden_layers)
        )
        self.linear = torch.nn.Linear(h, self.projection_dim, bias=False)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        import torch.nn.functional as F

        if input_ids.shape[0] != 1 or (
            attention_mask is not None and not bool(attention_mask.all())
        ):
            raise ValueError("JinaColBERT reference takes one unpadded sequence at a time")
        cfg, h = self.config, self.config.hidden_size
        nh, eps = cfg.num_attention_heads, cfg.layer_norm_eps
        hd = h // nh
        emb = self.roberta.embeddings
        x = emb.word_embeddings(input_ids[0]) + emb.token_type_embeddings.weight[0]
        x = F.layer_norm(x, (h,), self.roberta.emb_ln.weight, self.roberta.emb_ln.bias, eps)
        for layer in self.roberta.encoder.layers:
            q, k, v = (z.view(-1, nh, hd).transpose(0, 1) for z in layer.mixer.Wqkv(x).split(h, -1))
            q, k = _rotate_neox(q, cfg.rotary_emb_base), _rotate_neox(k, cfg.rotary_emb_base)
            a = F.scaled_dot_product_attention(q, k, v).transpose(0, 1).reshape(-1, h)
            x = F.layer_norm(
                x + layer.mixer.out_proj(a), (h,), layer.norm1.weight, layer.norm1.bias, eps
            )
            m = layer.mlp.fc2(F.gelu(layer.mlp.fc1(x)))
            x = F.layer_norm(x + m, (h,), layer.norm2.weight, layer.norm2.bias, eps)
        return F.normalize(self.linear(x), dim=-1).unsqueeze(0)


class JinaVLRanker(torch.nn.Module):
    """jina-reranker-m0 (`JinaVLForRanking`): Qwen2-VL (vision tower + M-RoPE decoder), then
    `score = Linear(h, h) -> ReLU -> Linear(h, 1)` on the last token's final hidden state, as its
    published modeling.py defines it (see harness/runners/hf/jina_vl.py for the source). The
    published checkpoints keep the vision tower at the top level (`visual.*`)."""

    # module name prefix -> checkpoint name prefix (the hub layout, which vLLM's loader expects)
    checkpoint_prefixes = {"model.visual.": "visual."}

    def __init__(self, config: transformers.PretrainedConfig):
        super().__init__()
        self.config = config
        h = config.text_config.hidden_size
        self.model = transformers.Qwen2VLModel(config)
        self.score = torch.nn.Sequential(
            torch.nn.Linear(h, h), torch.nn.ReLU(), torch.nn.Linear(h, 1)
        )

    def forward(self, input_ids, pixel_values=None, image_grid_thw=None):
        if input_ids.shape[0] != 1:
            raise ValueError("JinaVLRanker reference takes one sequence at a time")
        kw = {}
        if pixel_values is not None:
            image_token = self.config.image_token_id
            kw = dict(
                pixel_values=pixel_values,
                image_grid_thw=image_grid_thw,
                mm_token_type_ids=(input_ids == image_token).long(),
            )
        self.model.rope_deltas = None  # Qwen2VLModel caches M-RoPE offsets between calls
        hidden = self.model(
            input_ids=input_ids, attention_mask=torch.ones_like(input_ids), **kw
        ).last_hidden_state
        return self.score(hidden[:, -1])


def checkpoint_names(cls: type, state: dict) -> dict:
    """A reference module's state dict under the names its published checkpoints use."""
    return {renamed(k, getattr(cls, "checkpoint_prefixes", {})): v for k, v in state.items()}


def renamed(name: str, prefixes: dict[str, str]) -> str:
    for old, new in prefixes.items():
        if name.startswith(old):
            return new + name[len(old) :]
    return name


# architecture name -> (module class, num_labels vLLM forces for it, or None)
REFERENCE_ARCHS: dict[str, tuple[type[torch.nn.Module], int | None]] = {
    "Qwen2ForRewardModel": (Qwen2RewardModel, 1),
    "Qwen2ForProcessRewardModel": (Qwen2RewardModel, 2),
    "HF_ColBERT": (BertColBERT, None),
    "ColBERTJinaRobertaModel": (JinaColBERT, None),
    "JinaVLForRanking": (JinaVLRanker, 1),
}


def load_reference(
    model_dir: str, arch: str, dtype: torch.dtype, device: str = "cpu"
) -> torch.nn.Module:
    """Load a checkpoint of a REFERENCE_ARCHS architecture from safetensors (strict)."""
    from pathlib import Path

    from safetensors.torch import load_file

    cls, _ = REFERENCE_ARCHS[arch]
    config = transformers.AutoConfig.from_pretrained(model_dir, local_files_only=True)
    model = cls(config)
    inverse = {new: old for old, new in getattr(cls, "checkpoint_prefixes", {}).items()}
    state = {
        renamed(k, inverse): v
        for k, v in load_file(str(Path(model_dir) / "model.safetensors")).items()
    }
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [
        k for k in missing if not k.endswith("_ids")
    ]  # index buffers are rebuilt, not stored
    if missing or unexpected:
        raise ValueError(
            f"{model_dir}: checkpoint does not fit {arch}: missing {missing}, "
            f"unexpected {unexpected}"
        )
    return model.to(device=device, dtype=dtype).eval()
