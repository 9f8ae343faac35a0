#!/usr/bin/env bash
# Installs what the parity tests need beyond the build: Debian's torch and numpy, and a venv
# (.cache/hfvenv) with the pinned transformers / tokenizers / safetensors / peft / tensorboard of
# tests/reference/requirements.txt (its lines marked `# no-deps` are installed without their
# dependencies: see the comment there). Idempotent: returns at once when everything is in place.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.cache/hfvenv"
reqs="$root/tests/reference/requirements.txt"

packages=(python3 python3-venv python3-torch python3-numpy python3-yaml python3-psutil)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-test-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The venv is rebuilt when the requirements change (their copy inside it is the stamp).
if [ -x "$venv/bin/python" ] && cmp -s "$reqs" "$venv/requirements.txt"; then
  echo "install-test-deps: $venv up to date"
  exit 0
fi
rm -rf "$venv"
/usr/bin/python3 -m venv --system-site-packages "$venv"
no_deps_reqs="$venv/requirements-no-deps.txt"
grep -v 'no-deps' "$reqs" > "$venv/requirements-with-deps.txt"
grep '^[^#].*# *no-deps' "$reqs" | sed 's/ *#.*//' > "$no_deps_reqs"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$venv/requirements-with-deps.txt"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$no_deps_reqs"
"$venv/bin/python" -c "import torch, transformers, tokenizers, safetensors, peft
from tensorboard.backend.event_processing import event_accumulator"
cp "$reqs" "$venv/requirements.txt"
echo "install-test-deps: $venv ready ($("$venv/bin/python" -c 'import transformers, peft; print("transformers", transformers.__version__, "peft", peft.__version__)'))"
