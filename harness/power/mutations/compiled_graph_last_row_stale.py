"""A compiled model hands back the previous step's hidden state for a batch's last token."""

# the compiled path only: vLLM's torch.compile wrapper (support_torch_compile's __call__) when the
# model is compiled. Eager engines (every run of the default matrix, the harness's CPU default)
# never reach it; the `compiled` check (enforce_eager off) does. Shaped like vllm#48901
# (chunked-prefill scores wrong under compile): state the compiled graph keeps across steps
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "chunked-prefill/prefix-cache state"
REPLAYS = None
MODULE = "vllm.compilation.decorators"
FILES = ["vllm/compilation/decorators.py", "vllm/compilation/wrapper.py"]
CASES = ["qwen3-tiny-lasttoken-embed-modes"]
MATRIX = "matrices/extended.yaml"  # its checks are too slow for the default matrix


def apply(module):
    original = module._support_torch_compile

    def _support_torch_compile(cls, *args, **kwargs):
        cls = original(cls, *args, **kwargs)
        call = cls.__call__

        def __call__(self, *a, **kw):
            out = call(self, *a, **kw)
            if getattr(self, "do_not_compile", True) or not hasattr(out, "shape"):
                return out
            kept = getattr(self, "_parity_last_row", None)
            self._parity_last_row = out[-1].clone()
            if kept is not None and kept.shape == out[-1].shape:
                out = out.clone()
                out[-1] = kept
            return out

        cls.__call__ = __call__
        return cls

    module._support_torch_compile = _support_torch_compile
