"""What the language-server tests share: waiting for a document's diagnostics.

The tests of a module share one server (module-scoped pytest-lsp clients), so a wait
names the document and version it waits for: a late notification for another test's
file never satisfies it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsprotocol import types
from pytest_lsp import LanguageClient

WAIT = 60  # seconds; a server that stops answering fails the test instead of hanging it


async def published(client: LanguageClient, uri: str, version: int) -> list[types.Diagnostic]:
    """The diagnostics the server publishes for ``version`` of ``uri``."""

    async def wait() -> list[types.Diagnostic]:
        while True:
            params = await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
            if params.uri == uri and params.version == version:
                return list(params.diagnostics)

    return await asyncio.wait_for(wait(), WAIT)


async def open_document(client: LanguageClient, path: Path, text: str) -> list[types.Diagnostic]:
    """Open ``path`` with ``text`` (version 1) and return its first diagnostics."""
    uri = path.as_uri()
    waiting = asyncio.ensure_future(published(client, uri, 1))
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
    )
    return await waiting
