"""Torch threads: the fit time of one table with 1, 2 and torch's default CPU threads, idle and
next to a CPU-bound process, and a served run against `tdm impute` before and after the thread
setting (TDM_TORCH_THREADS).

Run from the repository root; prints a markdown section (`--write` also puts it in BENCHMARKS.md):

    python -m benchmarks.torch_threads --max-iter 300 --write

The table is the demo's (scikit-learn's wine data, 178 rows, 13 numeric columns, 25% of cells
removed, seed 0). Each fit of part 1 runs in a fresh process (`TDMImputer` defaults, `max_iter`
steps, seed 0) and times `fit_transform` alone. Part 2 reads each run's fit seconds from its
`tdm_lineage` row: `tdm impute` in a fresh process, and a run `tdm run` triggers on `tdm serve`
(one serve per setting, started before timing). "Before" is `TDM_TORCH_THREADS=0` (torch's
default: what every entry point used when it set nothing); "after" is the default setting. The
CPU-bound neighbour is `python -c "while True: pass"`, started before a measurement and stopped
after it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import duckdb

REPO = Path(__file__).resolve().parent.parent
TABLE, KEY = "wines", "wine_id"
DATE = date.today()  # the date the numbers are taken

_FIT = """
import sys, time, duckdb, torch
from tdm import TDMImputer
threads, db, max_iter = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
if threads:
    torch.set_num_threads(threads)
with duckdb.connect(db, read_only=True) as con:
    frame = con.execute("SELECT * FROM wines").df()
X = frame.select_dtypes("number").drop(columns="wine_id").to_numpy(dtype=float)
imputer = TDMImputer(max_iter=max_iter, random_state=0)
started = time.perf_counter()
imputer.fit_transform(X)
print(time.perf_counter() - started, torch.get_num_threads())
"""


def main() -> None:
    """Measure, print the markdown section, and with --write put it in BENCHMARKS.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-iter", type=int, default=300, help="steps per fit [300]")
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md too")
    args = parser.parse_args()
    start_load = f"{os.getloadavg()[0]:.1f}"
    with tempfile.TemporaryDirectory(prefix="tdm-threads-") as tmp:
        db = Path(tmp) / "warehouse.duckdb"
        from cli.demo import build_demo_warehouse

        build_demo_warehouse(db, missing_rate=0.25, seed=0)
        env = _clean_environment(Path(tmp))
        fits = fit_times(db, args.max_iter, env)
        runs = run_times(db, args.max_iter, env, Path(tmp))
    load = f"{os.getloadavg()[0]:.1f}"
    body = report(args.max_iter, fits, runs, f"{start_load} at the start, {load} at the end")
    if args.write:
        from benchmarks._report import replace_section

        replace_section("Torch threads: fits, served runs and tdm impute", body)
    print(body)


def fit_times(db: Path, max_iter: int, env: dict[str, str]) -> dict[tuple[str, str], float]:
    """Seconds of one fit per (threads, load): threads '1', '2' and '0' (torch's default)."""
    times: dict[tuple[str, str], float] = {}
    for load in ("idle", "loaded"):
        with _neighbour(load == "loaded"):
            for threads in ("0", "1", "2"):
                command = [sys.executable, "-c", _FIT, threads, str(db), str(max_iter)]
                out = subprocess.run(
                    command, env=env, cwd=REPO, check=True, capture_output=True, text=True
                ).stdout.split()
                times[(threads, load)] = float(out[0])
                print(f"fit threads={threads} ({out[1]} used) {load}: {out[0]} s", flush=True)
    return times


def run_times(
    db: Path, max_iter: int, env: dict[str, str], tmp: Path
) -> dict[tuple[str, str, str], float]:
    """Fit seconds per (entry point, setting, load): `tdm impute` and a served run, with
    TDM_TORCH_THREADS=0 ("before") and the default ("after")."""
    tdm = str(Path(sys.executable).with_name("tdm"))
    times: dict[tuple[str, str, str], float] = {}
    for setting, extra in (("before", {"TDM_TORCH_THREADS": "0"}), ("after", {})):
        run_env = {**env, **extra, "TDM_DB_PATH": str(db), "TDM_MAX_ITER": str(max_iter)}
        with _served(tdm, run_env, tmp / f"serve-{setting}.log") as client_env:
            for load in ("idle", "loaded"):
                with _neighbour(load == "loaded"):
                    for entry in ("tdm impute", "served run"):
                        target = f"t_{setting}_{load}_{entry.split()[0]}"
                        if entry == "tdm impute":  # on serve's server: no temporary one
                            command = [tdm, "impute", "--table", TABLE, "--key", KEY]
                        else:
                            command = [tdm, "run", TABLE, "--key", KEY, "--timeout", "600"]
                        subprocess.run(
                            [*command, "--target", target],
                            env=client_env,
                            cwd=tmp,
                            check=True,
                            capture_output=True,
                        )
                        times[(entry, setting, load)] = _fit_seconds(db, target)
                        print(f"{entry} {setting} {load}: {times[(entry, setting, load)]:.2f} s")
    return times


def report(
    max_iter: int,
    fits: dict[tuple[str, str], float],
    runs: dict[tuple[str, str, str], float],
    load: str,
) -> str:
    """The markdown body: machine, command, the two tables with ratios, and the choice."""
    import torch

    from flows.settings import PipelineSettings

    default = PipelineSettings.model_fields["torch_threads"].default
    base = fits[("0", "idle")]
    label = {"0": f"torch default ({torch.get_num_threads()})", "1": "1", "2": "2"}
    lines = [
        f"Command: `.venv/bin/python -m benchmarks.torch_threads --max-iter {max_iter} --write`; "
        f"{DATE.isoformat()}.",
        f"Machine: {os.cpu_count()} CPU cores ({platform.machine()}, shared with other jobs), "
        f"torch {torch.__version__} (cpu); 1-minute load average {load}.",
        "",
        f"Fit of the demo's `wines` (178 x 13, 25% missing), `TDMImputer` defaults, {max_iter} "
        "steps, one fresh process each; ratio: time over torch's default threads, idle.",
        "",
        "| torch threads | idle s | ratio | loaded s | ratio |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {label[t]} | {fits[(t, 'idle')]:.2f} | {fits[(t, 'idle')] / base:.2f} | "
            f"{fits[(t, 'loaded')]:.2f} | {fits[(t, 'loaded')] / base:.2f} |"
            for t in ("0", "1", "2")
        ),
        "",
        "Fit seconds of the same table (from `tdm_lineage`) through `tdm impute` and through a "
        f"run that `tdm run` triggers on `tdm serve`; before: `TDM_TORCH_THREADS=0`, after: the "
        f"default ({default}); ratio: time over `tdm impute` after, idle.",
        "",
        "| entry point | setting | idle s | ratio | loaded s | ratio |",
        "|---|---|---:|---:|---:|---:|",
    ]
    ref = runs[("tdm impute", "after", "idle")]
    for entry in ("tdm impute", "served run"):
        for setting in ("before", "after"):
            idle, loaded = runs[(entry, setting, "idle")], runs[(entry, setting, "loaded")]
            lines.append(
                f"| {entry} | {setting} | {idle:.2f} | {idle / ref:.2f} | {loaded:.2f} | "
                f"{loaded / ref:.2f} |"
            )
    speedup = {load: fits[("0", load)] / fits[(str(default), load)] for load in ("idle", "loaded")}
    served = {
        load: runs[("served run", "before", load)] / runs[("served run", "after", load)]
        for load in ("idle", "loaded")
    }
    parity = {
        load: runs[("served run", "after", load)] / runs[("tdm impute", "after", load)]
        for load in ("idle", "loaded")
    }
    lines += [
        "",
        f"Default chosen: {default} thread(s) (`TDM_TORCH_THREADS`, every entry point). Against "
        f"torch's default its fit is {speedup['idle']:.1f}x faster idle and "
        f"{speedup['loaded']:.1f}x faster beside the busy neighbour; a served run's fit is "
        f"{served['idle']:.1f}x (idle) and {served['loaded']:.1f}x (loaded) faster than before "
        f"the setting reached served runs, and takes {parity['idle']:.2f} (idle) and "
        f"{parity['loaded']:.2f} (loaded) times the fit of `tdm impute` with the same setting.",
    ]
    return "\n".join(lines)


def _fit_seconds(db: Path, target: str) -> float:
    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute(
            "SELECT fit_seconds FROM tdm_lineage WHERE target_table = ? "
            "ORDER BY finished_at DESC LIMIT 1",
            [target],
        ).fetchone()
    if row is None or row[0] is None:
        raise RuntimeError(f"no lineage row with a fit time for {target!r}")
    return float(row[0])


def _clean_environment(tmp: Path) -> dict[str, str]:
    """This environment without thread caps, TDM_* settings or a Prefect API."""
    drop = {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "PREFECT_API_URL"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("TDM_")}
    env.update(
        PREFECT_HOME=str(tmp / "prefect"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_RUNNER_POLL_FREQUENCY="1",
        PREFECT_FLOWS_DEFAULT_RETRIES="0",
    )
    return env


@contextlib.contextmanager
def _neighbour(active: bool) -> Iterator[None]:
    """A CPU-bound process beside the measurement, when `active`."""
    if not active:
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(1.0)
        yield
    finally:
        spinner.kill()
        spinner.wait()


@contextlib.contextmanager
def _served(tdm: str, env: dict[str, str], log: Path) -> Iterator[dict[str, str]]:
    """`tdm serve` on a free port with `env`; yields the environment of its clients."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    serve_env = {**env, "PREFECT_SERVER_API_PORT": str(port)}
    api = f"http://127.0.0.1:{port}/api"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [tdm, "serve"], env=serve_env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        _wait_until_served(api, process, log)
        yield {**env, "PREFECT_API_URL": api}
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def _wait_until_served(api: str, process: subprocess.Popen[bytes], log: Path) -> None:
    import httpx

    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"tdm serve exited: {log.read_text()}")
        with contextlib.suppress(httpx.HTTPError):
            response = httpx.get(f"{api}/deployments/name/impute-table/impute-table", timeout=2)
            if response.status_code == 200 and response.json().get("status") == "READY":
                return
        time.sleep(0.5)
    raise RuntimeError(f"tdm serve did not serve in time: {log.read_text()}")


if __name__ == "__main__":
    main()
