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


#: docs/architecture.md's layers: a unit (a top-level module or subpackage of torchrl_vase)
#: imports only units of its own layer or below
LAYERS = {
    0: {"_validation", "_adam", "_random_stream", "checkpointing", "replay", "diagnostics",
        "envs", "gaussian", "kernels", "timing", "defaults"},
    1: {"modules", "surprise", "objectives"},
    2: {"transforms", "exploration"},
    3: {"step", "watchers"},
    4: {"loop", "off_policy", "loggers", "tracking", "runs", "evaluation", "collectors"},
    5: {"recipe"},
}
LAYER_OF = {unit: layer for layer, units in LAYERS.items() for unit in units}


def _unit_imports() -> dict[str, set[str]]:
    """Each unit's imports of other units (module level and in functions alike)."""
    imports: dict[str, set[str]] = {}
    package = ROOT / "torchrl_vase"
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).with_suffix("").parts
        if parts == ("__init__",):
            continue  # the package's re-exports
        unit = parts[0]
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name.startswith("torchrl_vase."):
                    other = name.split(".")[1]
                    if other != unit and other in LAYER_OF:
                        imports.setdefault(unit, set()).add(other)
            if isinstance(node, ast.ImportFrom) and node.module == "torchrl_vase":
                imports.setdefault(unit, set()).update(
                    a.name for a in node.names if a.name in LAYER_OF and a.name != unit)
    return imports


def test_every_unit_has_a_layer_and_imports_nothing_above_it():
    units = {p.stem if p.is_file() else p.name for p in (ROOT / "torchrl_vase").iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    assert units == set(LAYER_OF), "a unit without a layer (docs/architecture.md)"
    upward = [(unit, other) for unit, others in _unit_imports().items() for other in others
              if LAYER_OF[other] > LAYER_OF[unit]]
    assert upward == []


def test_the_units_import_no_cycle():
    graph = _unit_imports()
    done: set[str] = set()

    def visit(unit: str, path: tuple[str, ...]) -> None:
        assert unit not in path, f"import cycle: {' -> '.join((*path, unit))}"
        if unit in done:
            return
        for other in sorted(graph.get(unit, ())):
            visit(other, (*path, unit))
        done.add(unit)

    for unit in sorted(LAYER_OF):
        visit(unit, ())


def test_no_recipe_edits_the_import_path():
    offenders = [f"{path.relative_to(ROOT)}:{n}" for path in (ROOT / "recipes").rglob("*.py")
                 for n, line in enumerate(path.read_text().splitlines(), 1)
                 if "sys.path" in line or "PYTHONPATH" in line]
    assert offenders == []
