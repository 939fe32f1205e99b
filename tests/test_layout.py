"""The code's shape, as issue 24 set it: the recipe is assembly, functions fit on a screen."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 80
MAX_RECIPE_LINES = 300


def _long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    return [f"{path.relative_to(ROOT)}:{node.lineno} {node.name} "
            f"({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]


def test_the_recipe_is_assembly():
    lines = len((ROOT / "recipes" / "trpo_vase.py").read_text().splitlines())
    assert lines <= MAX_RECIPE_LINES, f"recipes/trpo_vase.py has {lines} lines"


def test_no_function_of_the_library_or_the_recipe_is_longer_than_80_lines():
    paths = [ROOT / "recipes" / "trpo_vase.py", *sorted((ROOT / "torchrl_vase").rglob("*.py"))]
    assert [entry for path in paths for entry in _long_functions(path)] == []
