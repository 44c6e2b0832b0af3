"""Model judges: checks that need interpretation, graded by a model against a rubric."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Judge:
    rubric: str
    model: str | None = None
    name: str | None = None
    threshold: float = 0.5

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        first_line = self.rubric.strip().splitlines()[0] if self.rubric.strip() else "judge"
        return first_line if len(first_line) <= 80 else first_line[:77] + "…"


def judge(
    rubric: str, *, model: str | None = None, name: str | None = None, threshold: float = 0.5
) -> Judge:
    """A check a model grades: passes when its score reaches ``threshold`` (0 to 1) and it says
    the answer passes. Usable alone or in a ``validate`` list beside validators."""
    return Judge(rubric=rubric, model=model, name=name, threshold=threshold)
