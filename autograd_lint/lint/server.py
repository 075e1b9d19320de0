"""``autograd-lint server``: the checks in an editor, over the Language Server Protocol (stdio).

Built on pygls (``pip install 'autograd-lint[lsp]'``).  For every Python
document the editor opens, changes or saves, the server checks the buffer as
``autograd-lint check - --stdin-filename PATH`` would (the project's
``[tool.autograd-lint]`` found from the document's path, ``per-file-ignores``
and ``# noqa`` applied) and publishes the findings.  It offers:

* code actions: the fix of a finding's rule, for that finding alone (safe fixes
  as preferred quick fixes, unsafe ones titled as such), and adding
  ``# noqa: CODE`` to its line (the same edit as ``check --add-noqa``);
* hover: on a line with findings, each rule's documentation page.

Checks run in a thread, one document at a time; changes that arrive during a
check are read meanwhile, and only the newest text is checked next, so that a
burst of keystrokes costs two checks, not one per keystroke.

A document that does not compile gets one diagnostic naming the problem, and
the server goes on serving; a configuration that cannot be read is shown to
the user as one message, and its documents get no findings until it is fixed.
Nothing is ever written to disk: edits go to the editor, which applies them.
"""

from __future__ import annotations

import asyncio
import difflib
from urllib.parse import unquote
from dataclasses import dataclass
from typing import Sequence

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec, ServerTextPosition

from autograd_lint import __version__
from autograd_lint.lint.add_noqa import add_noqa_to_text
from autograd_lint.config import ConfigError, project_settings
from autograd_lint.lint.docs import rule_page
from autograd_lint.lint.engine import check_source
from autograd_lint.model.source import SourceError, SourceFile, module_name
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


@dataclass(frozen=True)
class Checked:
    """The last check of one document version: its text, settings, and findings."""

    source: SourceFile
    settings: Settings
    diagnostics: list[Diagnostic]


class AutogradLintServer(LanguageServer):
    """The language server; :attr:`checked` holds each open document's last check."""

    def __init__(self) -> None:
        super().__init__(SOURCE, __version__)
        self.checked: dict[str, Checked] = {}
        self.busy: set[str] = set()  # documents whose check loop is running


def _is_python(document: TextDocument) -> bool:
    return document.language_id == "python" or (document.path or "").endswith(PYTHON_SUFFIXES)


def _lsp_diagnostic(diagnostic: Diagnostic, codec: PositionCodec, lines: Sequence[str]) -> types.Diagnostic:
    """Our finding as LSP shows it: from its column to the end of its line, in the client's units."""
    line = diagnostic.line - 1
    text = lines[line] if 0 <= line < len(lines) else ""
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


def check_text(path: str, text: str, codec: PositionCodec, previous: Checked | None) -> Outcome:
    """Check ``text`` as the file ``path``; touches no server state, so it can run in a thread."""
    try:
        settings = project_settings([path])
    except ConfigError as error:
        return Outcome(None, [], f"{SOURCE}: {error}")
    if previous is not None and previous.source.text == text and previous.settings == settings:
        checked = previous  # a save after the change: same text, same findings
    else:
        source = SourceFile(path, text, module_name(path))
        try:
            checked = Checked(source, settings, check_source(source, settings).diagnostics)
        except SourceError as error:
            return Outcome(None, [_problem_diagnostic(error.problem, error.line)])
    lines = text.splitlines(keepends=True)
    return Outcome(checked, [_lsp_diagnostic(d, codec, lines) for d in checked.diagnostics])


async def publish(server: AutogradLintServer, uri: str) -> None:
    """Check the document at ``uri`` and publish its diagnostics, newest version only.

    The check runs in a thread, so that the changes that arrive meanwhile are
    read; if some did, the newest text is checked next and the versions in
    between are never checked.  One loop per document runs at a time.
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
                None, check_text, document.path, text, document.position_codec, server.checked.get(uri)
            )
            if unquote(uri) not in server.workspace.text_documents:
                return
            if outcome.config_error is not None:
                server.window_show_message(types.ShowMessageParams(types.MessageType.Error, outcome.config_error))
            if outcome.checked is None:
                server.checked.pop(uri, None)
            else:
                server.checked[uri] = outcome.checked
            server.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=outcome.diagnostics)
            )
            current = server.workspace.get_text_document(uri)
            if current.version == version and current.source == text:
                return
    finally:
        server.busy.discard(uri)


def text_edits(old: str, new: str) -> list[types.TextEdit]:
    """Line-level edits that turn ``old`` into ``new`` (so that the editor keeps the cursor elsewhere).

    Every position is at the start of a line, where code points and UTF-16 units agree.
    """
    old_lines = old.splitlines(keepends=True)
    new_lines = new.splitlines(keepends=True)
    if old_lines and not old_lines[-1].endswith(("\n", "\r")):
        # Positions past the last line do not exist without a final newline: edit the whole text.
        last = old_lines[-1]
        end = types.Position(len(old_lines) - 1, len(last.encode("utf-16-le")) // 2)
        return [types.TextEdit(types.Range(types.Position(0, 0), end), new)]
    edits = []
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            edits.append(types.TextEdit(types.Range(types.Position(i1, 0), types.Position(i2, 0)), "".join(new_lines[j1:j2])))
    return edits


def _ours(checked: Checked, reported: types.Diagnostic) -> Diagnostic | None:
    """The finding behind a diagnostic the client sends back, by code and line."""
    if reported.source != SOURCE or not isinstance(reported.code, str):
        return None
    line = reported.range.start.line + 1
    on_line = [d for d in checked.diagnostics if d.code == reported.code and d.line == line]
    # Columns agree on ASCII lines; elsewhere the client counts UTF-16 units, so fall back to the line.
    same_column = [d for d in on_line if d.column == reported.range.start.character]
    return (same_column or on_line or [None])[0]


def code_actions(checked: Checked, uri: str, reported: Sequence[types.Diagnostic]) -> list[types.CodeAction]:
    """Quick fixes for the findings in ``reported``: the rule's fix, then a ``# noqa`` for the line."""
    # Imported here: the fix pass loads libcst.codemod, which publishing diagnostics does not need.
    from autograd_lint.lint.fix import fix_diagnostic

    actions = []
    for client_diagnostic in reported:
        diagnostic = _ours(checked, client_diagnostic)
        if diagnostic is None:
            continue
        rule = rule_by_code(diagnostic.code)
        if rule is not None and rule.fix is not FixSafety.NONE:
            fixed = fix_diagnostic(checked.source, checked.settings, diagnostic)
            if fixed is not None:
                unsafe = " (unsafe: review the change)" if rule.fix is FixSafety.UNSAFE else ""
                actions.append(
                    types.CodeAction(
                        title=f"Fix {diagnostic.code}: {rule.title}{unsafe}",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[client_diagnostic],
                        is_preferred=rule.fix is FixSafety.SAFE,
                        edit=types.WorkspaceEdit(changes={uri: text_edits(checked.source.text, fixed)}),
                    )
                )
        silenced = add_noqa_to_text(checked.source.text, [diagnostic]).text
        if silenced != checked.source.text:
            actions.append(
                types.CodeAction(
                    title=f"Add `# noqa: {diagnostic.code}` to this line",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[client_diagnostic],
                    edit=types.WorkspaceEdit(changes={uri: text_edits(checked.source.text, silenced)}),
                )
            )
    return actions


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
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]),
    )
    def code_action(ls: AutogradLintServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        checked = ls.checked.get(params.text_document.uri)
        if checked is None:
            return None
        return code_actions(checked, params.text_document.uri, params.context.diagnostics)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def on_hover(ls: AutogradLintServer, params: types.HoverParams) -> types.Hover | None:
        checked = ls.checked.get(params.text_document.uri)
        return None if checked is None else hover(checked, params.position.line)

    return server


def serve() -> None:
    """Serve over stdin and stdout until the client says exit."""
    build_server().start_io()
