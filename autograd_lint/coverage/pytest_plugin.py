"""The pytest plugin: truthful coverage for autograd code during a test run.

Registered as a ``pytest11`` entry point, so it is imported by every pytest
run of every project that installs autograd-lint.  Until ``--autograd-cov``
(or ``autograd_cov = true`` in the ini file) enables it, it only declares its
options: it imports neither torch nor coverage and registers no other hook.

Enabled, it (see ``docs/coverage.md``):

* installs the thread bridge (:mod:`.bridge`);
* installs the torch.compile recorder (:mod:`.compile_recorder`) if the
  torch version is supported and its self-test passes, and adds the evidence
  it confirmed to the running coverage before coverage (or pytest-cov) saves,
  under the dynamic context ``<test node id>|torch.compile``;
* counts, per Function, what ran (:mod:`.report`), prints the table at the
  end of the run, writes the JSON report, and fails the run on request; the
  static analyser the table needs runs in a child process beside the tests
  (:mod:`.discovery_worker`).

It works under ``coverage run -m pytest``, under pytest-cov (whose
``pytest_runtestloop`` wrapper saves after ours returns) and with
pytest-xdist (workers send their counts to the controller).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import warnings
from typing import TYPE_CHECKING, Any, Generator

import pytest

if TYPE_CHECKING:
    from autograd_lint.coverage.compile_recorder import Recorder
    from autograd_lint.coverage.discovery_worker import Background
    from autograd_lint.coverage.report import Row, Tally

# Key of the counts each xdist worker sends back in ``workeroutput``.
WORKER_KEY = "autograd_cov"
# Key of the lines each xdist worker's coverage saw run, per file under the report's roots.
WORKER_LINES_KEY = "autograd_cov_lines"
CONTEXT_SUFFIX = "|torch.compile"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("autograd-cov", "truthful coverage for autograd code")
    group.addoption(
        "--autograd-cov",
        action="store_true",
        default=None,
        help="trace backward code on autograd engine threads, record torch.compile code "
        "and report per-Function runs (ini: autograd_cov)",
    )
    group.addoption(
        "--autograd-cov-no-compile",
        action="store_false",
        dest="autograd_cov_compile",
        default=None,
        help="do not record torch.compile code (ini: autograd_cov_compile = false)",
    )
    group.addoption(
        "--autograd-cov-source",
        action="append",
        default=None,
        metavar="PATH",
        help="where to look for Functions to report (repeatable; default: coverage's "
        "[run] source, else the rootdir; ini: autograd_cov_source)",
    )
    group.addoption(
        "--autograd-cov-report",
        choices=("term", "none"),
        default=None,
        help="print the per-Function table at the end (term, the default) or not "
        "(ini: autograd_cov_report)",
    )
    group.addoption(
        "--autograd-cov-json",
        default=None,
        metavar="PATH",
        help="write the per-Function report as JSON (ini: autograd_cov_json)",
    )
    group.addoption(
        "--autograd-cov-fail-unexercised",
        action="store_true",
        default=None,
        help="fail the run if any Function's backward never ran "
        "(ini: autograd_cov_fail_unexercised)",
    )
    group.addoption(
        "--autograd-cov-fail-under",
        type=float,
        default=None,
        metavar="PERCENT",
        help="fail the run if fewer than PERCENT %% of Functions had their backward run "
        "(ini: autograd_cov_fail_under)",
    )
    parser.addini("autograd_cov", "enable --autograd-cov", type="bool", default=False)
    parser.addini("autograd_cov_compile", "record torch.compile code", type="bool", default=True)
    parser.addini("autograd_cov_source", "where to look for Functions", type="paths", default=[])
    parser.addini("autograd_cov_report", "term or none", default="term")
    parser.addini("autograd_cov_json", "path of the JSON report", default="")
    parser.addini(
        "autograd_cov_fail_unexercised", "fail if a backward never ran", type="bool", default=False
    )
    parser.addini("autograd_cov_fail_under", "minimum percent of backwards run", default="")


def _setting(config: pytest.Config, name: str) -> Any:
    """The command-line value of ``name`` if given, else the ini value."""
    value = config.getoption(name)
    return config.getini(name) if value is None else value


def pytest_configure(config: pytest.Config) -> None:
    if _setting(config, "autograd_cov"):
        config.pluginmanager.register(AutogradCov(config), "autograd_cov_enabled")


class AutogradCov:
    """The enabled plugin; one per pytest process (controller and each xdist worker)."""

    def __init__(self, config: pytest.Config) -> None:
        from autograd_lint.coverage import report

        self.config = config
        self.tally: Tally = report.Tally()
        self.recorder: Recorder | None = None
        self.is_worker = hasattr(config, "workerinput")
        self.rows: list[Row] = []
        self.evidence_note = ""
        self.omit_note = ""
        # Why the run fails (a fail option), printed as the run's last line.
        self.failure = ""
        self.discovery: Background | None = None
        self.installed = False
        # Lines xdist workers' coverage saw run: path -> line numbers.
        self.worker_lines: dict[str, set[int]] = {}
        # coverage's parallel data files when the session started: those that change or appear
        # later were saved by processes of this run (multiprocessing children).
        self.data_files_before: dict[str, tuple[int, int]] = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> None:
        """Install the bridge, the counters and the recorder, before any test module is imported.

        Not earlier: importing torch takes a second or more, and pytest's
        printed duration starts at the session start, so torch's import
        belongs after it, as it would be without the plugin.
        """
        if self.installed or importlib.util.find_spec("torch") is None:
            return
        self.installed = True
        from autograd_lint.coverage import bridge, report

        bridge.install()
        report.install(self.tally)
        if self._compile_wanted():
            self.recorder = self._start_recorder()

    def _compile_wanted(self) -> bool:
        from autograd_lint.coverage.compile_recorder import ENV_SWITCH

        return bool(_setting(self.config, "autograd_cov_compile")) and os.environ.get(ENV_SWITCH) != "0"

    def _start_recorder(self) -> Recorder | None:
        """Arm the compile recorder if this torch supports it; it starts at the first compile.

        Installing it imports Dynamo and its self-test compiles, so a suite
        that never calls ``torch.compile`` pays for neither.
        """
        import torch

        from autograd_lint.coverage import compile_recorder, compile_self_test

        forced = os.environ.get(compile_recorder.ENV_SWITCH) == "force"
        if not forced and not compile_recorder.version_supported(torch.__version__):
            warnings.warn(
                self._off_warning(f"torch {torch.__version__} is not a version it was verified on"), stacklevel=1
            )
            return None
        recorder = compile_recorder.Recorder()
        recorder.listeners.append(self.tally.on_compiled)
        compile_recorder.start_at_first_compile(recorder, self._recorder_failed, compile_self_test.run)
        return recorder

    def _recorder_failed(self, why: str) -> None:
        self.recorder = None
        warnings.warn(self._off_warning(why), stacklevel=1)

    @staticmethod
    def _off_warning(why: str) -> pytest.PytestWarning:
        from autograd_lint.coverage.compile_recorder import ENV_SWITCH

        return pytest.PytestWarning(
            f"autograd-cov: torch.compile recording is off: {why}. Code run only "
            f"under torch.compile will show as not run. Silence this with "
            f"--autograd-cov-no-compile or {ENV_SWITCH}=0."
        )

    def _rows_wanted(self) -> bool:
        """Whether anything reads the report: the table, the JSON or a fail option."""
        return any(
            (
                _setting(self.config, "autograd_cov_report") != "none",
                _setting(self.config, "autograd_cov_json"),
                _setting(self.config, "autograd_cov_fail_unexercised"),
                _setting(self.config, "autograd_cov_fail_under") not in (None, ""),
            )
        )

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Start the analyser beside the tests (the controller only: workers send counts)."""
        if not self.is_worker and self._rows_wanted():
            from autograd_lint.coverage.coverage_data import parallel_files
            from autograd_lint.coverage.discovery_worker import Background

            self.data_files_before = parallel_files()
            self.discovery = Background([os.path.abspath(r) for r in self._roots()])

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.discovery is not None:
            self.discovery.cancel()
        if self.failure:
            # After pytest's "N passed" line, which would otherwise end a failing run.
            reporter = config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(self.failure, red=True, bold=True)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        if self.recorder is not None:
            self.recorder.label = item.nodeid
        try:
            return (yield)
        finally:
            if self.recorder is not None:
                self.recorder.label = ""

    # trylast makes this the innermost wrapper: the code after ``yield`` runs
    # before pytest-cov's wrapper stops and saves coverage.
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        result = yield
        if self.recorder is not None and self.recorder.store:
            self._add_compile_evidence()
        if not self.is_worker:
            self.omit_note = _not_yours_note()
        if self.is_worker:
            self.config.workeroutput[WORKER_KEY] = self.tally.to_json()  # type: ignore[attr-defined]
            self.config.workeroutput[WORKER_LINES_KEY] = _measured_lines(  # type: ignore[attr-defined]
                [os.path.realpath(r) for r in self._roots()]
            )
        else:
            self._finish_report(session)
        return result

    def _add_compile_evidence(self) -> None:
        from autograd_lint.coverage.coverage_data import add_evidence

        assert self.recorder is not None
        added = add_evidence(self.recorder.store, CONTEXT_SUFFIX)
        self.evidence_note = (
            "torch.compile evidence not added: coverage is not running"
            if added is None
            else f"torch.compile evidence: {added} file records added to coverage"
        )

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist controller: add a finished worker's counts."""
        output = getattr(node, "workeroutput", {})
        runs = output.get(WORKER_KEY)
        if runs:
            self.tally.merge(self.tally.from_json(runs))
        for path, lines in (output.get(WORKER_LINES_KEY) or {}).items():
            self.worker_lines.setdefault(path, set()).update(lines)

    def _roots(self) -> list[str]:
        roots = _setting(self.config, "autograd_cov_source")
        if roots:
            return [str(r) for r in roots]
        source = _coverage_source()
        return source or [str(self.config.rootpath)]

    def _finish_report(self, session: pytest.Session) -> None:
        from autograd_lint.coverage import report

        if self.discovery is None:
            return  # nothing reads the rows
        roots = self.discovery.roots
        self.rows = report.build(self.tally.runs(), self.discovery.result(), roots)
        if any(row.code_lines for row in self.rows):
            from autograd_lint.coverage.coverage_data import lines_saved_since

            # What this process saw, what xdist workers sent, and what other processes of the
            # run (multiprocessing children) saved: the data `coverage combine` will join.
            extra = {path: set(lines) for path, lines in self.worker_lines.items()}
            for path, lines in lines_saved_since(self.data_files_before).items():
                extra.setdefault(path, set()).update(lines)
            statements, executed = _coverage_lines(extra)
            report.fill_lines(self.rows, statements, executed)
        json_path = _setting(self.config, "autograd_cov_json")
        if json_path:
            with open(json_path, "w", encoding="utf-8") as f:
                f.write(report.to_json(self.rows, str(self.config.rootpath)) + "\n")
        fail_under = _setting(self.config, "autograd_cov_fail_under")
        percent = report.exercised_percent(self.rows)
        if fail_under not in (None, "") and percent < float(fail_under):
            self.failure = (
                f"FAIL: autograd-cov: backward code ran for {percent:.1f}% of Functions, "
                f"under --autograd-cov-fail-under={float(fail_under):g}"
            )
        elif _setting(self.config, "autograd_cov_fail_unexercised") and report.unexercised(self.rows):
            missing = [r.qualname for r in report.unexercised(self.rows)]
            names = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            self.failure = f"FAIL: autograd-cov: --autograd-cov-fail-unexercised: backward code never ran: {names}"
        if self.failure:
            session.testsfailed += 1

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from autograd_lint.coverage import report

        if self.is_worker or _setting(self.config, "autograd_cov_report") == "none":
            return
        terminalreporter.write_sep("-", "autograd-cov: runs per Function (eager+compiled c)")
        if not self.rows:
            terminalreporter.write_line("no autograd.Function found or run")
        for line in report.format_table(self.rows, str(self.config.rootpath)):
            terminalreporter.write_line(line)
        for line in report.format_lines(self.rows, str(self.config.rootpath)):
            terminalreporter.write_line(line)
        missing = report.unexercised(self.rows)
        if missing:
            what = "Functions and custom-op backwards" if any(r.op for r in self.rows) else "Functions"
            terminalreporter.write_line(
                f"backward code never ran: {len(missing)} of "
                f"{sum(r.has_backward is not False for r in self.rows)} {what} "
                f"({report.exercised_percent(self.rows):.1f}% exercised)"
            )
        for note in (self.evidence_note, self.omit_note):
            if note:
                terminalreporter.write_line(note)


def _coverage_source() -> list[str]:
    """The directories coverage measures when it runs with ``[run] source`` or ``source_pkgs``.

    As coverage reads them: a ``source`` entry is a directory, else the name of
    an importable package (``--cov=mypkg`` for an installed package); a
    ``source_pkgs`` entry is a package name.  A package is found where it would
    be imported from, without importing it.
    """
    try:
        import coverage
    except ImportError:
        return []
    cov = coverage.Coverage.current()
    if cov is None:
        return []
    found = []
    for entry in cov.get_option("run:source") or []:
        if os.path.isdir(entry):
            found.append(entry)
        else:
            found.extend(_package_directories(entry))
    for name in cov.get_option("run:source_pkgs") or []:
        found.extend(_package_directories(name))
    return found


def _package_directories(name: str) -> list[str]:
    """Where the package (or module) ``name`` would be imported from; [] when it can't be found.

    Walks ``sys.path`` part by part with :class:`importlib.machinery.PathFinder`,
    which finds without executing anything (``importlib.util.find_spec`` would
    import the parent packages).
    """
    import importlib.machinery

    if not name or not all(part.isidentifier() for part in name.split(".")):
        return []
    path: list[str] | None = None
    spec = None
    for part in name.split("."):
        spec = importlib.machinery.PathFinder.find_spec(part, path)
        if spec is None:
            return []
        path = list(spec.submodule_search_locations or [])
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return list(spec.submodule_search_locations)
    return [spec.origin] if spec.origin else []


def _measured_lines(roots: list[str]) -> dict[str, list[int]]:
    """The lines this process's coverage saw run, per measured file under ``roots`` (an xdist
    worker's share of the custom-op lines)."""
    try:
        import coverage
    except ImportError:
        return {}
    cov = coverage.Coverage.current()
    if cov is None:
        return {}
    data = cov.get_data()
    found = {}
    for path in data.measured_files():
        real = os.path.realpath(path)
        if not roots or any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots):
            found[real] = sorted(data.lines(path) or ())
    return found


def _coverage_lines(extra: dict[str, set[int]]) -> tuple[Any, Any]:
    """``(statements(path), executed(path))`` from the running coverage, with ``extra`` lines
    (from xdist workers and child processes) added to what it saw run; both give None without coverage."""
    try:
        import coverage
    except ImportError:
        coverage = None  # type: ignore[assignment]
    cov = coverage.Coverage.current() if coverage is not None else None
    if cov is None:
        return (lambda path: None), (lambda path: None)
    data = cov.get_data()
    by_real = {os.path.realpath(p): p for p in data.measured_files()}

    @functools.lru_cache(maxsize=None)  # a file holds many Functions: analysed once
    def statements(path: str) -> set[int] | None:
        try:
            return set(cov.analysis2(path)[1])
        except Exception:  # noqa: BLE001 - not Python coverage can read: lines unknown
            return None

    def executed(path: str) -> set[int] | None:
        # A file coverage holds no data for was not measured (omitted, outside its source, or
        # never imported): its lines are unknown, not missing.
        real = os.path.realpath(path)
        measured = by_real.get(real)
        if measured is None and real not in extra:
            return None
        ran = set(data.lines(measured) or ()) if measured is not None else set()
        return ran | extra.get(real, set())

    return statements, executed


def _not_yours_note() -> str:
    """A hint when coverage measures torch's generated code or this plugin, else ``""``.

    Once coverage runs, its ``omit`` setting can no longer change through its
    public API; the coverage.py plugin (``[run] plugins``) sets it before
    measuring starts.
    """
    import fnmatch

    from autograd_lint.coverage import omitted_patterns

    try:
        import coverage
    except ImportError:
        return ""
    cov = coverage.Coverage.current()
    if cov is None or cov.get_option("run:source") or cov.get_option("run:include"):
        return ""
    patterns = omitted_patterns()
    found = [f for f in cov.get_data().measured_files() if any(fnmatch.fnmatch(f, p) for p in patterns)]
    if not found:
        return ""
    return (
        f"autograd-cov: coverage measured {len(found)} files that are not your code (torch's generated "
        f"code, this plugin); to omit them, add plugins = [\"autograd_lint.coverage\"] to [tool.coverage.run]"
    )
