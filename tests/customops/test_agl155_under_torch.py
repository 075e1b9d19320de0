"""AGL155's examples, run under torch: every INVALID one graph-breaks with GB6297 under
``torch.compile(fullgraph=True, backend="eager")``, and the VALID ones that apply a
Function to tensors compile (in a subprocess: torch is imported once per process)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from autograd_lint.rules.agl155_duplicate_apply_input import DuplicateApplyInput

# (examples, index) -> the function to compile and its arguments (source of a lambda)
CALLS = {
    ("INVALID", 0): ("square", "lambda: (torch.ones(3, requires_grad=True),)"),
    ("INVALID", 1): ("quadratic", "lambda: (torch.ones(4, 4, requires_grad=True),)"),
    ("INVALID", 2): ("self_gate", "lambda: (torch.ones(3, requires_grad=True),)"),
    ("VALID", 0): ("square", "lambda: (torch.ones(3, requires_grad=True),)"),
    ("VALID", 1): ("pad", "lambda: (torch.ones(3, requires_grad=True), 2)"),
}

SCRIPT = """
import json, sys, torch
cases = json.loads(sys.argv[1])
out = {}
for key, (source, name, args) in cases.items():
    namespace = {}
    exec(source, namespace)
    make = eval(args, {"torch": torch})
    namespace[name](*make())  # eager runs
    try:
        torch.compile(namespace[name], fullgraph=True, backend="eager")(*make())
        out[key] = "compiled"
    except Exception as error:
        out[key] = type(error).__name__ + ": " + str(error).splitlines()[0]
print(json.dumps(out))
"""


@pytest.mark.slow
@pytest.mark.requires_torch
def test_invalid_examples_graph_break_and_valid_ones_compile() -> None:
    pytest.importorskip("torch")
    cases = {
        f"{kind}-{index}": (textwrap.dedent(getattr(DuplicateApplyInput, kind)[index].source), name, args)
        for (kind, index), (name, args) in CALLS.items()
    }
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(cases)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    for key, text in outcome.items():
        if key.startswith("INVALID"):
            assert text == "Unsupported: autograd.Function.apply: duplicate tensor input", (key, text)
        else:
            assert text == "compiled", (key, text)
