"""Consulting a model through a command: the prompt as JSON on stdin, the answer on stdout.

This lets a judge or the responder go through the same harness as the agent under test (an
agent CLI in its print mode, a local model runner). The command runs with ``bash -c`` in a fresh
empty directory of its own, outside every task workspace: a consultation must not write into
the codebase under measurement, nor pick up its CLAUDE.md or AGENTS.md as instructions.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any

from runner.llm.completion import DISPATCH_FAILED, DISPATCH_TIMED_OUT, Completion, LLMError
from runner.llm.endpoints import LLMConfig, scrub_key
from runner.sandboxes.processes import run_process

# How much of stderr a failure quotes: the end, where the error usually is.
STDERR_TAIL_CHARS = 500
SCRATCH_PREFIX = "proctor-consultation-"


def stdin_payload(
    config: LLMConfig, messages: list[dict[str, Any]], *, json_mode: bool
) -> dict[str, Any]:
    return {"model": config.model, "messages": messages, "json": json_mode}


def complete_command(
    config: LLMConfig, messages: list[dict[str, Any]], *, json_mode: bool = False
) -> Completion:
    """Run the configured command once and return what it printed. Blocks up to
    ``timeout_s``; the command's whole process group is killed when it is over (also after a
    normal exit: a backgrounded child cannot hold the pipes open)."""
    assert config.command, "complete_command needs a command"
    payload = json.dumps(stdin_payload(config, messages, json_mode=json_mode)).encode()
    scratch = tempfile.mkdtemp(prefix=SCRATCH_PREFIX)
    try:
        result = run_process(
            ["bash", "-c", config.command],
            env=os.environ,
            cwd=scratch,
            timeout_s=config.timeout_s,
            stdin=payload,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if result.timed_out:
        raise LLMError(
            DISPATCH_TIMED_OUT,
            f"the consultation command did not finish within {config.timeout_s:g}s",
        )
    if result.exit_code != 0:
        tail = _tail(result.stderr) or "it printed nothing on stderr"
        raise LLMError(
            DISPATCH_FAILED,
            scrub_key(
                f"the consultation command exited with status {result.exit_code}: {tail}",
                config.api_key,
            ),
        )
    # The text loses the trailing newline every shell command prints; raw keeps it.
    return Completion(
        text=result.stdout.strip(),
        raw=result.stdout,
        model=config.model or "",
        usage={},
        duration_ms=result.duration_ms,
    )


def _tail(stderr: str) -> str:
    text = " ".join(stderr.split())
    return text if len(text) <= STDERR_TAIL_CHARS else "…" + text[-STDERR_TAIL_CHARS:]
