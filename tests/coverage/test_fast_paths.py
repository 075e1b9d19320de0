"""The hot paths: counting without extra Python frames, and the same behaviour as torch's own code.

Each test runs torch in a subprocess (see test_report_and_plugin.py for why).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch"),
]

PRELUDE = '''
import collections, json, sys, threading, _thread, warnings
warnings.filterwarnings("ignore")
import torch

class Old(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k=2.0):
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.k, None

class New(torch.autograd.Function):
    @staticmethod
    def forward(x, k=3.0):
        return x * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.k = inputs[1]

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.k, None

    @staticmethod
    def vmap(info, in_dims, x, k):
        return x * k, in_dims[0]

def by_name(tally):
    """The tally's counts by class name (classes defined in ``-c`` code have no source file)."""
    out = {}
    for (cls, phase, mode, kind), n in tally._flat().items():
        out.setdefault(cls.__qualname__, {}).setdefault(phase, {}).setdefault(mode, {})[kind] = n
    return out

def step():
    x = torch.ones(3, requires_grad=True)
    Old.apply(New.apply(x)).sum().backward()
    return x.grad.tolist()
'''


def run(body: str) -> dict:
    script = PRELUDE + textwrap.dedent(body)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_no_python_frame_per_forward_or_backward_node() -> None:
    """With a tracer on the thread (as under coverage), only hooks cost a frame of ours."""
    out = run('''
        def frames(n):
            calls = collections.Counter()
            def profile(frame, event, arg):
                if event == "call":
                    calls[frame.f_code.co_filename] += 1
            sys.setprofile(profile)
            for _ in range(n):
                step()
            sys.setprofile(None)
            return calls

        sys.settrace(lambda *args: None)  # a thread that already has a tracer
        step()
        before = frames(10)
        from autograd_lint.coverage import bridge, report
        tally = report.Tally()
        report.install(tally)
        step()
        after = frames(10)
        sys.settrace(None)
        ours = sum(n for f, n in after.items() if "autograd_lint" in f)
        print(json.dumps({
            "apply_hook": report.apply_hook, "node_hook": bridge.node_hook,
            "before": sum(before.values()), "after": sum(after.values()), "ours": ours,
            "grad": step(),
        }))
    ''')
    assert out["apply_hook"] == "inline" and out["node_hook"] == "get_user_fn"
    assert out["grad"] == [6.0, 6.0, 6.0]
    # Old: our apply replaces torch's (and its _is_setup_context_defined call);
    # New (setup_context): ours, then torch's.  Backward: ours replaces
    # torch's _get_user_fn.  Per step: 4 frames of ours, and no more frames
    # in all than without the plugin.
    assert out["ours"] == 10 * 4, out
    assert out["after"] <= out["before"], out


def test_counts_per_thread_kind_and_phase() -> None:
    out = run('''
        from autograd_lint.coverage import report
        tally = report.Tally()
        report.install(tally)
        step()
        t = threading.Thread(target=step); t.start(); t.join()
        done = threading.Event()
        def native():
            step(); done.set()
        _thread.start_new_thread(native, ())
        done.wait(30)
        x = torch.ones(2, requires_grad=True)
        (g,) = torch.autograd.grad(Old.apply(x).sum(), x, create_graph=True)
        print(json.dumps(by_name(tally)))
    ''')
    assert out["Old"]["forward"] == {"eager": {"main": 2, "thread": 1, "native": 1}}
    assert out["Old"]["backward"] == {"eager": {"main": 2, "thread": 1, "native": 1}}
    assert out["Old"]["double_backward"] == {"eager": {"main": 1}}
    assert out["New"]["forward"] == {"eager": {"main": 1, "thread": 1, "native": 1}}
    assert out["New"]["backward"] == {"eager": {"main": 1, "thread": 1, "native": 1}}


def test_torch_behaviour_is_kept() -> None:
    """Default arguments, functorch transforms and torch's own errors pass through unchanged."""
    out = run('''
        class Both(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1

            @staticmethod
            def backward(ctx, grad):
                return grad

            @staticmethod
            def vjp(ctx, grad):
                return grad

        def outcome(fn):
            try:
                return repr(fn())
            except Exception as error:
                return f"{type(error).__name__}: {error}"

        def cases():
            return [
                outcome(step),
                outcome(lambda: New.apply(torch.ones(2)).tolist()),
                outcome(lambda: torch.vmap(New.apply)(torch.ones(2, 3)).tolist()),
                outcome(lambda: torch.vmap(Old.apply)(torch.ones(2, 3)).tolist()),
                outcome(lambda: Both.apply(torch.ones(1, requires_grad=True)).sum().backward()),
            ]

        plain = cases()
        from autograd_lint.coverage import report
        tally = report.Tally()
        report.install(tally)
        print(json.dumps({"plain": plain, "plugin": cases(),
                          "counts": by_name(tally)}))
    ''')
    assert out["plugin"] == out["plain"]
    assert "Implementing both 'backward' and 'vjp'" in out["plain"][4]
    assert "setup_context" in out["plain"][3]  # functorch refuses old-style Functions
    assert out["counts"]["New"]["forward"] == {"eager": {"main": 3}}


def test_hook_wrappers() -> None:
    out = run('''
        from autograd_lint.coverage import bridge
        bridge.install()
        seen = []
        def tensor_hook(grad):
            "doc"
            seen.append("tensor")
        layer = torch.nn.Linear(2, 2)
        handle = layer.register_full_backward_hook(hook=lambda m, gi, go: seen.append("module"))
        layer.register_full_backward_pre_hook(lambda m, go: seen.append("pre"), prepend=True)
        x = torch.ones(1, 2, requires_grad=True)
        y = layer(x)
        y.register_hook(tensor_hook)
        y.sum().backward()
        wrapped = list(y._backward_hooks.values())[0]
        handle.remove()
        print(json.dumps({
            "seen": seen,
            "name": wrapped.__name__, "qualname": wrapped.__qualname__, "doc": wrapped.__doc__,
            "module": wrapped.__module__, "wrapped": wrapped.__wrapped__ is tensor_hook,
        }))
    ''')
    assert out["seen"] == ["tensor", "pre", "module"]
    assert out == {
        "seen": out["seen"], "name": "tensor_hook", "qualname": "tensor_hook", "doc": "doc",
        "module": "__main__", "wrapped": True,
    }
