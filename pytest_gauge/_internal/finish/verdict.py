"""What a run's gates mean for its exit, the same for the end of a run and for ``merge``: each gate's
outcome (a skipped gate fails under CI unless allowed: no silent green), and the summary appended to
GitHub's step summary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..analysis.gates import GateResult, fails_run

__all__ = ["SKIPPED_IN_CI", "append_step_summary", "ci_active", "gate_outcome"]

SKIPPED_IN_CI = (
    "a skipped gate fails a CI run (CI is set): no silent green. Run every case of the suite, split the"
    " suite with --gauge-shard I/N and gate with 'python -m pytest_gauge merge', or pass"
    " --gauge-allow-skipped-gates"
)


def ci_active(environ: Mapping[str, str]) -> bool:
    """Whether this is a CI run: the ``CI`` variable set (GitHub Actions, GitLab, most others set
    ``CI=true``) and not explicitly off."""
    return environ.get("CI", "").strip().lower() not in ("", "0", "false", "no", "off")


def gate_outcome(result: GateResult, *, strict_skips: bool) -> tuple[str, str]:
    """A gate's test outcome (``passed`` / ``failed`` / ``skipped``) and message; with ``strict_skips``
    (CI, skipped gates not allowed) a skipped gate fails, saying why."""
    if result.status == "skipped":
        if strict_skips:
            return "failed", f"{result.message}\n{SKIPPED_IN_CI}"
        return "skipped", result.message
    return ("failed" if fails_run(result) else "passed"), result.message


def append_step_summary(environ: Mapping[str, str], texts: Sequence[str]) -> None:
    """Append the suites' summaries to ``GITHUB_STEP_SUMMARY`` when it is set (other steps' text stays)."""
    path = environ.get("GITHUB_STEP_SUMMARY")
    if path and texts:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write("\n\n".join(texts) + "\n")
