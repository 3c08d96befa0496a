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

setup() {
    local extras=$1
    if [ ! -x "$VENV/bin/python" ]; then
        "$PY" -m venv "$VENV"
        "$VENV/bin/pip" install -q --upgrade pip
    fi
    # The CPU build of torch (a local wheel on this machine kind); an unpinned torch would pull
    # a multi-GB CUDA build. pyproject.toml itself stays permissive (torch>=2.3).
    if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
        "$VENV/bin/pip" install -q "torch==2.13.0"
    fi
    # Reinstall only when pyproject.toml or the extras changed (CI calls setup several times).
    local stamp="$VENV/.rayform-$(printf '%s' "$extras" | tr ',' '-')"
    local digest
    digest=$(sha256sum pyproject.toml | cut -d' ' -f1)
    if [ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]; then
        "$VENV/bin/pip" install -q -e ".[$extras]"
        echo "$digest" > "$stamp"
    fi
}

case "${1:-}" in
    demo)
        setup "torch,video,image,fastjpeg"
        shift
        exec "$VENV/bin/rayform" demo "$@"
        ;;
    test)
        setup "torch,video,image,fastjpeg,rerun,mcap,s3,ray,dev"
        shift
        exec "$VENV/bin/python" -m pytest "$@"
        ;;
    lint)
        setup "torch,video,image,fastjpeg,rerun,mcap,s3,ray,dev"
        "$VENV/bin/ruff" check rayform tests benchmarks
        "$VENV/bin/lint-imports" --no-cache
        exec "$VENV/bin/mypy"
        ;;
    bench)
        setup "torch,video,image,fastjpeg,rerun,mcap,s3,ray,dev"
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
