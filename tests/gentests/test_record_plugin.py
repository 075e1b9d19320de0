"""``pytest --autograd-record``: inert by default; records calls whose forward returned, with values."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from pytest_process import run_pytest

OPS = '''\
import torch
from torch.autograd import Function


class Scale(Function):
    @staticmethod
    def forward(ctx, x, factor, mode="sum", dtype=None):
        ctx.factor = factor
        return x * factor

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.factor, None, None, None


class Add(Function):
    @staticmethod
    def forward(a, b):
        return a + b

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        return grad, grad
'''


def recorded(pytester: pytest.Pytester, name: str = ".autograd-lint/inputs.json") -> dict:
    return json.loads((pytester.path / name).read_text())


def test_without_the_option_the_plugin_imports_nothing_and_writes_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inert="""
        import sys

        def test_torch_is_not_imported():
            assert "torch" not in sys.modules
    """)
    result = run_pytest(pytester, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / ".autograd-lint").exists()
    assert "recorded inputs" not in result.stdout.str()


def test_records_structure_counted_and_the_values_of_the_first_call(pytester: pytest.Pytester) -> None:
    pytest.importorskip("torch")
    pytester.makepyfile(ops=OPS, test_ops="""
        import torch
        from ops import Add, Scale

        def test_calls():
            x = torch.full((2, 3), 123.25, requires_grad=True)
            Scale.apply(x, 2, "mean", torch.float64)
            for _ in range(2):
                Scale.apply(x * 2, 2, "mean", torch.float64)  # same structure: counted, values kept from the first
            Scale.apply(x.detach().t(), factor=0.5)          # keyword bound to its position; a transposed view
            Scale.apply(torch.ones(4, dtype=torch.int64), 2, (1, 2))
            Scale.apply(x, 2, (i for i in range(3)))          # a generator can't be pickled: not recorded
            Add.apply(torch.ones(2), torch.ones(2))
            torch.nn.functional.relu(x).sum().backward()     # torch's own code is not recorded
    """)
    result = run_pytest(pytester, "--autograd-record", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["autograd-lint: recorded inputs of 2 Function(s) to *inputs.json, "
                                 "1 call(s) with unrecordable arguments"])
    data = recorded(pytester)
    assert data["format"] == 2 and sorted(data["functions"]) == ["ops.Add", "ops.Scale"]
    scale = data["functions"]["ops.Scale"]
    assert (scale["module"], scale["qualname"], scale["path"]) == ("ops", "Scale", "ops.py")
    tensor = {"shape": [2, 3], "dtype": "float32", "device": "cpu", "requires_grad": True}
    assert scale["cases"][0] == {"calls": 3, "args": [
        {"tensor": {**tensor, "values": [123.25] * 6}}, {"value": 2}, {"value": "mean"}, {"dtype": "float64"}]}
    transposed = {"shape": [3, 2], "dtype": "float32", "device": "cpu", "requires_grad": False,
                  "contiguous": False, "values": [123.25] * 6}
    # `factor=0.5` was passed by keyword: recorded in its position, with its value.
    assert {"calls": 1, "args": [{"tensor": transposed}, {"float": "0.5"}]} in scale["cases"]
    assert [{"value": 1}, {"value": 2}] in [a.get("tuple") for c in scale["cases"] for a in c["args"]]


def test_a_call_whose_forward_raised_is_not_recorded(pytester: pytest.Pytester) -> None:
    pytest.importorskip("torch")
    pytester.makepyfile(ops=OPS + """

class Checked(Function):
    @staticmethod
    def forward(ctx, x):
        if (x < 0).any():
            raise ValueError("negative")
        return x.sqrt()

    @staticmethod
    def backward(ctx, grad):
        return grad
""", test_ops="""
        import pytest
        import torch
        from ops import Checked

        def test_error_path():
            with pytest.raises(ValueError):
                Checked.apply(-torch.ones(5))

        def test_valid():
            Checked.apply(torch.ones(2, 2))
    """)
    result = run_pytest(pytester, "--autograd-record", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*recorded inputs of 1 Function(s)*, 1 call(s) whose forward raised (not recorded)"])
    cases = recorded(pytester)["functions"]["ops.Checked"]["cases"]
    assert [case["args"][0]["tensor"]["shape"] for case in cases] == [[2, 2]]


def test_large_tensors_keep_statistics_from_which_valid_values_are_drawn(pytester: pytest.Pytester) -> None:
    pytest.importorskip("torch")
    pytester.makepyfile(ops=OPS, test_ops="""
        import torch
        from ops import Add

        def test_domains():
            a = torch.randn(12, 12, dtype=torch.float64)
            spd = a @ a.T + torch.eye(12, dtype=torch.float64)
            probabilities = torch.softmax(torch.randn(5, 20), -1)
            Add.apply(spd, spd)
            Add.apply(probabilities, probabilities)
            Add.apply(torch.randint(3, 9, (100,)), torch.randint(3, 9, (100,)))
    """)
    run_pytest(pytester, "--autograd-record", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    stats = {tuple(case["args"][0]["tensor"]["shape"]): case["args"][0]["tensor"]["stats"]
             for case in recorded(pytester)["functions"]["ops.Add"]["cases"]}
    assert stats[(12, 12)]["positive_definite"] and stats[(12, 12)]["symmetric"]
    assert stats[(5, 20)]["simplex"] and not stats[(5, 20)]["integral"]
    assert stats[(100,)]["integral"] and 3 <= stats[(100,)]["min"] <= stats[(100,)]["max"] <= 8
    assert "values" not in json.dumps(list(stats.values()))


def test_the_recording_feeds_gen_tests(pytester: pytest.Pytester) -> None:
    pytest.importorskip("torch")
    pytester.makepyfile(ops=OPS, test_ops="""
        import torch
        from ops import Add

        def test_add():
            Add.apply(torch.ones(2, 5), torch.ones(5))
    """)
    run_pytest(pytester, "--autograd-record-file=rec.json", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    # The installed command, through this interpreter: CI does not put the venv on PATH.
    result = pytester.run(sys.executable, "-m", "autograd_lint", "gen-tests", "ops.py", "--inputs", "rec.json", "--out", "gen")
    assert result.ret == 0
    assert "1 recorded, 0 static, 1 search, 0 none" in result.stdout.str()
    generated = (pytester.path / "gen" / "test_gradcheck_ops.py").read_text()
    assert ('pytest.param(Case((tensor((2, 5), values=(1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)), '
            'tensor((5,), values=(1.0, 1.0, 1.0, 1.0, 1.0)))), id="recorded-2x5-5")') in generated
    run = run_pytest(pytester, "gen", "-p", "no:cacheprovider", "-v")
    run.assert_outcomes(passed=7)  # gradcheck, its non-contiguous twin and gradgradcheck each, the None check
    run.stdout.fnmatch_lines(["*::TestScale::test_gradcheck[[]search-?-number-sum-None[]] PASSED*",
                              "*::TestAdd::test_gradcheck[[]recorded-2x5-5[]] PASSED*"])


def test_xdist_workers_hand_their_cases_to_the_controller(pytester: pytest.Pytester) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("xdist")
    pytester.makepyfile(ops=OPS)
    pytester.makepyfile(test_one="""
        import torch
        from ops import Add

        def test_add():
            Add.apply(torch.ones(3), torch.ones(3))
    """, test_two="""
        import torch
        from ops import Scale

        def test_scale():
            Scale.apply(torch.ones(7), 3)
    """)
    kept = {"module": "old", "qualname": "Kept", "path": "old.py", "cases": []}
    previous = {"format": 1, "functions": {"old.Kept": kept}}
    (pytester.path / "rec.json").write_text(json.dumps(previous))
    result = run_pytest(pytester, "-n", "2", "--autograd-record-file=rec.json", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    data = recorded(pytester, "rec.json")
    assert sorted(data["functions"]) == ["old.Kept", "ops.Add", "ops.Scale"]
    assert data["functions"]["ops.Scale"]["cases"][0]["args"][0]["tensor"]["shape"] == [7]


def _two_test_directories(pytester: pytest.Pytester) -> dict[Path, bytes]:
    """ops.py, tests/test_x.py, tests/test_y.py and a failing other/test_z.py; their bytes."""
    pytester.makepyfile(ops=OPS)
    tests = pytester.mkdir("tests")
    (tests / "test_x.py").write_text("import torch\nfrom ops import Add\n\n\ndef test_x():\n"
                                     "    Add.apply(torch.ones(2), torch.ones(2))\n")
    (tests / "test_y.py").write_text("import torch\nfrom ops import Scale\n\n\ndef test_y():\n"
                                     "    Scale.apply(torch.ones(3), 2)\n")
    other = pytester.mkdir("other")
    (other / "test_z.py").write_text("def test_z():\n    assert False, 'not selected, must not run'\n")
    return {path: path.read_bytes() for path in pytester.path.rglob("*.py")}


@pytest.mark.parametrize("selection, expected", [
    ("tests/test_x.py", ["ops.Add"]),
    ("tests", ["ops.Add", "ops.Scale"]),
    ("tests/", ["ops.Add", "ops.Scale"]),
])
def test_a_path_after_the_flag_is_a_test_path_not_the_output(
    pytester: pytest.Pytester, selection: str, expected: list[str]
) -> None:
    pytest.importorskip("torch")
    before = _two_test_directories(pytester)
    result = run_pytest(pytester, "--autograd-record", selection, "-p", "no:cacheprovider",
                                           "--rootdir", str(pytester.path))
    result.assert_outcomes(passed=len(expected))
    assert result.ret == 0
    assert sorted(recorded(pytester)["functions"]) == expected
    assert {path: path.read_bytes() for path in before} == before


def test_an_existing_file_that_is_not_a_recording_is_refused_with_one_line(pytester: pytest.Pytester) -> None:
    before = _two_test_directories(pytester)
    result = run_pytest(pytester, "--autograd-record-file=tests/test_x.py", "tests",
                                           "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1, result.stderr.lines
    assert errors[0].endswith("test_x.py: exists and is not a recording of `pytest --autograd-record`; "
                              "not overwritten; give another --autograd-record-file")
    assert "passed" not in result.stdout.str()
    assert {path: path.read_bytes() for path in before} == before


def test_a_directory_is_refused_with_one_line(pytester: pytest.Pytester) -> None:
    _two_test_directories(pytester)
    result = run_pytest(pytester, "--autograd-record-file", "tests", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.stderr.lines if line.strip()] == [
        f"ERROR: {pytester.path / 'tests'}: is a directory, not a recording file; give another --autograd-record-file"
    ]


def test_an_existing_recording_is_replaced_atomically_keeping_uncalled_functions(pytester: pytest.Pytester) -> None:
    pytest.importorskip("torch")
    _two_test_directories(pytester)
    run_pytest(pytester, "--autograd-record", "tests/test_x.py", "-p", "no:cacheprovider")
    run_pytest(pytester, "--autograd-record", "tests/test_y.py", "-p", "no:cacheprovider")
    assert sorted(recorded(pytester)["functions"]) == ["ops.Add", "ops.Scale"]
    assert [p.name for p in (pytester.path / ".autograd-lint").iterdir()] == ["inputs.json"]


def test_torch_s_own_functions_are_recorded_only_when_asked(pytester: pytest.Pytester) -> None:
    """``--autograd-record-torch``: a recording for `gen-tests` on torch itself (torch's own test suite)."""
    pytest.importorskip("torch")
    pytester.makepyfile(test_lrn="""
        import torch

        def test_lrn():
            x = torch.rand(1, 3, 2, 2, requires_grad=True)
            torch.nn.CrossMapLRN2d(3)(x).sum().backward()   # torch.nn.modules._functions.CrossMapLRN2d
    """)
    result = run_pytest(pytester, "--autograd-record", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert recorded(pytester)["functions"] == {}
    result = run_pytest(pytester, "--autograd-record", "--autograd-record-torch", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["autograd-lint: recorded inputs of 1 Function(s) to *inputs.json"])
    entry = recorded(pytester)["functions"]["torch.nn.modules._functions.CrossMapLRN2d"]
    assert [arg for arg in entry["cases"][0]["args"] if "value" in arg] == [{"value": 3}, {"value": 1}]  # size, k


def test_a_call_made_while_dynamo_traces_does_not_hide_the_real_call(pytester: pytest.Pytester) -> None:
    """torch.cond traces its branches (CondAutogradOp.apply on fake tensors), then runs them on real ones."""
    pytest.importorskip("torch")
    pytester.makepyfile(test_cond="""
        import torch

        def test_cond():
            x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
            torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (x,)).sum().backward()
    """)
    result = run_pytest(pytester, "--autograd-record", "--autograd-record-torch", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    cases = recorded(pytester)["functions"]["torch._higher_order_ops.cond.CondAutogradOp"]["cases"]
    assert len(cases) == 1 and cases[0]["pickled"]
    assert cases[0]["args"][0] == {"tensor": {"shape": [], "dtype": "bool", "device": "cpu", "requires_grad": False}}


def test_a_file_given_to_the_flag_names_the_file_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    result = run_pytest(pytester, "-p", "no:cacheprovider", "--autograd-record=x.json")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*--autograd-record takes no value*--autograd-record-file=FILE*"])
