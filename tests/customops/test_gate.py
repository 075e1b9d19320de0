"""The custom-op gate: a gate word as a whole word, as ``\\bword\\b`` finds it, in a text that spells torch."""

from __future__ import annotations

import re

import pytest

from autograd_lint.model.locate import _GATE_WORDS, mentions_custom_op

WHOLE_WORD = re.compile(r"\b(?:" + "|".join(_GATE_WORDS) + r")\b")


@pytest.mark.parametrize(
    "text",
    [
        "import torch\n@torch.library.custom_op('a::b', mutates_args=())",
        "custom_op",  # no torch
        "torch custom_ops",
        "torch my_custom_op",
        "torch.library.register_fake_impl register_fake(",  # the second occurrence counts
        "torch écustom_op",  # a non-ASCII letter is a word character
        "torch custom_opé",
        "torch\ncustom_op",
        "torch 1custom_op",
        "torch custom_op1 (triton_op)",
        "torch impl_abstract",
        "torch registerregister_kernel",
    ],
)
def test_the_gate_is_the_whole_word_search(text: str) -> None:
    assert mentions_custom_op(text) == ("torch" in text and WHOLE_WORD.search(text) is not None)
