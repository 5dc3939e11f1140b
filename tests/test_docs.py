"""The docs' Python examples run as written (each ```python block of README.md and docs/, in
a fresh namespace, from the repository's root)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks():
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for i, block in enumerate(BLOCK.findall(path.read_text())):
            # one that runs the my_optimizer.py the docs say to save is run beside that file
            marks = pytest.mark.skip(reason="tests/test_custom_optimizer.py runs it") \
                if '"py:my_optimizer:' in block else ()
            yield pytest.param(block, id=f"{path.relative_to(ROOT)}#{i}", marks=marks)


BLOCKS = list(_blocks())


def test_the_docs_have_python_examples():
    assert len(BLOCKS) >= 2  # a pattern that stopped matching would pass every case below


@pytest.mark.parametrize("code", BLOCKS)
def test_a_python_example_of_the_docs_runs(code, monkeypatch):
    monkeypatch.chdir(ROOT)
    exec(compile(code, "<docs>", "exec"), {"__name__": "__docs__"})
