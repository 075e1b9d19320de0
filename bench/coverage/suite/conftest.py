"""Times the test loop alone (no collection, no imports), for bench/coverage_overhead.py."""

import time

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    start = time.perf_counter()
    try:
        return (yield)
    finally:
        print(f"\ntest loop: {time.perf_counter() - start:.3f} s")
