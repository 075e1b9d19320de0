"""``autograd-lint server`` driven over stdio by a real LSP client (pytest-lsp, on pygls's client)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import pytest_lsp
from lsp_documents import WAIT, open_document, published
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

BUGGY = textwrap.dedent(
    """
    import torch


    class Pair(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return [grad * 2]
    """
).lstrip()


# One server per module (and xdist worker), shared by its tests: starting one costs about 2 s
# of CPU, on each of CI's four interpreters. The tests stay independent: each opens its own
# file, and every wait names the document (and version) it waits for.
@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "autograd_lint", "server"]), scope="module"
)
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(types.InitializeParams(capabilities=types.ClientCapabilities()))
    yield
    await lsp_client.shutdown_session()


def apply_edits(text: str, edits: list[types.TextEdit]) -> str:
    """What an editor does with a quick fix's edits (positions in ASCII text are code points)."""
    lines = text.splitlines(keepends=True)

    def offset(position: types.Position) -> int:
        return sum(len(line) for line in lines[: position.line]) + position.character

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
    return text




async def change_document(client: LanguageClient, path: Path, text: str, version: int) -> list[types.Diagnostic]:
    uri = path.as_uri()
    waiting = asyncio.ensure_future(published(client, uri, version))
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            [types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )
    return await waiting


async def quick_fixes(client: LanguageClient, path: Path, diagnostic: types.Diagnostic) -> list[types.CodeAction]:
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=path.as_uri()),
            range=diagnostic.range,
            context=types.CodeActionContext(diagnostics=[diagnostic]),
        )
    )
    return [action for action in actions or [] if isinstance(action, types.CodeAction)]


@pytest.mark.asyncio(loop_scope="module")
async def test_diagnostic_quick_fix_then_nothing(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "ops.py"
    diagnostics = await open_document(client, path, BUGGY)
    assert [(d.code, d.range.start.line, d.range.start.character) for d in diagnostics] == [("AGL016", 10, 8)]
    actions = await quick_fixes(client, path, diagnostics[0])
    titles = [action.title for action in actions]
    assert titles[0].startswith("Fix AGL016") and actions[0].is_preferred
    assert any(title.startswith("Add `# noqa: AGL016`") for title in titles)
    assert actions[0].edit is not None and actions[0].edit.changes is not None
    fixed = apply_edits(BUGGY, actions[0].edit.changes[path.as_uri()])
    assert "return (grad * 2,)" in fixed
    assert await change_document(client, path, fixed, 2) == []


@pytest.mark.asyncio(loop_scope="module")
async def test_add_noqa_action_and_hover(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "ops.py"
    diagnostics = await open_document(client, path, BUGGY)
    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri=path.as_uri()), diagnostics[0].range.start)
    )
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert hover.contents.value.startswith("# AGL016: ")
    assert "## Why is this bad?" in hover.contents.value
    noqa = next(a for a in await quick_fixes(client, path, diagnostics[0]) if a.title.startswith("Add `# noqa"))
    assert noqa.edit is not None and noqa.edit.changes is not None
    silenced = apply_edits(BUGGY, noqa.edit.changes[path.as_uri()])
    assert "return [grad * 2]  # noqa: AGL016\n" in silenced
    assert await change_document(client, path, silenced, 2) == []


@pytest.mark.asyncio(loop_scope="module")
async def test_syntax_error_is_one_diagnostic_and_the_server_goes_on(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "ops.py"
    broken = BUGGY.replace("def forward(ctx, x):", "def forward(ctx, x:")
    diagnostics = await open_document(client, path, broken)
    assert len(diagnostics) == 1
    assert diagnostics[0].severity == types.DiagnosticSeverity.Error and "syntax" in diagnostics[0].message.lower()
    assert [d.code for d in await change_document(client, path, BUGGY, 2)] == ["AGL016"]


@pytest.mark.asyncio(loop_scope="module")
async def test_project_configuration_is_honoured(client: LanguageClient, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.autograd-lint]\nignore = ["AGL016"]\n')
    (tmp_path / "pkg").mkdir()
    assert await open_document(client, tmp_path / "pkg" / "ops.py", BUGGY) == []
    (tmp_path / "pyproject.toml").write_text('[tool.autograd-lint]\nselct = ["AGL016"]\n')
    assert await change_document(client, tmp_path / "pkg" / "ops.py", BUGGY + "\n", 2) == []
    # The server shows the message before it publishes the (empty) diagnostics.
    assert any("unknown key 'selct'" in message.message for message in client.messages)


@pytest.mark.asyncio(loop_scope="module")
async def test_a_burst_of_changes_ends_with_the_newest_text_checked(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "ops.py"
    await open_document(client, path, BUGGY)
    fixed = BUGGY.replace("[grad * 2]", "(grad * 2,)")
    # Only the newest text has two Functions that return a list.
    newest = BUGGY + BUGGY.replace("import torch\n", "").replace("class Pair", "class Other")
    versions = [fixed, BUGGY, fixed, BUGGY, newest]
    for version, text in enumerate(versions, start=2):
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(uri=path.as_uri(), version=version),
                [types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    async def newest_published() -> None:
        while [d.code for d in client.diagnostics.get(path.as_uri(), [])] != ["AGL016", "AGL016"]:
            await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)

    await asyncio.wait_for(newest_published(), WAIT)


def test_without_pygls_the_command_says_how_to_get_it(tmp_path: Path) -> None:
    hide_pygls = "import sys; sys.modules['pygls'] = None; from autograd_lint.cli import main; sys.exit(main(['server']))"
    result = subprocess.run([sys.executable, "-c", hide_pygls], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and "pip install 'autograd-lint[lsp]'" in result.stderr
