"""Which variant options a variant may give: those its harness or its sandbox reads, plus the
ones every trial reads. Anything else is refused at load, one line per option, so a typo
(``memroy="64m"``) or a limit the sandbox cannot apply never runs silently on defaults.
"""

from __future__ import annotations

import difflib

from proctor.definitions import PROMPT_OPTIONS, Variant
from runner.harnesses import HARNESSES
from runner.sandboxes import SANDBOX_KINDS
from runner.sandboxes.base import LIMIT_OPTIONS

# Read by the trial itself whatever the harness and sandbox (runner.trial.execute: trial_cost,
# and the variant's own prompts).
TRIAL_OPTIONS = frozenset({"prices", *PROMPT_OPTIONS})


def variant_option_problems(variant: Variant) -> list[str]:
    """One sentence per option of ``variant`` that nothing reads or its sandbox cannot apply,
    naming the option, the sandbox and the harness. Unknown harnesses and sandboxes are
    reported elsewhere and give nothing here."""
    harness = HARNESSES.get(variant.harness)
    sandbox = SANDBOX_KINDS.get(variant.sandbox)
    if harness is None or sandbox is None:
        return []
    where = f"variant {variant.name}"
    taken = TRIAL_OPTIONS | harness.option_names | sandbox.option_names
    problems = []
    for option in variant.options:
        if option in taken:
            continue
        if option in LIMIT_OPTIONS and sandbox.limits_refused_because:
            problems.append(
                f"{where}: the {variant.sandbox} sandbox cannot apply {option}= "
                f"({sandbox.limits_refused_because})"
            )
            continue
        others = [
            f"the {name} sandbox"
            for name, kind in sorted(SANDBOX_KINDS.items())
            if option in kind.option_names
        ] + [
            f"the {name} harness"
            for name, kind in sorted(HARNESSES.items())
            if option in kind.option_names
        ]
        if others:
            hint = f"; it is an option of {' and '.join(others[:3])}"
        else:
            close = difflib.get_close_matches(option, sorted(taken), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
        known = ", ".join(sorted(taken)) or "none"
        problems.append(
            f"{where}: unknown option {option} for the {variant.sandbox} sandbox and the "
            f"{variant.harness} harness (they take: {known}){hint}"
        )
    return problems
