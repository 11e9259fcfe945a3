"""Every value checked against what the run can finish with, before the first call: each numeric flag and
ini key driven with 0, a negative, nan, inf, 1e9 and 1e308, and each JSON input (tasks, labels, prices,
a baseline manifest, a cache entry) with depth, size, duplicate-key and type fuzz. A value outside its
bounds is one usage line naming it; none ends in an INTERNALERROR, before the calls or after them."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_gauge.testing import LoopbackServer
from tests.helpers import run_inprocess

EXTREMES = ("0", "-1", "nan", "inf", "1000000000", "1e308")

ACCEPTED = {
    "seed": ("0", "1000000000"),
    "timeout": (),
    "max-retries": ("0",),
    "max-concurrency": (),
    "max-timeouts": ("0", "1000000000"),
    "retry-after-cap": (),
    "close-threshold": ("0",),
    "budget-usd": ("1000000000",),
    "budget-tokens": ("1000000000",),
    "budget-task-usd": ("1000000000",),
    "bootstrap-rounds": (),
    "rpm": ("1000000000",),
    "tpm": ("1000000000",),
    "adaptive-look": ("1000000000",),
}
"""Which extremes each numeric flag takes (a run can finish with them): the shared run uses the last."""


def _clean(result: pytest.RunResult) -> str:
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text, text[-3000:]
    return text


def _refused(result: pytest.RunResult, name: str, value: str) -> bool:
    """Whether the run refused ``value`` as a usage error naming ``name`` and the value (else it ran)."""
    text = _clean(result)
    if result.ret == pytest.ExitCode.USAGE_ERROR:
        lines = [line for line in result.stderr.str().splitlines() if name in line]
        assert lines and any(value in line or f"{float(value):,.0f}" in line for line in lines), text
        return True
    assert result.ret == pytest.ExitCode.OK, text[-3000:]
    return False


@pytest.mark.usefixtures("mini_suite")
@pytest.mark.parametrize("flag", sorted(ACCEPTED))
def test_every_numeric_flag_takes_its_extremes_or_names_the_limit(
    pytester: pytest.Pytester, flag: str
) -> None:
    taken = []
    for value in EXTREMES:
        result = run_inprocess(pytester, "suites", "--collect-only", "-q", f"--gauge-{flag}", value)
        if not _refused(result, f"--gauge-{flag}", value):
            taken.append(value)
    assert tuple(taken) == ACCEPTED[flag]


@pytest.mark.usefixtures("mini_suite")
@pytest.mark.parametrize("flag", sorted(ACCEPTED))
def test_every_numeric_ini_key_takes_its_extremes_or_names_the_limit(
    pytester: pytest.Pytester, flag: str
) -> None:
    key = "gauge_" + flag.replace("-", "_")
    taken = []
    for value in EXTREMES:
        pytester.makeini(f"[pytest]\ngauge_backend = sim\n{key} = {value}\n")
        result = run_inprocess(pytester, "suites", "--collect-only", "-q")
        if not _refused(result, key, value):
            taken.append(value)
    assert tuple(taken) == ACCEPTED[flag]


@pytest.mark.usefixtures("mini_suite")
def test_a_run_with_every_accepted_extreme_ends_with_its_reports(pytester: pytest.Pytester) -> None:
    """The extremes a run takes, all at once (the calls made, then the analysis and the reports)."""
    args = [a for flag, values in ACCEPTED.items() if values for a in (f"--gauge-{flag}", values[-1])]
    result = run_inprocess(pytester, "suites", "--gauge-out", "out", *args)
    _clean(result)
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    assert (pytester.path / "out" / "mini" / "reports" / "metrics.json").is_file()


def test_bootstrap_rounds_past_the_memory_are_refused_with_the_memory_they_need(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    result = run_inprocess(pytester, "suites", "--gauge-bootstrap-rounds", "1000000000")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = _clean(result)
    assert (
        "--gauge-bootstrap-rounds (gauge_bootstrap_rounds) 1,000,000,000: resampling 1 task(s) would" in err
    )
    assert "GiB" in err and "give at most" in err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--gauge-out", "/proc/forbidden"), "--gauge-out /proc/forbidden: cannot be created"),
        (("--gauge-cache-dir", "/proc/forbidden"), "--gauge-cache-dir /proc/forbidden: cannot be created"),
        (("--gauge-backend", "replay", "--gauge-cassettes", "/nonexistent"), "/nonexistent: no such folder"),
    ],
)
def test_a_folder_that_cannot_be_one_is_one_line(
    pytester: pytest.Pytester, mini_suite: Path, args: tuple[str, ...], says: str
) -> None:
    result = run_inprocess(pytester, "suites", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    _clean(result)
    assert says in result.stderr.str()
    assert len(result.stderr.str().strip().splitlines()) == 1
    assert not (pytester.path / "gauge-out").exists()  # nothing made by a run that did not start


# ----- JSON inputs ---------------------------------------------------------------------------


@pytest.fixture
def server(mini_suite: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        monkeypatch.setenv("TAOTOKEN_API_KEY", "sk-extremes-0123456789")
        monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
        yield srv


DEEP = "[" * 100_000 + "]" * 100_000
LABEL = {"suite": "mini", "case_id": "m01-agent_x-vs-agent_y-AB", "label": "A", "labeller": "ann"}


def _labels(path: Path, text: str) -> list[str]:
    path.write_text(text, encoding="utf-8")
    return ["--gauge-labels", str(path)]


def _labels_big(path: Path, _text: str) -> list[str]:
    line = json.dumps(LABEL) + "\n"
    with path.open("w", encoding="utf-8") as fh:
        fh.write(line * (17 * 2**20 // len(line) + 1))
    return ["--gauge-labels", str(path)]


def _prices(path: Path, text: str) -> list[str]:
    path = path.with_suffix(".json")
    path.write_text(text, encoding="utf-8")
    return ["--gauge-prices", str(path)]


def _tasks(path: Path, text: str) -> list[str]:
    tasks = path.parent / "suites" / "mini" / "tasks.jsonl"
    tasks.write_text(tasks.read_text(encoding="utf-8") + text + "\n", encoding="utf-8")
    return []


Make = Callable[[Path, str], list[str]]

INPUTS: list[tuple[Make, str, str]] = [
    (_labels, DEEP, "nested more than 64 levels deep"),
    (
        _labels,
        json.dumps({**LABEL, "weight": 1e308}),
        "field 'weight' must be a number above 0 to 1,000,000,000",
    ),
    (_labels, json.dumps({**LABEL, "weight": "heavy"}), "field 'weight'"),
    (_labels, json.dumps(LABEL)[:-1] + ', "label": "B"}', "the key 'label' appears twice"),
    (_labels, "[1, 2]", "not a JSON object"),
    (_labels_big, "", "MiB, more than the 16 MiB accepted"),
    (_prices, DEEP, "prices file"),
    (_prices, '{"prices": [1, 2]}', "'prices' must be a table of models"),
    (_prices, '{"sim-judge": {"input": 1e308, "output": 1}}', "from 0 to 1,000,000 per million tokens"),
    (_prices, '{"sim-judge": {"input": "1", "output": 1}}', "from 0 to 1,000,000 per million tokens"),
    (_tasks, DEEP, "nested more than 64 levels deep"),
    (_tasks, '{"task_id": "m09", "task_id": "m10"}', "the key 'task_id' appears twice"),
    (_tasks, '{"task_id": 9, "category": "refusal", "task_prompt": "x", "success_criteria": []}', "task_id"),
]


@pytest.mark.parametrize(
    ("make", "text", "says"), INPUTS, ids=[f"{m.__name__}-{s[:24]}" for m, _, s in INPUTS]
)
def test_a_hostile_json_input_is_one_line_before_any_request(
    pytester: pytest.Pytester, server: LoopbackServer, make: Make, text: str, says: str
) -> None:
    args = make(pytester.path / "given.jsonl", text)
    result = run_inprocess(pytester, "suites", "--gauge-backend", "live", *args)
    text_out = _clean(result)
    assert result.ret in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERRUPTED), text_out[-2000:]
    assert says in text_out, text_out[-2000:]
    assert server.requests_total == 0


@pytest.fixture(scope="module")
def kept_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("extreme-baseline") / "base"


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("models", ["sim-agent-x"], "'models' is list, not an object"),
        ("hashes", "abc", "'hashes' is str, not an object"),
        ("seed", "seven", "'seed' is str"),
        ("cases_recorded", [1], "'cases_recorded' is list"),
        ("run_id", {"a": 1}, "'run_id' is dict"),
        ("versions", DEEP, "nested more than 64 levels deep"),
    ],
)
def test_a_baseline_manifest_of_the_wrong_types_is_one_line_before_any_request(
    pytester: pytest.Pytester, server: LoopbackServer, kept_base: Path, field: str, value: object, says: str
) -> None:
    if not kept_base.is_dir():
        made = run_inprocess(pytester, "suites", "--gauge-backend", "sim", "--gauge-out", str(kept_base))
        assert made.ret == 0
    base = pytester.path / "base"
    shutil.copytree(kept_base, base)
    path = base / "mini" / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest[field] = value
    text = json.dumps(manifest)
    if value == DEEP:
        text = text.replace(json.dumps(DEEP), DEEP)
    path.write_text(text, encoding="utf-8")
    result = run_inprocess(pytester, "suites", "--gauge-backend", "live", "--gauge-baseline", str(base))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert says in _clean(result), result.stderr.str()
    assert server.requests_total == 0
