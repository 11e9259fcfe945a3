"""conclusion.md's "The judge against people" section (``--gauge-labels``): the blind human labels against
each judge model's verdicts and the panel's, against the rules and between labellers, with the labels
that named no case of the run (docs/protocol.md#human-labels)."""

from __future__ import annotations

from ..analysis.human import HumanFindings
from ..analysis.judge_rules import PANEL, PRIMARY
from .common import ReportContext
from .format import estimate_cells, md_code, md_table

__all__ = ["human_section"]

_HEADER = ["compared with the labels", "agreement", "n", "95% interval", "kappa", "95% interval"]
_LISTED = 10


def _who(name: str) -> str:
    return "main verdict" if name == PRIMARY else "panel majority" if name == PANEL else f"`{name}`"


def _rows(h: HumanFindings) -> list[list[str]]:
    order = [PRIMARY, *sorted(w for w in h.agreement if w not in (PRIMARY, PANEL))]
    order += [PANEL] if PANEL in h.agreement else []
    rows = []
    for who in order:
        agree, kappa = estimate_cells(h.agreement[who]), estimate_cells(h.kappa[who])
        rows.append([_who(who), *agree, kappa[0], kappa[2]])
    rows.append(["the rules' higher-reward slot", *estimate_cells(h.rules), "", ""])
    if h.labeller_agreement.n:
        lab, kap = estimate_cells(h.labeller_agreement), estimate_cells(h.labeller_kappa)
        rows.append(["another labeller (cases with two or more)", *lab, kap[0], kap[2]])
    return rows


def human_section(ctx: ReportContext) -> list[str]:
    """The section's lines; none without ``--gauge-labels``."""
    h = ctx.metrics.human
    if h is None:
        return []
    who = ", ".join(md_code(x) for x in h.labellers) or "nobody"
    lines = [
        "## The judge against people",
        "",
        f"{h.labels} blind labels (A, B or tie, as the judge saw the slots) of {h.cases} cases by {who}. "
        "Each case counts once, weighted by the labelling sample (`labels sample`) so the figures stand "
        "for the whole suite; agreement intervals are cluster-adjusted over tasks, kappa's a task "
        "jackknife. Gate on them with `lower(human_judge_agreement) >= 0.8` or "
        "`human_judge_kappa(MODEL)`.",
        "",
    ]
    lines += md_table(_HEADER, _rows(h), "lrrlrl")
    if h.unknown:
        shown = ", ".join(md_code(c) for c in h.unknown[:_LISTED])
        more = f" and {len(h.unknown) - _LISTED} more" if len(h.unknown) > _LISTED else ""
        cases = "case" if len(h.unknown) == 1 else "cases"
        lines += ["", f"Labels of {len(h.unknown)} {cases} not in this run were ignored: {shown}{more}."]
    if h.set_aside:
        labels = "label was" if h.set_aside == 1 else "labels were"
        lines += [
            "",
            f"{h.set_aside} {labels} set aside: given on transcripts that have since changed (the label"
            " names the transcripts' hash); label those cases again.",
        ]
    return lines
