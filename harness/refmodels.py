"""Reference definitions of architectures that transformers does not ship (their hub checkpoints
use remote code, which is unavailable offline). Each mirrors the published modeling code and is
used both to build synthetic checkpoints and as the HF-side reference."""

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
        self.score = torch.nn.Sequential(torch.nn.Linear(h, h), torch.nn.ReLU(), torch.nn.Linear(h, config.num_labels))

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

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids).last_hidden_state
        return torch.nn.functional.normalize(self.linear(hidden), dim=-1)


# architecture name -> (module class, num_labels vLLM forces for it, or None)
REFERENCE_ARCHS: dict[str, tuple[type[torch.nn.Module], int | None]] = {
    "Qwen2ForRewardModel": (Qwen2RewardModel, 1),
    "Qwen2ForProcessRewardModel": (Qwen2RewardModel, 2),
    "HF_ColBERT": (BertColBERT, None),
}


def load_reference(model_dir: str, arch: str, dtype: torch.dtype) -> torch.nn.Module:
    """Load a checkpoint of a REFERENCE_ARCHS architecture from safetensors (strict)."""
    from pathlib import Path

    from safetensors.torch import load_file

    cls, _ = REFERENCE_ARCHS[arch]
    config = transformers.AutoConfig.from_pretrained(model_dir, local_files_only=True)
    model = cls(config)
    state = load_file(str(Path(model_dir) / "model.safetensors"))
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("_ids")]  # index buffers are rebuilt, not stored
    if missing or unexpected:
        raise ValueError(f"{model_dir}: checkpoint does not fit {arch}: missing {missing}, unexpected {unexpected}")
    return model.to(dtype).eval()
