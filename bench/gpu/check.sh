#!/usr/bin/env bash
# The GPU checks of issue 16, as one bounded script for a fresh GPU machine (the device tool's H200; prepare
# .gpu/ here first with bench/gpu/prepare.sh and carry it). Each part has its own time limit and the next
# runs whatever the last did; every result is JSON under $OUT:
#   devices.txt   what `fsm devices` finds
#   kernels.json  every CUDA kernel against a reference on real models, f32 (TF32 off) and bf16 operands
#   parity.json   gpt-tiny and mlp plans (1 device, 2 pipelined, FSDP over 2) 10 steps on cuda vs the CPU
#   gpt2.json     gpt2-124m bf16 on one GPU, batch 8 × 1024: step time, tokens/s, MFU, device memory vs plan,
#                 and a traced step's time by op (where to look first)
#   pytorch.json  PyTorch's step on the same model, batch and machine: eager and torch.compile
#   check.log     progress, stderr of every part, nvidia-smi
# DEVICE=simt runs the same parts on the emulated CUDA device at toy sizes: a rehearsal of this script on a
# machine without a GPU (its figures mean nothing).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/bench/gpu/out}
mkdir -p "$OUT"
LOG="$OUT/check.log"
log() { echo "[$(date +%T)] $*" >>"$LOG"; echo "$*"; }
part() {  # part NAME SECONDS COMMAND...: stdout to $OUT/NAME, stderr to the log, a time limit
  local name=$1 limit=$2; shift 2
  log "== $name (limit ${limit}s)"
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >"$OUT/$name" 2>>"$LOG"
  log "== $name: exit $? after $((SECONDS - t0))s"
}

# Node.js and the compiled TypeScript, carried.
if ! command -v node >/dev/null; then
  mkdir -p /tmp/node-bin && xz -dc .gpu/node.xz >/tmp/node-bin/node && chmod +x /tmp/node-bin/node
  export PATH=/tmp/node-bin:$PATH
fi
[ -e node_modules ] || ln -s .gpu/node_modules node_modules
[ -e dist ] || cp -r .gpu/dist dist
log "node $(node --version)"

# cuBLAS (and NCCL) from PyTorch's wheels: fsm loads them at run time.
NV=$(python3 -c "import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))" 2>/dev/null)/nvidia
export LD_LIBRARY_PATH=$(find "$NV" -maxdepth 3 -type d -name lib 2>/dev/null | tr '\n' ':')${LD_LIBRARY_PATH:-}

DEVICE=${DEVICE:-cuda}
if [ "$DEVICE" = simt ]; then SIZES=(small 1 1 8); else SIZES=(all 12 8 1024); fi

# The addon: the one built here for sm_90 if it loads and sees the GPU; else build it on this machine.
export FSM_NATIVE_PATH=$PWD/.gpu/addon/fsm_native.node
if [ "$DEVICE" = simt ]; then
  log "rehearsal on the emulated device"
elif ! node -e 'const b = require(process.env.FSM_NATIVE_PATH); const k = b.gpuKind("cuda"); if (!k || k.devices < 1) process.exit(1)' 2>>"$LOG"; then
  log "the carried addon does not load or sees no GPU: building here"
  cmake -S native -B /tmp/fsm-build -G Ninja -DCMAKE_JS_VERSION=8.0.0 "-DCMAKE_JS_INC=$PWD/node_modules/node-api-headers/include;$PWD/node_modules/node-addon-api" \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DFSM_BLAS=fallback -DFSM_MPI=OFF -DCMAKE_BUILD_TYPE=Release >>"$LOG" 2>&1 && cmake --build /tmp/fsm-build -j16 >>"$LOG" 2>&1
  export FSM_NATIVE_PATH=/tmp/fsm-build/fsm_native.node
fi
part devices.txt 30 node bin/fsm.js devices
part kernels.json 110 node dist/bench/gpu/check-kernels.js "$DEVICE" "${SIZES[0]}"
part parity.json 90 node dist/bench/gpu/check-parity.js "$DEVICE" 10
part gpt2.json "$([ "$DEVICE" = simt ] && echo 400 || echo 120)" node dist/bench/gpu/check-gpt2.js "$DEVICE" "${SIZES[1]}" "${SIZES[2]}" "${SIZES[3]}"
FLOPS=$(node -e 'try { console.log(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).flopsPerStep) } catch { console.log(0) }' "$OUT/gpt2.json")
PEAK=$(node -e 'import("./dist/src/cost/cluster.js").then((m) => console.log(m.getProfile("h200").peakFlops.bf16))')
part pytorch.json 150 python3 bench/gpu/pytorch_gpt2.py "{\"batch\": ${SIZES[2]}, \"seq\": ${SIZES[3]}, \"steps\": ${SIZES[1]}, \"flopsPerStep\": ${FLOPS:-0}, \"peakFlops\": ${PEAK:-0}, \"modes\": [\"eager\", \"compile\"]}"
nvidia-smi >>"$LOG" 2>&1
log "done in ${SECONDS}s"
