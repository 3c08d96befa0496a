#!/usr/bin/env bash
# One-command set-up and tasks for rayform development.
#   ./dev.sh demo    create .venv, install rayform, write the demo catalog and print its summary
#   ./dev.sh test    create .venv, install rayform with every extra and dev tools, run all tests
#   ./dev.sh lint    ruff + import contracts (import-linter) + mypy strict
#   ./dev.sh bench   run every benchmark (quick mode with BENCH_QUICK=1)
set -euo pipefail
cd "$(dirname "$0")"
VENV=${RAYFORM_VENV:-.venv}
PY=${PYTHON:-python3}

say() { echo "dev.sh: $*" >&2; }
# pip's own progress (what it downloads and builds) in a terminal; one line per stage elsewhere.
if [ -t 2 ]; then PIP_OUT=(--progress-bar on); else PIP_OUT=(-q); fi

setup() {
    local extras=$1
    if [ ! -x "$VENV/bin/python" ]; then
        say "creating the virtual environment $VENV (about 10 s) …"
        "$PY" -m venv "$VENV"
        "$VENV/bin/pip" install "${PIP_OUT[@]}" --upgrade pip
    fi
    # The CPU build of torch: an unpinned torch from PyPI would pull a multi-GB CUDA build on
    # Linux. Here torch==2.13.0 resolves to a local CPU wheel; elsewhere set
    # TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu. pyproject.toml stays permissive.
    if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
        say "installing torch (CPU build; about a minute) …"
        if [ -n "${TORCH_INDEX_URL:-}" ]; then
            "$VENV/bin/pip" install "${PIP_OUT[@]}" torch --index-url "$TORCH_INDEX_URL"
        else
            "$VENV/bin/pip" install "${PIP_OUT[@]}" "torch==2.13.0"
        fi
    fi
    # Reinstall only when pyproject.toml or the extras changed (CI calls setup several times).
    local stamp="$VENV/.rayform-$(printf '%s' "$extras" | tr ',' '-')"
    local digest
    digest=$(sha256sum pyproject.toml | cut -d' ' -f1)
    if [ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]; then
        say "installing rayform[$extras] (editable) and its dependencies (about 1-2 minutes) …"
        "$VENV/bin/pip" install "${PIP_OUT[@]}" -e ".[$extras]"
        echo "$digest" > "$stamp"
        say "installed; the rayform command is $VENV/bin/rayform"
    fi
}

case "${1:-}" in
    demo)
        setup "torch,image,fastjpeg,rerun"
        shift
        say "writing the demo catalog (about 30 s for 4 episodes) …"
        exec "$VENV/bin/rayform" demo "$@"
        ;;
    test)
        setup "torch,video,image,fastjpeg,rerun,mcap,rosbag,rlds,zarr,hdf5,ulog,s3,ray,plot,ui,dev"
        shift
        say "running the tests (about 15 minutes on 2 cores; -x stops at the first failure) …"
        exec "$VENV/bin/python" -m pytest "$@"
        ;;
    lint)
        setup "torch,video,image,fastjpeg,rerun,mcap,rosbag,rlds,zarr,hdf5,ulog,s3,ray,plot,ui,dev"
        "$VENV/bin/ruff" check rayform tests benchmarks conftest.py
        "$VENV/bin/lint-imports" --no-cache
        exec "$VENV/bin/mypy"
        ;;
    bench)
        setup "torch,video,image,fastjpeg,rerun,mcap,rosbag,rlds,zarr,hdf5,ulog,s3,ray,plot,ui,dev"
        shift
        for b in benchmarks/bench_*.py; do
            echo "== $b"
            "$VENV/bin/python" "$b" "$@"
        done
        ;;
    *)
        echo "usage: ./dev.sh demo|test|lint|bench" >&2
        exit 2
        ;;
esac
