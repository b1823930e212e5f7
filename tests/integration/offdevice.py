"""Run torch code "on a device" without one: the `meta` device, watched by a TorchFunctionMode.

Every torch call is checked: one that mixes tensors of two devices (a weight, a buffer, a mask or
a cos/sin table left on the host while the rest moved) raises `MixedDevices`, naming the call and
the tensors. Since meta tensors carry no data, the mode also keeps host values beside the device
tensors that come from host data (inputs moved with `.to(device)`, `torch.tensor(..., device=)`,
and what is computed from those only): data-dependent code (a `.tolist()` of an image grid, a
boolean-mask index of the input ids) sees real values. Reading data that came from weights (the
model's output) gives zeros: placement is what is checked here, not numbers.

A CUDA card behaves the same way for placement (torch refuses mixed devices there too; an index
tensor and 0-d scalars may stay on the host), so a recipe that runs clean here runs on `cuda`.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_leaves, tree_map
from torch.utils.weak import WeakTensorKeyDictionary

DEVICE = "meta"
T = torch.Tensor
# calls that hand data to the host: answered from the host values (zeros where there are none)
DATA_OUT = {
    T.item,
    T.tolist,
    T.numpy,
    T.cpu,
    T.__bool__,
    T.__int__,
    T.__float__,
    T.__index__,
    T.__len__,
    T.__iter__,
}
# calls that move or alias tensors between devices on purpose (nn.Module.to and friends)
TRANSFER = {
    torch._has_compatible_shallow_copy_type,
    T.copy_,
    T.set_,
    T.data.__set__,
    T.__setstate__,
    T.__reduce_ex__,
}


class MixedDevices(RuntimeError):
    pass


def _device_arg(args: tuple, kwargs: dict) -> torch.device | None:
    dev = kwargs.get("device")
    if dev is None:
        dev = next((a for a in args if isinstance(a, (str, torch.device))), None)
    return None if dev is None else torch.device(dev)


def _on(t, kind: str) -> bool:
    return isinstance(t, T) and t.device.type == kind


class OffDevice(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.host = WeakTensorKeyDictionary()  # device tensor -> its values, where they are known
        self.calls = 0

    def _host_of(self, t):
        return self.host.get(t) if _on(t, DEVICE) else t

    def _host_or_zeros(self, t):
        if _on(t, DEVICE):
            h = self.host.get(t)
            return h if h is not None else torch.zeros(t.shape, dtype=t.dtype)
        return t

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.calls += 1
        on_device = [t for t in tree_leaves((args, kwargs)) if _on(t, DEVICE)]
        if func in DATA_OUT and on_device:
            return func(self._host_or_zeros(args[0]), *args[1:], **kwargs)
        if func is T.to:
            return self._to(func, args, kwargs)
        if func not in TRANSFER:
            self._check_one_device(func, args, kwargs)
        try:
            out = func(*args, **kwargs)
        except (NotImplementedError, RuntimeError) as e:
            if not on_device or "meta" not in str(e):
                raise
            # an output whose shape depends on data (a boolean-mask index, repeat_interleave):
            # the shape from the host values where known, zeros elsewhere
            out = tree_map(
                lambda h: h.to(DEVICE) if isinstance(h, T) else h,
                func(*tree_map(self._host_or_zeros, args), **tree_map(self._host_or_zeros, kwargs)),
            )
        made_here = _device_arg((), kwargs)
        if (
            not on_device
            and _on(out, DEVICE)
            and made_here is not None
            and made_here.type == DEVICE
        ):
            self.host[out] = func(
                *args, **{**kwargs, "device": "cpu"}
            )  # torch.tensor/arange(..., device=)
        elif on_device and all(t in self.host for t in on_device):  # computed from host data only
            host_out = func(*tree_map(self._host_of, args), **tree_map(self._host_of, kwargs))
            for o, h in zip(tree_flatten(out)[0], tree_flatten(host_out)[0]):
                if _on(o, DEVICE) and isinstance(h, T):
                    self.host[o] = h
        return out

    def _to(self, func, args, kwargs):
        src, dev = args[0], _device_arg(args[1:], kwargs)
        if _on(src, DEVICE) and dev is not None and dev.type == "cpu":
            return func(self._host_or_zeros(src), *args[1:], **kwargs)
        out = func(*args, **kwargs)
        values = (
            None
            if isinstance(src, torch.nn.Parameter)
            else (src if _on(src, "cpu") else self.host.get(src))
        )
        if _on(out, DEVICE) and values is not None:
            self.host[out] = values.to(dtype=out.dtype)
        return out

    @staticmethod
    def _check_one_device(func, args, kwargs) -> None:
        tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, T)]
        if func is T.__getitem__:  # an index tensor on the host is moved by torch (on CUDA too)
            tensors = tensors[:1]
        devices = {t.device.type for t in tensors if t.dim() > 0}  # 0-d host scalars may mix
        if len(devices) > 1:
            what = ", ".join(f"{t.device.type}{tuple(t.shape)}" for t in tensors)
            raise MixedDevices(
                f"{getattr(func, '__qualname__', func)} got tensors on {sorted(devices)}: {what}"
            )


def left_behind(*objects) -> list[str]:
    """Parameters and buffers of the given modules (nn.Module or holders of them) not on DEVICE."""
    found = []
    for obj in objects:
        if isinstance(obj, torch.nn.Module):
            for name, t in [*obj.named_parameters(), *obj.named_buffers()]:
                if not _on(t, DEVICE):
                    found.append(f"{type(obj).__name__}.{name} on {t.device}")
    return found
