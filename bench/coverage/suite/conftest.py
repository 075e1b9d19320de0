"""Times the test loop alone (no collection, no imports), for bench/coverage_overhead.py."""

import time

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    start, cpu = time.perf_counter(), time.process_time()
    try:
        return (yield)
    finally:
        print(f"\ntest loop: {time.perf_counter() - start:.3f} s wall {time.process_time() - cpu:.3f} s cpu")
