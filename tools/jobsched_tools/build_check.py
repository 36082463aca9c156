"""What ``sam build`` left in ``.aws-sam/build`` is what ``sam deploy`` would deploy: check it.

``make sam-build`` runs this after ``sam build`` and fails when it finds a problem, because a
build that silently went wrong (the layer alone, an x86_64 or cpython-311 binary, another version
than the lock's) deploys as if nothing were wrong (issue 35 item 1). It checks:

- the built template, and each function's folder holding its ``app.py``;
- the jobsched layer: the ``jobsched`` package under ``python/``, and every distribution of the
  layer's lock (``layers/jobsched/requirements.txt``) at exactly its locked version, with
  pydantic-core's extension built for CPython 3.12 on aarch64;
- the handlers layer's ``job_handlers.py``;
- every extension module anywhere in the build is for CPython 3.12 (or the stable ABI) on
  aarch64 Linux: the functions run python3.12 on arm64.

Usage: ``python -m jobsched_tools.build_check [BUILD_DIR]`` (default ``.aws-sam/build``).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from jobsched_tools.emulator.provision import FUNCTION_IDS

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "layers" / "jobsched" / "requirements.txt"
LAYERS = ("JobschedLayer", "HandlersLayer")
# An extension module's file name ends with its tag: ``.cpython-312-aarch64-linux-gnu.so`` or
# ``.abi3.so`` (PEP 3149); one without a tag (``x.so``) says nothing and is refused too.
EXTENSION_OK = re.compile(r"\.(cpython-312-aarch64-linux-gnu|abi3)\.so$")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_versions(lock: Path = LOCK) -> dict[str, str]:
    """``{distribution: version}`` of a lock's ``name==version`` lines."""
    pins = {}
    for line in lock.read_text().splitlines():
        requirement = line.split("#")[0].split(";")[0].strip()
        if "==" in requirement:
            name, version = (part.strip() for part in requirement.split("==", 1))
            pins[_normalise(name)] = version
    return pins


def installed_versions(site: Path) -> dict[str, list[str]]:
    """``{distribution: [versions]}`` of the ``NAME-VERSION.dist-info`` folders in ``site``."""
    found: dict[str, list[str]] = {}
    for info in site.glob("*.dist-info"):
        name, _, version = info.name.removesuffix(".dist-info").rpartition("-")
        found.setdefault(_normalise(name), []).append(version)
    return found


def problems(build: Path, lock: Path = LOCK) -> list[str]:
    """What is wrong with the build in ``build``; empty when it is what the template deploys."""
    if not (build / "template.yaml").is_file():
        return [f"{build}/template.yaml is missing: sam build did not finish"]
    found: list[str] = []
    for function in FUNCTION_IDS:
        if not (build / function / "app.py").is_file():
            found.append(f"{function}: no app.py in {build / function}")
    site = build / "JobschedLayer" / "python"
    if not (site / "jobsched" / "__init__.py").is_file():
        found.append(f"JobschedLayer: no jobsched package in {site}")
    installed = installed_versions(site)
    for name, version in sorted(locked_versions(lock).items()):
        if installed.get(name) != [version]:
            found.append(f"JobschedLayer: {name} is {installed.get(name, 'absent')}, the lock says {version}")
    if not list(site.glob("pydantic_core/*.cpython-312-aarch64-linux-gnu.so")):
        found.append("JobschedLayer: no pydantic_core extension for CPython 3.12 on aarch64")
    if not (build / "HandlersLayer" / "python" / "job_handlers.py").is_file():
        found.append("HandlersLayer: no python/job_handlers.py")
    for extension in sorted(build.rglob("*.so")):
        if not EXTENSION_OK.search(extension.name):
            found.append(f"{extension.relative_to(build)}: not built for CPython 3.12 on aarch64")
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    build = Path(args[0] if args else ".aws-sam/build")
    found = problems(build)
    if found:
        refusal = f"sam build: FAILED, {build} is not what the template deploys (do not run sam deploy):"
        print(refusal, file=sys.stderr)
        for problem in found:
            print(f"  {problem}", file=sys.stderr)
        return 1
    pins = locked_versions()
    print(
        f"sam build: ok ({len(LAYERS)} layers and {len(FUNCTION_IDS)} functions in {build}, for python3.12"
        f" on arm64; the layer holds the lock's {len(pins)} distributions at their versions,"
        f" pydantic-core {pins.get('pydantic-core')} for aarch64)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
