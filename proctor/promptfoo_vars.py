"""A case's variables as promptfoo's test had them, for the promptfoo code Proctor runs (script
providers, javascript and python assertions, transforms) to read as ``context.vars``.

``proctor import promptfoo`` adds variables of its own: ``promptfoo_prompt_N`` and
``promptfoo_system_N`` hold a prompt it rendered per test, and ``promptfoo_data_vars`` names
(as a JSON list) the variables holding data, which a case keeps as JSON text since a case
variable is text. promptfoo's code sees neither: the first are left out, the data is data again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

# The case variable naming the variables that hold data as JSON text.
DATA_VARIABLES = "promptfoo_data_vars"
_IMPORTERS_OWN = re.compile(rf"^promptfoo_(?:prompt_\d+|system_\d+)$|^{DATA_VARIABLES}$")


def promptfoo_vars(variables: Mapping[str, Any]) -> dict[str, Any]:
    """``variables`` as promptfoo's test had them."""
    data = set(_json(variables.get(DATA_VARIABLES), default=[]))
    return {
        name: _json(value, default=value) if name in data else value
        for name, value in variables.items()
        if not _IMPORTERS_OWN.match(name)
    }


def _json(text: Any, *, default: Any) -> Any:
    # A variable edited by hand into something else stays as it is.
    try:
        return json.loads(text) if isinstance(text, str) else default
    except ValueError:
        return default
