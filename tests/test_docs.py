"""Every ```python block in README.md and docs/ runs, so the documentation cannot rot."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
EXAMPLES = [
    pytest.param(code, id=f"{page.relative_to(ROOT)}-{i}")
    for page in PAGES
    for i, code in enumerate(BLOCK.findall(page.read_text()))
]


def test_docs_have_examples():
    assert len(EXAMPLES) >= 4


@pytest.mark.parametrize("code", EXAMPLES)
def test_example_runs(code):
    exec(compile(code, "<doc example>", "exec"), {"__name__": "__doc_example__"})
