"""The template's generated blocks (alarms, Rules, provisioned capacity): each lives between two
marker lines of template.yaml and is rewritten from its module's Python description.

One reader and one rewriter for all of them: ``python -m jobsched_tools.ops.<module>`` rewrites
its block, ``--check`` only reports whether it is current (the template tests check the same).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def current(text: str, begin: str, end: str) -> str:
    """The block as it stands in ``text`` (the template), its marker lines included."""
    start = text.index(begin)
    stop = text.index(end, start) + len(end)
    return text[start:stop]


def rewrite(argv: list[str], begin: str, end: str, render: Callable[[], str], what: str, module: str) -> int:
    """Rewrite the template's block from ``render`` (or, with ``--check``, say it differs: 1)."""
    from jobsched_tools.emulator.provision import find_template

    path = Path(find_template())
    text = path.read_text(encoding="utf-8")
    block, wanted = current(text, begin, end), render()
    if block == wanted:
        return 0
    if "--check" in argv:
        print(f"{path}: the {what} block is not what {module} generates; run python -m {module}")
        return 1
    path.write_text(text.replace(block, wanted), encoding="utf-8")
    print(f"{path}: {what} block rewritten")
    return 0
