"""``autograd-lint server``: the checks in an editor, over the Language Server Protocol (stdio).

Built on pygls (``pip install 'autograd-lint[lsp]'``).  For every Python
document the editor opens, changes or saves, the server checks the buffer as
``autograd-lint check - --stdin-filename PATH`` would (the project's
``[tool.autograd-lint]`` found from the document's path, ``per-file-ignores``
and ``# noqa`` applied, the same protection against deeply nested code as a
file on the command line) and publishes the findings, each publication
carrying the document version it was computed from.  It offers:

* code actions: the fix of a finding's rule, for that finding alone (safe fixes
  as preferred quick fixes, unsafe ones titled as such), and adding
  ``# noqa: CODE`` to its line (the same edit as ``check --add-noqa``);
* hover: on a line with findings, each rule's documentation page.

Edits never land on a text they were not computed from: actions are offered
only for the version whose findings were last published, and a client that can
resolve code actions gets the fix's edit computed when it picks the action, for
that action alone, and only while the document is still at that version.  A
client that takes versioned edits (``documentChanges``) gets the version in the
edit, so that it refuses it for any other text.  Lines are counted as the
protocol counts them (``\n``, ``\r\n``, ``\r``), and the buffer is synchronised
whole (``TextDocumentSyncKind.Full``): pygls applies incremental changes with
lines split by ``str.splitlines()``, which also splits at a form feed, U+2028
or U+0085, and would corrupt the server's copy of such a buffer.

Checks run in a thread, one document at a time; changes that arrive during a
check are read meanwhile, and only the newest text is checked next, so that a
burst of keystrokes costs two checks, not one per keystroke.  A result for a
version that is already outdated is not published.

A document that does not compile gets one diagnostic naming the problem, and
the server goes on serving; a configuration that cannot be read is shown to
the user as one message, once per change of the configuration file, and its
documents get no findings until it is fixed.  A header line the client garbles
(a ``Content-Length`` that is not a number) costs that one message: the reader
finds the next header and the server goes on.  Nothing is ever written to
disk: edits go to the editor, which applies them.
"""

from __future__ import annotations

import asyncio
import difflib
import os
import re
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Sequence
from urllib.parse import unquote

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec, ServerTextPosition

from autograd_lint import __version__
from autograd_lint.config import ConfigError, find_config, project_settings
from autograd_lint.lint.add_noqa import add_noqa_to_text
from autograd_lint.lint.docs import rule_page
from autograd_lint.lint.engine import check_source
from autograd_lint.model.analysis import FileAnalysis
from autograd_lint.model.guard import run_guarded
from autograd_lint.model.source import SourceError, SourceFile, has_lone_cr, module_name, split_lines
from autograd_lint.rules import rule_by_code
from autograd_lint.rules.base import Diagnostic, FixSafety, Severity
from autograd_lint.settings import Settings

SOURCE = "autograd-lint"
PYTHON_SUFFIXES = (".py", ".pyi")
_SEVERITY = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFO: types.DiagnosticSeverity.Information,
}
# A Content-Length past this is a garbled header, not a message (the largest source
# files seen are a few MB): reading that many bytes would swallow every later message.
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
_CONTENT_LENGTH = re.compile(rb"Content-Length: *(\d+)\r\n")


@dataclass(frozen=True)
class Checked:
    """The check of one document version: its buffer, settings, findings, and the analysis behind them.

    ``published`` pairs each finding with the diagnostic the client was sent for it.
    """

    version: int | None
    buffer: str  # the document text as the client has it (``source.text`` reads a lone \r as \n)
    source: SourceFile
    settings: Settings
    analysis: FileAnalysis
    published: list[tuple[Diagnostic, types.Diagnostic]] = field(default_factory=list)

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return [finding for finding, _ in self.published]


class AutogradLintServer(LanguageServer):
    """The language server; :attr:`checked` holds each open document's last published check."""

    def __init__(self) -> None:
        super().__init__(SOURCE, __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full)
        self.checked: dict[str, Checked] = {}
        self.busy: set[str] = set()  # documents whose check loop is running
        # The configuration errors shown, each with the state of its file then: shown again only after a change.
        self.config_errors_shown: set[tuple[str, object]] = set()

    def current(self, uri: str) -> Checked | None:
        """The last check of ``uri``, if it was of the text the client has now; else None."""
        checked = self.checked.get(uri)
        if checked is None or unquote(uri) not in self.workspace.text_documents:
            return None
        document = self.workspace.get_text_document(uri)
        if checked.version != document.version or checked.buffer != document.source:
            return None
        return checked


def _is_python(document: TextDocument) -> bool:
    return document.language_id == "python" or (document.path or "").endswith(PYTHON_SUFFIXES)


def _lsp_diagnostic(diagnostic: Diagnostic, codec: PositionCodec, lines: Sequence[str]) -> types.Diagnostic:
    """Our finding as LSP shows it: from its column to the end of its line, in the client's units."""
    line = diagnostic.line - 1
    text = lines[line].rstrip("\r\n") if 0 <= line < len(lines) else ""
    end = max(len(text.rstrip()), diagnostic.column)
    server_range = types.Range(
        codec.position_to_client_units(lines, ServerTextPosition(line, diagnostic.column)),
        codec.position_to_client_units(lines, ServerTextPosition(line, end)),
    )
    return types.Diagnostic(
        range=server_range,
        message=diagnostic.message,
        severity=_SEVERITY[diagnostic.severity],
        code=diagnostic.code,
        source=SOURCE,
    )


def _problem_diagnostic(message: str, line: int | None) -> types.Diagnostic:
    """A file that cannot be checked: one diagnostic on its first column."""
    position = types.Position(max((line or 1) - 1, 0), 0)
    return types.Diagnostic(
        range=types.Range(position, position), message=message, severity=types.DiagnosticSeverity.Error, source=SOURCE
    )


@dataclass(frozen=True)
class Outcome:
    """One check of a document's text: what to remember, to publish, and to tell the user."""

    checked: Checked | None  # None when the text or the configuration could not be checked
    diagnostics: list[types.Diagnostic]
    config_error: str | None = None
    # The configuration file and its state when the error was seen (size, time, inode).
    config_state: tuple[str, object] | None = None


def _config_state(path: str) -> tuple[str, object]:
    """The configuration file that ``path`` reads, and what identifies its current content."""
    config = find_config([path])
    if config is None:
        return ("", None)
    try:
        stat = os.stat(config)
    except OSError:
        return (str(config), None)
    return (str(config), (stat.st_mtime_ns, stat.st_size, stat.st_ino))


def check_text(
    path: str, text: str, codec: PositionCodec, previous: Checked | None, version: int | None = None
) -> Outcome:
    """Check ``text`` (version ``version``) as the file ``path``; touches no server state, so it can run in a thread."""
    try:
        settings = project_settings([path])
    except ConfigError as error:
        message = f"{SOURCE}: {error}"
        return Outcome(None, [], message, (message, _config_state(path)))
    lines = split_lines(text)
    if previous is not None and previous.buffer == text and previous.settings == settings:
        # A save after the change: same text, same findings.
        published = [(d, _lsp_diagnostic(d, codec, lines)) for d, _ in previous.published]
        checked = Checked(version, text, previous.source, settings, previous.analysis, published)
        return Outcome(checked, [lsp for _, lsp in published])
    source = SourceFile(path, text, module_name(path))
    try:
        # The same protection as a file on the command line: a large stack, a raised
        # recursion limit, and any failure one message naming the stage.
        result = run_guarded(path, "checking the buffer", lambda: check_source(source, settings))
    except SourceError as error:
        return Outcome(None, [_problem_diagnostic(error.problem, error.line)])
    published = [(d, _lsp_diagnostic(d, codec, lines)) for d in result.diagnostics]
    checked = Checked(version, text, source, settings, result.analysis, published)
    return Outcome(checked, [lsp for _, lsp in published])


async def publish(server: AutogradLintServer, uri: str) -> None:
    """Check the document at ``uri`` and publish its diagnostics, newest version only.

    The check runs in a thread, so that the changes that arrive meanwhile are
    read; if some did, the result is dropped and the newest text is checked
    next: the versions in between are never checked nor published.  One loop
    per document runs at a time.
    """
    if uri in server.busy:
        return  # the running loop sees the newer version when its check ends
    server.busy.add(uri)
    try:
        while True:
            if unquote(uri) not in server.workspace.text_documents:
                return  # closed while a check ran: did_close has cleared its diagnostics
            document = server.workspace.get_text_document(uri)
            if not _is_python(document):
                return
            version, text = document.version, document.source
            outcome = await asyncio.get_running_loop().run_in_executor(
                None, check_text, document.path, text, document.position_codec, server.checked.get(uri), version
            )
            if unquote(uri) not in server.workspace.text_documents:
                return
            current = server.workspace.get_text_document(uri)
            if current.version != version or current.source != text:
                continue  # outdated before it could be shown: check the newest text instead
            if outcome.config_error is not None and outcome.config_state not in server.config_errors_shown:
                server.config_errors_shown.add(outcome.config_state)
                server.window_show_message(types.ShowMessageParams(types.MessageType.Error, outcome.config_error))
            if outcome.checked is None:
                server.checked.pop(uri, None)
            else:
                server.checked[uri] = outcome.checked
            server.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=outcome.diagnostics)
            )
            return
    finally:
        server.busy.discard(uri)


def text_edits(old: str, new: str, codec: PositionCodec) -> list[types.TextEdit]:
    """Line-level edits that turn ``old`` into ``new`` (so that the editor keeps the cursor elsewhere).

    Lines are the protocol's (:func:`~autograd_lint.model.source.split_lines`), and
    every position but the end of a last line without a line break is at the start
    of a line, where every position encoding agrees.
    """
    old_lines = split_lines(old)
    new_lines = split_lines(new)
    if old_lines and not old_lines[-1].endswith(("\n", "\r")):
        # Positions past the last line do not exist without a final newline: edit the whole text.
        end = codec.position_to_client_units(old_lines, ServerTextPosition(len(old_lines) - 1, len(old_lines[-1])))
        return [types.TextEdit(types.Range(types.Position(0, 0), end), new)]
    # The lines both texts begin and end with are left out of the diff: a fix changes a few
    # places, and matching every line of a large file cost 0.3 s (6,000 lines).
    shortest = min(len(old_lines), len(new_lines))
    head = 0
    while head < shortest and old_lines[head] == new_lines[head]:
        head += 1
    tail = 0
    while tail < shortest - head and old_lines[-1 - tail] == new_lines[-1 - tail]:
        tail += 1
    edits = []
    matcher = difflib.SequenceMatcher(
        a=old_lines[head : len(old_lines) - tail], b=new_lines[head : len(new_lines) - tail], autojunk=False
    )
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            start, end = types.Position(head + i1, 0), types.Position(head + i2, 0)
            edits.append(types.TextEdit(types.Range(start, end), "".join(new_lines[head + j1 : head + j2])))
    return edits


def _in_buffer_endings(checked: Checked, text: str) -> str | None:
    """``text`` (computed on ``checked.source.text``) with the buffer's own line breaks.

    The analysis reads a lone ``\r`` as ``\n``; a buffer that ends its lines with
    ``\r`` alone gets them back, and one that mixes them with others gets no edit.
    """
    if not has_lone_cr(checked.buffer):
        return text
    if "\n" in checked.buffer:
        return None
    return text.replace("\n", "\r")


def _ours(checked: Checked, reported: types.Diagnostic) -> Diagnostic | None:
    """The finding behind a diagnostic the client sends back: ours, with the same code and range."""
    if reported.source != SOURCE or not isinstance(reported.code, str):
        return None
    for finding, sent in checked.published:
        if sent.code == reported.code and sent.range == reported.range and sent.message == reported.message:
            return finding
    return None


def _workspace_edit(
    server: AutogradLintServer, uri: str, checked: Checked, text: str
) -> types.WorkspaceEdit | None:
    """The edit turning the checked buffer into ``text``, tied to its version where the client allows."""
    new = _in_buffer_endings(checked, text)
    if new is None:
        return None
    codec = server.workspace.position_codec
    edits = text_edits(checked.buffer, new, codec)
    capabilities = server.client_capabilities.workspace
    versioned = bool(
        capabilities and capabilities.workspace_edit and capabilities.workspace_edit.document_changes
    )
    if versioned and checked.version is not None:
        document = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=checked.version)
        return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(document, list(edits))])
    return types.WorkspaceEdit(changes={uri: edits})


def _resolves_edits(server: AutogradLintServer) -> bool:
    """Whether the client fills in a code action's edit with ``codeAction/resolve``."""
    document = server.client_capabilities.text_document
    code_action = document.code_action if document else None
    support = code_action.resolve_support if code_action else None
    return support is not None and "edit" in support.properties


def _fix_edit(server: AutogradLintServer, uri: str, checked: Checked, diagnostic: Diagnostic) -> types.WorkspaceEdit | None:
    # Imported here: the fix pass loads libcst.codemod, which publishing diagnostics does not need.
    from autograd_lint.lint.fix import fix_diagnostic

    fixed = run_guarded(
        checked.source.path,
        f"fixing {diagnostic.code}",
        lambda: fix_diagnostic(checked.source, checked.settings, diagnostic, checked.analysis),
    )
    return None if fixed is None else _workspace_edit(server, uri, checked, fixed)


def code_actions(
    server: AutogradLintServer, checked: Checked, uri: str, reported: Sequence[types.Diagnostic]
) -> list[types.CodeAction]:
    """Quick fixes for the findings in ``reported``: the rule's fix, then a ``# noqa`` for the line.

    A client that resolves code actions gets the fix without its edit (computed by
    :func:`resolve_code_action` for the one action it picks); any other gets it
    computed now, for the findings it asked about alone.
    """
    lazy = _resolves_edits(server)
    actions = []
    for client_diagnostic in reported:
        diagnostic = _ours(checked, client_diagnostic)
        if diagnostic is None:
            continue
        rule = rule_by_code(diagnostic.code)
        if rule is not None and rule.fix is not FixSafety.NONE and rule.fixer is not None:
            unsafe = " (unsafe: review the change)" if rule.fix is FixSafety.UNSAFE else ""
            action = types.CodeAction(
                title=f"Fix {diagnostic.code}: {rule.title}{unsafe}",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[client_diagnostic],
                is_preferred=rule.fix is FixSafety.SAFE,
            )
            if lazy:
                action.data = {"uri": uri, "version": checked.version, "finding": _finding_data(diagnostic)}
                actions.append(action)
            else:
                try:
                    action.edit = _fix_edit(server, uri, checked, diagnostic)
                except SourceError as error:
                    server.window_log_message(types.LogMessageParams(types.MessageType.Warning, str(error)))
                if action.edit is not None:
                    actions.append(action)
        silenced = add_noqa_to_text(checked.source.text, [diagnostic]).text
        edit = None if silenced == checked.source.text else _workspace_edit(server, uri, checked, silenced)
        if edit is not None:
            actions.append(
                types.CodeAction(
                    title=f"Add `# noqa: {diagnostic.code}` to this line",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[client_diagnostic],
                    edit=edit,
                )
            )
    return actions


def _finding_data(diagnostic: Diagnostic) -> dict[str, Any]:
    return {"line": diagnostic.line, "column": diagnostic.column, "code": diagnostic.code, "message": diagnostic.message}


def resolve_code_action(server: AutogradLintServer, action: types.CodeAction) -> types.CodeAction:
    """``action`` with the edit of its fix, computed now for the version it was offered for.

    When the document has changed since (or the finding is gone), the action comes
    back without an edit: applying it does nothing, rather than edit other text.
    """
    data = action.data if isinstance(action.data, dict) else {}
    uri, version, finding = data.get("uri"), data.get("version"), data.get("finding")
    if not isinstance(uri, str) or not isinstance(finding, dict):
        return action
    checked = server.current(uri)
    if checked is None or checked.version != version:
        return action
    diagnostic = next((d for d in checked.diagnostics if _finding_data(d) == finding), None)
    if diagnostic is None:
        return action
    try:
        edit = _fix_edit(server, uri, checked, diagnostic)
    except SourceError as error:
        server.window_log_message(types.LogMessageParams(types.MessageType.Warning, str(error)))
        return action
    if server.current(uri) is checked:  # not changed while the fix was computed
        action.edit = edit
    return action


def hover(checked: Checked, line: int) -> types.Hover | None:
    """The pages of the rules that reported on ``line`` (0-based), as Markdown."""
    codes = sorted({d.code for d in checked.diagnostics if d.line == line + 1})
    pages = [rule_page(rule) for rule in map(rule_by_code, codes) if rule is not None]
    if not pages:
        return None
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n---\n\n".join(pages)))


def build_server() -> AutogradLintServer:
    server = AutogradLintServer()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: AutogradLintServer, params: types.DidOpenTextDocumentParams) -> None:
        await publish(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: AutogradLintServer, params: types.DidChangeTextDocumentParams) -> None:
        await publish(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: AutogradLintServer, params: types.DidSaveTextDocumentParams) -> None:
        await publish(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: AutogradLintServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.checked.pop(params.text_document.uri, None)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix], resolve_provider=True),
    )
    async def code_action(ls: AutogradLintServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        # Only for the text the findings came from: a request that arrives after an
        # edit, before its check is published, gets no action rather than a stale one.
        uri = params.text_document.uri
        checked = ls.current(uri)
        if checked is None:
            return None
        # In a thread, so that the changes that arrive meanwhile are read.
        actions = await asyncio.get_running_loop().run_in_executor(
            None, code_actions, ls, checked, uri, params.context.diagnostics
        )
        return actions if ls.current(uri) is checked else None

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def code_action_resolve(ls: AutogradLintServer, action: types.CodeAction) -> types.CodeAction:
        return await asyncio.get_running_loop().run_in_executor(None, resolve_code_action, ls, action)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def on_hover(ls: AutogradLintServer, params: types.HoverParams) -> types.Hover | None:
        checked = ls.current(params.text_document.uri)
        return None if checked is None else hover(checked, params.position.line)

    return server


class ResyncingReader:
    """The client's byte stream as pygls reads it, resynchronised after a garbled header.

    pygls's reader takes a header line for ``Content-Length`` only when the line is
    exactly that header; after one it could not read (``Content-Length: abc``), it
    reads the message body as a header line, which runs on into the next
    message's header, and every message after is lost the same way: the server
    answers nothing, ``shutdown`` and ``exit`` included.  This reader hands on
    each line from the last ``Content-Length:`` in it, so that the next message
    is read, and drops a length past :data:`MAX_MESSAGE_BYTES` (which would
    swallow the messages after it).  Only the garbled message is lost.
    """

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream

    def readline(self) -> bytes:
        line = self._stream.readline()
        start = line.rfind(b"Content-Length:")
        if start > 0:
            line = line[start:]
        match = _CONTENT_LENGTH.fullmatch(line)
        if match is not None and int(match.group(1)) > MAX_MESSAGE_BYTES:
            return b"X-Dropped: garbled Content-Length\r\n"
        return line

    def read(self, size: int) -> bytes:
        return self._stream.read(size)


def serve(stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
    """Serve over stdin and stdout (or the streams given) until the client says exit."""
    import sys

    reader = ResyncingReader(stdin or sys.stdin.buffer)
    build_server().start_io(reader, stdout or sys.stdout.buffer)  # type: ignore[arg-type]
