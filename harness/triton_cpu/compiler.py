from triton.backends.compiler import BaseBackend


class InterpreterOnlyBackend(BaseBackend):
    """Claims the `cpu` target; refuses to compile because kernels must be interpreted."""

    @staticmethod
    def supports_target(target):
        return target.backend == "cpu"

    def hash(self) -> str:
        return "parity-harness-interpreter-only"

    def parse_options(self, options):
        raise RuntimeError("parity-harness cpu backend: set TRITON_INTERPRET=1; nothing compiles")

    def add_stages(self, stages, options, language):
        raise RuntimeError("parity-harness cpu backend: set TRITON_INTERPRET=1; nothing compiles")

    def load_dialects(self, context):
        return None

    def get_module_map(self):
        return {}
