"""Secrets an eval file read from its environment, recorded as references to the variable.

``profile(env={"OPENAI_API_KEY": os.environ["OPENAI_API_KEY"]})`` and
``variant("chat", api_key=os.environ["GATEWAY_KEY"])`` are how people write them. The value
itself must not be stored (the variant's record is kept in the database and shown), yet the
trial needs it, on this machine and on a worker elsewhere. Profile env values and endpoint
options already name a worker's variable as ``$NAME`` / ``${NAME}`` (``$$`` a dollar sign), so
the value read from a variable whose name says it is a secret is recorded as ``${NAME}`` and
read again from the environment of whoever runs the trial.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# Names that say they hold a credential: an environment variable's, or a variant option's.
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASS|CREDENTIAL|AUTH|COOKIE", re.IGNORECASE)
# Shorter values ("1", "yes") turn up in too many places to stand for one variable.
MIN_SECRET_CHARS = 6


def secret_variables(environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """(name, value) of the variables holding credentials, longest value first so a value
    that holds another is replaced whole."""
    found = [
        (name, value)
        for name, value in environ.items()
        if SECRET_NAME.search(name) and len(value) >= MIN_SECRET_CHARS
    ]
    return sorted(found, key=lambda item: (-len(item[1]), item[0]))


def as_references(value: str, secrets: list[tuple[str, str]], *, prefer: str = "") -> str:
    """``value`` with every credential of ``secrets`` in it replaced by a reference to its
    variable (``prefer``: the name to pick where two variables hold the same value)."""
    for name, secret in sorted(secrets, key=lambda item: (-len(item[1]), item[0] != prefer)):
        if secret in value:
            value = value.replace(secret, "${" + name + "}")
    return value


def credential_values(values: Mapping[str, object]) -> list[str]:
    """The text of each value whose name says it holds a credential (a case variable
    ``api_key``), for a trial to redact from what it records."""
    return [
        str(value)
        for name, value in values.items()
        if SECRET_NAME.search(name) and len(str(value)) >= MIN_SECRET_CHARS
    ]
