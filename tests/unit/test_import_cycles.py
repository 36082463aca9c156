"""No import cycles in the runtime (layers/) or the tooling (tools/) (issue 39).

A loop between modules makes each impossible to read or test alone. Every import counts, the
ones inside functions and under ``TYPE_CHECKING`` too: a lazy import only hides a loop from the
interpreter, not from a reader. A package's ``__init__`` is not counted as importing its
submodules unless it names them.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (ROOT / "layers" / "jobsched" / "jobsched", ROOT / "tools" / "jobsched_tools")


def _module_name(path: Path, package_root: Path) -> str:
    parts = list(path.relative_to(package_root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str, known: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for name in names:
            # The longest known module the name starts with: `from a.b import c` imports a.b.c if
            # c is a module, else a.b.
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    files = {
        _module_name(path, package): path for package in PACKAGES for path in sorted(package.rglob("*.py"))
    }
    known = set(files)
    return {module: _imports(path, module, known) for module, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _is_ancestor_package(a: str, b: str) -> bool:
    return b.startswith(a + ".") or a.startswith(b + ".")


def test_no_module_imports_itself_back() -> None:
    graph = import_graph()
    # A package's __init__ re-exporting its submodules, and a submodule importing the package,
    # is the ordinary package shape, not a loop between peers.
    peers = {m: {n for n in ns if not _is_ancestor_package(m, n)} for m, ns in graph.items()}
    assert cycles(peers) == []


def test_the_checker_sees_a_loop() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


# The layers, lowest first: a module imports only from its own folder and the folders before it
# (README, "Code layout"). The runtime's: pure rules, the ports they are used through, the AWS
# adapters, the targets (built-in handlers call AWS through the adapters), the use cases, the
# Lambda wiring. The tooling's sit above the whole runtime, in their own order.
RUNTIME_LAYERS = ("core", "ports", "adapters", "targets", "services", "runtime")
TOOLS_LAYERS = (
    "emulator",
    "iam",
    "build_check",
    "fakes",
    "importer",
    "sim",
    "explore",
    "successor",
    "ops",
    "bench",
    "deployment",
    "handlers",
    "local",
    "api",
    "cli",
)


# Inside core, lowest first: the schedule engine, the job definition (core/job/), the core's other
# modules (job state, runs, policies, the write language, ...), then the writes (core/transitions),
# which use them all.
CORE_LAYERS = ("schedule", "job", "*", "transitions")


def _rank(module: str) -> tuple[int, str]:
    package, _, rest = module.partition(".")
    folder = rest.split(".")[0]
    if package == "jobsched":
        return RUNTIME_LAYERS.index(folder), folder
    return len(RUNTIME_LAYERS) + TOOLS_LAYERS.index(folder), folder


def _core_rank(module: str) -> tuple[int, str]:
    """A core module's place inside core (``module`` is under jobsched.core)."""
    part = module.split(".")[2]
    return (CORE_LAYERS.index(part), part) if part in CORE_LAYERS else (CORE_LAYERS.index("*"), part)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, imported in sorted(graph.items()):
        if module.count(".") == 0:
            continue
        for other in sorted(imported):
            if other.count(".") == 0:
                continue
            (low, folder), (high, other_folder) = _rank(module), _rank(other)
            if high > low:
                found.append(f"{module} ({folder}) imports {other} ({other_folder})")
            elif folder == other_folder == "core" and module.count(".") > 1 and other.count(".") > 1:
                (low, part), (high, other_part) = _core_rank(module), _core_rank(other)
                if high > low:
                    found.append(f"{module} (core/{part}) imports {other} (core/{other_part})")
    return found


def test_every_folder_has_its_place_in_the_layers() -> None:
    folders = {m.split(".")[1] for m in import_graph() if m.count(".") >= 1}
    assert folders <= {*RUNTIME_LAYERS, *TOOLS_LAYERS}, folders - {*RUNTIME_LAYERS, *TOOLS_LAYERS}


def test_imports_point_down_the_layers() -> None:
    assert upward_imports(import_graph()) == []


def test_the_layer_check_sees_an_upward_import() -> None:
    graph = {
        "jobsched.core.job": {"jobsched.services.worker"},
        "jobsched.services.worker": {"jobsched.core.job"},
    }
    assert upward_imports(graph) == ["jobsched.core.job (core) imports jobsched.services.worker (services)"]
    inside_core = {"jobsched.core.job.model": {"jobsched.core.state"}, "jobsched.core.state": set()}
    assert upward_imports(inside_core) == [
        "jobsched.core.job.model (core/job) imports jobsched.core.state (core/state)"
    ]
