"""Which files a run reads: the playbook files under the paths given on the command line.

A file named on the command line is always read. Under a folder, as ruff does: hidden folders,
files and folders that a ``.gitignore`` (of that folder or of any folder up to the repository
root) ignores, and files matching an ``--exclude`` glob are left out; YAML files that are clearly
not playbooks (a ``docker-compose.yml``, a CI config: no ``apiVersion: noetl.io/...``, no
``kind: Playbook``, no ``workflow``) are skipped by the caller with a note (E003), see
``looks_like_playbook``. Paths that are not regular files (FIFOs, devices, sockets, symlinks to
them) are never opened, only reported, and folders that cannot be read are reported too.

The ``.gitignore`` support covers what such files hold in practice: comments, blank lines,
``!`` negation, a trailing ``/`` for folders, a leading or inner ``/`` anchoring the pattern to
its folder, and ``*``, ``?``, ``[...]``, ``**`` wildcards.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

__all__ = ["Found", "find_files", "looks_like_playbook", "path_kind"]

PLAYBOOK_SUFFIXES = (".yaml", ".yml")
_PLAYBOOK_KEYS = ("workflow", "workbook")


@dataclass
class Found:
    files: list[str] = field(default_factory=list)  # sorted, without duplicates
    named: set[str] = field(default_factory=set)  # given on the command line: never skipped
    missing: list[str] = field(default_factory=list)  # paths that do not exist
    broken: list[str] = field(default_factory=list)  # symlinks found under a folder, to nothing
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (folder, why)
    # Not regular files (FIFOs, sockets, devices, symlinks to them): never opened, since
    # reading one could block or never end. (path, what it is)
    special: list[tuple[str, str]] = field(default_factory=list)


# Glob tokens: ("lit", char), ("one",), ("set", compiled one-character class), ("star",) for `*`
# (no `/`), ("any",) for `**`, ("dirs",) for `**/` (nothing, or anything ending with `/`).
_Token = tuple


def _glob_tokens(pattern: str) -> tuple[_Token, ...]:
    """A gitignore glob as tokens over a ``/``-separated relative path."""
    out: list[_Token] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append(("dirs",))
            i += 3
        elif pattern.startswith("**", i):
            out.append(("any",))
            i += 2
        elif pattern[i] == "*":
            out.append(("star",))
            i += 1
        elif pattern[i] == "?":
            out.append(("one",))
            i += 1
        elif pattern[i] == "[" and (end := pattern.find("]", i + 1)) >= 0:
            # fnmatch's translation of one bracket expression: a single-character class.
            out.append(("set", re.compile(fnmatch.translate(pattern[i : end + 1])[4:-3])))
            i = end + 1
        else:
            out.append(("lit", pattern[i]))
            i += 1
    return tuple(out)


@dataclass(frozen=True)
class _Rule:
    """One .gitignore line. Matched by walking the glob's tokens over the path as a set of
    states (each path character visits each token at most once), not by a backtracking regex:
    `*a*a*a*a*b` against a long name took time to the power of its stars."""

    tokens: tuple[_Token, ...]
    negate: bool
    folders_only: bool

    def matches(self, path: str) -> bool:
        """Does the whole of ``path``, or a folder that holds it (`rule/...`), match?"""
        tokens, end = self.tokens, len(self.tokens)
        states = self._closure({0})
        for char in path:
            following: set[int] = set()
            inside: set[int] = set()  # `**/` states part way through `.*/`: not skippable now
            for state in states:
                if state > end:  # past a matched folder: anything under it
                    following.add(state)
                    continue
                if state == end:
                    if char == "/":
                        following.add(end + 1)
                    continue
                kind = tokens[state][0]
                if kind == "lit":
                    if tokens[state][1] == char:
                        following.add(state + 1)
                elif kind == "one":
                    if char != "/":
                        following.add(state + 1)
                elif kind == "set":
                    if tokens[state][1].match(char):
                        following.add(state + 1)
                elif kind == "star":
                    if char != "/":
                        following.add(state)
                elif kind == "any":
                    following.add(state)
                else:  # dirs: anything, and after a `/` the rest of the glob
                    inside.add(state)
                    if char == "/":
                        following.add(state + 1)
            if not following and not inside:
                return False
            states = self._closure(following) | inside
        return end in states or end + 1 in states

    def _closure(self, states: set[int]) -> set[int]:
        """``states`` and those reached by letting `*`, `**` and `**/` match nothing."""
        out = set(states)
        for state in sorted(states):
            while state < len(self.tokens) and self.tokens[state][0] in ("star", "any", "dirs"):
                state += 1
                out.add(state)
        return out


def _rule(line: str) -> _Rule:
    """The rule of one (non-comment) .gitignore line."""
    negate = line.startswith("!")
    text = line[1:] if negate else line
    folders_only = text.endswith("/")
    text = text.rstrip("/")
    anchored = "/" in text
    tokens = _glob_tokens(text.lstrip("/"))
    return _Rule(tokens if anchored else (("dirs",), *tokens), negate, folders_only)


@lru_cache(maxsize=256)
def _rules(folder: str) -> tuple[_Rule, ...]:
    """The rules of ``folder/.gitignore`` (none when there is no such file)."""
    try:
        with open(os.path.join(folder, ".gitignore"), encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return ()
    rules = []
    for line in lines:
        text = line.rstrip()
        if not text or text.startswith("#"):
            continue
        if not (text.removeprefix("!")).rstrip("/"):
            continue
        rules.append(_rule(text))
    return tuple(rules)


def _repository_root(folder: str) -> str:
    """The nearest folder at or above ``folder`` with a ``.git``, else ``folder`` itself."""
    current = folder
    while True:
        if os.path.exists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return folder
        current = parent


def _governing(
    folder: str, root: str, known: dict[str, tuple[tuple[str, tuple[_Rule, ...]], ...]]
) -> tuple[tuple[str, tuple[_Rule, ...]], ...]:
    """The (folder, rules) of the ``.gitignore`` files from ``root`` down to ``folder`` that
    hold rules, outermost first. Built on the nearest folder above already answered (``known``,
    one per walk): in a tree a thousand folders deep, walking every folder's ancestors again
    read each .gitignore half a million times."""
    chain = []
    current = folder
    while current not in known:
        chain.append(current)
        parent = os.path.dirname(current)
        if current == root or parent == current:
            outer: tuple[tuple[str, tuple[_Rule, ...]], ...] = ()
            break
        current = parent
    else:
        outer = known[current]
    for base in reversed(chain):
        rules = _rules(base)
        outer = (*outer, (base, rules)) if rules else outer
        known[base] = outer
    return outer


def _ignored(path: str, is_folder: bool, root: str, known: dict) -> bool:
    """Whether the ``.gitignore`` files from ``root`` down to ``path``'s folder ignore it."""
    ignored = False
    for base, rules in _governing(os.path.dirname(path), root, known):  # deeper decide last
        relative = os.path.relpath(path, base).replace(os.sep, "/")
        for rule in rules:
            if rule.folders_only and not is_folder:
                # `build/` ignores what is under a folder named build, not a file of that name
                if not any(rule.matches(p) for p in _parents(relative)):
                    continue
            elif not rule.matches(relative):
                continue
            ignored = not rule.negate
    return ignored


def _parents(relative: str) -> list[str]:
    parts = relative.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _excluded(path: str, start: str, patterns: tuple[str, ...]) -> bool:
    if not patterns:
        return False
    relative = os.path.relpath(path, start).replace(os.sep, "/")
    name = os.path.basename(path)
    return any(fnmatch.fnmatchcase(relative, p) or fnmatch.fnmatchcase(name, p) for p in patterns)


def find_files(paths: list[str] | tuple[str, ...], exclude: tuple[str, ...] = ()) -> Found:
    """The YAML files under ``paths`` (files named there are always kept)."""
    found = Found()

    def unreadable(error: OSError) -> None:
        found.unreadable.append((error.filename or "?", error.strerror or str(error)))

    for path in paths:
        kind = path_kind(path)
        if kind == "file":
            found.files.append(path)
            found.named.add(path)
            continue
        if kind == "missing":
            found.missing.append(path)
            continue
        if kind != "folder":
            found.special.append((path, kind))
            continue
        start = os.path.abspath(path)
        root = _repository_root(start)
        known: dict = {}  # folder -> the .gitignore rules governing it
        for folder, dirs, files in _walk(path, unreadable):
            here = os.path.abspath(folder)
            dirs[:] = sorted(
                d
                for d in dirs
                if not d.startswith(".")
                and not _excluded(os.path.join(here, d), start, exclude)
                and not _ignored(os.path.join(here, d), True, root, known)
            )
            for name in sorted(files):
                full = os.path.join(here, name)
                if (
                    name.endswith(PLAYBOOK_SUFFIXES)
                    and not name.startswith(".")
                    and not _excluded(full, start, exclude)
                    and not _ignored(full, False, root, known)
                ):
                    relative = os.path.join(folder, name)
                    kind = path_kind(relative)
                    if kind == "file":
                        found.files.append(relative)
                    elif kind == "missing":
                        found.broken.append(relative)
                    else:
                        found.special.append((relative, kind))
    found.files = sorted(dict.fromkeys(found.files))
    return found


def _walk(
    top: str, onerror: Callable[[OSError], None]
) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk(top)`` top-down without following symlinked folders, as a loop: Python 3.11's
    walk recurses once per level, and a folder tree 1,000 levels deep ended the run with a
    RecursionError. The caller may prune ``dirs`` in place before the walk goes on."""
    stack = [top]
    while stack:
        folder = stack.pop()
        dirs, files, links = [], [], set()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    (dirs if is_dir else files).append(entry.name)
                    if is_dir and entry.is_symlink():
                        links.add(entry.name)
        except OSError as error:
            onerror(error)
            continue
        yield folder, dirs, files
        stack += [os.path.join(folder, d) for d in reversed(dirs) if d not in links]


_PSEUDO_FILE_SYSTEMS = ("/proc/", "/sys/")


def path_kind(path: str) -> str:
    """ "folder", "file", "missing" or what else the path is (following symlinks)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISREG(mode):
        # /proc and /sys files pass for empty regular files, but reading one can block for ever
        # (/proc/kmsg) or hand over the process's secrets (/proc/self/environ): a symlink to one
        # is no playbook.
        if os.path.realpath(path).startswith(_PSEUDO_FILE_SYSTEMS):
            return "a file of /proc or /sys"
        return "file"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device file"


def looks_like_playbook(data: Any) -> bool:
    """Whether a loaded YAML document may be a playbook (so is checked, not skipped).

    Anything with a NoETL ``apiVersion``, ``kind: Playbook`` or a ``workflow``/``workbook`` is;
    so are documents that did not load (a broken playbook must still be reported) and empty ones.
    """
    if not isinstance(data, dict):
        return data is None
    api, kind = data.get("apiVersion"), data.get("kind")
    return (
        (isinstance(api, str) and api.startswith("noetl"))
        or kind == "Playbook"
        or any(key in data for key in _PLAYBOOK_KEYS)
    )
