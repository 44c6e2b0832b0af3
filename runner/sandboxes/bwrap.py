"""The ``bwrap`` sandbox: each process runs under bubblewrap in a read-only view of the system.

What a process sees: the system folders (/usr, /etc, /opt and the /bin, /lib links) and the
Python that runs Proctor with the ``proctor`` package (so runner-kit agents work), all read-only;
the trial's workspace and home, writable, at the same paths as on the host; its own /tmp (the
trial's tmp folder, kept across the trial's steps), /proc and /dev. Everything else of the host
(other users' homes, /root, /var, the Proctor database) is not there at all.

Each run gets fresh namespaces (user, pid, ipc, uts, cgroup and network unless the variant
allows the network) and no capabilities, even when Proctor runs as root. The process tree lives
in its own pid namespace, so it ends with its first process: run_process kills the bwrap
process group and the namespace dies with it (``--die-with-parent``), with no per-run cgroup.

Variant options: ``expose=[...]`` adds host paths, read-only at the same place (a CLI installed
outside the system folders, say). The resource limits ``cpus=``, ``memory=`` and ``pids=`` are
refused at load: bwrap sets none (see ``limits_refused_because``); the docker sandbox applies them.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import proctor
from proctor.definitions import Variant
from runner.sandboxes.base import LineSink, ProcessResult, SandboxError
from runner.sandboxes.local import LocalSandbox
from runner.sandboxes.processes import run_process

# Read-only system folders; the top-level /bin, /lib... are symlinks into /usr on merged-/usr
# systems and are recreated as such, or bound like the rest where they are real folders.
SYSTEM_DIRS = ("/usr", "/etc", "/opt")
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Where the sandbox's own tmp folder appears.
SANDBOX_TMP = "/tmp"
# bwrap reports its own failures on stderr with this prefix and exit status 1.
BWRAP_PREFIX = "bwrap: "
PROBE_TIMEOUT_S = 30.0


@functools.cache
def bwrap_problem() -> str | None:
    """Why bwrap cannot run sandboxes on this machine, or None when it can (probed once)."""
    binary = shutil.which("bwrap")
    if binary is None:
        return "bubblewrap is not installed (Debian package bubblewrap)"
    probe = run_process(
        [
            binary,
            "--ro-bind",
            "/",
            "/",
            "--unshare-all",
            "--cap-drop",
            "ALL",
            "--die-with-parent",
            "true",
        ],
        timeout_s=PROBE_TIMEOUT_S,
    )
    if probe.exit_code != 0:
        why = "timed out" if probe.timed_out else f"exit {probe.exit_code}"
        return f"bwrap cannot create namespaces here ({probe.stderr.strip() or why})"
    return None


def _python_dirs() -> list[str]:
    """The folders the Python running Proctor needs: the venv, its base install, and the
    ``proctor`` package itself (outside the venv when installed editable)."""
    dirs = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        str(Path(sys.executable).resolve().parent.parent),
    }
    dirs.add(str(Path(proctor.__file__).resolve().parent))
    return sorted(dirs)


def _within(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


@functools.cache
def _system_view(
    network: bool, expose: tuple[str, ...]
) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """The bwrap binary, the host folders a sandbox sees read-only, and the bwrap arguments
    that show them: the same for every sandbox of one process with the same ``network`` and
    ``expose``, so worked out once."""
    binary = shutil.which("bwrap") or "bwrap"
    read_only = [d for d in SYSTEM_DIRS if os.path.isdir(d)]
    read_only += [d for d in _python_dirs() if not _within(d, read_only)]
    read_only += [os.path.abspath(p) for p in expose if not _within(os.path.abspath(p), read_only)]
    args: list[str] = []
    for path in read_only:
        args += ["--ro-bind", path, path]
    for link in SYSTEM_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    if network:
        resolv = os.path.realpath("/etc/resolv.conf")
        if os.path.exists(resolv) and not _within(resolv, read_only):
            # e.g. systemd-resolved's file under /run: name lookups need it.
            args += ["--ro-bind", resolv, resolv]
    args += ["--dev", "/dev", "--proc", "/proc", "--symlink", SANDBOX_TMP, "/var/tmp"]
    return binary, tuple(read_only), tuple(args)


@functools.lru_cache(maxsize=256)
def _shown_read_only(path: str, read_only: tuple[str, ...]) -> bool:
    """Whether ``path`` is inside the host folders every sandbox sees (asked for each PATH
    entry of each sandbox: the same few answers every time)."""
    return _within(path, (*read_only, *SYSTEM_LINKS))


class BwrapSandbox(LocalSandbox):
    """The local sandbox's trial folders, with every process confined by bubblewrap."""

    kind = "bwrap"
    sees_host_files = False
    option_names = frozenset({"expose"})
    # Not applied through rlimits either: RLIMIT_NPROC counts every process of the user, not
    # the trial's; RLIMIT_AS caps each process's address space (not the trial's memory) and
    # breaks runtimes that reserve it up front (Node, Go, the JVM); nothing sets a CPU count.
    limits_refused_because = (
        "bubblewrap confines files and namespaces but has no per-trial cgroup to limit them; "
        "use sandbox='docker' for them"
    )
    # Writes outside the workspace, home and tmp fail (read-only file system): nothing to audit.
    confines_writes = True

    def __init__(self, *, network: bool = False, expose: Sequence[str] = ()) -> None:
        problem = bwrap_problem()
        if problem:
            raise SandboxError(f"the bwrap sandbox is unavailable: {problem}")
        missing = [path for path in expose if not os.path.exists(path)]
        if missing:
            raise SandboxError(
                f"the bwrap sandbox cannot expose {', '.join(missing)}: no such path on this machine"
            )
        super().__init__()
        self.network = network
        self.bwrap, self.read_only, system_view = _system_view(network, tuple(expose))
        self._path_for: tuple[str, str] | None = None
        # Every run's view up to the trial's own folders, the same for each of its runs. /tmp
        # first: a folder exposed below it (or the Python, in a venv under /tmp) then shows
        # through instead of being hidden by it.
        self.view = [
            self.bwrap,
            "--tmpfs",
            "/",
            "--bind",
            str(self.tmp),
            SANDBOX_TMP,
            *system_view,
            "--bind",
            str(self.host_workspace),
            self.workspace,
            "--bind",
            str(self.host_home),
            self.home,
        ]

    @classmethod
    def for_variant(cls, variant: Variant) -> BwrapSandbox:
        expose = variant.options.get("expose", ())
        if isinstance(expose, str):
            expose = (expose,)
        return cls(network=variant.network, expose=tuple(expose))

    def _visible(self, path: str) -> bool:
        return _shown_read_only(path, self.read_only) or _within(path, (self.workspace, self.home))

    def _inside_path(self, host_path: str) -> str:
        """``host_path`` (a PATH) with only the entries that exist inside, and the user's own
        tools dir first: with the system read-only, `npm install -g` and `pip install --user`
        land in $HOME/.local. Worked out once per sandbox and PATH (every run asks)."""
        if self._path_for is None or self._path_for[0] != host_path:
            local_bin = f"{self.home}/.local/bin"
            path = [p for p in host_path.split(os.pathsep) if p and self._visible(p)]
            inside = os.pathsep.join([local_bin, *[p for p in path if p != local_bin]])
            self._path_for = (host_path, inside)
        return self._path_for[1]

    def base_env(self) -> dict[str, str]:
        env = super().base_env()
        env["PATH"] = self._inside_path(env["PATH"])
        env["NPM_CONFIG_PREFIX"] = f"{self.home}/.local"
        env["TMPDIR"] = SANDBOX_TMP
        for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
            if name in env and not self._visible(env[name]):
                del env[name]
        # The mocks' shims first, before the user's own tools dir (bound in by _bwrap_argv).
        return self.mocks.apply_env(env) if self.mocks else env

    def _bwrap_argv(self, argv: Sequence[str], cwd: str) -> list[str]:
        args = list(self.view)
        if self.mocks:  # the trial's mocks: shims, unix sockets, the bridge (runner.mocks)
            args += ["--ro-bind", self.mocks.folder, self.mocks.folder]
            if self.mocks.hosts_file:  # the mocks' host names, on the sandbox's loopback
                args += ["--ro-bind", self.mocks.hosts_file, "/etc/hosts"]
            if not self.network:  # only the mocks' ports, bridged to their sockets
                argv = self.mocks.bridged(argv, sys.executable)
        args += ["--remount-ro", "/", "--unshare-all", "--cap-drop", "ALL"]
        if self.network:
            args.append("--share-net")
        args += ["--die-with-parent", "--new-session", "--chdir", cwd, "--", *argv]
        return args

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout_s: float | None = None,
        on_line: LineSink | None = None,
    ) -> ProcessResult:
        full_env = self.base_env()
        full_env.update(env or {})
        result = run_process(
            self._bwrap_argv(argv, cwd or self.workspace),
            env=full_env,
            cwd=str(self.root),
            timeout_s=timeout_s,
            on_line=on_line,
            own_namespace=True,  # --unshare-all --die-with-parent: no cgroup needed
        )
        return self._own_failure(argv, result)

    def _own_failure(self, argv: Sequence[str], result: ProcessResult) -> ProcessResult:
        """Tell bwrap's own failures apart from the process's: a program that is not there is
        exit 127 as on the host; anything else bwrap refused is the sandbox's error."""
        # bwrap fails before the program starts: exit 1, no output, one line of its own.
        first, _, rest = result.stderr.partition("\n")
        if (
            result.exit_code != 1
            or result.stdout
            or rest.strip()
            or not first.startswith(BWRAP_PREFIX)
        ):
            return result
        if first.startswith(BWRAP_PREFIX + "execvp "):
            reason = first.rsplit(": ", 1)[-1]
            return ProcessResult.not_started(argv[0], reason, result.duration_ms)
        raise SandboxError(
            f"the bwrap sandbox could not start {argv[0]}: {first.removeprefix(BWRAP_PREFIX)}"
        )
