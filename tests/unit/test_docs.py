"""The docs stay honest: every ``docs/NAME.md#anchor`` (and ``README.md#`` / ``CONTRIBUTING.md#``) in the
code, tests and docs names a file and an anchor that exist, every link of README.md, CONTRIBUTING.md and
docs/*.md resolves (file and anchor), every shell command of the README is one that works here (real
flags, real commands, real extras, what ``.ci/run`` runs), its Python parses, and nothing points at the
old design note outside the repository."""

from __future__ import annotations

import ast
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from pytest_gauge._internal.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
SEARCHED = ("pytest_gauge", "tests", "eval_suites", "benchmarks", "docs")
REFERENCE = re.compile(r"((?:docs/)?[a-z_]+\.md|README\.md|CONTRIBUTING\.md)#([a-z0-9_-]+)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
PAGES = ["README.md", "CONTRIBUTING.md", *(f"docs/{p.name}" for p in sorted((ROOT / "docs").glob("*.md")))]
OLD_NOTE = "SPEC " + "§"  # spelled in two parts so this file does not match itself


def _texts() -> dict[Path, str]:
    files = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "CONTRIBUTING.md"]
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


def _known_anchors() -> dict[str, set[str]]:
    """Anchors of every page, keyed by its path from the repository root (``docs/guide.md``)."""
    return {page: anchors((ROOT / page).read_text(encoding="utf-8")) for page in PAGES}


def test_every_reference_into_docs_names_an_existing_anchor() -> None:
    """Anchors into docs/NAME.md, README.md and CONTRIBUTING.md named in code, tests and docs; a bare
    page name with an anchor (a docstring naming a page of docs/) is a page of docs/."""
    known = _known_anchors()
    broken = []
    for path, text in _texts().items():
        if path.suffix == ".md" and str(path.relative_to(ROOT)) in PAGES:
            continue  # the pages' own links are resolved relative to them below
        for name, anchor in REFERENCE.findall(text):
            page = (
                name
                if name.startswith("docs/") or name in ("README.md", "CONTRIBUTING.md")
                else f"docs/{name}"
            )
            if anchor not in known.get(page, set()):
                broken.append(f"{path.relative_to(ROOT)}: {name}#{anchor}")
    assert not broken, "references to missing docs or anchors:\n" + "\n".join(broken)


def _prose(markdown: str) -> str:
    """The text outside fenced code blocks and inline code spans."""
    text = "\n".join(part for i, part in enumerate(re.split(r"^```.*$", markdown, flags=re.M)) if i % 2 == 0)
    return re.sub(r"`[^`\n]*`", "", text)


def test_every_link_of_the_pages_resolves() -> None:
    """Each ``[text](target)`` of README.md, CONTRIBUTING.md and docs/*.md: the file exists (relative to
    the page) and, for a Markdown page, so does the anchor (``#anchor`` alone is the page itself)."""
    known = _known_anchors()
    broken = []
    for page in PAGES:
        here = (ROOT / page).parent
        for target in LINK.findall(_prose((ROOT / page).read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            file, _, anchor = target.partition("#")
            resolved = (here / file).resolve() if file else ROOT / page
            if not resolved.exists():
                broken.append(f"{page}: {target} (no such file)")
                continue
            name = str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else ""
            if anchor and anchor not in known.get(name, set()):
                broken.append(f"{page}: {target} (no such anchor)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def _blocks(markdown: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", markdown, flags=re.M | re.S)


def _readme_commands() -> list[list[str]]:
    """Every command of the README's shell blocks, split into words (comments dropped, ``&&`` split)."""
    commands: list[list[str]] = []
    for block in _blocks((ROOT / "README.md").read_text(encoding="utf-8"), "bash"):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            while "&&" in words:
                cut = words.index("&&")
                commands.append(words[:cut])
                words = words[cut + 1 :]
            if words:
                commands.append(words)
    return commands


def _pytest_problems(config: pytest.Config, args: list[str]) -> list[str]:
    try:
        parsed, unknown = config._parser.parse_known_and_unknown_args(args)
    except pytest.UsageError as error:
        return [str(error)]
    paths: list[str] = getattr(parsed, "file_or_dir", [])
    problems = [f"unknown flag {word}" for word in unknown if word.startswith("-")]
    return problems + [f"no such path {path}" for path in paths if not (ROOT / path).exists()]


def _command_problems(config: pytest.Config, words: list[str]) -> list[str]:
    """What is wrong with one README command here (empty: nothing)."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    if words[:3] == ["pip", "install", "-e"]:
        target = words[3] if len(words) > 3 else ""
        extra = re.fullmatch(r"\.(?:\[(\w+)\])?", target)
        ok = extra is not None and (
            extra.group(1) is None or extra.group(1) in extras["optional-dependencies"]
        )
        return [] if ok else [f"no such install target {target}"]
    if words[0] == "pytest":
        return _pytest_problems(config, words[1:])
    if words[:3] == ["python", "-m", "pytest_gauge"]:
        try:
            build_parser().parse_args(words[3:])
        except SystemExit:
            return ["python -m pytest_gauge refuses these arguments"]
        return []
    if words[0] == "export":
        name = words[1].split("=")[0]
        sources = [p.read_text(encoding="utf-8") for p in (ROOT / "pytest_gauge").rglob("*.py")]
        sources += [p.read_text(encoding="utf-8") for p in (ROOT / "eval_suites").rglob("*.py")]
        return [] if any(name in s for s in sources) else [f"{name} is read by no code"]
    return [f"not a command this check knows: {words[0]}"]


def test_every_readme_command_works_here(pytestconfig: pytest.Config) -> None:
    """The README's shell commands name real flags (with valid values), subcommands, extras, paths and
    variables; its test command is the one ``.ci/run`` runs."""
    commands = _readme_commands()
    assert ["pytest", "eval_suites/"] in commands and ["pytest", "-n", "auto"] in commands
    broken = [f"{shlex.join(c)}: {p}" for c in commands for p in _command_problems(pytestconfig, c)]
    assert not broken, "README commands that would not work:\n" + "\n".join(broken)
    assert "pip install -e '.[test]' && pytest -n auto" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_readme_python_parses() -> None:
    for block in _blocks((ROOT / "README.md").read_text(encoding="utf-8"), "python"):
        ast.parse(block)


def test_nothing_points_at_the_old_design_note() -> None:
    stale = [str(p.relative_to(ROOT)) for p, text in _texts().items() if OLD_NOTE in text]
    # the protocol's table maps the old sections to anchors; the changelog records that they were replaced
    stale = [s for s in stale if s not in ("docs/protocol.md", "CHANGELOG.md")]
    assert not stale, f"replace these {OLD_NOTE}N references by links into docs/protocol.md: {stale}"


def test_no_issue_numbers_in_the_package_tests_or_docs() -> None:
    """A newcomer cannot look up a tracker number: code, tests, docs and the changelog say what and why."""
    number = re.compile(r"\b" + "issue" + r"s? #?\d+", re.I)  # spelled apart so this file does not match
    texts = _texts()
    for name in ("pyproject.toml", ".ci/run", "conftest.py"):
        texts[ROOT / name] = (ROOT / name).read_text(encoding="utf-8")
    found = [
        f"{p.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group()}"
        for p, text in texts.items()
        for m in number.finditer(text)
    ]
    assert not found, "say what and why instead of a tracker number:\n" + "\n".join(found)


def test_the_reference_names_every_metric_of_the_one_table() -> None:
    """docs/reference.md#metrics documents every metric a gate may name (analysis/metric_table.py)."""
    from pytest_gauge._internal.analysis.metric_table import METRICS

    text = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    section = text[text.index("## Metrics") : text.index("## Outputs")]
    missing = [m.name for m in METRICS if not re.search(rf"`{m.name}[`(]", section)]
    assert not missing, f"add these metrics to docs/reference.md#metrics: {missing}"


PROTOCOL_PAGES = (
    "protocol",
    "judging",
    "metrics",
    "gates",
    "reproducibility",
    "costs",
    "programs",
    "gateway",
)
PAGE_LIMIT = 30_000


def test_the_protocol_pages_stay_focused() -> None:
    """The protocol is a front page and one page per part, each at most 30 KB, so that a reader finds a
    section without scrolling through the whole reasoning."""
    sizes = {name: len((ROOT / "docs" / f"{name}.md").read_bytes()) for name in PROTOCOL_PAGES}
    assert {name: size for name, size in sizes.items() if size > PAGE_LIMIT} == {}


def test_the_protocol_front_page_keeps_every_anchor_of_its_pages() -> None:
    """Reports and code cite anchors of the front page (``protocol.md`` and an anchor); every section
    anchor of a part's page stays on the front page, leading to it."""
    front = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    explicit = set(re.findall(r'<a id="([^"]+)"></a>', front))
    missing = {
        f"{name}.md#{anchor}"
        for name in PROTOCOL_PAGES[1:]
        for anchor in re.findall(
            r'<a id="([^"]+)"></a>', (ROOT / "docs" / f"{name}.md").read_text(encoding="utf-8")
        )
        if anchor not in explicit
    }
    assert missing == set()
