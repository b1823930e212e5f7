"""Binary /v1/embeddings encodings (base64, bytes, bytes_only in float32, float16 or bfloat16,
little- or big-endian): the harness's decoder against a second implementation (struct), the
half-precision bounds of serve.yaml against the dtypes' eps, and the runner's handling of binary
answers from a test double of the server."""

import base64
import json
import math
import re
import struct

import httpx
import numpy as np
import pytest
import torch

from harness.matrix.request import ServeOptions
from harness.matrix.schema import Case
from harness.run.matrices import load_matrix
from harness.runners import serve_decode
from harness.runners.serve_decode import ServerFailure, decode_values
from tests.fake_server import served
from tests.requests import req

ORDERS = {"little": "<", "big": ">"}


# --- a second decoder: struct, one value at a time ---


def _struct_decode(raw: bytes, embed_dtype: str, endianness: str) -> list[float]:
    o = ORDERS[endianness]
    if embed_dtype == "float32":
        return list(struct.unpack(f"{o}{len(raw) // 4}f", raw))
    if embed_dtype == "float16":  # struct's "e": IEEE 754 binary16
        return list(struct.unpack(f"{o}{len(raw) // 2}e", raw))
    # bfloat16: the high 16 bits of a binary32; rebuilt as a binary32 and unpacked as one
    halves = struct.unpack(f"{o}{len(raw) // 2}H", raw)
    return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves]


def _random_bits(n: int, size: int, seed: int) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, size=n * size, dtype=np.uint8).tobytes()


SPECIALS = {
    dtype: [bytes.fromhex(h) for h in hexes]
    for dtype, hexes in {
        "float32": ["7f800000", "ff800000", "7fc00000", "00000001"],
        "float16": ["7c00", "fc00", "7e00", "0001"],
        "bfloat16": ["7f80", "ff80", "7fc0", "0001"],
    }.items()
}


@pytest.mark.parametrize("endianness", ["little", "big"])
@pytest.mark.parametrize("embed_dtype", ["float32", "float16", "bfloat16"])
def test_the_decoder_agrees_with_struct_on_every_bit_pattern_drawn(embed_dtype, endianness):
    size = serve_decode.ITEMSIZE[embed_dtype]
    # +inf, -inf, a NaN and the smallest subnormal (big-endian bits), then random patterns
    specials = SPECIALS[embed_dtype]
    if endianness == "little":
        specials = [v[::-1] for v in specials]
    raw = b"".join(specials) + _random_bits(4096, size, seed=len(embed_dtype))
    got = decode_values(raw, embed_dtype, endianness)
    want = np.asarray(_struct_decode(raw, embed_dtype, endianness), dtype=np.float32)
    assert got.dtype == np.float32 and got.shape == want.shape == (4100,)
    assert got[:2].tolist() == [np.inf, -np.inf] and np.isnan(got[2]) and 0 < got[3] < 1e-7
    assert np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("endianness", ["little", "big"])
def test_bfloat16_decodes_to_torchs_own_bfloat16_values(endianness):
    values = torch.from_numpy(np.random.default_rng(7).normal(size=512).astype(np.float32))
    bits = values.to(torch.bfloat16).view(torch.int16).numpy().astype(ORDERS[endianness] + "i2")
    got = decode_values(bits.tobytes(), "bfloat16", endianness)
    assert np.array_equal(got, values.to(torch.bfloat16).float().numpy())


def test_known_values_in_each_encoding():
    # 1.0: binary32 0x3f800000, binary16 0x3c00, bfloat16 0x3f80; -2.5: 0xc0200000, 0xc100, 0xc020
    cases = {
        ("float32", "big"): bytes.fromhex("3f800000c0200000"),
        ("float32", "little"): bytes.fromhex("0000803f000020c0"),
        ("float16", "big"): bytes.fromhex("3c00c100"),
        ("float16", "little"): bytes.fromhex("003c00c1"),
        ("bfloat16", "big"): bytes.fromhex("3f80c020"),
        ("bfloat16", "little"): bytes.fromhex("803f20c0"),
    }
    for (dtype, order), raw in cases.items():
        assert decode_values(raw, dtype, order).tolist() == [1.0, -2.5], (dtype, order)


def test_an_unknown_dtype_or_order_is_refused():
    with pytest.raises(ValueError, match="embed_dtype 'fp8_e4m3', endianness 'little'"):
        decode_values(b"\0", "fp8_e4m3", "little")
    with pytest.raises(ValueError, match="endianness 'native'"):
        decode_values(b"\0\0", "float16", "native")


# --- the half-precision bounds of serve.yaml, derived from the dtypes' eps ---

FLOAT32_BOUNDS = {"max_abs": 1.0e-5, "cosine_distance": 1.0e-6}  # the encoder-embed family's
HALF_CASES = {
    "serve-bert-tiny-mean-embed-base64-float16": "float16",
    "serve-bert-tiny-mean-embed-bytes-only-float16-big": "float16",
    "serve-bert-tiny-mean-embed-bytes-bfloat16-big": "bfloat16",
}


def _unit_roundoff(dtype: str) -> float:
    """eps / 2, from two sources that must agree: numpy's finfo (float16) or the bit layout
    (bfloat16: 7 stored mantissa bits), and torch's finfo."""
    from_torch = float(torch.finfo(getattr(torch, dtype)).eps) / 2
    own = float(np.finfo(np.float16).eps) / 2 if dtype == "float16" else 2.0**-7 / 2
    assert own == from_torch
    return own


def _derived(dtype: str) -> dict[str, float]:
    u = _unit_roundoff(dtype)
    a, c = FLOAT32_BOUNDS["max_abs"], FLOAT32_BOUNDS["cosine_distance"]
    # |v_i| <= 1: the spacing there is at most eps / 2 = u, so a value moves by at most u / 2
    return {"max_abs": a + u / 2, "cosine_distance": 1 - math.cos(math.acos(1 - c) + math.asin(u))}


def _round_up_3(x: float) -> float:
    digits = 2 - math.floor(math.log10(x))
    return math.ceil(x * 10**digits) / 10**digits


def test_serve_yaml_half_encoding_bounds_are_the_dtypes_rounding_on_top_of_float32():
    cases = {c.id: c for c in load_matrix("matrices/serve.yaml").cases}
    family = cases["serve-bert-tiny-mean-embed-bytes-float32-big"].tolerances["float32"]
    assert {k: family.bounds()[k] for k in FLOAT32_BOUNDS} == FLOAT32_BOUNDS
    for case_id, dtype in HALF_CASES.items():
        case = cases[case_id]
        assert (case.request.serve.embed_dtype, case.dtype) == (dtype, "float32")
        bounds = case.tolerances["float32"].bounds()
        for metric, value in _derived(dtype).items():
            assert bounds[metric] == _round_up_3(value), (case_id, metric, value)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_rounding_unit_vectors_never_exceeds_the_derived_widening(dtype):
    """The widening (u / 2 per value of a unit vector, asin(u) of angle) against torch's own
    rounding of 4000 unit vectors: never exceeded, and approached (not loose by a factor)."""
    u = _unit_roundoff(dtype)
    rng = np.random.default_rng(3)
    v = rng.normal(size=(4000, 32))
    v[:100] = np.eye(32)[rng.integers(0, 32, 100)] * 0.999  # components near 1 too
    v = torch.from_numpy(v / np.linalg.norm(v, axis=1, keepdims=True)).float()
    h = v.to(getattr(torch, dtype)).double().numpy()
    v = v.double().numpy()
    err = np.abs(h - v).max()
    cos = (h * v).sum(1) / np.linalg.norm(h, axis=1) / np.linalg.norm(v, axis=1)
    turn = (1 - cos).max()
    assert 0.9 * u / 2 < err <= u / 2
    assert 0.1 * (1 - math.cos(math.asin(u))) < turn <= 1 - math.cos(math.asin(u))


# --- the runner with binary answers, from a test double of the server ---

TEXTS = ["one", "two words", "three words here"]


def _vec(text: str) -> np.ndarray:
    return np.random.default_rng(len(text)).normal(size=6).astype(np.float32)


def _encode(vector: np.ndarray, dtype: str, order: str) -> bytes:
    t = torch.from_numpy(vector).to(getattr(torch, dtype))
    if dtype == "bfloat16":
        t = t.view(torch.int16)
    arr = t.numpy()
    return arr.astype(arr.dtype.newbyteorder(ORDERS[order])).tobytes()


def _binary_server(fault: str = ""):
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if request.url.path == "/tokenize":
            return httpx.Response(200, json={"tokens": [1, 2, 3]})
        fmt, dtype, order = body["encoding_format"], body["embed_dtype"], body["endianness"]
        written = {"big": "little", "little": "big"}[order] if fault == "swapped" else order
        raw = _encode(_vec(body["input"]), dtype, written)
        said = "float32" if fault == "mislabelled" else dtype
        if fmt == "base64":
            return httpx.Response(
                200, json={"data": [{"embedding": base64.b64encode(raw).decode()}]}
            )
        meta = {
            "data": [
                {
                    "index": 0,
                    "embed_dtype": said,
                    "endianness": order,
                    "start": 0,
                    "end": len(raw) - (2 if fault == "short-span" else 0),
                    "shape": [6],
                }
            ],
            "usage": {"prompt_tokens": 3},
        }
        headers = {"metadata": json.dumps(meta)} if fmt == "bytes" else {}
        return httpx.Response(200, content=raw, headers=headers)

    return handler


def _run(options: dict, fault: str = "") -> tuple[list[np.ndarray], list[dict]]:
    """The outputs and the per-request records of one run."""
    result = served(_binary_server(fault)).run("embed", list(TEXTS), req(**options))
    return result.outputs, result.evidence.records


@pytest.mark.parametrize("fmt", ["base64", "bytes", "bytes_only"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("order", ["little", "big"])
def test_binary_answers_decode_to_the_values_the_server_rounded(fmt, dtype, order):
    got, records = _run({"encoding_format": fmt, "embed_dtype": dtype, "endianness": order})
    for text, out in zip(TEXTS, got):
        want = torch.from_numpy(_vec(text)).to(getattr(torch, dtype)).float().numpy()
        assert np.array_equal(out, want)
    usage = {m["usage_prompt_tokens"] for m in records}
    assert usage == ({3} if fmt == "bytes" else {None})


def test_a_server_writing_the_other_byte_order_gives_other_values():
    got, _ = _run(
        {"encoding_format": "bytes", "embed_dtype": "float16", "endianness": "big"}, "swapped"
    )
    assert not np.allclose(got[0], _vec(TEXTS[0]), atol=1e-2)


@pytest.mark.parametrize(
    "fault, message",
    [
        (
            "mislabelled",
            "item 0: the bytes answer says it holds float32 big-endian values; asked for float16 "
            "big-endian",
        ),
        ("short-span", "item 0: the bytes answer's metadata spans bytes 0..10 of a 12-byte body"),
    ],
)
def test_bytes_metadata_that_does_not_say_what_was_asked_is_the_servers_error(fault, message):
    with pytest.raises(ServerFailure, match=re.escape(message)):
        _run({"encoding_format": "bytes", "embed_dtype": "float16", "endianness": "big"}, fault)


def test_binary_options_need_a_binary_format_and_an_embed_case():
    with pytest.raises(ValueError, match="apply to a binary encoding_format"):
        ServeOptions(embed_dtype="float16")
    ServeOptions(encoding_format="bytes", embed_dtype="bfloat16", endianness="big")
    with pytest.raises(ValueError, match="'bytes' applies to task 'embed' only"):
        Case(
            id="c",
            family="f",
            task="classify",
            model={"source": "synthetic", "arch": "BertModel"},
            inputs="short-texts",
            runners=["hf", "vllm-serve-v1"],
            tolerances={"float32": {"max_abs": 1e-5}},
            request={"serve": {"encoding_format": "bytes"}},
        )
