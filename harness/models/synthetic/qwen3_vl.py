"""Qwen3-VL: a tiny Qwen3-VL with its vision tower (deepstack included), the Qwen tokenizer with
the vision specials and Qwen3-VL's processor files, all written here (no hub). Two architectures:
ColQwen3 (colpali-engine's late-interaction retriever: the projection `custom_text_proj`, a
Linear with a bias, as colpali-engine builds it) and Qwen3VLForConditionalGeneration (the causal
VLM Qwen3-VL-Reranker ships: scored by its "yes"/"no" logits; `tokenizer: {chat_template: true}`
saves a chat template in Qwen3-VL's layout for its published scoring code)."""

from __future__ import annotations

from pathlib import Path

from harness.matrix.schema import SyntheticModel
from harness.models.synthetic import ArchFamily, register, seeded_values, update_config_json
from harness.models.synthetic.qwen2_vl import qwen_vl_config, qwen_vl_tokenizer

# colpali-engine 0.3.18's ColQwen3 fixes its projection width (`self.dim = 320`) and builds it as
# `nn.Linear(hidden_size, self.dim)`: bias included
COLQWEN3_DIM = 320
COLQWEN3_PROJECTION = "custom_text_proj"
# a multimodal sequence classifier: no class of its own in transformers (built from the VLM)
SEQ_CLS = "Qwen3VLForSequenceClassification"


# Qwen3-VL's chat template reduced to what the reranker's messages use: a turn per message,
# `content` a string or a list of parts (text as is, an image as the vision placeholder), the
# assistant header on add_generation_prompt (Qwen3-VL-Instruct's layout, no think block)
QWEN3_VL_CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- else %}{%- for part in message['content'] %}"
    "{%- if part['type'] == 'image' %}{{- '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- elif part['type'] == 'text' %}{{- part['text'] }}{%- endif %}"
    "{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"
)


def _qwen3_vl_tokenizer_and_processor(out: Path, config: dict, chat_template: bool = False) -> None:
    """Qwen2 byte-level BPE plus the vision specials, saved as one Qwen3VLProcessor with
    Qwen3-VL's image processor sized for the harness's 64x64 images (4 merged tokens each, at
    most 16) and its video processor (vLLM's Qwen3-VL processing reads both);
    `chat_template=True` saves QWEN3_VL_CHAT_TEMPLATE with them."""
    from transformers import Qwen3VLProcessor
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    tok = qwen_vl_tokenizer(config, "Qwen3-VL")
    vision = config["vision_config"]
    tile = vision["patch_size"] * vision["spatial_merge_size"]  # 32: a 64x64 image is 2x2 tokens
    sizes = dict(
        patch_size=vision["patch_size"],
        temporal_patch_size=vision["temporal_patch_size"],
        merge_size=vision["spatial_merge_size"],
        image_mean=[0.5, 0.5, 0.5],  # Qwen3-VL's released preprocessor_config.json
        image_std=[0.5, 0.5, 0.5],
    )
    images = Qwen2VLImageProcessor(
        size={"shortest_edge": tile * tile, "longest_edge": 16 * tile * tile}, **sizes
    )
    videos = Qwen3VLVideoProcessor(
        size={"shortest_edge": tile * tile, "longest_edge": 16 * tile * tile}, **sizes
    )
    processor = Qwen3VLProcessor(image_processor=images, tokenizer=tok, video_processor=videos)
    if chat_template:
        processor.chat_template = tok.chat_template = QWEN3_VL_CHAT_TEMPLATE
    processor.save_pretrained(out)


def _colqwen3_projection(out: Path, spec: SyntheticModel, config) -> None:
    """Add the ColQwen3 head to the saved backbone: `custom_text_proj.weight` [320, hidden] and
    `.bias` [320], seeded like every other parameter (the case's `head: {bias: false}` saves no
    bias: a bias-free projection); `architectures` names ColQwen3."""
    from safetensors.numpy import load_file, save_file

    if spec.arch != "ColQwen3":
        if spec.head:
            raise ValueError(f"{spec.arch} writes no head: `head` options {spec.head}")
        if spec.arch == SEQ_CLS:
            _seq_cls_head(out, spec, config)
        return  # the reranker's causal VLM: saved as transformers saves it
    if unknown := sorted(set(spec.head) - {"bias"}):
        raise ValueError(f"ColQwen3 head options are {{bias: true|false}}, not {unknown}")
    hidden = config.text_config.hidden_size
    path = out / "model.safetensors"
    weights = load_file(str(path))
    leaves = [("weight", (COLQWEN3_DIM, hidden))]
    if spec.head.get("bias", True):
        leaves.append(("bias", (COLQWEN3_DIM,)))
    for leaf, shape in leaves:
        name = f"{COLQWEN3_PROJECTION}.{leaf}"
        weights[name] = seeded_values(spec.seed, name, shape, float(config.initializer_range))
    save_file(weights, str(path), metadata={"format": "pt"})
    # save_pretrained wrote the backbone's class name
    update_config_json(out, {"architectures": [spec.arch]})


def _seq_cls_head(out: Path, spec: SyntheticModel, config) -> None:
    """A Qwen3-VL sequence classifier as a converted or fine-tuned checkpoint holds it: the VLM's
    backbone without lm_head, plus `score.weight` [num_labels, hidden] seeded like every other
    parameter. num_labels is the top-level config's (the case's `config: {num_labels: N}`); the
    text config keeps transformers' default 2, as real multimodal checkpoints do (vllm#50950)."""
    from safetensors.numpy import load_file, save_file

    path = out / "model.safetensors"
    weights = {k: v for k, v in load_file(str(path)).items() if not k.startswith("lm_head.")}
    shape = (int(config.num_labels), int(config.text_config.hidden_size))
    std = float(config.initializer_range)
    weights["score.weight"] = seeded_values(spec.seed, "score.weight", shape, std)
    save_file(weights, str(path), metadata={"format": "pt"})
    # save_pretrained wrote the causal VLM's class name
    update_config_json(out, {"architectures": [spec.arch]})


def _qwen3_vl_config() -> dict:
    text = dict(
        head_dim=32,  # vLLM's CPU attention rejects 16
        # M-RoPE over (t, h, w), interleaved as Qwen3-VL's; the sections sum to head_dim / 2
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 5e6,
            "mrope_section": [6, 5, 5],
            "mrope_interleaved": True,
        },
    )
    vision = dict(
        depth=2,
        hidden_size=32,
        intermediate_size=64,
        num_heads=2,
        in_channels=3,
        patch_size=16,
        spatial_merge_size=2,
        temporal_patch_size=2,
        out_hidden_size=64,  # the text hidden size
        num_position_embeddings=64,  # an 8x8 grid of learned positions, interpolated per image
        deepstack_visual_indexes=[0, 1],  # both vision layers feed both decoder layers
    )
    return qwen_vl_config(text, vision)


register(
    "qwen3-vl",
    ArchFamily(
        model_type="qwen3_vl",
        config=_qwen3_vl_config(),
        tokenizer=_qwen3_vl_tokenizer_and_processor,
        # Qwen3VLForConditionalGeneration: Qwen3-VL-Reranker, a causal VLM scored by its
        # "yes"/"no" logits (its own layout: model.visual, model.language_model, lm_head)
        # Qwen3VLForSequenceClassification: the VLM with a `score` head of num_labels rows
        archs=("ColQwen3", "Qwen3VLForConditionalGeneration", SEQ_CLS),
        hf_class={"ColQwen3": "Qwen3VLModel", SEQ_CLS: "Qwen3VLForConditionalGeneration"},
        # Qwen3VLModel saves `visual.X` / `language_model.X`; ColQwen3 checkpoints in the
        # layout of Qwen3VLForConditionalGeneration (colpali-engine's key mapping, vLLM's
        # "ColPali / nvidia" naming) hold `model.visual.X` / `model.language_model.X`
        checkpoint_prefixes={
            "visual.": "model.visual.",
            "language_model.": "model.language_model.",
        },
        post_build=_colqwen3_projection,
    ),
)
