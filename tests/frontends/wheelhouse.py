"""A local wheelhouse made from the distributions installed here, so that pre-commit's hook
environment installs without the package index (no test may reach the network).

``pre-commit try-repo`` creates a virtualenv for the hook and ``pip install``s this
project into it: setuptools to build it, libcst and libcst's own requirements to run
it.  Those are already installed in the interpreter running the tests; each is packed
back into a wheel (its installed files, as its ``RECORD`` lists them, with a new
``RECORD``), and pip is pointed at them with ``PIP_NO_INDEX`` and ``PIP_FIND_LINKS``.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import re
import zipfile
from pathlib import Path

# What building and running the hook needs, on any interpreter we test on: the build backend,
# libcst, and what libcst or autograd-lint require there (PyYAML, or pyyaml-ft on 3.13; tomli on 3.10).
NEEDED = ("setuptools", "libcst")
IF_INSTALLED = ("PyYAML", "pyyaml-ft", "typing-extensions", "tomli")
# Files of an installed distribution's metadata that say how it was installed, not what it is.
INSTALL_RECORDS = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"}


def _tag(wheel_metadata: str) -> str:
    """The compressed tag of a wheel file name (``cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64``)."""
    tags = [line.split(":", 1)[1].strip().split("-") for line in wheel_metadata.splitlines() if line.startswith("Tag:")]
    parts = [".".join(dict.fromkeys(tag[i] for tag in tags)) for i in range(3)]
    return "-".join(parts)


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def pack(name: str, into: Path) -> Path:
    """Pack the installed distribution ``name`` into a wheel in ``into``; raises PackageNotFoundError."""
    dist = importlib.metadata.distribution(name)
    root = Path(str(dist.locate_file("")))
    info = next(f.parts[0] for f in dist.files or () if f.parts[0].endswith(".dist-info"))
    project = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    wheel = into / f"{project}-{dist.version}-{_tag(dist.read_text('WHEEL') or '')}.whl"
    record = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in dist.files or ():
            # Scripts (../../bin) are made again from entry_points.txt; byte code is made again.
            if file.parts[0] == ".." or "__pycache__" in file.parts:
                continue
            if file.parts[0] == info and file.name in INSTALL_RECORDS:
                continue
            data = (root / file).read_bytes()
            archive.writestr(file.as_posix(), data)
            record.append(f"{file.as_posix()},{_digest(data)},{len(data)}")
        record.append(f"{info}/RECORD,,")
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return wheel


def build(into: Path) -> list[Path]:
    """The wheelhouse: every distribution of :data:`NEEDED` (raises when one is missing) and those
    of :data:`IF_INSTALLED` that are installed."""
    into.mkdir(parents=True, exist_ok=True)
    wheels = [pack(name, into) for name in NEEDED]
    for name in IF_INSTALLED:
        try:
            wheels.append(pack(name, into))
        except importlib.metadata.PackageNotFoundError:
            continue
    return wheels
