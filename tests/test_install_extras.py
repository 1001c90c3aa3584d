"""Every install path on its own: `pip install sqlwin`, and `pip install 'sqlwin[x]'` for each user-facing
extra, each in a fresh venv with the pip it starts with (never upgraded: 23.2 on Python 3.11, which matches
extras as written), then the README snippet that needs that path, for real (Spark, `sqlwin serve`, dbt).

pyspark and the other base requirements take most of an install, so they are installed once, into a fresh
base venv (the wheel built from this tree, then sqlwin itself removed again). Each path's fresh venv sees
the base's site-packages through a .pth file, so its own pip finds every base requirement satisfied and
installs sqlwin plus only what the extra adds (checked: pip says so, and no base requirement lands in it).
The dev venv, which holds every extra at once, is never seen by these venvs. The two paths that start a
Spark of their own (the core demo, the plot) run in the background while the server and dbt ones run.
"""

from __future__ import annotations

import ensurepip
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pytest

from sqlwin.server import ServerProcess
from tests.proctools import ROOT, base_env, run_process
from tests.servertools import DBT_BUILD_SUMMARY, DbtBuild, dbt_summary, record_dbt_build, run_dbt, shared_server

pytestmark = pytest.mark.slow

README = (ROOT / "README.md").read_text(encoding="utf-8")
BUILD_INPUTS = ("pyproject.toml", "README.md", "sqlwin", "udtfs")  # what the wheel is built from
# each extra, and a module its snippet needs that only the extra brings
EXTRAS = {"server": "thrift_sasl", "dbt": "dbt.adapters.spark", "plot": "matplotlib"}
BASE_REQUIREMENTS = {"pyspark", "pyarrow", "duckdb", "sqlglot"}
PIP_TIMEOUT = 900.0
RUN_TIMEOUT = 600.0


@dataclass
class Venv:
    path: Path

    @property
    def bin(self) -> Path:
        return self.path / "bin"

    @cached_property
    def site_packages(self) -> Path:
        script = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
        return Path(checked(self.run(["python", "-c", script], self.path)).stdout.strip())

    def env(self) -> dict[str, str]:
        """This venv active, and nothing of the process running the tests (its venv, its PYTHONPATH) in."""
        env = {k: v for k, v in base_env().items() if k not in ("PYTHONPATH", "PYTHONHOME", "SPARK_HOME")}
        env.update(VIRTUAL_ENV=str(self.path), PATH=f"{self.bin}{os.pathsep}{env.get('PATH', '')}")
        return env

    def run(self, args: list[str], cwd: Path, timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess[str]:
        """``args`` with its first word taken from this venv's bin/."""
        return run_process([str(self.bin / args[0]), *args[1:]], self.env(), cwd, timeout)

    def origin(self, module: str) -> Path:
        script = f"import importlib.util; print(importlib.util.find_spec({module!r}).origin)"
        return Path(checked(self.run(["python", "-c", script], self.path)).stdout.strip())

    def pip_install(self, requirement: str) -> str:
        """pip's output; --no-compile only skips writing .pyc files (what gets installed is the same)."""
        done = checked(self.run(["python", "-m", "pip", "install", "--no-compile", requirement], self.path,
                                PIP_TIMEOUT))
        return done.stdout + done.stderr


def checked(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, f"{done.args} exited {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


def fresh_venv(path: Path) -> Venv:
    """``python -m venv`` with the interpreter behind this one; its pip must be the one ensurepip bundles."""
    checked(run_process([sys.executable, "-m", "venv", str(path)], base_env(), path.parent, PIP_TIMEOUT))
    venv = Venv(path)
    pip = checked(venv.run(["python", "-m", "pip", "--version"], path)).stdout
    assert pip.startswith(f"pip {ensurepip.version()} "), pip
    return venv


def readme_block(containing: str) -> tuple[str, str]:
    """The README's fenced block holding ``containing``, and the fenced block right after it (its output)."""
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```\n", README, re.MULTILINE | re.DOTALL)
    index = next(i for i, block in enumerate(blocks) if containing in block)
    return blocks[index], blocks[index + 1]


def in_order(expected: str, printed: str) -> bool:
    """Every line of ``expected`` is a line of ``printed``, in the same order (others may come between)."""
    lines = iter(printed.splitlines())
    return all(any(line.rstrip() == want.rstrip() for line in lines) for want in expected.splitlines())


# -- the base venv, and a fresh venv per install path ------------------------------------------------------
@dataclass
class Install:
    base: Venv
    wheel: Path
    root: Path
    background: dict[str, Future[None]] = field(default_factory=dict)

    def venv_for(self, extra: str = "") -> Venv:
        """A fresh venv that sees the base one, after ``pip install sqlwin.whl`` or ``'sqlwin.whl[extra]'``."""
        venv = fresh_venv(self.root / (extra or "core"))
        (venv.site_packages / "_sqlwin_base.pth").write_text(
            f"import site; site.addsitedir({str(self.base.site_packages)!r})\n")
        output = venv.pip_install(f"{self.wheel}[{extra}]" if extra else str(self.wheel))
        assert "does not provide the extra" not in output, output  # pip only warns of a misspelt extra
        assert "Requirement already satisfied: pyspark" in output, output
        own = {p.name.lower() for p in venv.site_packages.iterdir()}
        assert "sqlwin" in own and not own & BASE_REQUIREMENTS, own
        assert venv.origin("sqlwin").is_relative_to(venv.site_packages)
        if extra:
            assert venv.origin(EXTRAS[extra]).is_relative_to(venv.site_packages)
        return venv


def build_base(root: Path) -> Install:
    source = root / "source"  # a copy: building in the tree would leave build/ and *.egg-info in it
    source.mkdir()
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, source / name)
    base = fresh_venv(root / "base")
    checked(base.run(["python", "-m", "pip", "wheel", "--no-deps", "-w", str(root / "dist"), str(source)], root,
                     PIP_TIMEOUT))
    wheel = next((root / "dist").glob("sqlwin-*.whl"))
    base.pip_install(str(wheel))
    checked(base.run(["python", "-m", "pip", "uninstall", "--yes", "sqlwin"], root))
    return Install(base, wheel, root)


# The paths that run a Spark of their own, started as soon as the base venv is ready (when their test runs).
def core_path(install: Install) -> None:
    venv = install.venv_for()
    for module in EXTRAS.values():
        done = venv.run(["python", "-c", f"import {module}"], install.root)
        assert done.returncode != 0, f"{module} is importable without its extra: the venv is not bare"
    # `make demo` runs sql_examples/tumble_bids.sql; the README shows what it prints
    done = checked(venv.run(["sqlwin", "run", str(ROOT / "sql_examples" / "tumble_bids.sql"), "--no-progress"],
                            install.root))
    expected = README.split("`make demo` prints (abridged):", 1)[1].split("```\n")[1]
    assert in_order(expected, done.stdout), done.stdout


# A replay small enough to keep Spark's work to two micro-batches and the end of the table: 12:01 and 12:05
# arrive first (W = 12:05), then 12:12 (W = 12:12 passes 12:10, so [12:00, 12:10) fires in micro-batch 2);
# the end of the table fires [12:10, 12:20) in micro-batch 3.
REPLAY = """CREATE OR REPLACE TEMPORARY VIEW arrivals AS SELECT * FROM VALUES
  (1, TIMESTAMP'2020-04-15 12:01:00', 5), (2, TIMESTAMP'2020-04-15 12:05:00', 8),
  (3, TIMESTAMP'2020-04-15 12:12:00', 3) AS t(seq, ts, v);
CREATE STREAM arriving FROM TABLE arrivals ARRIVAL ORDER BY seq MICRO BATCH BY seq > 2 WATERMARK FOR ts AS ts;
SELECT window_start, window_end, SUM(v) AS total
FROM TUMBLE(TABLE arriving, DESCRIPTOR(ts), INTERVAL '10' MINUTES) GROUP BY window_start, window_end;
"""
REPLAY_PANES = """\
window_start        │ window_end          │ total │ pane_index │ pane_timing │ is_final │ micro_batch
2020-04-15 12:00:00 │ 2020-04-15 12:10:00 │    13 │          0 │ ON_TIME     │ true     │           2
2020-04-15 12:10:00 │ 2020-04-15 12:20:00 │     3 │          0 │ ON_TIME     │ true     │           3
(2 rows)"""


def plot_path(install: Install) -> None:
    venv = install.venv_for("plot")
    assert "sqlwin replay sql_examples/streaming/dataflow_panes.sql --plot docs/panes_dataflow.png" in README
    script, png = install.root / "replay.sql", install.root / "panes.png"
    script.write_text(REPLAY)
    done = checked(venv.run(["sqlwin", "replay", str(script), "--plot", str(png), "--no-progress"], install.root))
    assert in_order(REPLAY_PANES, done.stdout), done.stdout
    assert f"panes drawn to {png}" in done.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


BACKGROUND: dict[str, Callable[[Install], None]] = {
    "test_core_install_runs_the_quick_start_demo": core_path,
    "test_plot_extra_draws_the_panes_of_a_replay": plot_path,
}


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Install]:
    root = tmp_path_factory.mktemp("install")
    selected = {item.name for item in request.session.items if item.module is request.module}
    pool = ThreadPoolExecutor(max_workers=len(BACKGROUND))
    try:
        install = build_base(root)
        install.background = {name: pool.submit(path, install) for name, path in BACKGROUND.items()
                              if name in selected}
        yield install
    finally:
        pool.shutdown(wait=True)  # the background paths' processes use the venvs removed below
        shutil.rmtree(root, ignore_errors=True)  # about 1 GB of venvs


@pytest.fixture()
def server(request: pytest.FixtureRequest) -> ServerProcess:
    return shared_server(request.config)


# -- one test per install path (the server and dbt ones first: the background ones run meanwhile) ----------
def test_server_extra_runs_the_pyhive_snippet(install: Install, server: ServerProcess) -> None:
    venv = install.venv_for("server")
    snippet, printed = readme_block("from pyhive import hive")
    assert 'host="127.0.0.1", port=10000' in snippet
    script = install.root / "pyhive_snippet.py"
    script.write_text(snippet.replace('host="127.0.0.1", port=10000', f"host={server.host!r}, port={server.port}"))
    done = checked(venv.run(["python", str(script)], install.root))
    assert done.stdout.strip() == printed.strip()


def test_dbt_extra_builds_the_dbt_project(install: Install, server: ServerProcess,
                                          request: pytest.FixtureRequest) -> None:
    venv = install.venv_for("dbt")
    commands, _ = readme_block("dbt build --profiles-dir .")
    assert "cd sql_examples/dbt_project\nSQLWIN_PORT=10000 dbt build --profiles-dir ." in commands
    workdir = install.root / "dbt_run"
    workdir.mkdir()
    done = run_dbt(venv.bin / "dbt", ["build"], server, workdir, schema="dbt_extra", env=venv.env())
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert dbt_summary(done.stdout) == DBT_BUILD_SUMMARY, done.stdout[-3000:]
    # tests/test_dbt.py checks what this build made instead of building the project a second time
    record_dbt_build(request.config, DbtBuild("dbt_extra", done.stdout, "sqlwin[dbt] in a fresh venv"))


def test_core_install_runs_the_quick_start_demo(install: Install) -> None:
    install.background["test_core_install_runs_the_quick_start_demo"].result()


def test_plot_extra_draws_the_panes_of_a_replay(install: Install) -> None:
    install.background["test_plot_extra_draws_the_panes_of_a_replay"].result()
