"""The trial spec: everything a worker needs to run one trial, as one JSON value.

The catalog writes a run's part (``RunCode`` plus the variant and limits) into ``Run.spec`` when
the batch is recorded; a worker reads it back with the trial's id and index, unpacks the bundles
it names and runs the trial from them. Nothing in it is a secret: model endpoints are named,
their keys come from the worker's own settings.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class RunCode:
    """Which code a run runs: the eval module inside its project bundle, the profile folder's
    bundle, and a local repository's commit bundle (None when the source is files or remote)."""

    suite: str
    case: str
    bundle: str
    eval_module: str
    variant: str
    variant_hash: str
    profile_bundle: str | None = None
    source: dict[str, Any] | None = None
    # How the case and the variant were recorded (evals_app.resolution.RECORD_FORMAT); runs
    # recorded before the format was named are of the first.
    record: int = 1

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> RunCode:
        return cls(**{k: value[k] for k in cls.__dataclass_fields__ if k in value})


@dataclass(frozen=True)
class TrialSpec:
    trial_id: int
    index: int
    organization_id: int
    case_version: int
    definition_hash: str
    code: RunCode | None  # None for runs recorded before bundles existed
    variant_spec: dict[str, Any] = field(default_factory=dict)
    limits: dict[str, Any] = field(default_factory=dict)
    # Model overrides from the command line (--responder-model, --judge-model).
    responder_model: str | None = None
    judge_model: str | None = None

    def to_json(self) -> dict[str, Any]:
        value = asdict(self)
        value["code"] = self.code.to_json() if self.code else None
        return value

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> TrialSpec:
        fields: dict[str, Any] = {k: value.get(k) for k in cls.__dataclass_fields__}
        fields["code"] = RunCode.from_json(value["code"]) if value.get("code") else None
        return cls(**fields)

    @classmethod
    def for_trial(
        cls,
        *,
        trial_id: int,
        index: int,
        organization_id: int,
        run_spec: dict[str, Any],
        batch_options: dict[str, Any],
    ) -> TrialSpec:
        code = run_spec.get("code")
        return cls(
            trial_id=trial_id,
            index=index,
            organization_id=organization_id,
            case_version=run_spec.get("case_version", 0),
            definition_hash=run_spec.get("definition_hash", ""),
            code=RunCode.from_json(code) if code else None,
            variant_spec=run_spec.get("variant") or {},
            limits=run_spec.get("limits") or {},
            responder_model=batch_options.get("responder_model"),
            judge_model=batch_options.get("judge_model"),
        )
