"""The core rule (docs/explanation/architecture.md): protocol code does no I/O and takes no hidden time or randomness.

Role modules (everything in actors/ outside the drivers in actors/runtime/, controller_quorum/,
storage/'s models) may not import ray, asyncio, time, random, sockets or threads, nor call open().
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN_MODULES = {"ray", "asyncio", "time", "random", "socket", "threading", "subprocess", "datetime"}
PROTOCOL_PACKAGES = ["actors", "controller_quorum", "storage"]
DRIVER_FOLDERS = [ROOT / "actors" / "runtime"]


def protocol_modules() -> list[Path]:
    files = []
    for pkg in PROTOCOL_PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if not any(folder in path.parents for folder in DRIVER_FOLDERS):
                files.append(path)
    return files


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of nodes under `if TYPE_CHECKING:` (annotations only, never executed)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.body:
                skipped |= {id(n) for n in ast.walk(child)}
    return skipped


def violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    skipped = _type_checking_only(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            names = []
        for name in names:
            if name.split(".")[0] in FORBIDDEN_MODULES:
                found.append(f"line {node.lineno}: imports {name}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
            found.append(f"line {node.lineno}: calls open()")
    return found


def test_there_are_protocol_modules_to_check():
    names = {p.name for p in protocol_modules()}
    assert {"contract.py", "broker_node.py", "disk.py", "modes.py", "raft.py", "controller.py"} <= names


@pytest.mark.parametrize("path", protocol_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_protocol_module_does_no_io_and_has_no_hidden_time_or_randomness(path):
    assert violations(path) == []


def test_the_checker_catches_a_forbidden_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import time\nfrom random import random\nopen('x')\nif TYPE_CHECKING:\n    import random\n")
    assert violations(bad) == ["line 1: imports time", "line 2: imports random", "line 3: calls open()"]


def test_only_the_ray_adapter_imports_ray():
    """docs/explanation/architecture.md: every `ray.*` call lives in one adapter package (actors/runtime/ray/adapter/):
    no module outside it imports Ray, and its modules that make Ray calls import it (its helpers that need no Ray,
    `processes.py`, do not)."""
    adapter = ROOT / "actors" / "runtime" / "ray" / "adapter"
    offenders = []
    for pkg in PROTOCOL_PACKAGES + ["kraftlab", "workloads", "observability"]:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if adapter in path.parents:
                continue
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                    [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
                if any(n.split(".")[0] == "ray" for n in names):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []
    importing = sorted(p.name for p in adapter.glob("*.py") if "\nimport ray\n" in p.read_text())
    assert importing == ["actors.py", "calls.py", "echo.py", "kernel_faults.py", "session.py"]
