"""The installed package as a user gets it from a wheel: what the wheel holds, and what the `tdm`
command says where the pipeline's packages or the paper's benchmark are not installed."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from cli.main import main, missing_pipeline_packages

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tdm", "tasks", "flows", "schemas", "deployments", "cli")


def _pipeline_extra() -> list[str]:
    """The names of the `pipeline` extra's distributions, as pyproject.toml lists them."""
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = []
    for requirement in extra["optional-dependencies"]["pipeline"]:
        name = requirement.split(";")[0]
        for stop in "[<>=!~ ":
            name = name.split(stop)[0]
        names.append(name)
    return names


def test_the_wheel_holds_the_packages_and_their_files_but_not_the_benchmark(
    tmp_path: Path,
) -> None:
    """Built from a copy of the source: every package with prefect.yaml (`tdm serve` reads it
    from the package), the licence; no benchmark, tests or results."""
    pytest.importorskip("setuptools")
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    for package in (*PACKAGES, "benchmarks", "tests"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__py*"))
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    built = subprocess.run(
        [*pip_wheel, "-q", "--no-index", "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("tdm_impute-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == set(PACKAGES)
    assert "deployments/prefect.yaml" in names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)


def _installed() -> None:
    """Skip where tdm-impute's metadata is absent (a source tree on the path, not installed)."""
    try:
        metadata.requires("tdm-impute")
    except metadata.PackageNotFoundError:
        pytest.skip("tdm-impute is not installed: no metadata to read the extra from")


@pytest.mark.parametrize(
    "requirement",
    [
        'prefect<3.9,>=3.8.8; extra == "pipeline"',
        "prefect(>=3.8); extra=='pipeline'",
        'prefect@ https://example.invalid/prefect.whl ; extra == "pipeline"',
        'prefect[dev]; python_version >= "3.11" and extra == "pipeline"',
    ],
)
def test_every_form_of_a_pipeline_requirement_is_read(
    requirement: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each form the metadata may write names the distribution `prefect` of the extra; a
    requirement of another extra is not read."""
    monkeypatch.setattr(metadata, "requires", lambda name: [requirement, 'x; extra == "dev"'])
    monkeypatch.setattr(metadata, "distribution", _absent)
    assert missing_pipeline_packages() == ["prefect"]


def _absent(name: str) -> metadata.Distribution:
    raise metadata.PackageNotFoundError(name)


def test_every_pipeline_package_is_found_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """In this full install none is missing; with none installed, every one of pyproject's
    pipeline extra is named (the requirements are read from the package's metadata)."""
    pytest.importorskip("prefect")
    _installed()
    assert missing_pipeline_packages() == []

    real = metadata.distribution

    def absent(name: str) -> metadata.Distribution:
        if name == "tdm-impute":
            return real(name)
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", absent)
    assert missing_pipeline_packages() == _pipeline_extra()


def test_a_library_only_install_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`pip install tdm-impute` installs the `tdm` command without the pipeline: it names what
    is missing and the extra to install, exit 2, and imports none of the pipeline."""
    _installed()
    real = metadata.distribution

    def without_prefect(name: str) -> metadata.Distribution:
        if name in ("prefect", "duckdb"):
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "distribution", without_prefect)
    assert main(["impute", "--table", "t"]) == 2
    err = capsys.readouterr().err
    assert "prefect, duckdb are not installed" in err
    assert "pip install 'tdm-impute[pipeline]'" in err


def test_bench_without_the_benchmark_says_where_it_lives(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Installed from a wheel, `tdm bench` with any arguments says that the benchmark runs from
    a clone; the other commands still refuse arguments they do not know."""
    monkeypatch.setitem(sys.modules, "benchmarks.cli", None)  # as if not installed
    assert main(["bench", "--datasets", "seeds", "--methods", "mean"]) == 2
    assert "run it from a clone of the repository" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["warehouse", "--datasets", "seeds"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --datasets seeds" in capsys.readouterr().err


def test_warehouse_without_a_config_outside_the_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --config, and no demo config in this folder: say how to give one, before any run."""
    monkeypatch.delenv("TDM_WAREHOUSE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["warehouse"]) == 2
    err = capsys.readouterr().err
    assert "No warehouse config given" in err and "--config FILE" in err
    assert list(tmp_path.iterdir()) == []
    assert main(["warehouse", "--config", ""]) == 2  # given, though empty: not the default
    assert "No warehouse config given" not in capsys.readouterr().err
