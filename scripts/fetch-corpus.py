#!/usr/bin/env python3
"""Fetch the playbook corpus the tests read: NoETL's public playbooks at pinned commits.

    python3 scripts/fetch-corpus.py [--dest DIR] [--quiet]

Every file named in ``tests/data/corpus-pins.json`` is downloaded from github.com/noetl/noetl at
its pinned commit (``raw.githubusercontent.com``), its sha256 checked against the table, and laid
out under the corpus' own names (``v1/``, ``case-v2/``, ``canonical/``); the project's seed
playbooks (``seeds/``) are copied from this repository. The corpus lands in ``DIR`` (default
``$NOETLC_CORPUS_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/noetlc-tests/corpus``) only when
every file is there and checks out: a half-fetched or tampered corpus is never left in its place.
A complete corpus already there is verified and kept (no download).

``NOETLC_CORPUS_URL`` replaces the download address, a template with ``{commit}`` and ``{path}``
(a mirror, or a local server in the tests). Exit status 0: the corpus is in place; 1: it is not
(the reason on stderr). Standard library only: it runs before the project is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PINS = ROOT / "tests" / "data" / "corpus-pins.json"
TIMEOUT_S = 20  # per request; an unreachable host fails at its first file, not 255 times
WORKERS = 8


def default_dest() -> Path:
    if os.environ.get("NOETLC_CORPUS_CACHE"):
        return Path(os.environ["NOETLC_CORPUS_CACHE"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "noetlc-tests" / "corpus"


def load_pins(pins: Path = PINS) -> dict:
    return json.loads(pins.read_text(encoding="utf-8"))


def pinned_names(pins: dict) -> dict[str, str]:
    """Corpus-relative name -> sha256, for every file of the corpus (fetched and local)."""
    table = {name: entry["sha256"] for name, entry in pins["files"].items()}
    table.update({name: entry["sha256"] for name, entry in pins["local"].items()})
    return table


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def problems(corpus: Path, pins: dict) -> list[str]:
    """Why ``corpus`` is not exactly the pinned corpus (empty: it is): a pinned file missing or
    different, or a playbook (``.yaml``/``.yml``, what the tests read) that is not pinned."""
    if not corpus.is_dir():
        return [f"{corpus} does not exist"]
    expected = pinned_names(pins)
    found = {p.relative_to(corpus).as_posix() for p in corpus.rglob("*") if p.is_file()}
    out = [f"missing: {name}" for name in sorted(expected.keys() - found)]
    out += [
        f"not pinned: {name}"
        for name in sorted(found - expected.keys())
        if name.endswith((".yaml", ".yml"))
    ]
    out += [
        f"sha256 differs: {name}"
        for name in sorted(expected.keys() & found)
        if _sha256((corpus / name).read_bytes()) != expected[name]
    ]
    return out


def _download(url: str) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": "noetlc-fetch-corpus"})
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        return response.read()


def _fetch_one(template: str, name: str, entry: dict, into: Path) -> None:
    url = template.format(commit=entry["commit"], path=urllib.parse.quote(entry["path"]))
    try:
        data = _download(url)
    except (urllib.error.URLError, OSError) as exc:
        raise RuntimeError(f"{name}: cannot download {url}: {exc}") from exc
    if _sha256(data) != entry["sha256"]:
        raise RuntimeError(
            f"{name}: {url} is not the pinned file (sha256 {_sha256(data)}, "
            f"pinned {entry['sha256']}); the table is tests/data/corpus-pins.json"
        )
    target = into / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def _copy_local(name: str, entry: dict, into: Path) -> None:
    data = (ROOT / entry["from"]).read_bytes()
    if _sha256(data) != entry["sha256"]:
        raise RuntimeError(f"{name}: {entry['from']} differs from its pinned sha256")
    target = into / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def fetch(dest: Path, pins: dict, template: str | None = None) -> int:
    """Put the pinned corpus at ``dest``; returns how many files were downloaded (0: it was
    there already). Raises RuntimeError (nothing changed at ``dest``) when it cannot."""
    if not problems(dest, pins):
        return 0
    template = template or os.environ.get("NOETLC_CORPUS_URL") or pins["url"]
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        files = sorted(pins["files"].items())
        # The first file alone: an unreachable host is one error, at once.
        _fetch_one(template, *files[0], staging)
        with ThreadPoolExecutor(WORKERS) as pool:
            jobs = [pool.submit(_fetch_one, template, n, e, staging) for n, e in files[1:]]
            try:
                for job in jobs:
                    job.result()
            except RuntimeError:
                pool.shutdown(cancel_futures=True)  # one failure is enough: stop the rest
                raise
        for name, entry in sorted(pins["local"].items()):
            _copy_local(name, entry, staging)
        left = problems(staging, pins)
        if left:
            raise RuntimeError("the fetched corpus is incomplete: " + "; ".join(left[:5]))
        # Another fetch (a parallel test run) may have finished first: keep whichever is whole.
        if dest.exists() and not problems(dest, pins):
            return len(files)
        shutil.rmtree(dest, ignore_errors=True)
        try:
            os.replace(staging, dest)
        except OSError:
            if problems(dest, pins):
                raise
        return len(files)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", type=Path, default=None, help="where the corpus goes")
    parser.add_argument("--quiet", action="store_true", help="print nothing on success")
    args = parser.parse_args(argv)
    dest = args.dest or default_dest()
    pins = load_pins()
    started = time.monotonic()
    template = os.environ.get("NOETLC_CORPUS_URL") or pins["url"]
    try:
        fetched = fetch(dest, pins, template)
    except RuntimeError as exc:
        print(f"fetch-corpus: no corpus at {dest}: {exc}", file=sys.stderr)
        return 1
    if not args.quiet:
        total = len(pinned_names(pins))
        how = (
            f"downloaded {fetched} from {urllib.parse.urlsplit(template).netloc} in "
            f"{time.monotonic() - started:.1f}s, sha256 checked"
            if fetched
            else "already there, sha256 checked"
        )
        print(f"fetch-corpus: {total} files at {dest} ({how})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
