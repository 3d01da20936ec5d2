"""Writing DAG files into the output folder: only inside it, only over regular files, atomically,
and removing only the orphans this compiler owns.

Ownership is recorded per source in a manifest next to the DAG files (``.noetlc-sources.json``:
DAG file -> playbook, both relative to the output folder). A generated file is an orphan when
its playbook sat in a folder compiled now and is gone; DAGs of other source folders (even ones
with the same folder name) and hand-written files are never touched.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

MANIFEST = ".noetlc-sources.json"


@dataclass
class Written:
    """What a sync did (or, with ``check_only``, would do)."""

    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (playbook or path, message)


def sync(
    files: Iterable[tuple[str, str, bytes]], output: str, roots: Sequence[str], check_only: bool
) -> Written:
    """Bring ``output`` in line with ``files`` ((playbook, DAG file path, bytes) each)."""
    done = Written()
    files = list(files)
    if os.path.lexists(output) and not os.path.isdir(output):
        done.errors += [(source, f"output {output} is not a folder") for source, _, _ in files]
        return done
    inside = os.path.realpath(output)
    owned = _read_manifest(output)
    for source, target, data in files:
        problem = _unsafe_target(target, inside)
        if problem is None:
            problem = _write(target, data, check_only, done)
        if problem is not None:
            done.errors.append((source, problem))
            continue
        owned[_relative(target, output)] = _relative(source, output)
    _remove_orphans(files, output, roots, owned, check_only, done)
    if not check_only and (files or done.removed) and os.path.isdir(output):
        _write_manifest(output, owned, done)
    return done


def _relative(path: str, output: str) -> str:
    return os.path.relpath(os.path.abspath(path), os.path.abspath(output)).replace(os.sep, "/")


def _unsafe_target(target: str, inside: str) -> str | None:
    """Why ``target`` must not be written, or None. Its folder must resolve inside the output
    folder (a symlinked subfolder must not lead out of it) and the file itself, if present, must
    be a regular file: a symlink, FIFO or device there is never opened or replaced."""
    folder = os.path.realpath(os.path.dirname(os.path.abspath(target)))
    if folder != inside and not folder.startswith(inside.rstrip(os.sep) + os.sep):
        return f"cannot write {target}: its folder leads outside the output folder"
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot write {target}: {exc.strerror}"
    if not stat.S_ISREG(mode):
        kind = "a symlink" if stat.S_ISLNK(mode) else "not a regular file"
        return f"cannot write {target}: it is {kind}; remove it first"
    return None


def _write(target: str, data: bytes, check_only: bool, done: Written) -> str | None:
    try:
        with open(target, "rb") as handle:
            same = handle.read() == data
    except FileNotFoundError:
        same = False
    except OSError as exc:
        return f"cannot read {target}: {exc.strerror}"
    if same:
        done.unchanged.append(target)
        return None
    if check_only:
        done.stale.append(target)
        return None
    try:
        folder = os.path.dirname(target) or "."
        _make_folders(folder)
        # mkstemp creates a new file (O_EXCL): a symlink planted at a guessable temp name
        # cannot redirect the write. os.replace swaps the name itself, never a link's target.
        handle, temporary = tempfile.mkstemp(prefix=".noetlc-", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
            os.chmod(temporary, 0o644)
            os.replace(temporary, target)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError as exc:
        return f"cannot write {target}: {exc.strerror or exc}"
    done.written.append(target)
    return None


def _make_folders(folder: str) -> None:
    """``os.makedirs(folder, exist_ok=True)`` as a loop: makedirs recurses once per missing
    level, and a source tree a thousand folders deep is mirrored into the output."""
    missing = []
    while folder and not os.path.isdir(folder):  # "" is the working folder: it exists
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    for path in reversed(missing):
        try:
            os.mkdir(path)
        except FileExistsError:
            if not os.path.isdir(path):
                raise


def _remove_orphans(files, output, roots, owned, check_only, done) -> None:
    """Files the manifest gives to a playbook under a folder compiled now that is not compiled
    now: that playbook was removed or renamed."""
    compiled_roots = [os.path.abspath(r) for r in roots if os.path.isdir(r)]
    compiled_now = {_relative(source, output) for source, _, _ in files}
    targets_now = {_relative(target, output) for _, target, _ in files}
    base = os.path.abspath(output)
    for dag, source in sorted(owned.items()):
        if dag in targets_now or source in compiled_now:
            continue
        playbook = os.path.normpath(os.path.join(base, source))
        if not any(playbook.startswith(root.rstrip(os.sep) + os.sep) for root in compiled_roots):
            continue  # another source folder's DAG
        path = os.path.normpath(os.path.join(base, dag))
        try:
            regular = stat.S_ISREG(os.lstat(path).st_mode)
        except OSError:
            regular = False
        if not regular:
            del owned[dag]  # gone already (or replaced by something we do not own)
            continue
        done.removed.append(path)
        if not check_only:
            try:
                os.remove(path)
            except OSError as exc:
                done.errors.append((path, f"cannot remove the orphan {path}: {exc.strerror}"))
                continue
            del owned[dag]


def _read_manifest(output: str) -> dict[str, str]:
    path = os.path.join(output, MANIFEST)
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return {}
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        return {}
    return {k: v for k, v in files.items() if isinstance(k, str) and isinstance(v, str)}


def _write_manifest(output: str, owned: dict[str, str], done: Written) -> None:
    text = json.dumps({"version": 1, "files": dict(sorted(owned.items()))}, indent=2) + "\n"
    path = os.path.join(output, MANIFEST)
    if _unsafe_target(path, os.path.realpath(output)) is not None:
        done.errors.append((path, f"cannot write {path}: it is not a regular file"))
        return
    scratch = Written()
    problem = _write(path, text.encode("utf-8"), False, scratch)
    if problem is not None:
        done.errors.append((path, problem))
