"""Latency of `noetlc lsp`: from a change of a playbook to its diagnostics, over stdio.

A real client (pygls's) starts the server, opens an N-step chain and sends changes that add and
remove an unknown arc target; the time from each didChange to the publishDiagnostics answering
it is measured. Baseline in the same script: `check_text` of the same text in this process (what
the server must do at least), so the ratio is the server's overhead (debounce, JSON-RPC, the
editor index). Goal (issue 25): diagnostics for 500 steps within 300 ms of a change.

    python bench/lsp_latency.py [STEPS ...]      # default: 100 500 2000
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from noetl_compile.check import check_text
from tests.test_lsp import chain

CHANGES = 12


async def server_latencies(text: str) -> list[float]:
    client = LanguageClient("bench", "1")
    published: asyncio.Queue = asyncio.Queue()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        published.put_nowait((time.perf_counter(), params))

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    await client.start_io(sys.executable, "-m", "noetl_compile", "lsp", env=env)
    await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities()))
    client.initialized(types.InitializedParams())
    uri = "file:///bench/big.yaml"
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="yaml", version=1, text=text)
        )
    )
    await asyncio.wait_for(published.get(), 120)
    last = text.rsplit("    - step: ", 1)
    broken = last[0] + "    - step: nowhere" + last[1][last[1].index("\n") :]
    latencies = []
    for version in range(2, 2 + CHANGES):
        body = broken if version % 2 == 0 else text
        sent = time.perf_counter()
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=body)],
            )
        )
        arrived, params = await asyncio.wait_for(published.get(), 120)
        assert params.version == version
        latencies.append(arrived - sent)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return latencies


def check_latency(text: str) -> float:
    timings = []
    for _ in range(5):
        start = time.perf_counter()
        check_text(text, "big.yaml")
        timings.append(time.perf_counter() - start)
    return min(timings)


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [100, 500, 2000]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'steps':>6} {'check in process':>17} {'lsp median':>11} {'lsp best':>9} {'ratio':>6}")
    for steps in sizes:
        text = chain(steps)
        baseline = check_latency(text)
        latencies = asyncio.run(server_latencies(text))
        median = statistics.median(latencies)
        print(
            f"{steps:>6} {baseline * 1000:>14.0f} ms {median * 1000:>8.0f} ms "
            f"{min(latencies) * 1000:>6.0f} ms {median / baseline:>6.2f}"
        )


if __name__ == "__main__":
    main()
