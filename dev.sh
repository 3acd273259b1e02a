#!/usr/bin/env bash
# One entry point for newcomers and CI:
#   ./dev.sh demo   create .venv/, install everything (pinned), build a demo warehouse and impute it
#   ./dev.sh test   create .venv/, install everything (pinned), run the test suite
#   ./dev.sh setup  only create .venv/ and install
# Any further arguments are passed on (to `tdm demo` or to pytest).
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3}
VENV=.venv
STAMP="$VENV/.installed"

die() { echo "dev.sh: $*" >&2; exit 1; }

setup() {
    "$PYTHON" - <<'PY' || die "Python >= 3.11 is needed (found $("$PYTHON" --version 2>&1)); set PYTHON=/path/to/python3.11"
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY
    # the version too: an editable install records it in its metadata when installed
    want=$(cat pyproject.toml constraints.txt tdm/_version.py | sha256sum | cut -c1-16)
    if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
        return 0
    fi
    [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    guard_cuda
    echo "dev.sh: installing tdm-impute and its pinned dependencies into $VENV/ ..."
    "$VENV/bin/python" -m pip install --quiet -c constraints.txt -e '.[pipeline,dev]'
    echo "$want" > "$STAMP"
}

# On a machine without an NVIDIA GPU, refuse an install that would pull CUDA packages (gigabytes)
# because no CPU build of the pinned torch is reachable. TDM_ALLOW_CUDA=1 overrides.
guard_cuda() {
    if command -v nvidia-smi >/dev/null 2>&1 || [[ "${TDM_ALLOW_CUDA:-0}" == 1 ]]; then
        return 0
    fi
    if "$VENV/bin/python" -c "import torch" 2>/dev/null; then
        return 0
    fi
    local report
    report=$(mktemp)
    "$VENV/bin/python" -m pip install --quiet --dry-run --ignore-installed --report "$report" \
        -c constraints.txt 'torch==2.13.0' >/dev/null
    if "$VENV/bin/python" - "$report" <<'PY'
import json, sys
items = json.load(open(sys.argv[1]))["install"]
cuda = [i["metadata"]["name"] for i in items if i["metadata"]["name"].lower().startswith("nvidia-")]
sys.exit(1 if cuda else 0)
PY
    then
        rm -f "$report"
    else
        rm -f "$report"
        die "this machine has no NVIDIA GPU, but the reachable torch 2.13.0 build would pull CUDA packages.
Point pip at PyTorch's CPU wheel index (PIP_EXTRA_INDEX_URL), or set TDM_ALLOW_CUDA=1 to install them anyway."
    fi
}

workers() {
    local cores
    cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
    echo $(( cores + 1 < 4 ? cores + 1 : 4 ))
}

cmd=${1:-}
[[ $# -gt 0 ]] && shift
case "$cmd" in
    setup) setup ;;
    demo) setup; exec "$VENV/bin/tdm" demo "$@" ;;
    # pytest-xdist workers: one more than the cores (much of the suite waits on Prefect servers
    # and `tdm` processes), at most 4. xdist's loadgroup scheduler hands each worker one more
    # test whenever it has two or fewer queued, instead of chunks of consecutive tests (a chunk
    # of long tests on one worker ends the run alone); tests marked `xdist_group` run on one worker
    # (the served deployments; the tests sharing a baseline's fit). `-n 0` after `test`
    # runs in one.
    test) setup; exec "$VENV/bin/python" -m pytest -n "$(workers)" --dist loadgroup "$@" ;;
    *) die "usage: ./dev.sh {demo|test|setup} [args...]" ;;
esac
