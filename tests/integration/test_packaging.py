"""Packaging as an index would take it: the sdist and the wheel build, their metadata passes
``twine check --strict`` (license, classifiers, a README that renders), the wheel installs into a
fresh virtual environment and its ``kafka-sidecar`` runs from there, and ``pip install
git+<url>`` builds from the repository's committed tree.

Fast by construction: no build isolation (the dev environment has setuptools >= 77), the wheel
installed with ``--no-deps`` and the dependencies taken from the dev environment through a
``.pth`` line placed after the new environment's own site-packages (so the command, its
modules and its entry points are the wheel's, not the editable install's).
"""

from __future__ import annotations

import email
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from pathlib import Path

from tests.support import REPO

TIMEOUT = 300


def run(*cmd: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def test_sdist_and_wheel_metadata_and_a_fresh_install(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, REPO)
    (sdist,) = dist.glob("kafka_sidecar-*.tar.gz")
    (wheel,) = dist.glob("kafka_sidecar-*.whl")
    run(sys.executable, "-m", "twine", "check", "--strict", sdist, wheel)

    with zipfile.ZipFile(wheel) as z:
        meta_name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_bytes(z.read(meta_name))
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in z.namelist())
    assert meta["Name"] == "kafka-sidecar" and meta["License-Expression"] == "Apache-2.0"
    assert meta["Requires-Python"] == ">=3.11" and meta["Description-Content-Type"] == "text/markdown"
    classifiers = meta.get_all("Classifier")
    assert "Framework :: Pytest" in classifiers and "Programming Language :: Python :: 3.11" in classifiers
    assert "## Set up" in meta.get_payload()  # the README is the long description
    with tarfile.open(sdist) as t:
        names = t.getnames()
    for needed in ("README.md", "LICENSE", "CHANGELOG.md", "pyproject.toml", "server/cli.py", "protocol/__init__.py"):
        assert any(n.endswith("/" + needed) for n in names), f"{needed} not in the sdist"

    env = tmp_path / "venv"
    venv.create(env, with_pip=False)
    py = env / "bin" / "python"
    site = Path(run(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    run(sys.executable, "-m", "pip", "--python", py, "install", "--quiet", "--no-deps", wheel)
    # Dependencies (kio, crc32c, ...) from this environment, after the wheel's own path.
    (site / "zz-dev-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    cli = env / "bin" / "kafka-sidecar"
    assert run(cli, "--version").stdout.startswith("kafka-sidecar ")
    where = run(py, "-c", "import kafka_sidecar.server.cli as c; print(c.__file__)").stdout.strip()
    assert where.startswith(str(site)), where
    doctor = run(cli, "doctor", "--data-dir", tmp_path / "data", "--listen", "127.0.0.1:0")
    assert doctor.stdout.count("ok: ") == 3


def test_pip_install_from_git(tmp_path: Path) -> None:
    """What `pip install git+<url>` does: clone the committed tree and build it."""
    if subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True).returncode:
        import pytest

        pytest.skip(f"{REPO} is not a git checkout")
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", tmp_path,
        f"git+file://{REPO}")
    (wheel,) = tmp_path.glob("kafka_sidecar-*.whl")
    with zipfile.ZipFile(wheel) as z:
        assert "kafka_sidecar/server/cli.py" in z.namelist()
