#!/usr/bin/env bash
# A reload of N workers pulled from a registry, with no tag moved: what each reload costs when
# it asks the registry about every reference (docs/deploy.md#figures).
#
#     cargo build --release
#     bench/reload/registry.sh [N] [MODULE.wasm]     # EDGEGATE=PATH for another binary
#
# Starts Debian's docker-registry on 127.0.0.1:5099, pushes MODULE under N repositories,
# serves N workers naming them by tag, and reloads five times. Prints each reload's `took`
# (ms), then the CPU time the gateway and the registry spent on those reloads.
set -euo pipefail
n=${1:-200}
root=$(cd "$(dirname "$0")/../.." && pwd)
edgegate=${EDGEGATE:-$root/target/release/edgegate}
module=${2:-$root/target/wasm-guests/wasm32-unknown-unknown/wasm/echo_json.opt.wasm}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
cd "$dir"
printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s/data\nhttp:\n  addr: 127.0.0.1:5099\n' "$dir" > registry.yml
docker-registry serve registry.yml > registry.log 2>&1 &
registry=$!
until curl -sf http://127.0.0.1:5099/v2/ > /dev/null; do sleep 0.1; done
{
    printf '[server]\nlisten = "127.0.0.1:18099"\nadmin = "127.0.0.1:19099"\n[runtime]\ncache_dir = "cache"\n'
    for i in $(seq "$n"); do
        "$edgegate" push "$module" "oci://127.0.0.1:5099/workers/w$i:live" > /dev/null
        printf '[workers.w%d]\nmodule = "oci://127.0.0.1:5099/workers/w%d:live"\n[[routes]]\npath = "/w%d"\nworker = "w%d"\n' "$i" "$i" "$i" "$i"
    done
} > edgegate.toml
EDGEGATE_ADMIN_TOKEN=bench-token-0123456789abcdef0123456789 "$edgegate" serve --config edgegate.toml > serve.log 2>&1 &
gateway=$!
until curl -sf http://127.0.0.1:19099/healthz > /dev/null; do sleep 0.1; done
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
g0=$(cpu $gateway) r0=$(cpu $registry)
for _ in 1 2 3 4 5; do
    curl -s -X POST -H 'authorization: Bearer bench-token-0123456789abcdef0123456789' http://127.0.0.1:19099/reload |
        python3 -c 'import json, sys; print("reload took %.0f ms" % json.load(sys.stdin)["took"])'
done
hz=$(getconf CLK_TCK)
echo "CPU over the 5 reloads of $n references: gateway $(( ($(cpu $gateway) - g0) * 1000 / hz )) ms, registry $(( ($(cpu $registry) - r0) * 1000 / hz )) ms"
