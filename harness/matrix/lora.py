"""A seeded LoRA adapter a case runs its model with (`lora:`)."""

from __future__ import annotations

from pydantic import Field

from harness.matrix.strict import Strict


class LoraAdapter(Strict):
    """A seeded LoRA adapter the harness builds beside the case's model with peft's own
    `get_peft_model` + `save_pretrained` (harness.models.lora; cached like synthetic models, keyed
    by the model's fingerprint and this spec). Its lora_A / lora_B matrices and the
    modules_to_save copies (e.g. a classifier head) are drawn from a numpy generator seeded by
    (seed, parameter name), never left at peft's init (lora_B = 0 would make it a no-op). The
    reference is peft (`PeftModel.from_pretrained` on the base, adapter enabled); the offline vLLM
    runners start the engine with enable_lora and send every request with a LoRARequest."""

    seed: int = 0
    r: int = Field(default=4, gt=0)
    lora_alpha: int = Field(default=8, gt=0)
    target_modules: list[str] = Field(min_length=1)
    # peft's modules_to_save: whole modules the adapter replaces (e.g. [score], the head)
    modules_to_save: list[str] = Field(default_factory=list)
    # the standard deviation of the seeded adapter weights
    std: float = Field(default=0.2, gt=0)
