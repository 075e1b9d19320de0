"""The compile recorder's self-test: compile a tiny Function and check the evidence.

It lives apart from :mod:`.compile_recorder` because Dynamo must compile its
code, while the recorder's own code is marked for Dynamo to skip
(:mod:`.dynamo_skip`).
"""

from __future__ import annotations

from typing import Any

from autograd_lint.coverage.compile_recorder import Recorder, activate, arcs_to_lines


def run() -> str | None:
    """Compile a tiny Function and check the evidence arrives when, and only when, it should.

    Returns None when the recorder works, else what went wrong.  Leaves no
    recorder active.
    """
    import torch

    class _Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            y = x * 2
            return y

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            g = grad * 2
            return g

    def probe(x: Any) -> Any:
        return _Probe.apply(x).sum()

    filename = probe.__code__.co_filename
    forward_line = _Probe.forward.__code__.co_firstlineno + 2
    backward_line = _Probe.backward.__code__.co_firstlineno + 2
    recorder = Recorder()
    activate(recorder)
    try:
        x = torch.ones(2, requires_grad=True)
        out = torch.compile(probe, backend="aot_eager", fullgraph=True)(x)
        after_forward = arcs_to_lines(recorder.store.get("", {}).get(filename, ()))
        out.backward()
        after_backward = arcs_to_lines(recorder.store.get("", {}).get(filename, ()))
    except Exception as error:  # any failure inside private torch code means "off"
        return f"{type(error).__name__}: {error}"
    finally:
        activate(None)
    if forward_line not in after_forward or backward_line in after_forward:
        return f"forward evidence wrong: recorded lines {sorted(after_forward)}"
    if backward_line not in after_backward:
        return f"backward evidence missing: recorded lines {sorted(after_backward)}"
    return None
