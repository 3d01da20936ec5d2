"""The playbook corpus of a fresh clone: ``scripts/fetch-corpus.py`` against a local stand-in for
github.com (the real script, over HTTP on 127.0.0.1), the pins table against the corpus in use
and the project's seed playbooks, and a test run without the corpus, which says how many tests
it could not run and fails none of them."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests import corpus
from tests.corpus import CORPUS, FETCH_SCRIPT, ROOT

FETCH = corpus.fetch_module()


def _sha256(path: Path) -> str:
    return FETCH._sha256(path.read_bytes())


class _GitHub:
    """Serves ``/<commit>/<path>`` as raw.githubusercontent.com does, from the corpus in use;
    ``altered`` names corpus files served with one byte more."""

    def __init__(self, altered: frozenset[str] = frozenset()) -> None:
        by_url = {
            f"/{entry['commit']}/{entry['path']}": name
            for name, entry in corpus.pins()["files"].items()
        }
        self.requests = 0
        github = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                github.requests += 1
                name = by_url.get(self.path)
                if name is None:
                    self.send_error(404)
                    return
                body = (CORPUS / name).read_bytes() + (b"\n" if name in altered else b"")
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/{{commit}}/{{path}}"


@pytest.fixture
def github(request) -> Iterator[_GitHub]:
    stand_in = _GitHub(frozenset(getattr(request, "param", ())))
    thread = threading.Thread(target=stand_in.server.serve_forever, daemon=True)
    thread.start()
    yield stand_in
    stand_in.server.shutdown()
    stand_in.server.server_close()


def _fetch(dest: Path, url: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, NOETLC_CORPUS_URL=url)
    return subprocess.run(
        [sys.executable, str(FETCH_SCRIPT), "--dest", str(dest)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.corpus
def test_the_corpus_in_use_is_the_pinned_one() -> None:
    assert FETCH.problems(CORPUS, corpus.pins()) == []


def test_the_pinned_seeds_are_the_projects_own() -> None:
    local = corpus.pins()["local"]
    assert sorted(local) == sorted(f"seeds/{p.parent.name[6:]}.yaml" for p in _golden_seeds())
    for name, entry in local.items():
        assert _sha256(ROOT / entry["from"]) == entry["sha256"], name
        assert corpus.seed(Path(name).stem) == ROOT / entry["from"]


def _golden_seeds() -> list[Path]:
    return sorted((ROOT / "golden").glob("seeds_*/playbook.yaml"))


def test_every_pin_names_a_full_commit_of_the_public_repository() -> None:
    pins = corpus.pins()
    assert pins["url"].startswith("https://raw.githubusercontent.com/noetl/noetl/")
    commits = {entry["commit"] for entry in pins["files"].values()}
    assert commits == set(pins["commits"])
    assert all(len(c) == 40 and set(c) <= set("0123456789abcdef") for c in commits)
    assert len(pins["files"]) == 255  # 254 playbooks and LICENSE-MIT


@pytest.mark.corpus
def test_fetch_lays_out_the_pinned_corpus_once(github, tmp_path) -> None:
    dest = tmp_path / "cache" / "corpus"
    first = _fetch(dest, github.url)
    assert first.returncode == 0, first.stderr
    host = github.url.split("/")[2]
    assert f"downloaded {len(corpus.pins()['files'])} from {host} in " in first.stdout
    assert FETCH.problems(dest, corpus.pins()) == []
    for name in FETCH.pinned_names(corpus.pins()):
        assert (dest / name).read_bytes() == (CORPUS / name).read_bytes(), name
    assert sorted(p.name for p in dest.iterdir()) == [
        "LICENSE-MIT",
        "canonical",
        "case-v2",
        "seeds",
        "v1",
    ]
    asked = github.requests
    again = _fetch(dest, github.url)
    assert again.returncode == 0 and "already there, sha256 checked" in again.stdout
    assert github.requests == asked  # a complete cache is verified, not downloaded again
    assert [p.name for p in dest.parent.iterdir()] == ["corpus"]  # no staging folder left


@pytest.mark.corpus
@pytest.mark.parametrize("github", [("canonical/hello_world/hello_world.yaml",)], indirect=True)
def test_a_file_that_is_not_the_pinned_one_is_refused(github, tmp_path) -> None:
    dest = tmp_path / "cache" / "corpus"
    done = _fetch(dest, github.url)
    assert done.returncode == 1
    assert "canonical/hello_world/hello_world.yaml: " in done.stderr
    assert "is not the pinned file" in done.stderr
    assert list((tmp_path / "cache").iterdir()) == []  # nothing half-fetched left behind


def test_an_unreachable_host_leaves_no_corpus(tmp_path) -> None:
    dest = tmp_path / "cache" / "corpus"
    done = _fetch(dest, "http://127.0.0.1:9/{commit}/{path}")  # the discard port: refused
    assert done.returncode == 1
    assert f"fetch-corpus: no corpus at {dest}: " in done.stderr
    assert "cannot download http://127.0.0.1:9/" in done.stderr
    assert not dest.exists()


def test_without_the_corpus_its_tests_are_counted_as_not_run(tmp_path) -> None:
    tests = [
        "tests/test_golden.py::test_every_seed_has_an_identical_golden_case",
        "tests/test_schema.py::test_corpus_validates_exactly_when_check_finds_no_structural_error",
        "tests/test_schema.py::test_a_templated_kind_and_a_typo",
    ]
    env = dict(os.environ, NOETLC_CORPUS=str(tmp_path / "nowhere"))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", *tests],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 passed, 2 skipped" in done.stdout
    assert "needs NoETL's public playbooks" in done.stdout  # -ra names each skip's reason
    assert "2 tests NOT RUN: they need NoETL's public playbooks" in done.stdout
    assert "python3 scripts/fetch-corpus.py" in done.stdout
