"""References into docs/ stay valid: every ``docs/NAME.md#anchor`` in the code, tests and READMEs names a
file and an anchor that exist, and nothing points at the old design note outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEARCHED = ("pytest_gauge", "tests", "eval_suites", "benchmarks", "docs")
REFERENCE = re.compile(r"docs/([a-z_]+\.md)#([a-z0-9-]+)")
OLD_NOTE = "SPEC " + "§"  # spelled in two parts so this file does not match itself


def _texts() -> dict[Path, str]:
    files = [ROOT / "README.md", ROOT / "CHANGELOG.md"]
    for folder in SEARCHED:
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".md")]
    return {p: p.read_text(encoding="utf-8") for p in files if p.is_file()}


def anchors(markdown: str) -> set[str]:
    """Explicit ``<a id="...">`` anchors and GitHub's heading slugs (lowercase, punctuation dropped,
    spaces to hyphens)."""
    found = set(re.findall(r'<a id="([^"]+)"></a>', markdown))
    for heading in re.findall(r"^#{1,6} (.+)$", markdown, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def test_heading_slugs_follow_github() -> None:
    assert anchors("## The judge protocol\n### Cost, with retries (USD)\n") == {
        "the-judge-protocol",
        "cost-with-retries-usd",
    }


def test_every_reference_into_docs_names_an_existing_anchor() -> None:
    known = {p.name: anchors(p.read_text(encoding="utf-8")) for p in (ROOT / "docs").glob("*.md")}
    broken = []
    for path, text in _texts().items():
        for name, anchor in REFERENCE.findall(text):
            if anchor not in known.get(name, set()):
                broken.append(f"{path.relative_to(ROOT)}: docs/{name}#{anchor}")
    assert not broken, "references to missing docs or anchors:\n" + "\n".join(broken)


def test_nothing_points_at_the_old_design_note() -> None:
    stale = [str(p.relative_to(ROOT)) for p, text in _texts().items() if OLD_NOTE in text]
    # the protocol's table maps the old sections to anchors; the changelog records that they were replaced
    stale = [s for s in stale if s not in ("docs/protocol.md", "CHANGELOG.md")]
    assert not stale, f"replace these {OLD_NOTE}N references by links into docs/protocol.md: {stale}"
