"""A planned batch as one plain value: what ``proctor eval`` records locally and what
``proctor eval --server`` sends to a server, with the bundles it references.

Building it snapshots the code each case and variant needs (see ``evals_app.bundle_archive``):
per eval file, its folder plus every file its import read from under the project root; per
profile, its folder; per local ``repo()``, the commit it resolves to. After this nothing reads
the person's files again: workers run from the bundles.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evals_app import project_paths
from evals_app.bundle_archive import (
    BundleTooLarge,
    PackedBundle,
    check_size,
    folder_files,
    ignore_rules,
    pack_git_commit,
    pack_tree,
    relative_files,
    walk_files,
)
from evals_app.loading import display_path, load_file
from evals_app.recorded_values import Callables, case_callables, variant_callables
from evals_app.resolution import RECORD_FORMAT, canonical_hash, is_local_repo, variant_spec
from evals_app.source_capture import project_root
from proctor.definitions import Repo, Variant

FORMAT = RECORD_FORMAT


class SubmissionError(Exception):
    """The batch cannot be bundled; ``problems`` are one line each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass
class Submission:
    value: dict[str, Any]  # JSON-serialisable: what a server receives
    bundles: dict[str, PackedBundle]  # by digest: every bundle ``value`` references
    # The Python callables the submitting process loaded, by definition hash and by variant
    # spec hash: its own trials run them rather than importing the eval again.
    case_callables: dict[str, Callables] = field(default_factory=dict)
    variant_callables: dict[str, Callables] = field(default_factory=dict)
    # The project folders they were loaded from, by their bundle's digest.
    project_roots: dict[str, Path] = field(default_factory=dict)
    # One line per path outside the project that a recorded value names (said once).
    warnings: list[str] = field(default_factory=list)


def build_submission(
    planned, options: dict[str, Any], *, max_bytes: int, own_folders: tuple[Path, ...] = ()
) -> Submission:
    """The submission for ``planned`` (runner.batches.planning.Planned items). Reads the eval
    folders, profile folders and local repositories (git subprocesses) once. Files under
    ``own_folders`` (Proctor's home: database, artifacts, caches) are never bundled."""
    builder = _Builder(max_bytes, tuple(p.resolve() for p in own_folders))
    cases: list[dict[str, Any]] = []
    variants: list[dict[str, Any]] = []
    variant_index: dict[tuple[str, str], int] = {}
    runs: list[dict[str, Any]] = []
    submission = Submission(value={}, bundles=builder.bundles)
    for plan in planned:
        resolved = plan.resolved
        path = Path(resolved.module_path)
        case = resolved.case
        source = case.source if case.source is not None else resolved.suite.source
        commands = [c["command"] for c in resolved.definition["checks"] if c["kind"] == "command"]
        builder.names(path, commands, f"case {case.id}")
        if "task" in resolved.definition:  # its folder travels with the bundle
            builder.names(path, resolved.definition["task"]["folder"], f"case {case.id}'s task")
        cases.append(
            {
                "suite": resolved.suite.id,
                "suite_name": resolved.suite.label,
                "case": case.id,
                "name": case.label,
                "tags": list(case.tags),
                "definition": resolved.definition,
                "definition_hash": resolved.definition_hash,
                "sources": resolved.sources,
                "module_path": display_path(path),
                "source": builder.repo_bundle(source, path, case.id)
                if is_local_repo(source)
                else None,
            }
        )
        submission.case_callables[resolved.definition_hash] = case_callables(resolved.suite, case)
        for variant in plan.variants:
            key = (resolved.suite.id, variant.name)
            if key not in variant_index:
                variant_index[key] = len(variants)
                entry = builder.variant_entry(resolved.suite.id, variant, path)
                variants.append(entry)
                submission.variant_callables[entry["spec_hash"]] = variant_callables(variant)
            run: dict[str, Any] = {
                "case": len(cases) - 1,
                "variant": variant_index[key],
                "trials": plan.trials,
            }
            if plan.adaptive is not None:
                run["adaptive"] = plan.adaptive.to_json()
            runs.append(run)
    # Bundled once every file a recorded value names is known.
    for entry, plan in zip(cases, planned, strict=True):
        path = Path(plan.resolved.module_path)
        entry["bundle"], entry["eval_module"] = builder.project_bundle(path)
        submission.project_roots[entry["bundle"]] = project_root(path)
    if builder.problems:
        raise SubmissionError(builder.problems)
    submission.value = {
        "format": FORMAT,
        "options": options,
        "cases": cases,
        "variants": variants,
        "runs": runs,
    }
    submission.warnings = builder.warnings
    return submission


class _Builder:
    def __init__(self, max_bytes: int, own_folders: tuple[Path, ...]) -> None:
        self.max_bytes = max_bytes
        self.own_folders = own_folders
        self.bundles: dict[str, PackedBundle] = {}
        self.problems: list[str] = []
        self.warnings: list[str] = []
        self._projects: dict[Path, tuple[str, str]] = {}
        self._profiles: dict[str, str | None] = {}
        # Per eval file: the project files its recorded values name (relative to its root).
        self._named: dict[Path, set[str]] = {}
        self._warned: set[str] = set()

    def _own(self, path: Path) -> bool:
        return any(folder == path or folder in path.parents for folder in self.own_folders)

    def _keep(self, packed: PackedBundle) -> str:
        self.bundles.setdefault(packed.digest, packed)
        return packed.digest

    def names(self, path: Path, value: Any, what: str) -> None:
        """Note the files of the project that a recorded value of ``path``'s eval names (they
        go into its bundle), and say once of each path outside the project that a rerun
        elsewhere needs it there too."""
        root = project_root(path)
        self._named.setdefault(path, set()).update(project_paths.project_files_named(value))
        for outside in project_paths.outside_paths(value, root):
            if outside not in self._warned:
                self._warned.add(outside)
                self.warnings.append(
                    f"{display_path(path)}: {what} names {outside}, outside the project "
                    f"({root}): it is recorded as written, so a rerun on another machine, or "
                    "after it moves, needs it at that path"
                )

    def project_bundle(self, path: Path) -> tuple[str, str]:
        """The digest of the eval file's bundle and the file's path inside it: its folder,
        the files its import read and the project files its recorded values name."""
        if path not in self._projects:
            root = project_root(path)
            files = _eval_folder_files(path, root)
            rules = ignore_rules(root)
            files.update(
                (rel, p)
                for rel, p in relative_files(load_file(path).read_files, root).items()
                if p.is_file() and not rules.match_file(rel)
            )
            files.update(_named_files(root, self._named.get(path, set()), rules))
            files = {
                rel: p
                for rel, p in files.items()
                if not self._own(p) and not _in_virtualenv(p, root)
            }
            files[path.relative_to(root).as_posix()] = path
            try:
                check_size(files, self.max_bytes, "its bundle")
                digest = self._keep(pack_tree(files))
            except BundleTooLarge as exc:
                self.problems.append(f"{display_path(path)}: {exc}")
                digest = ""
            self._projects[path] = (digest, path.relative_to(root).as_posix())
        return self._projects[path]

    def profile_bundle(self, variant: Variant, path: Path) -> str | None:
        profile = variant.profile
        if profile is None or profile.dir is None:
            return None
        if profile.dir not in self._profiles:
            folder = Path(profile.dir)
            digest = None
            if not folder.is_dir():
                self.problems.append(
                    f"{display_path(path)}: variant {variant.name}: profile folder {profile.dir} does not exist"
                )
            else:
                files = {rel: p for rel, p in folder_files(folder).items() if not self._own(p)}
                try:
                    check_size(files, self.max_bytes, f"profile folder {profile.dir}")
                    digest = self._keep(pack_tree(files))
                except BundleTooLarge as exc:
                    self.problems.append(f"{display_path(path)}: variant {variant.name}: {exc}")
            self._profiles[profile.dir] = digest
        return self._profiles[profile.dir]

    def variant_entry(self, suite: str, variant: Variant, path: Path) -> dict[str, Any]:
        digest = self.profile_bundle(variant, path)
        spec = variant_spec(variant, profile_digest=digest, root=project_root(path))
        if spec["profile"] is not None:
            run = [spec["profile"][k] for k in ("run", "install", "env")]
            self.names(path, run, f"variant {variant.name}'s profile")
        self.names(path, spec["options"], f"variant {variant.name}")
        return {
            "suite": suite,
            "name": variant.name,
            "harness": variant.harness,
            "model": variant.model or "",
            "sandbox": variant.sandbox,
            "spec": spec,
            "spec_hash": canonical_hash(spec),
            "profile_bundle": digest,
        }

    def repo_bundle(self, source: Repo, path: Path, case: str) -> dict[str, Any] | None:
        """A local repository at the commit its ref names now (the working tree's uncommitted
        changes are not part of it, as with any clone)."""
        where = f"{display_path(path)}: case {case}: repo {source.url}"
        wanted = source.ref or "HEAD"
        try:
            commit = subprocess.run(
                [
                    "git",
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    "--end-of-options",
                    f"{wanted}^{{commit}}",
                ],
                cwd=source.url,
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
            ).stdout.strip()
        except OSError:
            commit = ""
        if not commit:
            self.problems.append(
                f"{where}: {'is not a git repository' if not Path(source.url, '.git').exists() else f'has no commit {wanted}'}"
            )
            return None
        try:
            digest = self._keep(pack_git_commit(Path(source.url), commit))
        except subprocess.CalledProcessError as exc:
            reason = (exc.stderr or b"").decode("utf-8", "replace").strip().splitlines()
            self.problems.append(
                f"{where}: could not bundle commit {commit[:12]}: {reason[-1] if reason else 'git failed'}"
            )
            return None
        return {"kind": "bundled-repo", "bundle": digest, "commit": commit, "ref": source.ref}


def _in_virtualenv(path: Path, root: Path) -> bool:
    """A file of an installed package (a virtual environment inside the project): the worker
    has its own packages, never the submitter's."""
    for folder in path.parents:
        if folder == root or root not in folder.parents:
            return False
        if folder.name == "site-packages" or (folder / "pyvenv.cfg").is_file():
            return True
    return False


def _named_files(root: Path, named: set[str], rules) -> dict[str, Path]:
    """The files behind the project paths a recorded value names: a file, or every file of a
    folder that the ignore rules keep."""
    files: dict[str, Path] = {}
    for relative in sorted(named):
        path = root / relative if relative else root
        if path.is_file() and not _in_virtualenv(path, root):
            files[path.relative_to(root).as_posix()] = path
        elif path.is_dir():
            files.update((p.relative_to(root).as_posix(), p) for p in walk_files(path, root, rules))
    return files


def _eval_folder_files(path: Path, root: Path) -> dict[str, Path]:
    """The eval file's own folder, recursively: its fixtures and data files travel with it."""
    rules = ignore_rules(root)
    return {p.relative_to(root).as_posix(): p for p in walk_files(path.parent, root, rules)}
