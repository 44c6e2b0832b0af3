"""Proctor: the Django project, and the small public SDK that eval files import.

``from proctor import suite, case, variant, profile, command, repo, files, tasks, adaptive,
Verdict``. This package's top level imports nothing of Django, so eval files stay plain Python.
"""

from proctor import mock
from proctor.assertions import Assertion, assertion
from proctor.conversations import (
    Responder,
    SimulatedUser,
    Turn,
    Turns,
    responder,
    simulated_user,
    turn,
    turns,
)
from proctor.definitions import (
    AdaptiveTrials,
    Cache,
    Case,
    Command,
    Files,
    Profile,
    Repo,
    Suite,
    Variant,
    Verdict,
    adaptive,
    case,
    command,
    files,
    profile,
    repo,
    suite,
    variant,
)
from proctor.judges import Judge, judge
from proctor.tasks import Task, tasks
from proctor.tools import Tool, tool

__all__ = [
    "AdaptiveTrials",
    "adaptive",
    "Assertion",
    "SimulatedUser",
    "Tool",
    "assertion",
    "simulated_user",
    "tool",
    "Judge",
    "Responder",
    "Turn",
    "Turns",
    "judge",
    "responder",
    "turn",
    "turns",
    "Cache",
    "Case",
    "Command",
    "Files",
    "Profile",
    "Repo",
    "Suite",
    "Variant",
    "Verdict",
    "case",
    "command",
    "files",
    "profile",
    "repo",
    "suite",
    "variant",
    "mock",
    "Task",
    "tasks",
]
