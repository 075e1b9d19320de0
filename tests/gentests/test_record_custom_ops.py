"""``pytest --autograd-record`` records custom-op calls too, and gen-tests replays them in the op's opcheck test."""

from __future__ import annotations

import json
import re

import pytest

from gentests_support import gen_tests
from pytest_process import run_pytest

OPS = '''\
import torch


@torch.library.custom_op("rec::window", mutates_args=())
def window(x: torch.Tensor, width: int, scale: float = 1.0) -> torch.Tensor:
    # Needs x.numel() to be a multiple of width: inputs found statically or by search rarely are.
    return x.reshape(-1, width).cumsum(-1).reshape(x.shape) * scale


@window.register_fake
def _(x, width, scale=1.0):
    return torch.empty_like(x)


def window_setup(ctx, inputs, output):
    x, width, scale = inputs
    ctx.width, ctx.scale, ctx.shape = width, scale, x.shape


def window_backward(ctx, grad):
    g = grad.reshape(-1, ctx.width).flip(-1).cumsum(-1).flip(-1).reshape(ctx.shape)
    return g * ctx.scale, None, None


window.register_autograd(window_backward, setup_context=window_setup)


@torch.library.custom_op("rec::never_called", mutates_args=())
def never_called(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@never_called.register_fake
def _(x):
    return torch.empty_like(x)
'''

USAGE = '''\
import torch

from ops import window


def test_window():
    x = torch.arange(6.0, requires_grad=True)
    out = window(x, 3, scale=2.0)      # keyword bound to its position
    assert out.tolist() == [0.0, 2.0, 6.0, 6.0, 14.0, 24.0]
    for _ in range(2):
        window(torch.ones(2, 4), 4)    # another structure, called twice
    window(torch.ones(4), width=2)     # the first structure again: counted


def test_compiled_calls_still_trace_under_the_recorder():
    compiled = torch.compile(lambda t: window(t, 2), backend="eager", fullgraph=True)
    assert compiled(torch.ones(4)).tolist() == [1.0, 2.0, 1.0, 2.0]


def test_a_failing_call_is_not_recorded():
    try:
        window(torch.ones(5), 3)
    except RuntimeError:
        pass
'''


@pytest.mark.slow
def test_custom_op_calls_are_recorded_and_replayed(pytester: pytest.Pytester) -> None:
    pytest.importorskip("torch")
    pytester.makepyfile(ops=OPS, test_usage=USAGE)
    result = run_pytest(pytester, "--autograd-record", "-p", "no:cacheprovider", "test_usage.py")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([
        "autograd-lint: recorded inputs of 0 Function(s) and 1 custom op(s) to *inputs.json, "
        "1 call(s) whose forward raised (not recorded)"
    ])
    data = json.loads((pytester.path / ".autograd-lint" / "inputs.json").read_text())
    assert list(data["functions"]) == ["ops.rec::window"]
    entry = data["functions"]["ops.rec::window"]
    assert (entry["module"], entry["qualname"], entry["path"]) == ("ops", "rec::window", "ops.py")
    # Ordered by calls.  The compiled call passes the same structure as `window(torch.ones(4), width=2)`:
    # it is not recorded (its arguments are fake while Dynamo traces), so that case has one call.
    cases = [(case["calls"], case["args"]) for case in entry["cases"]]
    assert [calls for calls, _ in cases] == [2, 1, 1]
    assert cases[0][1][0]["tensor"]["shape"] == [2, 4] and cases[0][1][1:] == [{"value": 4}]
    assert cases[1][1][0]["tensor"]["shape"] == [4] and cases[1][1][1:] == [{"value": 2}]
    assert cases[2][1] == [
        {"tensor": {"shape": [6], "dtype": "float32", "device": "cpu", "requires_grad": True,
                    "values": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]}},
        {"value": 3},
        {"float": "2.0"},
    ]

    generated = gen_tests(pytester.path, "ops.py", "--out", "generated")
    assert generated.returncode == 0, generated.stderr
    assert "inputs of 2 custom op(s): 1 recorded, 0 static, 1 search, 0 none" in generated.stdout
    text = (pytester.path / "generated" / "test_opcheck_ops.py").read_text()
    window_class = text[text.index("class TestOp_rec__window"):text.index("class TestOp_rec__never_called")]
    ids = re.findall(r'id="([^"]+)"', window_class)
    assert ids and all(i.startswith("recorded") for i in ids), window_class
    assert "3, 2.0" in window_class  # the recorded width and scale

    run = run_pytest(pytester, "generated", "-p", "no:cacheprovider", "-q")
    outcomes = run.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("error", 0) == 0, run.stdout.str()
    assert outcomes["passed"] >= 3 * 2  # opcheck, gradcheck, for both recorded cases at least
