"""Latency per edit of ``autograd-lint server``, measured from a real LSP client.

Usage: python bench/lsp_latency.py [--edits N] [--lines N | --file PATH]

Starts the server over stdio with pygls's client, opens a generated file of
about 1,000 lines (autograd.Functions, some with findings, between ordinary
helper code), then sends N edits, one at a time, each changing one line inside
a Function (a full-document change, as many editors send), and times each from
the didChange notification to the publishDiagnostics for that version.  Prints
the first open, the median, 90th percentile and maximum per edit, and the CPU
time of the same check in-process (best of 10), which a busy machine disturbs
less.  Needs pygls (``pip install 'autograd-lint[lsp]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

FUNCTION = '''

class Op{n}(torch.autograd.Function):
    """Fused multiply-add number {n}."""

    @staticmethod
    def forward(ctx, a, b, c):
        ctx.save_for_backward(a, b)
        out = a * b + c
        return out

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        grad_a = grad * b
        grad_b = grad * a
        return {returned}
'''
HELPER = '''

def helper_{n}(values, scale=1.0):
    """Plain code between the Functions, as a real module has."""
    total = 0.0
    for value in values:
        total += value * scale
    return total / max(len(values), 1)
'''


def make_source(lines: int) -> tuple[str, int]:
    """A module of about ``lines`` lines, and the 0-based line of the first backward's return."""
    parts = ['"""Generated for bench/lsp_latency.py."""\n\nimport torch\n']
    n = 0
    while sum(part.count("\n") for part in parts) < lines:
        # Every fifth Function returns one gradient too few (AGL001); the rest are correct.
        returned = "grad_a, grad_b" if n % 5 == 0 else "grad_a, grad_b, grad"
        parts.append(FUNCTION.format(n=n, returned=returned))
        parts.append(HELPER.format(n=n))
        n += 1
    text = "".join(parts)
    target = next(i for i, line in enumerate(text.splitlines()) if line.strip().startswith("return grad_a"))
    return text, target


def real_source(file: Path) -> tuple[str, int]:
    """A real file's text, and the 0-based line below its first ``def backward`` (the line edited)."""
    source = file.read_text()
    target = next(i for i, line in enumerate(source.splitlines()) if line.strip().startswith("def backward")) + 1
    return source, target


async def measure(edits: int, lines: int, file: Path | None = None) -> None:
    source, target = make_source(lines) if file is None else real_source(file)
    directory = Path(tempfile.mkdtemp(prefix="agl-lsp-bench-"))
    path = directory / (file.name if file is not None else "kernels.py")
    path.write_text(source)
    uri = path.as_uri()
    published: dict[int, asyncio.Future[int]] = {}
    publications: list[int] = []
    client = LanguageClient("lsp-latency-bench", "1")

    latest: dict[str, list[types.Diagnostic]] = {}

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        publications.append(params.version or 0)
        latest[params.uri] = list(params.diagnostics)
        future = published.get(params.version or 0)
        if future is not None and not future.done():
            future.set_result(len(params.diagnostics))

    await client.start_io(sys.executable, "-m", "autograd_lint", "server")
    await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities()))
    client.initialized(types.InitializedParams())

    loop = asyncio.get_running_loop()
    published[1] = loop.create_future()
    start = time.perf_counter()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=source))
    )
    found = await published[1]
    first = time.perf_counter() - start
    print(f"file: {source.count(chr(10))} lines, {source.count('torch.autograd.Function')} Functions; {found} findings")
    print(f"first open (server warm-up included): {first * 1000:.0f} ms")

    lines_of_source = source.splitlines(keepends=True)

    def change(version: int) -> None:
        edited = list(lines_of_source)
        if file is None:
            # Alternate the edited return between a correct and a buggy one, so findings change.
            ending = "grad_a, grad_b, grad\n" if version % 2 else "grad_a, grad_b\n"
            edited[target] = "        return " + ending
        elif version % 2:
            edited[target] = edited[target].rstrip("\n") + "  # edited\n"
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                [types.TextDocumentContentChangeWholeDocument(text="".join(edited))],
            )
        )

    timings = []
    for version in range(2, edits + 2):
        published[version] = loop.create_future()
        start = time.perf_counter()
        change(version)
        await published[version]
        timings.append(time.perf_counter() - start)

    # A burst, as from fast typing: 20 changes sent without waiting.
    burst = range(edits + 2, edits + 22)
    published[burst[-1]] = loop.create_future()
    checked_before = len(publications)
    start = time.perf_counter()
    for version in burst:
        change(version)
    await published[burst[-1]]
    burst_time = time.perf_counter() - start
    checks = len(publications) - checked_before

    fix_ms = None
    if file is not None:
        # One quick-fix request for the last version's first finding, as an editor sends it.
        last = burst[-1]
        published[last + 1] = loop.create_future()
        change(last + 1)
        await published[last + 1]
        diagnostics = latest.get(uri, [])
        if diagnostics:
            start = time.perf_counter()
            await client.text_document_code_action_async(
                types.CodeActionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    range=diagnostics[0].range,
                    context=types.CodeActionContext(diagnostics=[diagnostics[0]]),
                )
            )
            fix_ms = (time.perf_counter() - start) * 1000

    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    ms = sorted(t * 1000 for t in timings)
    p90 = ms[min(len(ms) - 1, int(round(0.9 * (len(ms) - 1))))]
    print(f"per edit over {len(ms)} edits: median {statistics.median(ms):.0f} ms, p90 {p90:.0f} ms, max {ms[-1]:.0f} ms")
    print(f"burst of {len(burst)} changes sent at once: last version's diagnostics after {burst_time * 1000:.0f} ms, "
          f"{checks} checks published")
    print(f"CPU time of one check of the buffer, in this process: {check_cpu_ms(path, source):.0f} ms (best of 10)")
    if fix_ms is not None:
        print(f"quick-fix request, client round trip: {fix_ms:.0f} ms; CPU of that one fix in-process: "
              f"{fix_cpu_ms(path, source):.0f} ms (median of 5)")


def fix_cpu_ms(path: Path, source: str) -> float:
    """The CPU time of the server's work for one quick fix: the first finding with a fix, fixed alone."""
    from autograd_lint.config import project_settings
    from autograd_lint.lint.engine import check_source
    from autograd_lint.lint.fix import fix_diagnostic
    from autograd_lint.model.source import SourceFile
    from autograd_lint.rules import rule_by_code

    settings = project_settings([str(path)])
    file = SourceFile(str(path), source, "kernels")
    checked = check_source(file, settings)
    fixable = [d for d in checked.diagnostics if (rule := rule_by_code(d.code)) is not None and rule.fixer is not None]
    if not fixable:
        return float("nan")
    fix_diagnostic(file, settings, fixable[0], checked.analysis)  # imports warmed
    times = []
    for _ in range(5):
        start = time.process_time()
        fix_diagnostic(file, settings, fixable[0], checked.analysis)
        times.append(time.process_time() - start)
    return statistics.median(times) * 1000


def check_cpu_ms(path: Path, source: str) -> float:
    """The server's work per edit without the protocol, as CPU time (less sensitive to a busy machine)."""
    from autograd_lint.config import project_settings
    from autograd_lint.lint.engine import check_source
    from autograd_lint.model.source import SourceFile

    settings = project_settings([str(path)])
    check_source(SourceFile(str(path), source, "kernels"), settings)  # imports and caches warmed
    best = float("inf")
    for _ in range(10):
        start = time.process_time()
        check_source(SourceFile(str(path), source, "kernels"), settings)
        best = min(best, time.process_time() - start)
    return best * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=50)
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--file", type=Path, help="a real file to open and edit instead of a generated one")
    args = parser.parse_args()
    asyncio.run(measure(args.edits, args.lines, args.file))


if __name__ == "__main__":
    main()
