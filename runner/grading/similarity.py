"""``similar`` and ``not-similar``: the cosine similarity of the output's embedding and the
value's, against a threshold (0.75 unless the assertion sets one), as promptfoo grades them.

With a list of values, ``similar`` passes when the output is close enough to any of them,
``not-similar`` only when it is far enough from all of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from runner.llm import LLMConfig
from runner.llm.embeddings import embed

DEFAULT_THRESHOLD = 0.75


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=False)) / norms if norms else 0.0


def similarity_verdict(
    kind: str,
    value: str | Sequence[str],
    output: str,
    *,
    threshold: float | None,
    config: LLMConfig,
) -> tuple[bool, float, str]:
    """(passed, score, reason); raises LLMError when no embeddings come."""
    bound = DEFAULT_THRESHOLD if threshold is None else threshold
    expected = [value] if isinstance(value, str) else list(value)
    vectors = embed(config, [output, *expected])
    similarities = [cosine(vectors[0], vector) for vector in vectors[1:]]
    if kind == "not-similar":
        closest = max(similarities)
        passed = closest <= bound
        relation = "at most" if passed else "above"
        return (
            passed,
            1 - closest,
            f"similarity {closest:.2f} is {relation} the threshold {bound:g}",
        )
    best = max(similarities)
    passed = best >= bound
    relation = "at least" if passed else "below"
    of = f" (the closest of {len(expected)} values)" if len(expected) > 1 else ""
    return passed, best, f"similarity {best:.2f}{of} is {relation} the threshold {bound:g}"
