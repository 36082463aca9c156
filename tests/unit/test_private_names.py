"""The tooling (tools/) reaches no module's private names: no ``from m import _name`` and no
``m._name`` on a module it imported, where m is another of jobsched's or jobsched_tools' modules.
What one module needs of another is public there, with a docstring (``api.client_for``, once
``api._client`` that ``jobsched dlq`` and ``jobsched outcomes`` imported).

ruff's PLC2701 (import-private-name, selected in pyproject.toml) checks imports from other
top-level packages only: it lets ``jobsched_tools.cli`` import ``jobsched_tools.api._client``.
This test checks within the package too, and attribute access on an imported module.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools" / "jobsched_tools"
FIRST_PARTY = ("jobsched", "jobsched_tools")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(TOOLS.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def first_party(module: str) -> bool:
    return module.split(".")[0] in FIRST_PARTY


def reaches(path: Path, text: str | None = None) -> list[str]:
    """Each private name of another first-party module that ``path`` (or ``text``, as though it
    stood there) imports or reads."""
    module = module_name(path)
    tree = ast.parse(path.read_text() if text is None else text, str(path))
    where = path.relative_to(ROOT)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    imports, modules = imported(tree, module, package)
    found = [f"{where}:{line}: {what}" for line, what in imports]
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and private(node.attr)):
            continue
        dotted = dotted_name(node.value)
        head = dotted.split(".")[0] if dotted else ""
        if dotted and head in modules and modules[head] + dotted[len(head) :] != module:
            found.append(f"{where}:{node.lineno}: {dotted}.{node.attr}")
    return found


def imported(tree: ast.Module, module: str, package: str) -> tuple[list[tuple[int, str]], dict[str, str]]:
    """The private names ``tree`` imports from other first-party modules (line, import), and the
    local names it binds to first-party modules (or to what may be one), with the module each
    names."""
    found: list[tuple[int, str]] = []
    modules: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join([*anchor, source] if source else anchor)
            if not first_party(source) or source == module:
                continue
            for alias in node.names:
                if private(alias.name):
                    found.append((node.lineno, f"from {source} import {alias.name}"))
                else:  # perhaps a module: `from jobsched_tools import api`
                    modules[alias.asname or alias.name] = f"{source}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if first_party(alias.name):
                    bound = alias.asname or alias.name.split(".")[0]
                    modules[bound] = alias.name if alias.asname else bound
    return found, modules


def dotted_name(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of names and attributes; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted_name(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def test_the_tooling_uses_no_other_module_s_private_names() -> None:
    assert [line for path in sorted(TOOLS.rglob("*.py")) for line in reaches(path)] == []


def test_the_check_sees_each_way_of_reaching_a_private_name() -> None:
    """The check can fail: each form it forbids is found, and a module's own names are not."""
    source = (
        "import sys\n"
        "import jobsched_tools.api\n"
        "from jobsched_tools import api\n"
        "from jobsched_tools.api import _client\n"
        "from ..api import _build\n"
        "from jobsched_tools.cli.cmd_fake import _mine\n"
        "api._client('sqs', None)\n"
        "jobsched_tools.api._client('sqs', None)\n"
        "_mine._x, sys._getframe\n"
    )
    found = [line.split(": ", 1)[1] for line in reaches(TOOLS / "cli" / "cmd_fake.py", source)]
    assert found == [
        "from jobsched_tools.api import _client",
        "from jobsched_tools.api import _build",
        "api._client",
        "jobsched_tools.api._client",
    ]
