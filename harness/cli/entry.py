"""`parity`'s entry point: parse, run the command in the environment of the vLLM under test
(harness.cli.launch), and turn every error into its exit code with a clear message (one
catch-all: a bug of the harness is said to be one, with where to look, never a bare traceback)."""

from __future__ import annotations

import argparse
import json
import sys
import traceback

from pydantic import ValidationError
from rich.markup import escape

from harness.cli.common import UsageError, check_settings, err
from harness.cli.launch import here_or_launch, resolve
from harness.cli.parser import build_parser
from harness.settings import current

# commands that run an engine: each runs in the environment of its --vllm
ENGINE_COMMANDS = ("run", "golden", "mteb", "models", "select", "power", "check")
DEBUG_ENV = "PARITY_DEBUG"


def _command(name: str):
    """The function of a command (imported when called: a command's imports are its own)."""
    if name == "run":
        from harness.cli.run import cmd_run as f
    elif name == "select":
        from harness.cli.run import cmd_select as f
    elif name == "check":
        from harness.cli.check import cmd_check as f
    elif name == "branch":
        from harness.cli.branch import cmd_branch as f
    elif name == "report":
        from harness.cli.report import cmd_report as f
    else:
        from harness.cli import other

        f = getattr(other, f"cmd_{name}")
    return f


def _power(argv: list[str]) -> int:
    """`parity power ...` (its own parser, harness/power/cli.py), in its --vllm's environment."""
    spec_text = None
    for i, a in enumerate(argv):
        if a == "--vllm" and i + 1 < len(argv):
            spec_text = argv[i + 1]
            argv = argv[:i] + argv[i + 2 :]
            break
    code = here_or_launch(resolve(spec_text), ["power", *argv], "power")
    if code is not None:
        return code
    from harness.power.cli import main as power_main

    return power_main(argv)


def dispatch(argv: list[str]) -> int:
    check_settings()
    if argv[:1] == ["power"]:
        return _power(argv[1:])
    args = build_parser().parse_args(argv)
    if args.command == "check" and args.vllm and len(args.vllm) > 1:
        from harness.cli.check import cmd_check_several

        return cmd_check_several(args, argv)
    if args.command in ENGINE_COMMANDS:
        text = getattr(args, "vllm", None)
        text = text[0] if isinstance(text, list) else text
        code = here_or_launch(resolve(text), argv, args.command)
        if code is not None:
            return code
    # a command added by its own package sets its function itself (e.g. `parity repro`)
    func = args.func if callable(args.func) else _command(args.func)
    from harness.run import interrupt

    with interrupt.handling():  # SIGINT/SIGTERM: stop every process, keep what was obtained
        return func(args)


def main(argv: list[str] | None = None) -> int:
    from harness.engine.target import EngineSpecError
    from harness.matrix.schema import MatrixError
    from harness.select.rows import SelectionError
    from harness.select.vllm_source import SourceError

    argv = sys.argv[1:] if argv is None else argv
    try:
        return dispatch(argv)
    except MatrixError as e:
        err.print(f"[bold red]matrix error[/]\n{escape(str(e))}", highlight=False, soft_wrap=True)
    except (SelectionError, SourceError) as e:
        err.print(
            f"[bold red]cannot select by change:[/] {escape(str(e))}",
            highlight=False,
            soft_wrap=True,
        )
    except (UsageError, EngineSpecError) as e:
        err.print(f"[bold red]parity:[/] {escape(str(e))}", highlight=False, soft_wrap=True)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError) as e:
        err.print(f"[bold red]parity:[/] {escape(str(e))}", highlight=False, soft_wrap=True)
    except (json.JSONDecodeError, ValidationError) as e:
        err.print(
            f"[bold red]parity: unreadable input:[/] {escape(str(e))}",
            highlight=False,
            soft_wrap=True,
        )
    except KeyboardInterrupt:
        err.print("parity: interrupted")
        return 130
    except Exception as e:  # the one catch-all: a bug of the harness, said to be one
        if current().debug:
            traceback.print_exc()
        where = traceback.extract_tb(e.__traceback__)[-1]
        err.print(
            f"[bold red]parity: internal error[/] {type(e).__name__}: {escape(str(e))} "
            f"(at {where.filename}:{where.lineno}; {DEBUG_ENV}=1 prints the traceback). "
            "This is a bug of the harness: please report it.",
            highlight=False,
        )
        return 1
    return 2


def namespace(argv: list[str]) -> argparse.Namespace:
    """ARGV parsed as `parity` parses it (for tests and tools)."""
    return build_parser().parse_args(argv)
