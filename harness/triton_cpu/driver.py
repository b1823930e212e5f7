from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase


class InterpreterDriver(DriverBase):
    """Always active, so vLLM's CPU build counts Triton as present."""

    @classmethod
    def is_active(cls):
        return True

    def map_python_to_cpp_type(self, ty: str) -> str:
        raise RuntimeError("parity-harness cpu driver: interpreter only")

    def get_current_target(self):
        return GPUTarget("cpu", 0, 0)

    def get_active_torch_device(self):
        import torch

        return torch.device("cpu")

    def get_benchmarker(self):
        raise RuntimeError("parity-harness cpu driver: interpreter only")
