"""A few seconds of fuzzing in every run of the suite (the long run is ``bench/fuzz.py``)."""

from __future__ import annotations

import random
from pathlib import Path

from fuzz_support import FUNCTION, MUTATIONS, check_file, check_run, embed, mutate, rule_examples
from generated_programs import PROGRAMS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(program=PROGRAMS, where=st.sampled_from(["module", "forward"]))
def test_generated_programs_never_break_the_analysis(program: str, where: str) -> None:
    check_file(embed(program, where).encode())


def test_every_mutation_of_real_function_files_keeps_the_properties() -> None:
    rng = random.Random(13)
    seeds = rule_examples()
    for mutation in MUTATIONS:
        for _ in range(3):
            seed = rng.choice(seeds)
            check_file(mutation(seed, rng))


def test_a_run_over_mutated_files_reports_each_bad_file_once_and_every_finding(tmp_path: Path) -> None:
    rng = random.Random(8)
    seeds = [FUNCTION, *rule_examples()]
    files = {f"m{index:02d}.py": mutate(rng.choice(seeds), rng)[1] for index in range(24)}
    check_run(files, tmp_path / "run", timeout=240)
