"""What coverage sees of backward code the autograd engine runs on a CUDA device thread.

Real coverage.py (``coverage run -m pytest``, and pytest-cov) over ``cuda/``, in subprocesses,
with its C tracer (``COVERAGE_CORE=ctrace``: a per-thread ``sys.settrace`` hook, so threads
started in C++ are not traced) and, where Python has it, ``sysmon`` (``sys.monitoring``, every
thread). Needs a CUDA device: skipped everywhere else, CI included. The figures seen on a GPU
machine are in docs/coverage.md ("CUDA device threads").
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from conftest import Run, marked, run_in_copy

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

CUDA = Path(__file__).parent / "cuda"
# The backward code the engine runs on the device thread when the caller is the main thread.
DEVICE_THREAD_TAGS = ("square-bwd", "cube-bwd", "cuda-hook", "op-bwd", "triton-bwd")
ALL_TAGS = ("square-fwd", "triton-fwd", *DEVICE_THREAD_TAGS, "single-bwd", "compiled-fwd", "compiled-bwd", "never-bwd")


def _run(factory: pytest.TempPathFactory, argv: list[str], **env: str) -> Run:
    run = run_in_copy(factory, argv, project=CUDA, **env)
    assert run.returncode == 0, run.output
    return run


@pytest.fixture(scope="module")
def ctrace_off(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _run(tmp_path_factory, ["coverage", "run", "-m", "pytest", "-p", "no:autograd_lint_cov"], COVERAGE_CORE="ctrace")


@pytest.fixture(scope="module")
def ctrace_on(tmp_path_factory: pytest.TempPathFactory) -> Run:
    argv = ["coverage", "run", "-m", "pytest", "--autograd-cov", "--autograd-cov-json=report.json"]
    return _run(tmp_path_factory, argv, COVERAGE_CORE="ctrace")


@pytest.fixture(scope="module")
def pytest_cov_on(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _run(tmp_path_factory, ["pytest", "--cov=.", "--autograd-cov"], COVERAGE_CORE="ctrace")


@pytest.fixture(scope="module")
def sysmon_off(tmp_path_factory: pytest.TempPathFactory) -> Run:
    if sys.version_info < (3, 12):
        pytest.skip("coverage's sysmon core needs Python 3.12+")
    return _run(tmp_path_factory, ["coverage", "run", "-m", "pytest", "-p", "no:autograd_lint_cov"], COVERAGE_CORE="sysmon")


def _file_of(tag: str) -> str:
    return "tritonlib.py" if tag.startswith("triton-") else "cudalib.py"


def _seen(run: Run) -> dict[str, bool]:
    return {tag: marked(_file_of(tag), tag, CUDA) <= run.lines(_file_of(tag)) for tag in ALL_TAGS}


def _compile_recorder_on() -> bool:
    from autograd_lint.coverage import compile_recorder

    forced = os.environ.get(compile_recorder.ENV_SWITCH) == "force"
    return forced or compile_recorder.version_supported(torch.__version__)


def test_table(ctrace_off: Run, ctrace_on: Run, pytest_cov_on: Run, request: pytest.FixtureRequest) -> None:
    """Which marked lines each arm saw run: the whole table of docs/coverage.md ("CUDA device threads")."""
    arms = {"ctrace, plain": ctrace_off, "ctrace, --autograd-cov": ctrace_on, "pytest-cov, --autograd-cov": pytest_cov_on}
    if sys.version_info >= (3, 12):
        arms["sysmon, plain"] = request.getfixturevalue("sysmon_off")
    main_thread = {"square-fwd", "triton-fwd", "single-bwd"}
    compiled = {"compiled-fwd", "compiled-bwd"} if _compile_recorder_on() else set()
    expected = {
        "ctrace, plain": main_thread,
        "ctrace, --autograd-cov": main_thread | set(DEVICE_THREAD_TAGS) | compiled,
        "pytest-cov, --autograd-cov": main_thread | set(DEVICE_THREAD_TAGS) | compiled,
        "sysmon, plain": main_thread | set(DEVICE_THREAD_TAGS),  # it does not see compiled code either
    }
    rows = ["| lines | " + " | ".join(arms) + " |"] + [
        f"| {tag} | " + " | ".join("run" if _seen(run)[tag] else "missed" for run in arms.values()) + " |"
        for tag in ALL_TAGS
    ]
    print("\n" + "\n".join(rows))  # with -s: the table as docs/coverage.md shows it
    for arm, run in arms.items():
        seen = {tag for tag, ran in _seen(run).items() if ran}
        assert seen == expected[arm], (arm, "\n".join(rows), run.output[-3000:])


def test_plain_ctrace_misses_device_thread_backward(ctrace_off: Run) -> None:
    seen = _seen(ctrace_off)
    assert not any(seen[tag] for tag in DEVICE_THREAD_TAGS), seen
    assert seen["square-fwd"] and seen["single-bwd"], seen


def test_bridge_covers_device_thread_backward(ctrace_on: Run, pytest_cov_on: Run) -> None:
    for run in (ctrace_on, pytest_cov_on):
        seen = _seen(run)
        assert all(seen[tag] for tag in DEVICE_THREAD_TAGS), (seen, run.output)
        assert not seen["never-bwd"], seen


def test_bridge_adds_only_backward_lines(ctrace_off: Run, ctrace_on: Run) -> None:
    for name in ("cudalib.py", "tritonlib.py"):
        added = ctrace_on.lines(name) - ctrace_off.lines(name)
        tags = (*DEVICE_THREAD_TAGS, "compiled-fwd", "compiled-bwd")
        allowed = set().union(*(marked(name, tag, CUDA) for tag in tags if _file_of(tag) == name))
        assert added <= allowed, (name, sorted(added - allowed))


def test_compiled_backward_is_covered(ctrace_on: Run) -> None:
    if not _compile_recorder_on():
        pytest.skip(f"the compile recorder is off on torch {torch.__version__} unless AUTOGRAD_COV_COMPILE=force")
    seen = _seen(ctrace_on)
    assert seen["compiled-fwd"] and seen["compiled-bwd"], seen


def test_report_counts_device_thread_backward(ctrace_on: Run) -> None:
    report = json.loads((ctrace_on.root / "report.json").read_text())
    ran = {f["qualname"]: f["backward_ran"] for f in report["functions"]}
    assert ran["CudaSquare"] and ran["CudaCube"] and ran["SingleThreaded"], ran
    assert not ran["NeverBackwardCuda"], ran
    assert ran["scale_backward"] and ran["double_backward"], ran


def test_sysmon_core_sees_every_thread(sysmon_off: Run) -> None:
    seen = _seen(sysmon_off)
    assert all(seen[tag] for tag in DEVICE_THREAD_TAGS), seen
