#!/usr/bin/env bash
# Prepares .gpu/ (git-ignored through .git/info/exclude) for bench/gpu/check.sh on the device tool's GPU
# machine, which has no Node.js and no network: this machine's node binary (xz), the runtime packages, the
# compiled TypeScript (dist/), and the addon built here with nvcc for Hopper (sm_90; the portable sgemm and no
# MPI, so it needs only the C and C++ runtimes there). Carry it: run(command, carry: [".gpu"]).
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
rm -rf .gpu && mkdir -p .gpu/node_modules
xz -T2 -6 -c "$(command -v node)" > .gpu/node.xz
npx tsc -p tsconfig.build.json
cp -r dist .gpu/dist
# What dist needs at run time, and the headers a build there would need.
for p in chevrotain @chevrotain lodash-es @dagrejs node-addon-api node-api-headers; do cp -r "node_modules/$p" .gpu/node_modules/; done
cmake -S native -B .gpu/build -G Ninja -DCMAKE_JS_VERSION=8.0.0 "-DCMAKE_JS_INC=$PWD/node_modules/node-api-headers/include;$PWD/node_modules/node-addon-api" \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DFSM_BLAS=fallback -DFSM_MPI=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build .gpu/build -j"$(nproc)" >/dev/null
mkdir -p .gpu/addon && cp .gpu/build/fsm_native.node .gpu/addon/ && rm -rf .gpu/build
du -sh .gpu
