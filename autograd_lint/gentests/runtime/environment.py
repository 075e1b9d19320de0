"""What a generated test needs around its Function: the subject imported, the device present,
the process group it was recorded under."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import traceback
from typing import Any, Iterator, Sequence

import pytest
import torch

from autograd_lint.gentests.runtime.cases import Case


def _device_available(kind: str) -> bool:
    """Whether this machine has a device of type ``kind`` (``cpu``, ``cuda``, ``mps``...)."""
    module = getattr(torch, kind, None)
    return kind == "cpu" or (module is not None and bool(module.is_available()))


def requires_device(device: str) -> pytest.MarkDecorator:
    """Skip a case recorded on ``device`` (``cuda``, ``cuda:1``, ``mps``...) where it is missing."""
    kind = torch.device(device).type
    return pytest.mark.skipif(
        not _device_available(kind), reason=f"case recorded on {device}; {kind} is not available here"
    )


def _replay_backend(recorded: str) -> str | None:
    """The backend to replay a case recorded with ``recorded`` in: itself where it runs here, else gloo.

    ``recorded`` is a backend name (``nccl``) or per-device ones (``cpu:gloo,cuda:nccl``).
    A backend runs here when torch has it and a device it serves is present. None: not even gloo.
    """
    distributed = torch.distributed

    def runs(name: str, devices: Sequence[str]) -> bool:
        return bool(distributed.is_backend_available(name)) and any(_device_available(d) for d in devices)

    parts = [part.strip().split(":") for part in recorded.split(",")]
    if all(runs(part[-1], [part[0]] if len(part) == 2 else distributed.Backend.backend_capability.get(part[-1], []))
           for part in parts):
        return recorded
    return "gloo" if runs("gloo", ["cpu"]) else None


@contextlib.contextmanager
def recorded_process_group(case: Case | None) -> Iterator[None]:
    """Run the body under the process group ``case`` was recorded under, if any.

    A Function that calls a collective (``torch.distributed.nn``'s, DDP's and
    FSDP's hooks, DTensor's redistribution) needs an initialised default process
    group.  A case recorded in a world of one process runs under a single-process
    group made here (rank 0, an in-memory ``HashStore``, the recorded backend where
    it runs, else gloo), destroyed afterwards; the collectives are then the identity
    or a copy, as they were when recorded, so the checks judge the Function's own
    arithmetic.  An initialised group (the test run's own) is used as it is.  A case
    recorded in a larger world is skipped: one process can't play the other ranks.
    """
    group = case.process_group if case is not None else None
    if group is None:
        yield
        return
    if group.world_size != 1:
        pytest.skip(f"recorded in a process group of world size {group.world_size}; a replay in one process "
                    "can't reproduce its collectives")
    distributed = torch.distributed
    if not distributed.is_available():
        pytest.skip("recorded in a process group; this build of torch has no torch.distributed")
    if distributed.is_initialized():
        yield
        return
    backend = _replay_backend(group.backend)
    if backend is None:
        pytest.skip(f"recorded in a {group.backend} process group; neither {group.backend} nor gloo runs here")
    distributed.init_process_group(backend, store=distributed.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        distributed.destroy_process_group()


def import_subject(module_name: str, test_file: str, root_from_test: str) -> Any:
    """Import the analysed module, adding its import root to ``sys.path`` if needed.

    ``root_from_test`` is the directory the module is importable from, relative to
    the generated test file; it is only used when the module is not importable
    already (an installed package, or a root that pytest put on ``sys.path``).
    """
    try:
        return _import_or_skip(module_name)
    except ModuleNotFoundError as error:
        if error.name is None:
            raise
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(test_file)), root_from_test))
    sys.path.insert(0, root)
    return _import_or_skip(module_name)


def _import_or_skip(module_name: str) -> Any:
    """Import ``module_name``; skip the test module when what is missing is another package.

    Not a bug of the Function: its module needs a package this environment lacks
    (torch's own CUDA-only kernels import `cuda.bindings` on a CPU machine).  A
    missing module of the subject's own package is raised, for the caller.
    """
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and error.name.split(".")[0] != module_name.split(".")[0]:
            pytest.skip(f"{module_name} cannot be imported here: it needs {error.name}, which is not installed",
                        allow_module_level=True)
        raise
    except Exception as error:
        broken = _broken_dependency(error, module_name)
        if broken is None:
            raise  # the subject's own module-level code raised: a collection error, as pytest reports it
        first = (str(error).strip().splitlines() or [""])[0]
        pytest.skip(f"{module_name} cannot be imported here: importing {broken} raised {type(error).__name__}: "
                    f"{first} (that package is broken in this environment)", allow_module_level=True)


def _broken_dependency(error: BaseException, module_name: str) -> str | None:
    """The other package whose own import raised ``error``, or None.

    The innermost module-level frame of the traceback is the module being imported
    when the error was raised: one of another installed package (a torchvision
    built for another torch raises "operator torchvision::nms does not exist" as
    it is imported) is no bug of the subject, and one broken module, a collection
    error, stopped the whole generated suite.  Its package is named by the
    ``sys.path`` entry it lies under.
    """
    modules = [frame.filename for frame in traceback.extract_tb(error.__traceback__) if frame.name == "<module>"
               and not frame.filename.startswith("<")]
    if not modules:
        return None
    innermost = os.path.abspath(modules[-1])
    for entry in sorted((os.path.abspath(p) for p in sys.path if p), key=len, reverse=True):
        if innermost.startswith(entry + os.sep):
            package = os.path.relpath(innermost, entry).split(os.sep)[0].removesuffix(".py")
            return None if package == module_name.split(".")[0] else package
    return None
