"""Every ```python block in README.md and docs/ runs, so the documentation cannot rot."""

import re
import tempfile
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
def test_example_runs(code, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # what an example writes is cleaned up
    exec(compile(code, "<doc example>", "exec"), {"__name__": "__doc_example__"})


def test_every_public_name_is_in_the_api_reference():
    import torchrl_vase
    from torchrl_vase import envs

    reference = (ROOT / "docs" / "reference.md").read_text()
    documented = set(re.findall(r"^::: torchrl_vase\.(\w+)", reference, re.MULTILINE))
    assert set(torchrl_vase.__all__) - documented == set()
    env_members = set(re.findall(r"^        - (\w+)$", reference, re.MULTILINE))
    assert set(envs.__all__) - env_members == set()


def test_every_page_is_in_the_site_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").glob("**/*.md")}
    pages = {p for p in pages if not p.startswith("results/")}  # tables included by results.md
    assert {p for p in pages if f" {p}" not in nav} == set()
