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

A document that does not compile gets one diagnostic naming the problem, and
the server goes on serving; a configuration that cannot be read is shown to
the user as one message, and its documents get no findings until it is fixed.
Nothing is ever written to disk: edits go to the editor, which applies them.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Sequence

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import ServerTextPosition

from autograd_lint import __version__
from autograd_lint.add_noqa import add_noqa_to_text
from autograd_lint.config import ConfigError, project_settings
from autograd_lint.docs import rule_page
from autograd_lint.engine import check_source
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


def _is_python(document: TextDocument) -> bool:
    return document.language_id == "python" or (document.path or "").endswith(PYTHON_SUFFIXES)


def _lsp_diagnostic(diagnostic: Diagnostic, document: TextDocument, lines: Sequence[str]) -> types.Diagnostic:
    """Our finding as LSP shows it: from its column to the end of its line, in the client's units."""
    line = diagnostic.line - 1
    text = lines[line] if 0 <= line < len(lines) else ""
    end = max(len(text.rstrip()), diagnostic.column)
    server_range = types.Range(
        document.position_codec.position_to_client_units(lines, ServerTextPosition(line, diagnostic.column)),
        document.position_codec.position_to_client_units(lines, ServerTextPosition(line, end)),
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


def check_document(server: AutogradLintServer, document: TextDocument) -> list[types.Diagnostic]:
    """Check ``document``'s current text; remember the result for code actions and hover."""
    path = document.path
    try:
        settings = project_settings([path])
    except ConfigError as error:
        server.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"{SOURCE}: {error}"))
        server.checked.pop(document.uri, None)
        return []
    source = SourceFile(path, document.source, module_name(path))
    try:
        diagnostics = check_source(source, settings).diagnostics
    except SourceError as error:
        server.checked.pop(document.uri, None)
        return [_problem_diagnostic(error.problem, error.line)]
    server.checked[document.uri] = Checked(source, settings, diagnostics)
    lines = source.text.splitlines(keepends=True)
    return [_lsp_diagnostic(d, document, lines) for d in diagnostics]


def publish(server: AutogradLintServer, uri: str) -> None:
    document = server.workspace.get_text_document(uri)
    if not _is_python(document):
        return
    diagnostics = check_document(server, document)
    server.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=uri, version=document.version, diagnostics=diagnostics)
    )


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
    return next((d for d in checked.diagnostics if d.code == reported.code and d.line == line), None)


def code_actions(checked: Checked, uri: str, reported: Sequence[types.Diagnostic]) -> list[types.CodeAction]:
    """Quick fixes for the findings in ``reported``: the rule's fix, then a ``# noqa`` for the line."""
    # Imported here: the fix pass loads libcst.codemod, which publishing diagnostics does not need.
    from autograd_lint.fix import fix_diagnostic

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
    def did_open(ls: AutogradLintServer, params: types.DidOpenTextDocumentParams) -> None:
        publish(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: AutogradLintServer, params: types.DidChangeTextDocumentParams) -> None:
        publish(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: AutogradLintServer, params: types.DidSaveTextDocumentParams) -> None:
        publish(ls, params.text_document.uri)

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
