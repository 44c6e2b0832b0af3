"""The project's one C extension; everything else about the package is in pyproject.toml.

It starts each run's program inside its cgroup (runner/sandboxes/cgroup_spawn.py). It is
optional: where it cannot be built (no C compiler or Python headers, not x86-64 Linux), the
install goes on without it and runs move into their cgroup through a shell instead. Declared
here because setuptools still calls its pyproject.toml table for extensions experimental.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "runner.sandboxes._clone_into_cgroup",
            sources=["runner/sandboxes/_clone_into_cgroup.c"],
            optional=True,
        )
    ]
)
