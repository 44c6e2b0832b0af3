"""`proctor eval --dry-run`: the batch a command would run, read from its plan, with nothing
run and nothing recorded (no database, no bundle stored, no folder made)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from evals_app.loading import display_path
from runner.batches.planning import Planned


def dry_run_listing(planned: list[Planned]) -> dict[str, Any]:
    """The suites, their cases and variants, and the runs (case × variant) with their trials,
    in the order the batch would record them: the value ``--dry-run --json`` prints."""
    suites: dict[str, dict[str, Any]] = {}
    for plan in planned:
        resolved = plan.resolved
        entry = suites.setdefault(
            resolved.suite.id,
            {
                "suite": resolved.suite.id,
                "name": resolved.suite.label,
                "file": display_path(resolved.module_path),
                "cases": [],
                "variants": [],
                "runs": [],
            },
        )
        entry["cases"].append({"case": resolved.case.id, "name": resolved.case.label})
        known = {v["name"] for v in entry["variants"]}
        for variant in plan.variants:
            if variant.name not in known:
                known.add(variant.name)
                entry["variants"].append(
                    {
                        "name": variant.name,
                        "harness": variant.harness,
                        "model": variant.model,
                        "sandbox": variant.sandbox,
                        # Its own prompts, when it carries them (None: the suite's).
                        "prompt": variant.prompt,
                        "system_prompt": variant.system_prompt,
                    }
                )
            entry["runs"].append(
                {"case": resolved.case.id, "variant": variant.name, "trials": plan.trials}
            )
    runs = [run for suite in suites.values() for run in suite["runs"]]
    return {
        "dry_run": True,
        "suites": list(suites.values()),
        "runs": len(runs),
        "trials": sum(run["trials"] for run in runs),
    }


def print_dry_run(out: Console, listing: dict[str, Any]) -> None:
    """The listing for a person: per suite its cases, its variants and what they multiply to."""
    for suite in listing["suites"]:
        trials = sum(run["trials"] for run in suite["runs"])
        out.print(
            f"suite {suite['suite']} ({suite['file']}): {_count(len(suite['cases']), 'case')} × "
            f"{_count(len(suite['variants']), 'variant')}: {_count(len(suite['runs']), 'run')}, "
            f"{_count(trials, 'trial')}",
            markup=False,
        )
        for case in suite["cases"]:
            named = f" ({case['name']})" if case["name"] != case["case"] else ""
            out.print(f"  case {case['case']}{named}", markup=False)
        for variant in suite["variants"]:
            parts = [variant["harness"], variant["model"], variant["sandbox"]]
            out.print(
                f"  variant {variant['name']} ({', '.join(p for p in parts if p)})", markup=False
            )
    out.print(
        f"Dry run: {_count(listing['runs'], 'run')}, {_count(listing['trials'], 'trial')}; "
        "nothing ran and nothing was recorded.",
        markup=False,
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"
