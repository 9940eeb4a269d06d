#!/usr/bin/env bash
# Runs the demo on a fresh machine: installs what it needs into .venv first, then `mssr-hf demo` (offline, CPU).
# Extra arguments go to `mssr-hf demo` (e.g. --quick).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup-env.sh"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec "$root/.venv/bin/mssr-hf" demo "$@"
