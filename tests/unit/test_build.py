"""The deploy build (issue 35 item 1): ``make sam-build`` builds for python3.12 on arm64 on any
machine with Python 3.11+ (every resource has ``BuildMethod: makefile``), and fails, never skips,
when the build is not what the template deploys (``jobsched_tools.build_check``). The real build
runs in ``make test`` (``make template-check``); these check its parts in a second."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from jobsched_tools.build_check import FUNCTION_IDS, locked_versions, main, problems
from jobsched_tools.emulator.provision import load_template

ROOT = Path(__file__).resolve().parents[2]
LAYERS = {"JobschedLayer": "ContentUri", "HandlersLayer": "ContentUri"}
needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def fake_build(into: Path) -> Path:
    """A build as sam build leaves it, with empty files: the template, each function's app.py,
    both layers, and the lock's distributions with an aarch64 cp312 pydantic-core."""
    (into / "template.yaml").parent.mkdir(parents=True, exist_ok=True)
    (into / "template.yaml").write_text("Resources: {}\n")
    for function in FUNCTION_IDS:
        (into / function).mkdir()
        (into / function / "app.py").write_text("")
    site = into / "JobschedLayer" / "python"
    (site / "jobsched").mkdir(parents=True)
    (site / "jobsched" / "__init__.py").write_text("")
    for name, version in locked_versions().items():
        (site / f"{name.replace('-', '_')}-{version}.dist-info").mkdir()
    (site / "pydantic_core").mkdir()
    (site / "pydantic_core" / "_pydantic_core.cpython-312-aarch64-linux-gnu.so").write_bytes(b"")
    (into / "HandlersLayer" / "python").mkdir(parents=True)
    (into / "HandlersLayer" / "python" / "job_handlers.py").write_text("")
    return into


def test_a_complete_build_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build = fake_build(tmp_path / "build")
    assert problems(build) == []
    assert main([str(build)]) == 0
    assert "sam build: ok" in capsys.readouterr().out


def test_the_layer_alone_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What a bare `sam build` without python3.12 used to leave: the layer, no function."""
    build = fake_build(tmp_path / "build")
    for function in FUNCTION_IDS:
        shutil.rmtree(build / function)
    assert [p.split(":")[0] for p in problems(build)] == list(FUNCTION_IDS)
    assert main([str(build)]) == 1
    assert "sam build: FAILED" in capsys.readouterr().err


def test_no_build_at_all_fails(tmp_path: Path) -> None:
    assert problems(tmp_path) == [f"{tmp_path}/template.yaml is missing: sam build did not finish"]


@pytest.mark.parametrize(
    "extension",
    [
        "pydantic_core/_pydantic_core.cpython-312-x86_64-linux-gnu.so",  # the build machine's arch
        "pydantic_core/_pydantic_core.cpython-311-aarch64-linux-gnu.so",  # the build machine's Python
        "somewhere/native.so",  # untagged: cannot be told
    ],
)
def test_a_binary_for_another_platform_fails(tmp_path: Path, extension: str) -> None:
    build = fake_build(tmp_path / "build")
    path = build / "JobschedLayer" / "python" / extension
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    assert problems(build) == [f"JobschedLayer/python/{extension}: not built for CPython 3.12 on aarch64"]


def test_another_version_than_the_lock_s_fails(tmp_path: Path) -> None:
    build = fake_build(tmp_path / "build")
    site = build / "JobschedLayer" / "python"
    pinned = locked_versions()["pydantic"]
    (site / f"pydantic-{pinned}.dist-info").rename(site / "pydantic-2.13.5.dist-info")
    shutil.rmtree(site / "pydantic_core")
    assert problems(build) == [
        f"JobschedLayer: pydantic is ['2.13.5'], the lock says {pinned}",
        "JobschedLayer: no pydantic_core extension for CPython 3.12 on aarch64",
    ]


def _code_folder(resource: dict[str, object]) -> Path:
    properties = resource["Properties"]
    assert isinstance(properties, dict)
    return ROOT / str(properties.get("CodeUri") or properties["ContentUri"])


def test_every_function_and_layer_is_built_by_its_makefile() -> None:
    """No resource is left to SAM's python3.12 builder, which needs that interpreter here."""
    resources = load_template()["Resources"]
    built = {
        logical_id: resource
        for logical_id, resource in resources.items()
        if resource["Type"] in ("AWS::Serverless::Function", "AWS::Serverless::LayerVersion")
    }
    assert set(built) == {*FUNCTION_IDS, *LAYERS}
    for logical_id, resource in built.items():
        assert resource["Metadata"]["BuildMethod"] == "makefile", logical_id
        assert (_code_folder(resource) / "Makefile").is_file(), logical_id


@needs_make
@pytest.mark.parametrize("function", FUNCTION_IDS)
def test_a_function_s_makefile_builds_its_app(tmp_path: Path, function: str) -> None:
    folder = _code_folder(load_template()["Resources"][function])
    subprocess.run(
        ["make", "--makefile", str(folder / "Makefile"), f"build-{function}", f"ARTIFACTS_DIR={tmp_path}"],
        cwd=folder,
        check=True,
        capture_output=True,
        timeout=60,
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.py"]
    assert (tmp_path / "app.py").read_text() == (folder / "app.py").read_text()


@needs_make
def test_a_function_s_makefile_refuses_its_own_requirements(tmp_path: Path) -> None:
    """They would not be installed: functions get their packages from the layers."""
    folder = tmp_path / "function"
    shutil.copytree(ROOT / "functions" / "trigger", folder)
    (folder / "requirements.txt").write_text("requests==2.32.5\n")
    done = subprocess.run(
        ["make", "-f", str(folder / "Makefile"), "build-TriggerFunction", f"ARTIFACTS_DIR={tmp_path}"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "functions get theirs from the layers" in done.stdout


@needs_make
@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_a_layer_s_makefile_fetches_wheels_for_the_lambda_runtime(tmp_path: Path, layer: str) -> None:
    """pip, run by any Python, asked for CPython 3.12 wheels for manylinux aarch64, binaries only,
    into the layer's python/ folder (make -n: the commands, not run; the real build is make test's)."""
    folder = _code_folder(load_template()["Resources"][layer])
    if layer == "HandlersLayer":  # pip runs only when the handlers' requirements list a package
        folder = Path(shutil.copytree(folder, tmp_path / "handlers"))
        (folder / "requirements.txt").write_text("cronsim==2.6\n")
    done = subprocess.run(
        ["make", "-n", "--makefile", str(folder / "Makefile"), f"build-{layer}", "ARTIFACTS_DIR=/out"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    pip = " ".join(done.stdout.split())
    for option in (
        "-m pip install",
        "--platform manylinux2014_aarch64",
        "--implementation cp",
        "--python-version 3.12",
        "--abi cp312",
        "--only-binary=:all:",
        '--target "/out/python"',
        "-r requirements.txt",
    ):
        assert option in pip, option
