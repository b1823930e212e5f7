"""Images made by the harness (numpy + PIL, no downloads): gradients, waves, noise, a checkerboard,
shapes and text drawn with PIL's built-in bitmap font. Deterministic; hashed over raw pixels (PNG
bytes depend on zlib). Worker requests carry `{"image": "<set>/<index>"}` references, resolved
here on the worker's side, so images never travel through JSON."""

from __future__ import annotations

import hashlib
from functools import lru_cache

import numpy as np

SIZE = 64
IMAGE_SETS = ("synthetic-images", "synthetic-images-56", "blank")


@lru_cache(maxsize=None)
def synthetic_images() -> tuple:
    from PIL import Image, ImageDraw, ImageFont

    s = SIZE
    y, x = np.mgrid[0:s, 0:s].astype(np.float32) / (s - 1)
    arrays = [
        np.stack([x, y, 1 - x], -1),
        np.stack([np.sin(6 * np.pi * x) * 0.5 + 0.5, y * y, np.cos(4 * np.pi * y) * 0.5 + 0.5], -1),
        np.random.default_rng(0).random((s, s, 3), dtype=np.float32),
        np.stack([((x * 8).astype(int) + (y * 8).astype(int)) % 2] * 3, -1).astype(np.float32),
    ]
    images = [Image.fromarray((a * 255).round().astype(np.uint8), "RGB") for a in arrays]
    im = Image.new("RGB", (s, s), (20, 30, 40))
    draw = ImageDraw.Draw(im)
    draw.ellipse((8, 8, 40, 40), fill=(230, 40, 40))
    draw.rectangle((30, 30, 60, 56), fill=(40, 200, 90))
    images.append(im)
    im = Image.new("RGB", (s, s), (250, 250, 240))
    draw = ImageDraw.Draw(im)
    draw.polygon([(5, 60), (32, 4), (60, 60)], fill=(30, 60, 200))
    draw.line((0, 0, 63, 63), fill=(0, 0, 0), width=3)
    images.append(im)
    font = ImageFont.load_default_imagefont()
    for text, bg, fg in (("CAT", (255, 255, 255), (0, 0, 0)), ("42!", (10, 10, 80), (255, 220, 0))):
        im = Image.new("RGB", (s, s), bg)
        draw = ImageDraw.Draw(im)
        draw.text((6, 10), text, fill=fg, font=font)
        draw.text((6, 34), text.lower() * 2, fill=fg, font=font)
        images.append(im)
    return tuple(images)


def image(ref: str):
    """`synthetic-images/3` -> that PIL image; `blank/28` -> a black 28x28 image;
    `synthetic-images-56/3` -> its centre 56x56 (sides a multiple of 28, Qwen2-VL's patch x
    merge: the GME card's own pre-resize leaves it as it is); `file:/path/page.png` -> that file,
    as RGB."""
    if ref.startswith("file:"):
        from PIL import Image

        with Image.open(ref[5:]) as im:
            return im.convert("RGB")
    name, _, index = ref.partition("/")
    if name == "blank":  # `blank/28`: a black 28x28 RGB image (a model card's dummy image)
        from PIL import Image

        return Image.new("RGB", (int(index), int(index)))
    if name == "synthetic-images-56":
        return synthetic_images()[int(index)].crop((4, 4, 60, 60))
    if name != "synthetic-images":
        raise ValueError(f"unknown image set {name!r}; valid: {', '.join(IMAGE_SETS)}")
    return synthetic_images()[int(index)]


def pixels_sha256(refs: list[str]) -> str:
    h = hashlib.sha256()
    for ref in refs:
        im = image(ref)
        # a file is named by its base name: a clone elsewhere hashes alike
        label = "file:" + ref.rsplit("/", 1)[-1] if ref.startswith("file:") else ref
        h.update(f"{label}:{im.mode}{im.size}".encode())
        h.update(im.tobytes())
    return h.hexdigest()


def is_image(item) -> bool:
    return isinstance(item, dict) and "image" in item
