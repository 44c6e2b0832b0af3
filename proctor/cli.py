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

    args = sys.argv[1:]
    # Commands are named after their module (seed_demo_data); accept the dashed spelling too.
    if args and not args[0].startswith("-"):
        args[0] = args[0].replace("-", "_")
    execute_from_command_line(["proctor", *args])


if __name__ == "__main__":
    main()
