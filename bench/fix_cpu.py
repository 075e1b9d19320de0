"""CPU time of one quick fix, as the language server computes it when a fix is asked for.

Usage: python bench/fix_cpu.py FILE [RUNS] [--insert-agl009 [--nested]]

Checks FILE on its own (as the server checks a buffer), then fixes its first
finding that has a fix, alone (``fix_diagnostic`` with the check's analysis,
what a ``codeAction`` or ``codeAction/resolve`` request runs), RUNS times
(default 3) after one warm-up; prints the median CPU time
(``time.process_time``, every thread) and every run, and the same with the
text edits the server sends for the fix (``server.text_edits``), i.e. the whole
request.  Needs pygls.  ``--insert-agl009``
first inserts, before the file's first top-level class, a small Function whose
backward lacks ``@once_differentiable`` (an AGL009 finding, the issue's
example), for files with no fixable finding of their own (PyTorch's
``test_custom_ops.py``); with ``--nested``, the same Function goes at the start
of the body of the file's first ``def test_...`` method instead (as PyTorch's tests
define theirs: inside a method of a large test class).  Run it with ``PYTHONPATH=<another checkout>`` in
alternation with this one for paired figures.
"""

from __future__ import annotations

import re
import statistics
import sys
import time

from autograd_lint.lint.engine import check_source
from pygls.workspace import PositionCodec

from autograd_lint.lint.fix import fix_diagnostic
from autograd_lint.lint.server import text_edits
from autograd_lint.model.source import SourceFile
from autograd_lint.rules import rule_by_code
from autograd_lint.settings import Settings

AGL009_FUNCTION = '''

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
'''


def with_function(text: str, nested: bool) -> str:
    """``text`` with :data:`AGL009_FUNCTION` before its first top-level class, or (``nested``)
    first in the body of its first ``def test_...`` method."""
    if not nested:
        at = text.index("\nclass ")
        return text[:at] + AGL009_FUNCTION + text[at:]
    header = re.search(r"^( +)def test_\w+\(", text, re.MULTILINE)
    assert header is not None, "no test method"
    colon = re.compile(r"\):[^\n]*\n").search(text, header.end())
    assert colon is not None
    indent = header.group(1) * 2
    block = "".join(indent + line if line.strip() else line for line in AGL009_FUNCTION.lstrip("\n").splitlines(True))
    return text[: colon.end()] + block + "\n" + text[colon.end() :]


def main() -> None:
    arguments = [a for a in sys.argv[1:] if a not in ("--insert-agl009", "--nested")]
    path = arguments[0]
    runs = int(arguments[1]) if len(arguments) > 1 else 3
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    if "--insert-agl009" in sys.argv:
        text = with_function(text, "--nested" in sys.argv)
    settings = Settings()
    source = SourceFile(path, text, "bench")
    checked = check_source(source, settings)
    fixable = [d for d in checked.diagnostics if (rule := rule_by_code(d.code)) is not None and rule.fixer is not None]
    if not fixable:
        sys.exit(f"{path}: no finding with a fix")
    finding = fixable[0]
    fix_diagnostic(source, settings, finding, checked.analysis)  # warm-up: imports
    times, requests = [], []
    for _ in range(runs):
        start = time.process_time()
        fixed = fix_diagnostic(source, settings, finding, checked.analysis)
        times.append(time.process_time() - start)
        if fixed is not None:
            # The rest of the server's answer: the edits turning the buffer into the fixed text.
            text_edits(source.text, fixed, PositionCodec())
            requests.append(time.process_time() - start)
    shown = ", ".join(f"{t:.3f}" for t in sorted(times))
    print(f"{path}: {finding.code} at line {finding.line} fixed ({fixed is not None}): "
          f"median {statistics.median(times):.3f} s CPU per fix ({shown})")
    if requests:
        shown = ", ".join(f"{t:.3f}" for t in sorted(requests))
        print(f"  with the server's text edits: median {statistics.median(requests):.3f} s CPU per request ({shown})")


if __name__ == "__main__":
    main()
