"""The ``e2b`` sandbox: one E2B sandbox per trial, created from the variant's template and
driven through E2B's official Python SDK (``e2b``).

``variant("command", sandbox="e2b", template="my-template")`` reads the key from
``E2B_API_KEY``; the SDK itself honours ``E2B_DOMAIN`` (a self-hosted E2B or another provider
speaking its protocol) and its other settings. Processes run in the remote sandbox with their
output streamed line by line as it comes; the workspace and the home live there, mirrored on
the worker (``runner.sandboxes.remote_mirror``) for everything that reads them as files.

What a docker trial has that this kind does not: CPU and memory limits (E2B sizes them per
template, so ``cpus=``/``memory=``/``pids=`` are refused at load), mocks (they run on the
worker, which a remote sandbox cannot reach: a case with mocks is refused at load), the audit
of writes outside the workspace (nothing the agent does can write on the worker; what it
writes elsewhere in its own remote machine is not listed), and Proctor's runner kit on
``python3``'s path (install it in the template). A step's processes are one process group,
killed when the step ends or times out; one that leaves it (``setsid``) lives until the
sandbox is killed at the trial's end.

The sandbox is killed when the trial ends, whatever happened; its id is recorded with the
trial so the reaper kills it when the worker died (``Sandbox.kill_remote``). As a last guard it
is created with a lifetime E2B enforces itself, renewed before each step to the step's timeout
plus a margin, so even a sandbox nobody kills ends soon after its last step would have.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from proctor.definitions import Variant
from runner.sandboxes import remote_mirror
from runner.sandboxes.base import LineSink, ProcessResult, Sandbox, SandboxError
from runner.sandboxes.processes import LineSplitter
from runner.sandboxes.trial_folders import hand_back, take

if TYPE_CHECKING:
    from e2b import Sandbox as RemoteSandbox

# E2B's own lifetime for a sandbox, in seconds, past the current step's timeout.
LIFETIME_MARGIN_S = 300
# A step with no timeout of its own keeps its sandbox this long at most.
UNTIMED_STEP_S = 3600
# Where the archive of the mirror waits in the remote user's home between upload and unpacking.
TRANSFER_FILE = ".proctor-transfer.tar.gz"
# The folder in the remote user's home that holds the trial's workspace and home.
TRIAL_FOLDER = "proctor-trial"
# What every remote process's PATH is, before the template's own tools are found.
REMOTE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def provider_error(exc: BaseException, doing: str) -> SandboxError:
    """One line for an error of E2B or of the way to it, saying what Proctor was doing."""
    from e2b.exceptions import (
        AuthenticationException,
        NotFoundException,
        RateLimitException,
        TemplateException,
        TimeoutException,
    )

    text = " ".join(str(exc).split()) or type(exc).__name__
    if len(text) > 300:
        text = text[:297] + "..."
    if isinstance(exc, AuthenticationException):
        why = f"E2B refused the key in E2B_API_KEY ({text})"
    elif isinstance(exc, RateLimitException):
        why = f"E2B's quota or rate limit was reached ({text})"
    elif isinstance(exc, NotFoundException | TemplateException):
        why = f"E2B does not know it ({text})"
    elif isinstance(exc, TimeoutException):
        why = f"E2B did not answer in time or the sandbox ended ({text})"
    elif isinstance(exc, OSError) or "connect" in type(exc).__name__.lower():
        why = f"E2B could not be reached ({type(exc).__name__}: {text})"
    else:
        why = f"{type(exc).__name__}: {text}"
    return SandboxError(f"e2b sandbox: {doing} failed: {why}")


class E2BSandbox(Sandbox):
    kind = "e2b"
    option_names = frozenset({"template"})
    limits_refused_because = (
        "E2B sets CPU and memory per template, not per sandbox: build a template with the "
        "sizes you need and name it with template="
    )
    reaches_host_mocks = False
    # Nothing the agent runs can write on the worker: the outside-writes audit has nothing to
    # find there (see the module's note for what it does not see remotely).
    confines_writes = True

    def __init__(self, template: str, *, network: bool) -> None:
        if not os.environ.get("E2B_API_KEY"):
            raise SandboxError(
                "e2b sandbox: E2B_API_KEY is not set in the worker's environment; set it to "
                "your E2B API key"
            )
        self.template = template
        self.root = take()
        self.host_workspace = self.root / "workspace"
        self.host_home = self.root / "home"
        self._remote: RemoteSandbox | None = None
        self._destroyed = False
        started = time.monotonic()
        try:
            self._remote = self._create(template, network)
            self.remote_id = self._remote.sandbox_id
            remote_home = self._shell("printf '%s' \"$HOME\"", doing="reading its home").strip()
            remote_root = f"{remote_home or '/home/user'}/{TRIAL_FOLDER}"
            self.workspace = f"{remote_root}/workspace"
            self.home = f"{remote_root}/home"
            self._remote_root = remote_root
            self._transfer = f"{remote_home or '/home/user'}/{TRANSFER_FILE}"
            self._tmp = f"{remote_root}/tmp"
            # The pid of the running step's program, which leads its process group.
            self._step_pid_file = f"{remote_root}/step.pid"
            self._shell(
                "mkdir -p " + " ".join(map(shlex.quote, (self.workspace, self.home, self._tmp))),
                doing="making the workspace",
            )
        except BaseException:
            self.destroy()
            raise
        # The mirror as it was last sent or fetched: unchanged, it need not go up again.
        self._synced = remote_mirror.signature(self.root)
        # When E2B will end the sandbox by itself (this process's clock), unless renewed.
        self._ends_at = started + LIFETIME_MARGIN_S

    @classmethod
    def variant_problems(cls, variant: Variant) -> list[str]:
        template = variant.options.get("template")
        if isinstance(template, str) and template:
            return []
        return [
            f"variant {variant.name}: the e2b sandbox needs template='...' (the name or id of "
            f"an E2B template), got {template!r}"
        ]

    @classmethod
    def for_variant(cls, variant: Variant) -> E2BSandbox:
        for problem in cls.variant_problems(variant):
            raise SandboxError(problem)
        return cls(str(variant.options["template"]), network=variant.network)

    @staticmethod
    def _create(template: str, network: bool) -> RemoteSandbox:
        try:
            from e2b import Sandbox as RemoteSandbox

            return RemoteSandbox.create(
                template=template,
                timeout=LIFETIME_MARGIN_S,
                allow_internet_access=network,
                metadata={"created_by": "proctor"},
            )
        except Exception as exc:
            raise provider_error(exc, f"creating a sandbox from template {template!r}") from None

    @classmethod
    def kill_remote(cls, remote_id: str) -> None:
        from e2b import Sandbox as RemoteSandbox

        RemoteSandbox.kill(remote_id)

    def base_env(self) -> dict[str, str]:
        return {
            "PATH": REMOTE_PATH,
            "HOME": self.home,
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "TMPDIR": self._tmp,
        }

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout_s: float | None = None,
        on_line: LineSink | None = None,
    ) -> ProcessResult:
        started = time.monotonic()
        remote = self._live()
        self._keep_alive(timeout_s)
        self._push()
        full_env = self.base_env()
        full_env.update(env or {})
        streams = {name: LineSplitter(name, on_line) for name in ("stdout", "stderr")}
        timed_out = False
        exit_code: int | None = None
        try:
            from e2b import CommandExitException, TimeoutException

            handle = remote.commands.run(
                self._in_own_group(argv),
                background=True,
                envs=full_env,
                cwd=cwd or self.workspace,
                # 0 is "no limit" to the SDK.
                timeout=timeout_s if timeout_s else 0,
            )
            try:
                result = handle.wait(
                    on_stdout=lambda chunk: streams["stdout"].feed(chunk.encode()),
                    on_stderr=lambda chunk: streams["stderr"].feed(chunk.encode()),
                )
                exit_code = result.exit_code
            except CommandExitException as exc:
                exit_code = exc.exit_code
            except TimeoutException:
                if timeout_s is None or time.monotonic() - started < timeout_s:
                    raise
                timed_out = True
                handle.kill()
                self._kill_step_group()
        except SandboxError:
            raise
        except Exception as exc:
            raise provider_error(exc, f"running {argv[0] if argv else 'a process'}") from None
        finally:
            for stream in streams.values():
                stream.close()
        self._pull()
        if exit_code == 127 and f"{argv[0]}: command not found" in streams["stderr"].text():
            return ProcessResult.not_started(
                argv[0], "command not found", int((time.monotonic() - started) * 1000)
            )
        return ProcessResult(
            exit_code=None if timed_out else exit_code,
            stdout=streams["stdout"].text(),
            stderr=streams["stderr"].text(),
            timed_out=timed_out,
            duration_ms=int((time.monotonic() - started) * 1000),
        )

    def destroy(self) -> None:
        if self._destroyed:
            return
        self._destroyed = True
        remote, self._remote = self._remote, None
        try:
            if remote is not None:
                remote.kill()
        except Exception:
            # The reaper and E2B's own lifetime are the guards left; the trial's result stands.
            pass
        finally:
            hand_back(self.root)

    # --- a step's processes ------------------------------------------------------------------

    def _in_own_group(self, argv: Sequence[str]) -> str:
        """The shell line that runs ``argv`` as the leader of a process group of its own (job
        control on), records its pid, and once it exits kills the group: a child it left in
        the background never outlives the step, nor holds its output open."""
        pid_file = shlex.quote(self._step_pid_file)
        return (
            f"set -m; {shlex.join(argv)} & pid=$!; echo $pid > {pid_file}; wait $pid; code=$?; "
            "kill -KILL -- -$pid 2>/dev/null; exit $code"
        )

    def _kill_step_group(self) -> None:
        """Kill the timed-out step's process group (the SDK's kill ends only the shell)."""
        pid_file = shlex.quote(self._step_pid_file)
        self._shell(
            f'kill -KILL -- -"$(cat {pid_file})" 2>/dev/null; true', doing="ending a timed-out step"
        )

    # --- moving the mirror and keeping the sandbox alive -------------------------------------

    def _live(self) -> RemoteSandbox:
        if self._remote is None:
            raise SandboxError("e2b sandbox: used after it was destroyed")
        return self._remote

    def _keep_alive(self, timeout_s: float | None) -> None:
        """Make E2B keep the sandbox until this step's time is up and a margin after, when the
        lifetime it has would end sooner (a call per step at most, none for short steps)."""
        step_s = int(timeout_s or UNTIMED_STEP_S)
        now = time.monotonic()
        if now + step_s + LIFETIME_MARGIN_S / 2 <= self._ends_at:
            return
        try:
            self._live().set_timeout(step_s + LIFETIME_MARGIN_S)
        except Exception as exc:
            raise provider_error(exc, "extending the sandbox's lifetime") from None
        self._ends_at = now + step_s + LIFETIME_MARGIN_S

    def _shell(self, script: str, *, doing: str) -> str:
        """Run a script of Proctor's own in the sandbox; any failure is the sandbox's."""
        from e2b import CommandExitException

        try:
            result = self._live().commands.run(script, timeout=UNTIMED_STEP_S)
        except CommandExitException as exc:
            detail = " ".join((exc.stderr or exc.stdout or "").split())[:300]
            raise SandboxError(
                f"e2b sandbox: {doing} failed (exit {exc.exit_code}): {detail}"
            ) from None
        except Exception as exc:
            raise provider_error(exc, doing) from None
        return result.stdout

    def _push(self) -> None:
        """Send the mirror up when the worker changed it since the last trip."""
        now = remote_mirror.signature(self.root)
        if now == self._synced:
            return
        try:
            self._live().files.write(self._transfer, remote_mirror.pack(self.root))
        except Exception as exc:
            raise provider_error(exc, "uploading the workspace") from None
        root, transfer = shlex.quote(self._remote_root), shlex.quote(self._transfer)
        self._shell(
            f"rm -rf {root}/workspace {root}/home && mkdir -p {root} && "
            f"tar -xzf {transfer} -C {root} && rm -f {transfer}",
            doing="unpacking the workspace",
        )
        self._synced = now

    def _pull(self) -> None:
        """Bring the remote workspace and home back into the mirror."""
        root, transfer = shlex.quote(self._remote_root), shlex.quote(self._transfer)
        self._shell(f"tar -czf {transfer} -C {root} workspace home", doing="packing the workspace")
        try:
            data: Any = self._live().files.read(self._transfer, format="bytes")
        except Exception as exc:
            raise provider_error(exc, "downloading the workspace") from None
        remote_mirror.unpack(self.root, bytes(data))
        self._synced = remote_mirror.signature(self.root)
