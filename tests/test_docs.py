"""Every ```python block in README.md and docs/ runs, so the documentation cannot rot."""

import re
import shutil
import subprocess
import sys
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
    # the examples are written for the repository's root; they run in a temporary directory that
    # looks like it, so that nothing they write lands in the repository
    for name in ("recipes", "conf"):
        (tmp_path / name).symlink_to(ROOT / name)
    exec(compile(code, "<doc example>", "exec"), {"__name__": "__doc_example__"})


def test_every_public_name_is_in_the_api_reference():
    import torchrl_vase
    from torchrl_vase import envs

    reference = "\n".join(page.read_text() for page in (ROOT / "docs" / "reference").glob("*.md"))
    documented = set(re.findall(r"^::: torchrl_vase\.(\w+)", reference, re.MULTILINE))
    assert set(torchrl_vase.__all__) - documented == set()
    env_members = set(re.findall(r"^        - (\w+)$", reference, re.MULTILINE))
    assert set(envs.__all__) - env_members == set()


def test_every_page_is_in_the_site_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").glob("**/*.md")}
    pages = {p for p in pages if not p.startswith("results/")}  # tables included by results.md
    assert {p for p in pages if f" {p}" not in nav} == set()


@pytest.mark.skipif(not (Path(sys.prefix) / "bin" / "mkdocs").exists(),
                    reason="mkdocs (the docs extra) is not installed")
def test_make_docs_fails_on_a_broken_link(tmp_path):
    """``make docs`` on a copy of the site's sources with one link to a missing page: the build
    must fail and name the link (a ``--quiet`` would hide the warning from ``--strict``)."""
    for name in ("docs", "docs_hooks"):
        shutil.copytree(ROOT / name, tmp_path / name)
    for name in ("mkdocs.yml", "Makefile"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "torchrl_vase").symlink_to(ROOT / "torchrl_vase")  # the API reference's source
    index = tmp_path / "docs" / "index.md"
    index.write_text(index.read_text() + "\nSee [the missing page](no_such_page.md).\n")
    stamp = Path(sys.prefix) / ".installed"
    build = subprocess.run(["make", "docs", f"VENV={sys.prefix}", f"STAMP={stamp}", "-o",
                            str(stamp)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert build.returncode != 0
    assert "no_such_page.md" in build.stdout + build.stderr


def test_importing_the_library_does_not_import_mlflow():
    # MLflow takes seconds to import; the transforms and losses do not need it
    code = ("import sys, torchrl_vase; assert 'mlflow' not in sys.modules; "
            "from torchrl_vase import TrainingRun, tracking; assert 'mlflow' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


#: a signature the docs write out: ``Name(args, *, key=default, ...)`` (a bare ``*`` in it)
SIGNATURE = re.compile(r"`(\w+)(\.build)?\(([^`]*?(?:^|[(,])\s*\*\s*,[^`]*?)\)`", re.S | re.M)


def _parameters(target) -> dict:
    """``target``'s parameters, those its ``**kwargs`` passes on to a base class's included."""
    import inspect

    parameters = dict(inspect.signature(target).parameters)
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()) and inspect.isclass(target):
        for base in target.__mro__[1:]:
            if "__init__" in vars(base):
                for name, parameter in inspect.signature(base).parameters.items():
                    parameters.setdefault(name, parameter)
    return parameters


def test_the_signatures_the_guides_write_out_have_the_codes_names_and_defaults():
    import ast

    import torchrl_vase

    checked, wrong = 0, []
    for page in PAGES:
        for name, build, arguments in SIGNATURE.findall(page.read_text()):
            if name not in torchrl_vase.__all__:
                continue
            target = getattr(torchrl_vase, name)
            parameters = _parameters(target.build if build else target)
            for key, written in re.findall(r"(\w+)=([^,\n)]+)", arguments):
                checked += 1
                if key not in parameters:
                    wrong.append(f"{page.name}: {name}{build} has no parameter {key}")
                    continue
                default = parameters[key].default
                try:
                    value = ast.literal_eval(written.strip())
                except (ValueError, SyntaxError):  # nn.ReLU, a name: not a literal to compare
                    continue
                same = (list(value) == list(default) if isinstance(value, list | tuple)
                        and isinstance(default, list | tuple) else value == default)
                if not same:
                    wrong.append(f"{page.name}: {name}{build}({key}={written.strip()}), the "
                                 f"code's default is {default!r}")
    assert checked >= 15 and not wrong, wrong  # the pattern still finds the signatures
