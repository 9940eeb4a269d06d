#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: installs what it needs into .venv first (fast when already
# installed), then runs pytest offline on the CPU. Extra arguments go to pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup-env.sh"
cd "$root"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
exec "$root/.venv/bin/python" -m pytest "$@"
