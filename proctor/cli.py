"""The `proctor` command: Django's management commands under a shorter name.

`proctor eval`, `proctor serve`, `proctor worker`, `proctor harness list` and friends are
management commands of the project's apps, so `python manage.py eval` works the same.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proctor.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(["proctor", *sys.argv[1:]])


if __name__ == "__main__":
    main()
