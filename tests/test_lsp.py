"""`noetlc lsp` driven over stdio by pygls's LSP client, as an editor drives it.

One server process per test module: initialize, open, change, definition, completion, hover,
then the latency of diagnostics after a change to a 500-step playbook (printed; asserted with a
bound honest under a loaded CI machine).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

ROOT = Path(__file__).resolve().parents[1]

PLAYBOOK = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata:
  name: demo
  path: demo/lsp
workload:
  city: Paris
  limit: 3
workflow:
  - step: start
    tool: {kind: noop}
    next:
      arcs:
        - step: fetch
  - step: fetch
    tool:
      kind: python
      code: |
        result = {"temp": 20}
    next:
      arcs:
        - step: report
          when: "{{ fetch.temp > 10 }}"
        - step: done
  - step: report
    tool:
      kind: python
      input:
        t: "{{ fetch.temp }}"
        c: "{{ workload.city }}"
      code: |
        result = t
    next: done
  - step: done
    tool: {kind: noop}
"""


def chain(n: int) -> str:
    lines = [
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: big, path: t/big}\n",
        "workload:\n  base: 1\nworkflow:\n",
    ]
    for i in range(n):
        name = "start" if i == 0 else f"s{i}"
        prev = "workload.base" if i == 0 else ("start" if i == 1 else f"s{i - 1}") + ".value"
        lines.append(
            f"  - step: {name}\n    tool:\n      kind: python\n"
            f'      input: {{x: "{{{{ {prev} }}}}"}}\n'
            "      code: |\n        result = {'value': x}\n"
        )
        if i + 1 < n:
            lines.append(f"    next:\n      arcs:\n        - step: s{i + 1}\n")
    return "".join(lines)


class Session:
    """A started `noetlc lsp` and the diagnostics it has published, per uri."""

    def __init__(self) -> None:
        self.client = LanguageClient("noetlc-test", "1")
        self.diagnostics: dict[str, asyncio.Queue] = {}

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def published(params: types.PublishDiagnosticsParams) -> None:
            self.queue(params.uri).put_nowait((time.perf_counter(), params))

    def queue(self, uri: str) -> asyncio.Queue:
        return self.diagnostics.setdefault(uri, asyncio.Queue())

    async def start(self) -> types.InitializeResult:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        await self.client.start_io(sys.executable, "-m", "noetl_compile", "lsp", env=env)
        result = await self.client.initialize_async(
            types.InitializeParams(capabilities=types.ClientCapabilities(), process_id=os.getpid())
        )
        self.client.initialized(types.InitializedParams())
        return result

    def open(self, uri: str, text: str) -> None:
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id="yaml", version=1, text=text
                )
            )
        )

    def change(self, uri: str, version: int, text: str) -> None:
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    async def published(
        self, uri: str, timeout: float = 30
    ) -> tuple[float, types.PublishDiagnosticsParams]:
        return await asyncio.wait_for(self.queue(uri).get(), timeout)

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process so far (Linux /proc)."""
        fields = Path(f"/proc/{self.client._server.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()


def _at(params_cls, uri: str, line: int, character: int, **extra):
    return params_cls(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=line, character=character),
        **extra,
    )


def _position_of(text: str, needle: str, occurrence: int = 0) -> tuple[int, int]:
    offset = -1
    for _ in range(occurrence + 1):
        offset = text.index(needle, offset + 1)
    line = text.count("\n", 0, offset)
    return line, offset - (text.rfind("\n", 0, offset) + 1)


def test_editor_session(tmp_path: Path) -> None:
    asyncio.run(_editor_session(tmp_path))


async def _editor_session(tmp_path: Path) -> None:
    session = Session()
    init = await session.start()
    capabilities = init.capabilities
    assert capabilities.definition_provider and capabilities.hover_provider
    assert capabilities.completion_provider is not None
    uri = (tmp_path / "demo.yaml").as_uri()
    try:
        # open: a clean playbook publishes no finding
        session.open(uri, PLAYBOOK)
        _, params = await session.published(uri)
        assert not params.diagnostics, params.diagnostics

        # change: a typo in an arc target is R201 at the arc, with the suggestion
        broken = PLAYBOOK.replace("- step: report\n", "- step: reprot\n", 1)
        session.change(uri, 2, broken)
        _, params = await session.published(uri)
        codes = {(d.code, d.range.start.line) for d in params.diagnostics}
        line, column = _position_of(broken, "reprot")
        assert ("R201", line) in codes, params.diagnostics
        r201 = next(d for d in params.diagnostics if d.code == "R201")
        assert "report" in r201.message and r201.source == "noetlc"
        assert r201.range.start.character == column
        assert r201.severity == types.DiagnosticSeverity.Error

        # and back: the finding goes away
        session.change(uri, 3, PLAYBOOK)
        _, params = await session.published(uri)
        assert not params.diagnostics, params.diagnostics

        # A literal secret is reported (X601) and never sent in a message's text.
        secret = (tmp_path / "secret.yaml").as_uri()
        leaky = PLAYBOOK.replace(
            "kind: noop}", 'kind: http, url: "https://u:Sup3rS3cretPw@h.example/x"}', 1
        ).replace("    next:\n      arcs:\n        - step: fetch\n", "    next: fetch\n", 1)
        session.open(secret, leaky)
        _, params = await session.published(secret)
        assert "X601" in {d.code for d in params.diagnostics}
        assert all("Sup3rS3cretPw" not in d.message for d in params.diagnostics)

        # A YAML file that is no playbook (a compose file) gets no findings.
        compose = (tmp_path / "docker-compose.yml").as_uri()
        session.open(compose, "services:\n  db: {image: postgres}\n")
        _, params = await session.published(compose)
        assert not params.diagnostics

        client = session.client
        definition_line, _ = _position_of(PLAYBOOK, "- step: fetch", 1)
        # definition from an arc's `step:`
        line, column = _position_of(PLAYBOOK, "step: fetch")
        found = await client.text_document_definition_async(
            _at(types.DefinitionParams, uri, line, column + len("step: ") + 2)
        )
        assert isinstance(found, types.Location) and found.uri == uri
        assert found.range.start == types.Position(line=definition_line, character=10)
        # definition from a template reference
        line, column = _position_of(PLAYBOOK, "fetch.temp }}")
        found = await client.text_document_definition_async(
            _at(types.DefinitionParams, uri, line, column + 1)
        )
        assert found.range.start.line == definition_line
        # nothing to go to from a workload key
        line, column = _position_of(PLAYBOOK, "city: Paris")
        found = await client.text_document_definition_async(
            _at(types.DefinitionParams, uri, line, column)
        )
        assert found is None

        # completion: step names after `step:`, tool kinds after `kind:`, workload keys in a
        # template after `workload.`
        typing = PLAYBOOK.replace("        - step: done\n", "        - step: re\n", 1)
        session.change(uri, 4, typing)
        await session.published(uri)
        line, column = _position_of(typing, "step: re\n")
        items = await client.text_document_completion_async(
            _at(types.CompletionParams, uri, line, column + len("step: re"))
        )
        assert [item.label for item in items.items] == ["report"]
        line, column = _position_of(typing, "kind: python")
        items = await client.text_document_completion_async(
            _at(types.CompletionParams, uri, line, column + len("kind: py"))
        )
        assert [item.label for item in items.items] == ["python"]
        line, column = _position_of(typing, "kind: noop")
        items = await client.text_document_completion_async(
            _at(types.CompletionParams, uri, line, column + len("kind: "))
        )
        labels = {item.label for item in items.items}
        assert {"http", "postgres", "python", "duckdb", "noop"} <= labels
        line, column = _position_of(typing, "workload.city")
        items = await client.text_document_completion_async(
            _at(types.CompletionParams, uri, line, column + len("workload."))
        )
        assert [item.label for item in items.items] == ["city", "limit"]
        line, column = _position_of(typing, "fetch.temp }}")
        items = await client.text_document_completion_async(
            _at(types.CompletionParams, uri, line, column + 2)
        )
        assert {item.label for item in items.items} == {"fetch"}

        # hover over a reference to `fetch`: its tool and the result fields read of it
        line, column = _position_of(PLAYBOOK, "fetch.temp > 10")
        shown = await client.text_document_hover_async(
            _at(types.HoverParams, uri, line, column + 2)
        )
        text = shown.contents.value
        assert "step `fetch`" in text and "tool: `python`" in text
        assert "`fetch.temp` (line 23, 29)" in text
        assert "next: `report`, `re`" in text  # the document as changed last
    finally:
        await session.stop()


def test_diagnostics_of_a_500_step_playbook_after_a_change(tmp_path: Path) -> None:
    asyncio.run(_latency(tmp_path))


async def _latency(tmp_path: Path) -> None:
    session = Session()
    await session.start()
    uri = (tmp_path / "big.yaml").as_uri()
    text = chain(500)
    try:
        session.open(uri, text)
        _, params = await session.published(uri)
        assert not params.diagnostics, params.diagnostics
        latencies, cpu = [], []
        for version in range(2, 12):
            # Each change introduces or removes an unknown arc target at the end.
            broken = version % 2 == 0
            changed = text.replace("    - step: s499\n", "    - step: s4999\n") if broken else text
            sent, used = time.perf_counter(), session.cpu_seconds()
            session.change(uri, version, changed)
            arrived, params = await session.published(uri)
            latencies.append(arrived - sent)
            cpu.append(session.cpu_seconds() - used)
            assert params.version == version
            assert any(d.code == "R201" for d in params.diagnostics) == broken
        latencies.sort()
        cpu.sort()
        median = latencies[len(latencies) // 2]
        # Wall time depends on the machine's load; the server's own CPU time per change is what
        # an idle machine would wait (plus the debounce).
        print(
            f"\n500-step playbook, diagnostics after a change: median {median * 1000:.0f} ms, "
            f"best {latencies[0] * 1000:.0f} ms, worst {latencies[-1] * 1000:.0f} ms; server CPU "
            f"per change median {cpu[len(cpu) // 2] * 1000:.0f} ms; load {os.getloadavg()[0]:.1f}"
        )
        # 300 ms is the goal on an idle machine (see the printed median); CI runs on two shared
        # cores, so the assertion leaves room for load.
        assert median < 1.5
    finally:
        await session.stop()
