"""One run's side of a baseline comparison, as the comparison reads it and a baseline file stores it:
each transcript's outcome, the tasks, the records, the costs per task and where each transcript is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from . import CaseRecord

__all__ = ["Outcome", "RunSide", "Unit", "outcomes_from_records", "setup_of"]


@dataclass(frozen=True)
class Outcome:
    """One transcript's rule verdict: task success and reward."""

    success: bool
    reward: float


Unit = tuple[str, str, int]  # (task_id, agent, sample)


@dataclass(frozen=True)
class RunSide:
    """What one run contributes to a comparison. ``models``/``prompts`` are the manifest's
    ``agent:<name>`` model names and ``prompt:agent:<name>`` hashes; ``task_costs`` the nominal cost of
    every call of a task (None: unknown); ``links`` where each transcript is (a relative link)."""

    suite: str
    tasks: tuple[str, ...]
    records: tuple[CaseRecord, ...]
    outcomes: Mapping[Unit, Outcome]
    task_costs: Mapping[str, float | None]
    models: Mapping[str, str] = field(default_factory=dict)
    prompts: Mapping[str, str] = field(default_factory=dict)
    links: Mapping[Unit, str] = field(default_factory=dict)
    setup: Mapping[str, str] = field(default_factory=dict)  # what is not an agent: see ``setup_of``

    def agents(self) -> list[str]:
        """The agents with at least one transcript, sorted."""
        return sorted({a for _, a, _ in self.outcomes})


def setup_of(manifest: Mapping[str, object]) -> dict[str, str]:
    """What a comparison must hold fixed besides the agents, by name: the judge's and user simulator's
    models (``judge:0 model``), their prompts (hashes), the judge's and user simulator's settings."""
    models = manifest.get("models")
    hashes = manifest.get("hashes")
    settings = manifest.get("settings")
    out: dict[str, str] = {}
    if isinstance(models, Mapping):
        out |= {f"{k} model": str(v) for k, v in models.items() if not str(k).startswith("agent:")}
    if isinstance(hashes, Mapping):
        prompts = {"judge_prompt": "judge prompt", "prompt:user_sim_extra": "user_sim prompt"}
        out |= {name: str(hashes[k]) for k, name in prompts.items() if k in hashes}
    if isinstance(settings, Mapping):
        out |= {str(k): str(v) for k, v in settings.items()}
    return out


def outcomes_from_records(records: Sequence[CaseRecord]) -> dict[Unit, Outcome]:
    """Each transcript's success and reward, read off the judged cases that used it."""
    out: dict[Unit, Outcome] = {}
    for r in records:
        out.setdefault((r.task_id, r.agent_left, r.sample), Outcome(r.task_success_left, r.reward_left))
        out.setdefault((r.task_id, r.agent_right, r.sample), Outcome(r.task_success_right, r.reward_right))
    return out
