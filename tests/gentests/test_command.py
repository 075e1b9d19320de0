"""``autograd-lint gen-tests``: deterministic output, stale/edited files, bad input, exit codes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pytest_process import run_pytest

from autograd_lint.cli import main

SQUARE = '''\
import torch
from torch.autograd import Function


class Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


def make():
    class Local(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad

    return Local


class ForwardOnly(Function):
    @staticmethod
    def forward(ctx, x):
        return x
'''

OUT = Path("generated")
GENERATED = OUT / "test_gradcheck_pkg_ops.py"


def write_project(root: Path) -> Path:
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "ops.py").write_text(SQUARE)
    return root


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return write_project(tmp_path)


def gen(*args: str) -> int:
    return main(["gen-tests", "pkg", "--out", str(OUT), *args])


def test_writes_one_module_per_source_module_and_is_idempotent(project: Path, capsys) -> None:
    assert gen() == 0
    output = capsys.readouterr().out
    assert f"wrote {GENERATED} (1 Function(s))" in output
    assert "Local is defined inside a function" in output
    assert sorted(p.name for p in OUT.iterdir()) == [GENERATED.name]
    first = GENERATED.read_bytes()
    assert b"class TestSquare:" in first and b"ForwardOnly" not in first

    assert gen() == 0
    assert "wrote" not in capsys.readouterr().out
    assert GENERATED.read_bytes() == first
    assert gen("--check") == 0


def test_check_reports_stale_and_missing_files_without_writing(project: Path, capsys) -> None:
    assert gen("--check") == 1
    assert f"{GENERATED}: missing" in capsys.readouterr().out
    assert not OUT.exists()

    gen()
    ops = project / "pkg" / "ops.py"
    ops.write_text(ops.read_text() + "\n\ndef demo():\n    return Square.apply(torch.randn(2, 5))\n")
    before = GENERATED.read_text()
    assert gen("--check") == 1
    assert f"{GENERATED}: stale" in capsys.readouterr().out
    assert GENERATED.read_text() == before

    assert gen() == 0
    assert "static-2x5" in GENERATED.read_text()


def test_edited_files_are_kept_unless_forced(project: Path, capsys) -> None:
    gen()
    edited = GENERATED.read_text().replace("class TestSquare:", "class TestSquare:  # tuned by hand")
    GENERATED.write_text(edited)
    capsys.readouterr()

    assert gen() == 2
    assert f"{GENERATED}: edited since it was generated; not overwritten (use --force)" in capsys.readouterr().err
    assert GENERATED.read_text() == edited
    assert gen("--check") == 1

    assert gen("--force") == 0
    assert "tuned by hand" not in GENERATED.read_text()


def test_a_file_we_did_not_write_is_not_overwritten(project: Path, capsys) -> None:
    OUT.mkdir()
    GENERATED.write_text("def test_mine():\n    pass\n")
    assert gen() == 2
    assert f"{GENERATED}: not written by gen-tests; not overwritten (use --force)" in capsys.readouterr().err
    assert GENERATED.read_text() == "def test_mine():\n    pass\n"


def test_a_broken_file_gets_one_line_and_the_run_continues(project: Path, capsys) -> None:
    (project / "pkg" / "broken.py").write_text("import torch\n\ndef oops(:\n    Square.apply(1)\n")
    assert gen() == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith(str(Path("pkg") / "broken.py"))
    assert GENERATED.exists()


def test_an_unreadable_recording_is_an_error(project: Path, capsys) -> None:
    Path("inputs.json").write_text("{not json")
    assert gen("--inputs", "inputs.json") == 2
    assert "inputs.json: cannot read recorded inputs" in capsys.readouterr().err
    assert GENERATED.exists()


def test_the_generated_import_root_is_relative_to_the_output(project: Path) -> None:
    gen()
    assert 'subject = import_subject("pkg.ops", __file__, "..")' in GENERATED.read_text()


def test_the_command_imports_neither_torch_nor_the_analysed_code(project: Path) -> None:
    (project / "pkg" / "ops.py").write_text('raise SystemExit("the analysed code was imported")\n' + SQUARE)
    script = textwrap.dedent(
        """
        import sys
        from autograd_lint.cli import main
        code = main(["gen-tests", "pkg", "--out", "generated"])
        assert "torch" not in sys.modules, "torch was imported"
        sys.exit(code)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=project, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (project / GENERATED).exists()


def test_recorded_cuda_cases_are_skipped_where_cuda_is_missing(pytester: pytest.Pytester) -> None:
    torch = pytest.importorskip("torch")
    project = write_project(pytester.path)
    recording = {"format": 1, "functions": {"pkg.ops.Square": {
        "module": "pkg.ops", "qualname": "Square", "path": "pkg/ops.py",
        "cases": [
            {"calls": 3, "args": [{"tensor": {"shape": [2, 3], "dtype": "float32", "device": "cpu",
                                              "requires_grad": True}}]},
            {"calls": 1, "args": [{"tensor": {"shape": [4], "dtype": "float16", "device": "cuda:0",
                                              "requires_grad": True}}]},
        ]}}}
    Path("inputs.json").write_text(json.dumps(recording))
    assert gen("--inputs", "inputs.json") == 0
    text = GENERATED.read_text()
    assert 'pytest.param(Case((tensor((2, 3)),)), id="recorded-2x3")' in text
    assert 'id="recorded-4@cuda:0", marks=requires_device("cuda:0")' in text

    result = run_pytest(pytester, str(project / OUT), "-rs", "-p", "no:cacheprovider")
    # gradcheck, non-contiguous gradcheck (skipped for the vector), gradgradcheck on each case
    if torch.cuda.is_available():
        result.assert_outcomes(passed=5, skipped=1)
    else:
        result.assert_outcomes(passed=3, skipped=3)
        result.stdout.fnmatch_lines(["SKIPPED *case recorded on cuda:0; cuda is not available here"])


def test_a_pickled_cuda_case_is_marked_and_its_module_collects(pytester: pytest.Pytester) -> None:
    # Recorded on a GPU machine: flex_attention's Function, its GraphModules pickled with
    # the CUDA tensors. The generated module used requires_device without importing it.
    torch = pytest.importorskip("torch")
    from autograd_lint.gentests import pickled

    project = write_project(pytester.path)
    payload = pickled.dumps((torch.ones(4, requires_grad=True),))
    recording = {"format": 1, "functions": {"pkg.ops.Square": {
        "module": "pkg.ops", "qualname": "Square", "path": "pkg/ops.py",
        "cases": [{"calls": 1, "pickled": payload, "args": [
            {"tensor": {"shape": [4], "dtype": "float32", "device": "cuda:0", "requires_grad": True}}]}]}}}
    Path("inputs.json").write_text(json.dumps(recording))
    assert gen("--inputs", "inputs.json") == 0
    text = GENERATED.read_text()
    assert 'marks=requires_device("cuda:0")' in text
    result = run_pytest(pytester, str(project / OUT), "-rs", "-p", "no:cacheprovider")
    if not torch.cuda.is_available():
        result.stdout.fnmatch_lines(["SKIPPED *case recorded on cuda:0; cuda is not available here"])
    assert result.ret == pytest.ExitCode.OK


def test_a_module_whose_dependency_is_missing_is_skipped_not_an_error(pytester: pytest.Pytester) -> None:
    # torch's own CUDA-only kernels import `cuda.bindings` at the top: on a CPU
    # machine their generated tests were a collection error, a failure with no bug.
    pytest.importorskip("torch")
    project = write_project(pytester.path)
    ops = project / "pkg" / "ops.py"
    ops.write_text("import not_installed_anywhere_xyz\n" + ops.read_text())
    assert gen() == 0
    result = run_pytest(pytester, str(project / OUT), "-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED *pkg.ops cannot be imported here: it needs not_installed_anywhere_xyz*"])


def test_a_module_whose_dependency_raises_on_import_is_skipped_its_own_error_raised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # spikingjelly's example module imports torchvision, which a build for another torch
    # breaks ("operator torchvision::nms does not exist"): the collection error stopped
    # the whole generated suite.  An error of the subject's own module-level code stays one.
    from autograd_lint.gentests.runtime.environment import import_subject

    (tmp_path / "brokendep_xyz").mkdir()
    (tmp_path / "brokendep_xyz" / "__init__.py").write_text("raise RuntimeError('operator brokendep::nms does not exist')\n")
    (tmp_path / "subj_xyz").mkdir()
    (tmp_path / "subj_xyz" / "__init__.py").write_text("")
    (tmp_path / "subj_xyz" / "uses.py").write_text("import brokendep_xyz\n")
    (tmp_path / "subj_xyz" / "own.py").write_text("raise RuntimeError('the subject is broken')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(pytest.skip.Exception, match=r"subj_xyz.uses cannot be imported here: importing brokendep_xyz "
                                                    r"raised RuntimeError: operator brokendep::nms does not exist"):
        import_subject("subj_xyz.uses", str(tmp_path / "test_x.py"), ".")
    with pytest.raises(RuntimeError, match="the subject is broken"):
        import_subject("subj_xyz.own", str(tmp_path / "test_x.py"), ".")


TWO_AND_AN_ALTERNATIVE = '''
import torch
from torch.autograd import Function


class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x ** 2 * grad


if hasattr(torch, "square"):
    class Square(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.square(x)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad
else:
    class Square(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad
'''


def test_every_function_of_a_module_is_written_and_a_name_defined_twice_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    write_project(tmp_path)
    (tmp_path / "pkg" / "ops.py").write_text(TWO_AND_AN_ALTERNATIVE)
    assert gen() == 0
    assert f"wrote {GENERATED} (2 Function(s))" in capsys.readouterr().out
    text = GENERATED.read_text()
    assert text.count("class TestCube:") == 1 and text.count("class TestSquare:") == 1


def test_custom_op_modules_import_their_registering_modules_and_test_compile_parity_on_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    # The written text only (tests/gentests/test_custom_ops_end_to_end.py runs it, marked slow).
    shutil.copytree(Path(__file__).parent / "fixtures" / "custom_ops" / "correct", tmp_path, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.chdir(tmp_path)
    written = Path("generated") / "test_opcheck_opspkg_ops.py"
    assert main(["gen-tests", ".", "--out", "generated"]) == 0
    plain = written.read_text()
    # opspkg/fakes.py registers the ops' fake kernels: the test module must import it too.
    assert 'import_subject("opspkg.fakes", __file__, "..")' in plain
    assert "test_compile_parity" not in plain and plain.count("def test_opcheck(") == 9
    # Each class says what opcheck can test: np_sin has no fake kernel, rowsum's inputs need no gradient.
    assert '"""opspkg::np_sin (line 57): no fake kernel (opcheck skips test_faketensor' in plain
    assert '"""opspkg::rowsum (line 75): fake kernel, no register_autograd (inputs do not require grad)."""' in plain
    assert main(["gen-tests", ".", "--out", "generated", "--compile-parity", "--force"]) == 0
    assert written.read_text().count("def test_compile_parity(") == 7
    capsys.readouterr()


def test_recorded_cases_are_found_by_full_name_else_by_qualname_in_the_same_file() -> None:
    # A test run may import pkg/ops.py as `ops` (rootdir-relative): a qualname recorded from
    # the same file matches, one from another file never does.
    from types import SimpleNamespace

    from autograd_lint.gentests.inputs import ValueInput
    from autograd_lint.gentests.recording import Recording

    def entry(qualname: str, path: str, value: int) -> dict[str, object]:
        return {"qualname": qualname, "path": path, "cases": [{"args": [{"value": value}]}]}

    recording = Recording({
        "ops.Square": entry("Square", "pkg/ops.py", 1),
        "pkg.ops.Square": entry("Square", "pkg/ops.py", 2),
        "other.Cube": entry("Cube", "other/ops.py", 3),
        "ops.Cube": entry("Cube", "pkg/ops.py", 4),
    })

    def recorded(full_name: str, qualname: str) -> list[tuple[object, ...]]:
        spec = SimpleNamespace(full_name=full_name, qualname=qualname, path="/project/pkg/ops.py")
        return [case.args for case in recording.cases_for(spec)]  # type: ignore[arg-type]

    assert recorded("pkg.ops.Square", "Square") == [(ValueInput("2"),)]
    assert recorded("pkg.ops.Cube", "Cube") == [(ValueInput("4"),)]
    assert recorded("pkg.ops.Other", "Other") == []



def test_a_recorded_none_is_the_literal_none_and_a_value_of_another_type_drops_the_case() -> None:
    # The recorder writes floats under "float"; a "value" holding one (a hand-edited file) is not a literal.
    from types import SimpleNamespace

    from autograd_lint.gentests.inputs import ValueInput
    from autograd_lint.gentests.recording import Recording

    spec = SimpleNamespace(full_name="pkg.ops.Square", qualname="Square", path="/project/pkg/ops.py")

    def recorded(*args: object) -> list[tuple[object, ...]]:
        entry = {"qualname": "Square", "path": "pkg/ops.py", "cases": [{"args": [{"value": a} for a in args]}]}
        return [case.args for case in Recording({"pkg.ops.Square": entry}).cases_for(spec)]  # type: ignore[arg-type]

    assert recorded(None, True, 3, "sum") == [(ValueInput("None"), ValueInput("True"), ValueInput("3"),
                                               ValueInput("'sum'"))]
    assert recorded(None, 1.5) == []


def test_a_recording_merged_from_a_worker_written_and_read_back_keeps_calls_values_and_old_functions(
    tmp_path: Path,
) -> None:
    from types import SimpleNamespace

    from autograd_lint.gentests.inputs import TensorInput, ValueInput
    from autograd_lint.gentests.recording import Recorder, RecordingError, load

    path = tmp_path / "inputs.json"
    old = {"module": "pkg.ops", "qualname": "Old", "path": "pkg/ops.py", "cases": []}
    path.write_text(json.dumps({"format": 1, "functions": {"pkg.ops.Old": old}}))
    tensor = {"shape": [2], "dtype": "float32", "device": "cpu", "requires_grad": True, "contiguous": False}
    args = [{"tensor": tensor}, {"float": "inf"}, {"float": "0.5"}, {"dtype": "float16"},
            {"tuple": [{"value": 1}]}, {"list": [{"value": 1}, {"float": "2.5"}]}]
    example = [{"tensor": {**tensor, "values": [1.0, "nan"]}}, *args[1:]]
    controller, worker = Recorder(), Recorder()
    assert not controller.has_case("pkg.ops", "Square", args)  # a Function never called: its values are wanted
    controller.add("pkg.ops", "Square", "pkg/ops.py", args, example)
    for _ in range(2):
        worker.add("pkg.ops", "Square", "pkg/ops.py", args, example)
    worker.add("pkg.ops", "Cube", "pkg/ops.py", [{"value": None}])
    controller.merge(worker.as_json())
    controller.write(str(path))
    data = json.loads(path.read_text())
    assert path.read_text() == json.dumps(data, indent=1, sort_keys=True) + "\n"  # stable diffs between runs
    assert data["format"] == 2 and list(data["functions"]) == ["pkg.ops.Cube", "pkg.ops.Old", "pkg.ops.Square"]
    assert [case["calls"] for case in data["functions"]["pkg.ops.Square"]["cases"]] == [3]
    spec = SimpleNamespace(full_name="pkg.ops.Square", qualname="Square", path=str(tmp_path / "pkg" / "ops.py"))
    (case,) = load(str(path)).cases_for(spec)  # type: ignore[arg-type]
    assert case.args == (TensorInput((2,), contiguous=False, values=(1.0, "nan")), ValueInput("float('inf')"),
                         ValueInput("0.5"), ValueInput("torch.float16"), ValueInput("(1,)"), ValueInput("[1, 2.5]"))
    mine = tmp_path / "test_mine.py"
    mine.write_text("def test_mine():\n    pass\n")
    for refused, why in ((tmp_path, "is a directory, not a recording file"),
                         (mine, "exists and is not a recording of `pytest --autograd-record`; not overwritten")):
        with pytest.raises(RecordingError, match=f"^{re.escape(f'{refused}: {why}')}$"):
            Recorder().write(str(refused))
    assert mine.read_text() == "def test_mine():\n    pass\n"


def test_a_record_counts_64_structures_and_puts_the_smaller_of_equally_frequent_cases_first() -> None:
    from autograd_lint.gentests.recording import FunctionRecord, Recorder

    def vector(size: int) -> list[dict[str, object]]:
        return [{"tensor": {"shape": [size], "dtype": "float32"}}]

    recorder = Recorder()
    for size in range(65):
        recorder.add("pkg.ops", "Square", "pkg/ops.py", vector(size))
    record = recorder.functions["pkg.ops.Square"]
    assert len(record.counts) == 64 and vector(64)[0] not in [args[0] for args in record.examples.values()]
    # A 65th structure is no longer kept (its values need not be encoded); a kept one still counts.
    assert recorder.has_case("pkg.ops", "Square", vector(64)) and recorder.has_case("pkg.ops", "Square", vector(3))
    # Sizes: a pickle's length, else the tensors' elements: 2 elements before a pickle of 3 characters,
    # a pickle of 1 character before 2 elements, and no tensor (0) before a pickle of 1 character.
    record = FunctionRecord("pkg.ops", "Cube", "pkg/ops.py")
    record.add(vector(2), None)
    record.add([{"object": "pkg.ops.Mesh"}], None, pickled="abc")
    record.add([{"value": 1}], None)
    record.add([{"object": "pkg.ops.Grid"}], None, pickled="a")
    assert [case["args"] for case in record.as_json()["cases"]] == [
        [{"value": 1}], [{"object": "pkg.ops.Grid"}], vector(2)]


def test_the_recorder_keeps_the_values_of_a_tensor_of_at_most_64_elements_else_statistics() -> None:
    torch = pytest.importorskip("torch")
    from autograd_lint.gentests.record_plugin import _ArgumentEncoder

    encoder = _ArgumentEncoder(torch)
    small = encoder.encode(torch.arange(64.0), with_values=True)["tensor"]  # type: ignore[index]
    large = encoder.encode(torch.arange(65.0), with_values=True)["tensor"]  # type: ignore[index]
    assert small["values"] == [float(i) for i in range(64)] and "stats" not in small
    assert "values" not in large and large["stats"]["min"] == 0.0 and large["stats"]["max"] == 64.0


def test_a_custom_op_s_second_case_passes_another_value_for_each_literal_default() -> None:
    from autograd_lint.gentests.custom_ops import _alternative

    # Documented: True for False, n + 1 for an int, 2 x for a float (0.5 for zero).
    assert [_alternative(s) for s in ("True", "False", "3", "-1", "0.25", "0.0", "1.5e-3", "None", "'sum'")] == [
        "False", "True", "4", "0", "0.5", "0.5", "0.003", None, None]
    # Floats written without a dot, or without digits on one side of it.
    assert [_alternative(s) for s in ("1e-3", "2E+4", "1.", ".5", "-1e-3", ".", "e3", "1e")] == [
        "0.002", "40000.0", "2.0", "1.0", "-0.002", None, None, None]


DECLARED = '''\
import torch
from torch.autograd import Function


def reference(a):
    return a * 2


# autograd-lint: low-precision dtype=bfloat16, device = cuda:1 k=2 reference=lambda a: a * 2
class Kernel(Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


# autograd-lint: low-precision dtype=float16 reference=pkg.ops.reference
class Imported(Kernel):
    pass


# autograd-lint: gradcheck atol=1e-4, rtol = 0.01
class Approx(Function):
    @staticmethod
    def forward(ctx, a):
        return a.exp()

    @staticmethod
    def backward(ctx, grad):
        return grad


class Configured(Approx):
    pass
'''


def test_declared_low_precision_and_tolerances_are_written_into_the_checks(project: Path, capsys) -> None:
    # The written text only (test_low_precision.py and test_tolerance.py run such modules in subprocesses).
    (project / "pkg" / "ops.py").write_text(DECLARED)
    (project / "pyproject.toml").write_text(
        '[tool.autograd-lint]\ngradcheck-tolerances = {"pkg.ops.Configured" = "rtol=0.5"}\n')
    assert gen() == 0
    text = GENERATED.read_text()
    kernel, imported = (text.split("class TestKernel:")[1].split("class TestImported:"))
    imported, approx = imported.split("class TestApprox:")
    approx, configured = approx.split("class TestConfigured:")
    assert "check_low_precision(subject.Kernel, case, reference=lambda a: a * 2, dtype='bfloat16', " \
           "device='cuda:1', k=2.0)" in kernel and "check_gradcheck" not in kernel
    assert "check_low_precision(subject.Imported, case, reference=load_reference(\"pkg.ops.reference\"), " \
           "dtype='float16', device='cpu', k=3.0)" in imported and "check_gradcheck" not in imported
    for check in ("check_gradcheck", "check_gradcheck_non_contiguous", "check_gradgradcheck"):
        assert f"{check}(subject.Approx, case, atol=0.0001, rtol=0.01)" in approx
        assert f"{check}(subject.Configured, case, rtol=0.5)" in configured
    capsys.readouterr()


OPTIONAL_CHECKS = '''\
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable


class Full(Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, scale):
        return x * scale

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.scale = inputs[1]
        ctx.set_materialize_grads(False)

    @staticmethod
    def backward(ctx, grad):
        if grad is None:
            return None, None
        return grad * ctx.scale, None

    @staticmethod
    def jvp(ctx, x_t, scale_t):
        return x_t * ctx.scale


class Once(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        return grad * 2
'''


def test_each_check_is_written_where_the_function_has_what_it_checks(project: Path, capsys) -> None:
    (project / "pkg" / "ops.py").write_text(OPTIONAL_CHECKS)
    assert gen("--compile-parity") == 0
    full, once = GENERATED.read_text().split("class TestFull:")[1].split("class TestOnce:")

    def checks(text: str, name: str) -> list[str]:
        return re.findall(rf"        (check_\w+)\(subject\.{name}, case\)", text)

    assert checks(full, "Full") == [
        "check_gradcheck", "check_gradcheck_non_contiguous", "check_gradgradcheck", "check_forward_ad",
        "check_vmap", "check_undefined_grad", "check_non_tensor_grads_are_none", "check_compile_parity"]
    assert checks(once, "Once") == [
        "check_gradcheck", "check_gradcheck_non_contiguous", "check_once_differentiable", "check_compile_parity"]
    capsys.readouterr()


CONFLICTING = '''\
import torch
from torch.autograd import Function


# autograd-lint: surrogate-gradient reference=lambda x: x
# autograd-lint: low-precision dtype=float32 reference=lambda x: x
class Both(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


# autograd-lint: gradcheck atol=1e-3 atol=1e-4
class Twice(Both):
    pass
'''


def test_conflicting_or_repeated_declarations_and_an_out_file_are_one_line_each(project: Path, capsys) -> None:
    (project / "pkg" / "ops.py").write_text(CONFLICTING)
    assert gen() == 2
    assert capsys.readouterr().err.splitlines() == [
        f"{Path('pkg', 'ops.py')}:7: Both is declared both a surrogate gradient and a low-precision kernel; its test "
        "compares it with the low-precision reference only",
        f"{Path('pkg', 'ops.py')}:17: gradcheck tolerance 'atol=1e-4' is given twice"]
    both, twice = GENERATED.read_text().split("class TestTwice:")
    assert "check_low_precision(subject.Both, case, reference=lambda x: x, dtype='float32'" in both
    assert "surrogate" not in both and "check_gradcheck(subject.Twice, case)" in twice
    Path("a_file").write_text("")
    assert main(["gen-tests", "pkg", "--out", "a_file"]) == 2
    assert capsys.readouterr().err == (
        "error: --out a_file: not a directory; the generated test modules go into a directory\n")


SURROGATES = '''\
import torch
from torch.autograd import Function


# autograd-lint: surrogate-gradient reference=lambda x: -x
class Declared(Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -grad


class Inferred(Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class Sampled(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2 * torch.rand_like(grad)
'''


def test_a_declared_surrogate_gets_its_reference_check_and_a_plain_one_is_inferred_and_hinted(
    project: Path, capsys
) -> None:
    # The written text only (tests/gentests/test_surrogate.py runs such modules, marked slow or left
    # out of the quick runs).
    (project / "pkg" / "ops.py").write_text(SURROGATES)
    assert gen() == 0
    hints = [line for line in capsys.readouterr().out.splitlines() if "backward plainly is not the derivative" in line]
    assert len(hints) == 2 and ": Inferred: " in hints[0] and "straight-through estimator" in hints[0]
    assert ": Sampled: " in hints[1] and "(a sampled gradient)" in hints[1]
    text = GENERATED.read_text()
    declared, inferred = text.split("class TestInferred")
    assert "check_surrogate_reference(subject.Declared, case, reference=lambda x: -x)" in declared
    assert "def test_gradcheck(" not in declared
    assert "def test_gradcheck(" in inferred and "def test_surrogate_reference(" not in inferred
    # Only the gradcheck of an inferred surrogate is an expected failure.
    assert "xfail" not in declared and inferred.count("@pytest.mark.xfail(") == 2
    assert "check_once_differentiable" not in text  # no backward here is once_differentiable
    assert inferred.split("@pytest.mark.xfail(", 1)[1].split("def ", 1)[1].startswith("test_gradcheck(")
    assert "any_tensor()" in text and "contiguous=False" not in text  # searched inputs: contiguous ones
    assert "check_surrogate_gradients(subject.Sampled, case, sampled=True)" in inferred


def test_a_local_function_without_a_recording_is_left_out() -> None:
    from autograd_lint.gentests.command import group_by_module
    from autograd_lint.model.analysis import analyze
    from autograd_lint.model.source import SourceFile
    from autograd_lint.settings import Settings

    specs = analyze(SourceFile("pkg/ops.py", SQUARE, "pkg.ops"), {}, Settings()).functions
    targets, left_out = group_by_module(specs)
    assert [spec.qualname for spec in left_out] == ["make.<locals>.Local"]
    assert [spec.qualname for target in targets for spec in target.functions] == ["Square"]


def test_a_pickled_case_is_written_in_lines_of_96_characters_that_join_to_the_pickle() -> None:
    from autograd_lint.gentests.inputs import InputCase, TensorInput
    from autograd_lint.gentests.render import _case_source

    pickle = "".join(chr(65 + i % 26) for i in range(200))
    chunks = [json.loads(line) for line in _case_source(InputCase((TensorInput((2,)),), pickle)).splitlines()[1:-1]]
    assert [len(chunk) for chunk in chunks] == [96, 96, 8] and "".join(chunks) == pickle


def test_a_case_is_written_as_the_harness_call_that_makes_it_again_and_labelled_by_its_arguments() -> None:
    torch = pytest.importorskip("torch")
    from autograd_lint.gentests.inputs import FunctionInputs, InputCase, Origin, ScalarInput, TensorInput, ValueInput
    from autograd_lint.gentests.render import _case_source, case_ids
    from autograd_lint.gentests.runtime import cases

    tensors = (TensorInput((2, 3), "float32", "cuda:0", requires_grad=False, contiguous=False, values=(1.0, "nan", True)),
               TensorInput((), stats=(("max", 2.0), ("min", -1.0))),
               TensorInput(None, "int64", requires_grad=False, rank=2, sizes=((0, 4),)), TensorInput((0, -1)))
    case = InputCase((*tensors, ScalarInput(), ValueInput("torch.float16"), ValueInput("(1,)")))
    made = eval(_case_source(case), {"torch": torch, **vars(cases)})  # noqa: S307 (our own generated text)
    assert made.args == (*tensors, ScalarInput(), torch.float16, (1,))
    assert case_ids(FunctionInputs(Origin.RECORDED, (case,))) == [
        "recorded-2x3.float32@cuda:0-scalar-?.int64-0xj-number-float16-1"]


def test_equal_cases_get_numbered_ids() -> None:
    from autograd_lint.gentests.inputs import FunctionInputs, InputCase, Origin, TensorInput
    from autograd_lint.gentests.render import case_ids

    case = InputCase((TensorInput((3,)),))
    assert case_ids(FunctionInputs(Origin.STATIC, (case, case, case))) == ["static-3", "static-3#2", "static-3#3"]


def test_calls_are_counted_apart_by_their_process_group_and_not_by_tensor_values() -> None:
    from autograd_lint.gentests.recording import structure_key

    args = [{"tensor": {"shape": [2], "dtype": "float32", "values": [1.0, 2.0], "stats": {"mean": 1.5}}}]
    two = {"backend": "gloo", "world_size": 2}
    four = {"backend": "gloo", "world_size": 4}
    assert structure_key(args) == json.dumps([{"tensor": {"dtype": "float32", "shape": [2]}}], sort_keys=True)
    assert len({structure_key(args), structure_key(args, two), structure_key(args, four)}) == 3


POISSON = """
import torch


class Poisson(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.bernoulli(x)

    @staticmethod
    def backward(ctx, grad):
        return grad
"""


def test_a_forward_that_draws_random_numbers_gets_the_gradient_contract_too(project: Path) -> None:
    (project / "pkg" / "ops.py").write_text(POISSON)
    assert gen() == 0
    generated = GENERATED.read_text()
    assert "check_gradcheck(subject.Poisson, case)" in generated
    assert "check_surrogate_gradients(subject.Poisson, case)" in generated
