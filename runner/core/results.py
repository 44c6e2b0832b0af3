"""What checks and consultations produce, read by the layers above that make them (grading, the
llm client, the workspace's prepare) and by the recorder interface that reports them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Output kept per command check; long test logs are cut in the middle.
MAX_OUTPUT_CHARS = 64_000


@dataclass(frozen=True)
class ExecResult:
    exit_code: int | None
    output: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass
class CheckResult:
    name: str
    kind: str
    passed: bool
    message: str = ""
    score: float | None = None
    output: str = ""
    source_ref: dict[str, Any] = field(default_factory=dict)
    duration_ms: int = 0
    weight: float | None = None  # assertions only
    metric: str = ""


def clip(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n… [{len(text) - limit} characters cut] …\n{text[-half:]}"


@dataclass
class ConsultationRecord:
    """One call of a judge, the responder or a simulated user, as kept for auditing.

    ``verdict`` is what the caller concluded (a judge's ``passed``/``failed``, the responder's
    ``answer``/``done``/``cannot_answer``); ``cause`` names why no usable verdict came, when
    none did. Mirrors evals_app's Consultation model.
    """

    kind: str  # judge | responder | simulated_user
    prompt: list[dict[str, Any]]
    answer: str
    verdict: str
    reason: str
    cause: str
    model: str
    duration_ms: int
    turn_index: int | None = None
    check_index: int | None = None
    # The tokens the call used, as the endpoint reported them (input_tokens, output_tokens).
    usage: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
