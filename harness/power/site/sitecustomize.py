"""Site hook of `parity power`: with PARITY_MUTATION=<name> set, patch vLLM in this process.

The power runner puts this folder first on PYTHONPATH, so every process of a run (the vLLM
worker and its in-process engine core, `vllm serve` and the engine-core process it spawns) runs
it at start-up. It loads ../hook.py by path and installs the mutation's import hook, then runs
the sitecustomize this one shadows, if the interpreter has one further down sys.path.
"""

import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _install_hook() -> None:
    if not os.environ.get("PARITY_MUTATION"):
        return
    path = os.path.join(os.path.dirname(_HERE), "hook.py")
    spec = importlib.util.spec_from_file_location("_parity_power_hook", path)
    hook = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = hook
    spec.loader.exec_module(hook)
    hook.install()


def _chain() -> None:
    """Run the next sitecustomize on sys.path (ours shadows it), under its own name."""
    from importlib.machinery import PathFinder

    rest = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]
    spec = PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.origin == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


try:
    _install_hook()
except (
    Exception
) as e:  # never break the interpreter: say so and let the run show the mutation missing
    sys.stderr.write(f"[parity-power] hook not installed: {type(e).__name__}: {e}\n")
_chain()
