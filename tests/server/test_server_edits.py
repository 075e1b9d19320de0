"""Quick fixes and diagnostic ranges of ``autograd-lint server`` on odd text, after edits, and for
clients that take versioned edits or resolve code actions; driven by a real LSP client (pytest-lsp)."""

from __future__ import annotations

import asyncio
import re
import sys
import textwrap
from pathlib import Path

import pytest
import pytest_lsp
from lsp_documents import WAIT, open_document, published
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "autograd_lint", "server"])
# AGL009 (an unsafe fix: add @once_differentiable and its import) and AGL016 (a safe one).
SOURCE = textwrap.dedent(
    """
    import torch


    class XSinX(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            s = torch.sin(a)
            ctx.save_for_backward(a, s)
            return a * s

        @staticmethod
        def backward(ctx, grad):
            a, s = ctx.saved_tensors
            return grad * (s + a * torch.cos(a))


    class Pair(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return [grad * 2]
    """
).lstrip()
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def lsp_lines(text: str) -> list[str]:
    """The lines of ``text`` as the protocol counts them: only \\n, \\r\\n and \\r end one."""
    return _LINE.findall(text)


def offset(text: str, position: types.Position) -> int:
    """A protocol position (UTF-16 units, the default encoding) as an index into ``text``."""
    lines = lsp_lines(text)
    before = sum(len(line) for line in lines[: position.line])
    line = lines[position.line] if position.line < len(lines) else ""
    units = 0
    for index, char in enumerate(line):
        if units >= position.character:
            return before + index
        units += 2 if ord(char) > 0xFFFF else 1
    return before + len(line)


def apply_edits(text: str, edits: list[types.TextEdit]) -> str:
    """What an editor does with a quick fix's edits."""
    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[: offset(text, edit.range.start)] + edit.new_text + text[offset(text, edit.range.end) :]
    return text


def edits_of(action: types.CodeAction, uri: str) -> list[types.TextEdit]:
    assert action.edit is not None
    if action.edit.document_changes:
        (change,) = action.edit.document_changes
        assert isinstance(change, types.TextDocumentEdit)
        return list(change.edits)
    assert action.edit.changes is not None
    return list(action.edit.changes[uri])


async def start(client: LanguageClient, capabilities: types.ClientCapabilities) -> None:
    await client.initialize_session(types.InitializeParams(capabilities=capabilities))


# One server per module (and xdist worker), shared by its tests: starting one costs about 2 s
# of CPU, on each of CI's four interpreters. The tests stay independent: each opens its own
# file, and every wait names the document and version it waits for.
@pytest_lsp.fixture(config=SERVER, scope="module")
async def client(lsp_client: LanguageClient):
    await start(lsp_client, types.ClientCapabilities())
    yield
    await lsp_client.shutdown_session()


VERSIONED = types.ClientCapabilities(
    workspace=types.WorkspaceClientCapabilities(
        workspace_edit=types.WorkspaceEditClientCapabilities(document_changes=True)
    ),
    text_document=types.TextDocumentClientCapabilities(
        code_action=types.CodeActionClientCapabilities(
            resolve_support=types.ClientCodeActionResolveOptions(properties=["edit"]),
            data_support=True,
        )
    ),
)


@pytest_lsp.fixture(config=SERVER, scope="module")
async def resolving_client(lsp_client: LanguageClient):
    await start(lsp_client, VERSIONED)
    yield
    await lsp_client.shutdown_session()




def change(client: LanguageClient, path: Path, text: str, version: int) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=path.as_uri(), version=version),
            [types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


async def actions_for(client: LanguageClient, path: Path, diagnostic: types.Diagnostic) -> list[types.CodeAction]:
    actions = await asyncio.wait_for(
        client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=path.as_uri()),
                range=diagnostic.range,
                context=types.CodeActionContext(diagnostics=[diagnostic]),
            )
        ),
        WAIT,
    )
    return [action for action in actions or [] if isinstance(action, types.CodeAction)]


def at(text: str, diagnostic: types.Diagnostic) -> str:
    """The buffer's text from the diagnostic's start to the end of its line."""
    start = offset(text, diagnostic.range.start)
    return text[start : start + len(lsp_lines(text)[diagnostic.range.start.line])].split("\n")[0].rstrip("\r")


def fixed_as_expected(text: str) -> bool:
    """The AGL009 fix put @once_differentiable right under backward's @staticmethod, and nothing else moved."""
    return (
        "from torch.autograd.function import once_differentiable" in text
        and "    @staticmethod\n    @once_differentiable\n    def backward(ctx, grad):\n        a, s" in text.replace("\r\n", "\n").replace("\r", "\n")
    )


# Characters that str.splitlines() takes for line ends and Python (and the protocol) do not.
ODD_BREAKS = ["\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("odd", ODD_BREAKS, ids=lambda c: f"U+{ord(c):04X}")
async def test_ranges_and_fixes_right_below_odd_line_breaks(client: LanguageClient, tmp_path: Path, odd: str) -> None:
    # In a comment and in a string above the findings, and a non-ASCII name beside.
    text = SOURCE.replace("import torch\n", f"import torch  # page{odd}break\nNOTE = 'a{odd}b'  # é𝛼\n", 1)
    path = tmp_path / "ops.py"
    diagnostics = await open_document(client, path, text)
    assert sorted(d.code for d in diagnostics) == ["AGL009", "AGL016"]
    by_code = {d.code: d for d in diagnostics}
    assert at(text, by_code["AGL016"]).startswith("return [grad * 2]")
    assert at(text, by_code["AGL009"]).startswith("def backward(ctx, grad):")
    (fix, noqa) = await actions_for(client, path, by_code["AGL009"])
    assert fix.title.startswith("Fix AGL009")
    fixed = apply_edits(text, edits_of(fix, path.as_uri()))
    assert fixed_as_expected(fixed) and f"# page{odd}break\n" in fixed and f"'a{odd}b'  # é𝛼\n" in fixed
    silenced = apply_edits(text, edits_of(noqa, path.as_uri()))
    assert silenced.count("# noqa: AGL009") == 1 and "    def backward(ctx, grad):  # noqa: AGL009\n" in silenced
    (fix16, _) = await actions_for(client, path, by_code["AGL016"])
    assert apply_edits(text, edits_of(fix16, path.as_uri())) == text.replace("return [grad * 2]", "return (grad * 2,)")


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("ending", ["\r\n", "\r"], ids=["crlf", "cr"])
async def test_fixes_keep_the_line_endings(client: LanguageClient, tmp_path: Path, ending: str) -> None:
    text = ("\t# a tab, and 'ü'\n" + SOURCE).replace("\n", ending)
    path = tmp_path / "ops.py"
    diagnostics = await open_document(client, path, text)
    agl009 = next(d for d in diagnostics if d.code == "AGL009")
    assert at(text, agl009).startswith("def backward(ctx, grad):")
    fix = (await actions_for(client, path, agl009))[0]
    fixed = apply_edits(text, edits_of(fix, path.as_uri()))
    assert fixed_as_expected(fixed)
    other = "\n" if ending != "\n" else "\r"
    assert other not in fixed.replace("\r\n", "") if ending == "\r" else "\n" not in fixed.replace("\r\n", "")


# The buffers a fix is asked for right after an edit: as written, with CRLF line ends, and
# with form feeds (a page-break line between sections, and one inside a comment).
AFTER_EDIT_BUFFERS = {
    "lf": SOURCE,
    "crlf": SOURCE.replace("\n", "\r\n"),
    "form-feed": SOURCE.replace("import torch\n", "import torch  # page\x0cbreak\n\x0c\n", 1),
}


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("buffer", AFTER_EDIT_BUFFERS)
async def test_a_fix_asked_right_after_an_edit_is_never_for_the_old_text(
    client: LanguageClient, tmp_path: Path, buffer: str
) -> None:
    text = AFTER_EDIT_BUFFERS[buffer]
    ending = "\r\n" if buffer == "crlf" else "\n"
    path = tmp_path / "ops.py"
    diagnostics = await open_document(client, path, text)
    agl009 = next(d for d in diagnostics if d.code == "AGL009")
    edited = text
    for version in range(2, 12):
        edited = "# a new first line" + ending + edited
        if version == 11:
            # Listen before the last edit: its diagnostics may be published while the actions below are answered.
            last = asyncio.ensure_future(published(client, path.as_uri(), 11))
        change(client, path, edited, version)
        # Asked at once, with the diagnostic of the first text, as an editor does before the new ones come.
        for action in await actions_for(client, path, agl009):
            assert fixed_as_expected(apply_edits(edited, edits_of(action, path.as_uri()))) or "noqa" in action.title
    newest = await last
    agl009 = next(d for d in newest if d.code == "AGL009")
    fix = (await actions_for(client, path, agl009))[0]
    assert fixed_as_expected(apply_edits(edited, edits_of(fix, path.as_uri())))


@pytest.mark.asyncio(loop_scope="module")
async def test_resolved_fix_is_versioned_and_refused_once_the_text_changed(
    resolving_client: LanguageClient, tmp_path: Path
) -> None:
    client = resolving_client
    path = tmp_path / "ops.py"
    diagnostics = await open_document(client, path, SOURCE)
    agl009 = next(d for d in diagnostics if d.code == "AGL009")
    fix, noqa = await actions_for(client, path, agl009)
    assert fix.edit is None and fix.data is not None  # computed only when picked
    assert noqa.edit is not None and noqa.edit.document_changes is not None
    resolved = await asyncio.wait_for(client.code_action_resolve_async(fix), WAIT)
    (document_edit,) = resolved.edit.document_changes
    assert document_edit.text_document.version == 1
    assert fixed_as_expected(apply_edits(SOURCE, list(document_edit.edits)))
    # The same action, picked after an edit: no edit comes back.
    edited = "# one more line\n" + SOURCE
    # Listen before the edit: version 2's diagnostics may be published while the resolve is answered.
    version_2 = asyncio.ensure_future(published(client, path.as_uri(), 2))
    change(client, path, edited, 2)
    stale = await asyncio.wait_for(client.code_action_resolve_async(fix), WAIT)
    assert stale.edit is None
    await version_2
    assert (await asyncio.wait_for(client.code_action_resolve_async(fix), WAIT)).edit is None


@pytest.mark.asyncio(loop_scope="module")
async def test_deep_code_in_the_buffer_is_checked(client: LanguageClient, tmp_path: Path) -> None:
    deep = SOURCE.replace("return [grad * 2]", "return [" + " + ".join(["grad"] * 600) + "]")
    diagnostics = await open_document(client, tmp_path / "ops.py", deep)
    agl016 = next(d for d in diagnostics if d.code == "AGL016")
    assert at(deep, agl016).startswith("return [grad + grad")


@pytest.mark.asyncio(loop_scope="module")
async def test_configuration_error_shown_once_per_change_of_the_file(client: LanguageClient, tmp_path: Path) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.autograd-lint]\nselct = ["AGL016"]\n')
    path = tmp_path / "ops.py"
    before = len(client.messages)  # the server is shared: count only what this file brings
    await open_document(client, path, SOURCE)
    for version in range(2, 5):
        change(client, path, SOURCE + "\n" * version, version)
        await published(client, path.as_uri(), version)
    errors = [m for m in client.messages[before:] if "unknown key" in m.message]
    assert len(errors) == 1
    config.write_text('[tool.autograd-lint]\nselct = ["AGL009"]\n')
    change(client, path, SOURCE, 5)
    await published(client, path.as_uri(), 5)
    assert len([m for m in client.messages[before:] if "unknown key" in m.message]) == 2


def _message(payload: str) -> bytes:
    body = payload.encode()
    return b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body


@pytest.mark.parametrize(
    "garbled",
    [b"Content-Length: abc\r\n\r\n{}", b"Content-Length: 99999999999999\r\n\r\n{}", b"Content-Lenght: 2\r\n\r\n{}"],
    ids=["not-a-number", "huge", "misspelt"],
)
def test_a_garbled_header_costs_one_message_not_the_session(garbled: bytes) -> None:
    import json
    import subprocess

    messages = [
        _message(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}})),
        _message(json.dumps({"jsonrpc": "2.0", "method": "initialized", "params": {}})),
        garbled,
        _message(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})),
        _message(json.dumps({"jsonrpc": "2.0", "method": "exit"})),
    ]
    result = subprocess.run(
        [sys.executable, "-m", "autograd_lint", "server"], input=b"".join(messages), capture_output=True, timeout=120
    )
    assert b'"id": 2' in result.stdout.replace(b'"id":2', b'"id": 2')
    assert result.returncode == 0
