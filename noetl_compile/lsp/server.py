"""`noetlc lsp`: a language server over stdio (pygls) running the checker in process.

Each open playbook is checked when it is opened and again after each change: at once when the
edits had paused, else once they pause for ``DEBOUNCE_S`` (typing a word re-checks at its first
key and once at its end, not per key); the checker's findings are published as LSP diagnostics. Go-to-definition, completion and hover answer from the index of
the last version that read as a playbook (``index.py``), so a half-typed line does not take
completion away.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from .. import __version__
from ..diagnostics import Diagnostic, Severity
from ..report import _Redactor as Redactor  # the masking every report format applies
from .index import DocumentIndex, Place, build_index, completion_context, word_before

# Long enough that a burst of keystrokes is checked once, short enough to stay well inside the
# 300 ms an editor user reads as "immediate" (checking a 500-step playbook takes ~100-250 ms).
DEBOUNCE_S = 0.03

SEVERITY = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFO: types.DiagnosticSeverity.Information,
}


def _path(uri: str) -> str:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def _range(place: Place) -> types.Range:
    return types.Range(
        start=types.Position(line=place.line, character=place.start),
        end=types.Position(line=place.line, character=place.end),
    )


def to_lsp(diagnostic: Diagnostic, lines: list[str], redact: Redactor) -> types.Diagnostic:
    """One finding, its range running over the word it points at (at least one character); a
    literal secret found in the file is masked in its text, as in every report format."""
    line = max(diagnostic.position.line - 1, 0)
    start = max(diagnostic.position.col - 1, 0)
    text = lines[line] if line < len(lines) else ""
    end = start
    while end < len(text) and not text[end].isspace() and text[end] not in ":,{}[]":
        end += 1
    message = diagnostic.message + (f"\n{diagnostic.hint}" if diagnostic.hint else "")
    message = redact(diagnostic.path, message) or ""
    return types.Diagnostic(
        range=types.Range(
            start=types.Position(line=line, character=start),
            end=types.Position(line=line, character=max(end, start + 1)),
        ),
        message=message,
        severity=SEVERITY[diagnostic.severity],
        code=diagnostic.code,
        source="noetlc",
    )


class NoetlLanguageServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("noetlc", __version__)
        self.indexes: dict[str, DocumentIndex] = {}
        self.pending: dict[str, asyncio.Task] = {}
        self.changed: dict[str, float] = {}  # loop time of each document's last change

    def check(self, uri: str) -> None:
        document = self.workspace.get_text_document(uri)
        text = document.source
        # As in the CLI: the cyclic collector would cost more than parsing (a 500-step
        # playbook's check allocates ~10^5 objects and collections trigger all through it).
        gc.disable()
        try:
            index = build_index(text, _path(uri))
        finally:
            gc.enable()
        if index.playbook is not None or uri not in self.indexes:
            self.indexes[uri] = index
        lines = text.split("\n")
        redact = Redactor(index.diagnostics)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=uri,
                version=document.version,
                diagnostics=[to_lsp(d, lines, redact) for d in index.diagnostics],
            )
        )

    def schedule(self, uri: str) -> None:
        """Check ``uri`` now if its edits had paused, else once they pause again.

        Leading and trailing edge: the first change after a pause is checked at once (nothing
        waits for a debounce that only batches keystrokes); a change arriving within
        ``DEBOUNCE_S`` of the previous one cancels the waiting check and waits itself, so a
        burst is checked at its start and once at its end."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        previous, self.changed[uri] = self.changed.get(uri), now
        waiting = self.pending.pop(uri, None)
        if waiting is not None:
            waiting.cancel()
        burst = previous is not None and now - previous < DEBOUNCE_S
        if waiting is None and not burst:
            self.check(uri)
            return

        async def later() -> None:
            await asyncio.sleep(DEBOUNCE_S)
            self.pending.pop(uri, None)
            self.check(uri)

        self.pending[uri] = loop.create_task(later())


server = NoetlLanguageServer()


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: NoetlLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.check(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: NoetlLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: NoetlLanguageServer, params: types.DidSaveTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: NoetlLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    waiting = ls.pending.pop(uri, None)
    if waiting is not None:
        waiting.cancel()
    ls.indexes.pop(uri, None)
    ls.changed.pop(uri, None)
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


@server.feature(types.TEXT_DOCUMENT_DEFINITION)
def definition(ls: NoetlLanguageServer, params: types.DefinitionParams) -> types.Location | None:
    uri = params.text_document.uri
    index = ls.indexes.get(uri)
    place = index.definition(params.position.line, params.position.character) if index else None
    return types.Location(uri=uri, range=_range(place)) if place else None


@server.feature(types.TEXT_DOCUMENT_HOVER)
def hover(ls: NoetlLanguageServer, params: types.HoverParams) -> types.Hover | None:
    index = ls.indexes.get(params.text_document.uri)
    text = index.hover(params.position.line, params.position.character) if index else None
    if text is None:
        return None
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text))


@server.feature(
    types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=[".", " ", ":"])
)
def completion(ls: NoetlLanguageServer, params: types.CompletionParams) -> types.CompletionList:
    uri = params.text_document.uri
    index = ls.indexes.get(uri)
    lines = ls.workspace.get_text_document(uri).lines
    line = params.position.line
    line_text = lines[line].rstrip("\r\n") if line < len(lines) else ""
    column = min(params.position.character, len(line_text))
    context = completion_context(line_text, column)
    typed = word_before(line_text, column)
    items: list[types.CompletionItem] = []
    if index is not None:
        steps = list(index.definitions)
        if context == "kind":
            items = [
                _item(k, types.CompletionItemKind.EnumMember, "tool kind") for k in index.kinds()
            ]
        elif context == "workload":
            items = [
                _item(k, types.CompletionItemKind.Field, "workload key")
                for k in index.workload_keys
            ]
        elif context == "template":
            items = [_item(s, types.CompletionItemKind.Reference, "step result") for s in steps]
            items += [
                _item(k, types.CompletionItemKind.Field, "workload key")
                for k in index.workload_keys
            ]
        else:
            items = [_item(s, types.CompletionItemKind.Reference, "step") for s in steps]
    items = [item for item in items if item.label.startswith(typed)]
    return types.CompletionList(is_incomplete=False, items=items)


def _item(label: str, kind: types.CompletionItemKind, detail: str) -> types.CompletionItem:
    return types.CompletionItem(label=label, kind=kind, detail=detail)


def serve() -> int:
    logging.basicConfig(level=logging.WARNING)
    gc.freeze()  # what is loaded by now lives as long as the server: never scan it again
    server.start_io()
    return 0
