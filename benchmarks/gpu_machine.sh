#!/usr/bin/env bash
# The project on a lent GPU machine that reaches no package index (its image has Python 3.12 with
# torch, NumPy, SciPy, scikit-learn, pandas, pytest and pytest-xdist).
#
#   bash benchmarks/gpu_machine.sh bundle   here: writes .gpu/ (about 55 MB, ignored by git;
#                                           carry it): the pinned packages
#                                           the image lacks, as one stripped archive, the lapjv
#                                           source, ../shared/datasets and py-spy (to read the
#                                           stacks of a stalled test run)
#   bash benchmarks/gpu_machine.sh run [SECONDS [PYTEST ARGS...]]
#                                           there: unpacks them, runs `benchmarks.cuda_vs_cpu --out
#                                           $OUT/gpu.md` (parts: $GPU_PARTS, in that order;
#                                           "none" skips it) for at most $GPU_BENCH_SECONDS
#                                           (default: half of SECONDS, default 570; agreement
#                                           tables: $GPU_TABLES), then the tests in $GPU_FIRST
#                                           alone, then pytest on CUDA (the whole suite, or
#                                           PYTEST ARGS) until SECONDS have passed since the
#                                           start. A test stops after 120 s with its threads'
#                                           stacks, so that a stuck one is named; when the log
#                                           stands still for 75 s, $OUT/stall.txt gets the
#                                           processes, the GPU's and py-spy's stacks of them
set -uo pipefail
cd "$(dirname "$0")/.."

# In the image already (2026-11): carrying another version of these would shadow it. pandas is
# carried all the same: the project needs pandas 3.
IN_IMAGE="annotated-doc anyio attrs certifi charset-normalizer click cloudpickle colorama contourpy
cycler execnet filelock fonttools fsspec h11 httpcore httpx humanize idna iniconfig jinja2 joblib
kiwisolver markdown markdown-it-py markupsafe matplotlib mdurl mpmath msgpack mypy-extensions
narwhals networkx numpy packaging pathspec pillow pluggy prometheus-client psutil pyarrow pygments
pytest pytest-timeout pytest-xdist python-dateutil pyyaml regex requests rich scikit-learn scipy
shellingham six sortedcontainers sympy threadpoolctl toolz tqdm typer typing-extensions
typing-inspect urllib3 zipp torch mypy ruff librt ast-serialize lapjv"

bundle() {
    local python=${PYTHON:-.venv/bin/python} work
    work=$(mktemp -d)
    mkdir -p .gpu
    grep -v '^#' constraints.txt | while IFS= read -r pin; do
        name=$(echo "${pin%%==*}" | tr 'A-Z_.' 'a-z--')
        [[ " $(echo $IN_IMAGE) " == *" $name "* ]] || echo "$pin"
    done >"$work/req.txt"
    local platforms=()
    for p in manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_24 \
        manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do
        platforms+=(--platform "${p}_x86_64")
    done
    "$python" -m pip install -q --no-deps --no-compile --only-binary=:all: --python-version 3.12 \
        --implementation cp "${platforms[@]}" --target "$work/site" -r "$work/req.txt" || return 1
    find "$work/site" -name '*.so*' -exec strip --strip-unneeded {} + 2>/dev/null
    find "$work/site" -type d -name tests -prune -exec rm -rf {} +
    tar -C "$work/site" -cf - . | xz -T0 -6 >.gpu/site.tar.xz
    "$python" -m pip download -q --no-deps --no-build-isolation --no-binary=:all: -d .gpu \
        "$(grep '^lapjv==' constraints.txt)" || return 1
    tar -C .. -cJf .gpu/shared.tar.xz shared/datasets
    "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux1_x86_64 -d .gpu py-spy==0.4.3 || return 1
    rm -rf "$work"
    du -sh .gpu
}

run() {
    local until=${1:-570} start=$SECONDS
    shift || true
    export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    mkdir -p /tmp/site /tmp/lap
    xz -dc .gpu/site.tar.xz | tar -C /tmp/site -xf - || return 1
    xz -dc .gpu/shared.tar.xz | tar -C /tmp -xf - || return 1
    ln -sfn /tmp/shared ../shared  # where the suite and the benchmarks look for the datasets
    python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/lap \
        .gpu/lapjv-*.tar.gz
    export PYTHONPATH="$PWD:/tmp/lap:/tmp/site"
    # Also for subprocesses that set PYTHONPATH themselves (after the image's packages there).
    local packages
    packages=$(python3 -c 'import site; print(site.getsitepackages()[0])')
    printf '/tmp/lap\n/tmp/site\n' >"$packages/tdm-gpu.pth"
    mkdir -p /tmp/bin && printf '#!/bin/sh\nexec python3 -m cli.main "$@"\n' >/tmp/bin/tdm
    chmod +x /tmp/bin/tdm && export PATH="/tmp/bin:$PATH"  # the `tdm` command, not installed
    if compgen -G '.gpu/py_spy-*.whl' >/dev/null; then
        python3 -m zipfile -e .gpu/py_spy-*.whl /tmp/pyspy && chmod +x /tmp/pyspy/*/scripts/py-spy
        ln -sfn /tmp/pyspy/*/scripts/py-spy /tmp/bin/py-spy
    fi
    echo "set up in $((SECONDS - start)) s"
    # The repeat part compares CUDA runs under deterministic algorithms, which cuBLAS allows
    # only with a fixed workspace; set for the benchmark's process alone.
    if [[ ${GPU_PARTS:-} != none ]]; then
        CUBLAS_WORKSPACE_CONFIG=:4096:8 timeout "${GPU_BENCH_SECONDS:-$((until / 2))}" \
            python3 -m benchmarks.cuda_vs_cpu --out "$OUT/gpu.md" \
            --parts "${GPU_PARTS:-steps,california,agreement,repeat}" \
            --tables "${GPU_TABLES:-concrete_slump,parkinsons,seeds,glass,blood_transfusion,california}"
        pkill -f 'benchmarks[.]cuda_vs_cpu --out|loky'  # what a stopped benchmark left (forest workers)
    fi
    if [[ -n ${GPU_FIRST:-} ]]; then
        echo "first, alone: $GPU_FIRST"
        # shellcheck disable=SC2086  # a list of test ids
        timeout $((until - SECONDS + start)) python3 -m pytest -p no:cacheprovider -p no:xdist \
            -rfEs -v --timeout=120 --timeout-method=thread $GPU_FIRST >"$OUT/first.log" 2>&1
        echo "first tests: exit $? after $((SECONDS - start)) s"
        tail -n 15 "$OUT/first.log"
    fi
    echo "pytest from $((SECONDS - start)) s"
    watch_for_stall "$OUT/suite.log" "$OUT/stall.txt" &
    local watcher=$!
    # A worker a core: `nproc` alone would count OMP_NUM_THREADS=1 and run one worker.
    timeout $((until - SECONDS + start)) python3 -m pytest -n "$(env -u OMP_NUM_THREADS nproc)" \
        -p no:cacheprovider \
        -rfE -v --timeout=120 --timeout-method=thread --durations=15 \
        --junitxml="$OUT/junit.xml" "$@" >"$OUT/suite.log" 2>&1
    echo "pytest: exit $? after $((SECONDS - start)) s"
    kill "$watcher" 2>/dev/null
    tail -n 40 "$OUT/suite.log"
    ps -eo pcpu,etimes,args --sort=-pcpu | head -n 8  # what else was running
}

# While LOG grows, nothing; once it has stood still for 75 s, what is running goes to REPORT:
# the processes with their states, the GPU's processes, and py-spy's stacks (Python and native)
# of every pytest process. At most three such reports.
watch_for_stall() {
    local log=$1 report=$2 size=-1 still=0 reports=0
    while ((reports < 3)); do
        sleep 15
        local now
        now=$(stat -c %s "$log" 2>/dev/null || echo 0)
        if [[ $now != "$size" ]]; then size=$now still=0; continue; fi
        still=$((still + 15))
        ((still >= 75)) || continue
        {
            echo "=== stalled at $(date -u +%T): the log has not grown for $still s"
            ps -eo pid,ppid,stat,pcpu,etimes,wchan:24,args --sort=pid | cut -c1-220
            nvidia-smi --query-compute-apps=pid,used_memory --format=csv
            if command -v py-spy >/dev/null; then
                for pid in $(pgrep -f 'pytest|prefect|uvicorn|distributed'); do
                    echo "--- py-spy dump --native --pid $pid"
                    timeout 20 py-spy dump --native --pid "$pid" 2>&1 | cut -c1-200 | head -n 80
                done
            fi
        } >>"$report" 2>&1
        reports=$((reports + 1)) still=0
    done
}

case "${1:-}" in
    bundle) bundle ;;
    run) shift; run "$@" ;;
    *) echo "usage: bash benchmarks/gpu_machine.sh {bundle|run [SECONDS [PYTEST ARGS...]]}" >&2
       exit 2 ;;
esac
