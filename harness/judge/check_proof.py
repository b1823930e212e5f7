"""What a derived invariance case's check says of a run (harness.judge.verdict asks here; each
check's own proof is in harness.matrix.checks.CHECKS): why its mode cannot run where it ran, or
why its engine feature was not in effect."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.matrix.schema import Case


def check_unavailable(case: "Case", info: dict) -> str | None:
    """For a derived invariance case: why vLLM cannot run its mode where it ran (a skip with that
    reason, e.g. async scheduling, which vLLM's CPU platform always turns off), else None."""
    if case.check is None:
        return None
    from harness.matrix.checks import CHECKS
    from harness.matrix.proofs import Evidence

    check = CHECKS.get(case.check)
    if check is None or check.unavailable is None:
        return None
    return check.unavailable(Evidence.of(case.check, info))


def check_not_in_effect(case: "Case", info: dict) -> str | None:
    """For a derived invariance case (`<id>@<check>`): why the engine feature it exercises was not
    in effect, from what the runner reported (`info`). Every derived case must prove its check;
    what proves each one is the check's own (harness.matrix.checks.CHECKS). A check that did not
    take effect, or whose effect could not be read, proves nothing: an error."""
    if case.check is None:
        return None
    from harness.matrix.checks import CHECKS
    from harness.matrix.proofs import Evidence

    check = CHECKS.get(case.check)
    if check is None:
        return f"invariance check {case.check} is unknown; valid: {', '.join(CHECKS)}"
    return check.proof(Evidence.of(case.check, info))
