"""The package layout shows the flow (README, "Layout"): imports only point down, and no module
imports, directly or round about, one that imports it.

Layers, top to bottom; a module may import from its own layer or a lower one:

    kraftlab/          the user-facing commands (cli, runner, demo)
    workloads/         the scenario model and everything about scenarios
    actors/runtime/    the two drivers (sim/, ray/) and what they share
    actors/ (the rest), controller_quorum/, storage/     the roles (one layer)
    observability/     the event schema, the history and its readers

Every import counts for the layers, also inside functions and `if TYPE_CHECKING:` blocks; only
imports run when a module loads (module level, outside TYPE_CHECKING) count for cycles. Modules are
parsed with `ast`, never imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# (name, module prefixes), top to bottom. A module belongs to the layer of its longest prefix.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("kraftlab", ("kraftlab",)),
    ("workloads", ("workloads",)),
    ("actors/runtime", ("actors.runtime",)),
    ("roles", ("actors", "controller_quorum", "storage")),
    ("observability", ("observability",)),
)
PACKAGES = ("kraftlab", "workloads", "actors", "controller_quorum", "storage", "observability")
# What a role may use of observability: the event schema it emits and the latency histogram.
# The history's readers (projection, checks, history files...) are unknown to the roles.
ROLE_OBSERVABILITY = ("observability.events", "observability.latency")


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the project module imported (a package stands for its __init__.py)
    line: int
    at_load: bool  # run when the source loads (module level, outside TYPE_CHECKING)


def discover(root: Path, packages: Sequence[str] = PACKAGES) -> dict[str, Path]:
    """Every project module: dotted name -> file (a package is its __init__.py)."""
    modules: dict[str, Path] = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def layer_of(module: str) -> int:
    """The index in LAYERS (0 = top) of the longest matching prefix."""
    best, best_len = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add its folder to LAYERS")
    return best


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement, with whether it runs when the module loads."""

    def visit(node: ast.AST, at_load: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, at_load
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            at_load = False
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from visit(child, False)
            for child in node.orelse:
                yield from visit(child, at_load)
            return
        for child in ast.iter_child_nodes(node):
            yield from visit(child, at_load)

    yield from visit(tree, True)


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The project module `name` loads: itself, else its longest known prefix (an attribute's owner)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def imports_of(module: str, modules: dict[str, Path]) -> list[Import]:
    path = modules[module]
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[Import] = []
    for node, at_load in _import_nodes(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # `from pkg import name`: the submodule pkg.name if there is one, else pkg itself.
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        for name in dict.fromkeys(names):  # once per statement and module
            if name.split(".")[0] not in {m.split(".")[0] for m in modules}:
                continue  # not a project module (the standard library, a dependency)
            target = _known(name, modules)
            if target is None:
                raise AssertionError(f"{path}:{node.lineno} imports {name}, which is no project module")
            if target != module:
                found.append(Import(module, target, node.lineno, at_load))
    return found


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if ROOT in path.parents else str(path)


def upward_imports(modules: dict[str, Path]) -> list[str]:
    problems = []
    for module in sorted(modules):
        for imp in imports_of(module, modules):
            src, dst = layer_of(imp.source), layer_of(imp.target)
            if dst < src:
                problems.append(
                    f"{_shown(modules[module])}:{imp.line}: "
                    f"{imp.source} ({LAYERS[src][0]}) imports {imp.target} ({LAYERS[dst][0]}), a layer above it"
                )
    return problems


def find_cycles(modules: dict[str, Path]) -> list[list[str]]:
    """One cycle (a -> b -> ... -> a) per strongly connected group of modules (Tarjan), among the
    imports that run when a module loads."""
    graph = {m: sorted({i.target for i in imports_of(m, modules) if i.at_load}) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0

    def connect(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            connect(v)

    cycles = []
    for group in groups:
        members = set(group)
        # A shortest path back to the group's first module, by breadth-first search inside it.
        start = group[0]
        previous: dict[str, str] = {}
        frontier = [start]
        end = None
        while frontier and end is None:
            following = []
            for v in frontier:
                for w in graph[v]:
                    if w == start:
                        end = v
                        break
                    if w in members and w not in previous:
                        previous[w] = v
                        following.append(w)
                if end is not None:
                    break
            frontier = following
        path = [end]
        while path[-1] != start:
            path.append(previous[path[-1]])
        cycles.append(list(reversed(path)) + [start])
    return cycles


# --- the project -------------------------------------------------------------------------------


def test_every_module_is_in_a_layer():
    modules = discover(ROOT)
    assert {"kraftlab.cli", "workloads.steps", "actors.runtime.sim.cluster", "actors.broker_node", "observability.events"} <= set(modules)
    for module in modules:
        layer_of(module)


def test_imports_only_point_down():
    problems = upward_imports(discover(ROOT))
    assert problems == [], "imports pointing up:\n" + "\n".join(problems)


def test_no_import_cycle():
    cycles = find_cycles(discover(ROOT))
    assert cycles == [], "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_roles_know_nothing_of_who_reads_their_events():
    modules = discover(ROOT)
    roles = [m for m in modules if LAYERS[layer_of(m)][0] == "roles"]
    problems = []
    for module in roles:
        for imp in imports_of(module, modules):
            if imp.target.startswith("observability") and imp.target not in ROLE_OBSERVABILITY:
                problems.append(f"{module}:{imp.line} imports {imp.target}")
    assert problems == [], "role modules importing a reader of the history:\n" + "\n".join(problems)


# --- the checker itself ----------------------------------------------------------------------------


def _tree(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return discover(root)


def test_the_checker_catches_an_upward_import_anywhere(tmp_path):
    modules = _tree(tmp_path, {
        "kraftlab/__init__.py": "",
        "kraftlab/cli.py": "",
        "storage/__init__.py": "",
        "storage/a.py": "from kraftlab.cli import main\n",
        "storage/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import kraftlab.cli\n",
        "storage/c.py": "def f():\n    from kraftlab import cli\n",
        "actors/__init__.py": "",
        "actors/runtime/__init__.py": "",
        "actors/runtime/d.py": "from ..e import x\n",
        "actors/e.py": "from actors.runtime import d\nfrom storage import a\nimport os\n",
    })
    found = [p.split(": ", 1)[1] for p in upward_imports(modules)]
    assert found == [
        "actors.e (roles) imports actors.runtime.d (actors/runtime), a layer above it",
        "storage.a (roles) imports kraftlab.cli (kraftlab), a layer above it",
        "storage.b (roles) imports kraftlab.cli (kraftlab), a layer above it",
        "storage.c (roles) imports kraftlab.cli (kraftlab), a layer above it",
    ]


def test_the_checker_reports_a_cycle_of_load_time_imports_only(tmp_path):
    modules = _tree(tmp_path, {
        "storage/__init__.py": "",
        "storage/a.py": "from . import b\n",
        "storage/b.py": "from storage.c import x\n",
        "storage/c.py": "import storage.a\n",
        "storage/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from storage import e\n",
        "storage/e.py": "import storage.d\ndef f():\n    import storage.e\n",
    })
    assert find_cycles(modules) == [["storage.a", "storage.b", "storage.c", "storage.a"]]
