#!/usr/bin/env bash
# Runs the README's test command on another Node.js major (22, 24, …) without installing it: the
# registry's node-<platform>-<arch> package holds the official binary, unpacked into a temporary
# folder and put first on PATH for this run only. CI runs the Node.js of the machine (20 here).
set -euo pipefail
major=${1:?usage: pnpm test:node MAJOR (e.g. 24)}
package="node-$(node -p 'process.platform + "-" + process.arch')"
version=$(npm view "$package@$major" version | tail -n 1 | awk '{print $NF}' | tr -d "'")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
(cd "$dir" && npm pack --silent "$package@$version" >/dev/null && tar xzf ./*.tgz)
export PATH="$dir/package/bin:$PATH"
echo "node $(node --version)"
cd "$(dirname "$0")/.."
pnpm install --frozen-lockfile && pnpm test
