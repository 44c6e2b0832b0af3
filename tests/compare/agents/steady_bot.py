"""A command agent for the compare tests: answers "ok" to every task, except the tasks named in
the ``broken`` file next to it (one per line), which it answers "no". Each turn reports a cost."""

from pathlib import Path

from proctor.runner import create_emitter, env

run = env()
emit = create_emitter()
emit.started(session_id=f"bot-{abs(hash(run.prompt)) % 10_000}", model=run.model)
broken_file = Path(__file__).with_name("broken")
broken = broken_file.read_text().split() if broken_file.exists() else []
task = run.prompt.strip().split()[-1]
emit.usage(input_tokens=1000, output_tokens=100, cost_usd=0.01)
emit.message("no" if task in broken else "ok")
emit.finished("done")
