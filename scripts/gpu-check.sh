#!/usr/bin/env bash
# The GPU check: one command that a machine with an NVIDIA GPU and no network runs from a
# checkout plus the CUDA bundle (scripts/build-cuda.sh), inside one deadline. Steps, most
# valuable first, each with a time limit of its own (a hang or a slow compile cannot eat the
# rest; a step that no longer fits before the deadline is skipped and named):
#   1. engram selftest --backend cuda, cold   (an empty kernel cache: the cold start)
#   2. the same again, warm                    (the cache from step 1: the warm start)
#   3. engram bench train at the first rank    (Llama-3.1-8B's architecture, random bf16 weights,
#                                               batch 8 × 64, 16 labels: tok/s, MFU, memory, the
#                                               first step's seconds and kernels compiled)
#   4. PEFT on the same random model and ranks (--peft-script, default
#                                               ../shared/peers/peft_random_bench.py, run by
#                                               --peft-python; skipped without it)
#   5. engram bench train at the other ranks
#   6. the tiny memorization run on the backend and on the CPU (their exact match must agree)
#   7. engram bench generate at batch 1 and 16
#   8. engram selftest --backend wgpu          (where a Vulkan driver is present)
# Everything goes under --out DIR, as it is produced: gpu-check.json (every step's figures,
# rewritten after each step), gpu-check.log (every step's output), nvidia-smi.csv (utilization
# and memory every 250 ms, where nvidia-smi exists). A summary table is printed at the end; exit
# status 1 if a step failed or timed out.
#
#   scripts/gpu-check.sh [--engram PATH] [--backend cuda] [--arch CONFIG.json] [--dtype bf16]
#                        [--ranks 8,256,2048] [--out DIR] [--deadline 540] [--no-wgpu]
#                        [--peft-python PY] [--peft-script PATH] [--kernel-cache DIR]
#
# --engram: the bundle's launcher (default: dist/engram-cuda-*/engram, else `engram` on PATH).
# --kernel-cache: where the run keeps compiled kernels (default: an empty directory under --out's
# temporary work, so step 1 is a cold start). The CPU parts run anywhere: CI runs
#   scripts/gpu-check.sh --engram target/debug/engram --backend cpu \
#       --arch tests/fixtures/tiny-f32/config.json --dtype f32 --ranks 4,8 --no-wgpu --out DIR
set -uo pipefail
cd "$(dirname "$0")/.."

engram=""
backend=cuda
arch=configs/models/llama-3.1-8b-instruct.config.json
dtype=bf16
ranks=8,256,2048
out=gpu-check
deadline=540
wgpu=auto
peft_python=""
peft_script=../shared/peers/peft_random_bench.py
kcache=""
while [ $# -gt 0 ]; do
    case "$1" in
        --engram) engram="$2"; shift 2 ;;
        --backend) backend="$2"; shift 2 ;;
        --arch) arch="$2"; shift 2 ;;
        --dtype) dtype="$2"; shift 2 ;;
        --ranks) ranks="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --deadline) deadline="$2"; shift 2 ;;
        --no-wgpu) wgpu=no; shift ;;
        --peft-python) peft_python="$2"; shift 2 ;;
        --peft-script) peft_script="$2"; shift 2 ;;
        --kernel-cache) kcache="$2"; shift 2 ;;
        -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
        *) echo "gpu-check.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
if [ -z "$engram" ]; then
    engram=$(ls dist/engram-cuda-*/engram 2>/dev/null | head -1)
    [ -n "$engram" ] || engram=$(command -v engram || true)
fi
[ -x "$engram" ] || { echo "gpu-check.sh: no engram binary (build the bundle with scripts/build-cuda.sh, or pass --engram)" >&2; exit 2; }
if [ "$wgpu" = auto ]; then
    if ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json >/dev/null 2>&1; then wgpu=yes; else wgpu=no; fi
fi
mkdir -p "$out" || { echo "gpu-check.sh: cannot create --out $out" >&2; exit 2; }
work=$(mktemp -d)
smi_pid=""
trap '[ -n "$smi_pid" ] && kill "$smi_pid" 2>/dev/null; rm -rf "$work"' EXIT
export ENGRAM_KERNEL_CACHE="${kcache:-$work/kernels}"
log="$out/gpu-check.log"
: > "$log"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used,power.draw --format=csv \
        -lms 250 > "$out/nvidia-smi.csv" 2>/dev/null &
    smi_pid=$!
fi

steps=()      # JSON objects, one per step
summary=()    # "name|status|seconds|last line"
start_all=$(date +%s)
failed=0

json_text() { sed 's/\\/\\\\/g; s/"/\\"/g' | tr -d '\r\n'; }

# The JSON of every step so far (rewritten after each, so a killed run keeps what it measured).
write_json() {
    {
        echo "{"
        echo "  \"backend\": \"$backend\", \"architecture\": \"$arch\", \"dtype\": \"$dtype\","
        echo "  \"kernel_cache\": \"$ENGRAM_KERNEL_CACHE\", \"deadline_s\": $deadline,"
        echo "  \"seconds\": $(( $(date +%s) - start_all )),"
        echo "  \"steps\": ["
        local i sep
        for i in "${!steps[@]}"; do
            sep=","; [ "$i" -eq $(( ${#steps[@]} - 1 )) ] && sep=""
            echo "    ${steps[$i]}$sep"
        done
        echo "  ]"
        echo "}"
    } > "$out/gpu-check.json.tmp" && mv "$out/gpu-check.json.tmp" "$out/gpu-check.json"
}

# step NAME LIMIT_S JSON_FILE COMMAND...: runs COMMAND under LIMIT_S seconds (less if the
# deadline is nearer; skipped under 20 s), its output shown and logged; records the step.
step() {
    local name="$1" limit="$2" json="$3"; shift 3
    local left=$(( deadline - ($(date +%s) - start_all) ))
    [ "$limit" -le "$left" ] || limit=$left
    if [ "$limit" -lt 20 ]; then
        steps+=("{\"name\": \"$name\", \"status\": \"skipped\", \"why\": \"deadline\"}")
        summary+=("$name|skipped|0|no time left before the ${deadline} s deadline")
        write_json
        return
    fi
    local t0 t1 rc slog="$work/$(echo "$name" | tr ' /' '__').log"
    echo
    echo "=== $name (limit ${limit} s): $*" | tee -a "$log"
    t0=$(date +%s)
    timeout -k 5 "$limit" "$@" 2>&1 | tee "$slog" | tee -a "$log"
    rc=${PIPESTATUS[0]}
    t1=$(date +%s)
    local status=ok
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then status=timeout; failed=1
    elif [ "$rc" -ne 0 ]; then status=failed; failed=1; fi
    local result=null
    if [ -n "$json" ] && [ -s "$json" ]; then result=$(cat "$json"); fi
    local last
    last=$(grep -v '^\s*$' "$slog" | tail -n 1)
    steps+=("{\"name\": \"$name\", \"status\": \"$status\", \"exit\": $rc, \"seconds\": $((t1 - t0)), \"last_line\": \"$(echo "$last" | json_text)\", \"kernels_line\": \"$(grep '^GPU kernels: ' "$slog" | tail -n 1 | json_text)\", \"result\": $result}")
    summary+=("$name|$status|$((t1 - t0))|$last")
    write_json
}

step "selftest $backend cold" 150 "$work/selftest-cold.json" \
    "$engram" selftest --backend "$backend" --json "$work/selftest-cold.json"
if [ "$backend" != cpu ]; then
    step "selftest $backend warm" 60 "$work/selftest-warm.json" \
        "$engram" selftest --backend "$backend" --json "$work/selftest-warm.json"
fi

first_rank="${ranks%%,*}"
other_ranks="${ranks#*,}"; [ "$other_ranks" = "$ranks" ] && other_ranks=""
bench_train() {
    local tag="$1" r="$2"; shift 2
    step "bench train r $r$tag" 150 "$work/train-$r$tag.json" \
        "$engram" bench train --backend "$backend" --architecture "$arch" --random-weights \
        --dtype "$dtype" --ranks "$r" --batch 8 --seq-len 64 --label-len 16 --steps 10 \
        --warmup-steps 2 --json "$work/train-$r$tag.json" "$@"
}
bench_train "" "$first_rank"

if [ -n "$peft_python" ]; then
    if [ -f "$peft_script" ]; then
        step "peft random bench" 180 "$work/peft.json" \
            "$peft_python" "$peft_script" "$arch" --ranks "$ranks" --batch 8 \
            --seq 64 --labels 16 --steps 10 --warmup 2 --json "$work/peft.json"
    else
        steps+=("{\"name\": \"peft random bench\", \"status\": \"skipped\", \"why\": \"no $peft_script\"}")
        summary+=("peft random bench|skipped|0|no $peft_script (pass --peft-script)")
    fi
fi

IFS=',' read -ra rest <<< "$other_ranks"
for r in "${rest[@]}"; do bench_train "" "$r"; done

head -n 4 tests/fixtures/facts/synthetic-20.jsonl > "$work/facts4.jsonl"
memorize=(train --model tests/fixtures/tiny-f32 --facts "$work/facts4.jsonl" --rank 8 --epochs 60
          --lr 1e-2 --warmup-epochs 0 --constant-lr --dropout 0 --batch-size 4 --no-checkpoints
          --eval)
step "memorization cpu" 60 "" "$engram" "${memorize[@]}" --backend cpu --out "$work/memorize-cpu"
if [ "$backend" != cpu ]; then
    step "memorization $backend" 60 "" "$engram" "${memorize[@]}" --backend "$backend" \
        --out "$work/memorize-$backend"
fi

# The same training with the adapters' matmuls in bf16 (adapter_compute = "bf16").
bench_train " bf16-lora" "$first_rank" --adapter-compute bf16

step "bench generate" 90 "$work/generate.json" \
    "$engram" bench generate --backend "$backend" --dtype "$dtype" --architecture "$arch" \
    --random-weights --batch 1,16 --new-tokens 32 --prompt-len 64 --json "$work/generate.json"

if [ "$wgpu" = yes ]; then
    step "selftest wgpu" 150 "$work/selftest-wgpu.json" \
        "$engram" selftest --backend wgpu --json "$work/selftest-wgpu.json"
fi

# The memorization runs must agree on exact match.
em() { grep -o 'rephrased (trained) questions: [0-9]*/[0-9]*' "$work/memorization_$1.log" 2>/dev/null | awk '{print $NF}'; }
agree=true
if [ "$backend" != cpu ] && [ "$(em cpu)" != "$(em "$backend")" ]; then agree=false; failed=1; fi
steps+=("{\"name\": \"memorization exact match\", \"cpu\": \"$(em cpu)\", \"$backend\": \"$(em "$backend")\", \"agree\": $agree}")
write_json

echo
echo "=== summary ($(( $(date +%s) - start_all )) s; every figure in $out/gpu-check.json)" | tee -a "$log"
for s in "${summary[@]}"; do
    IFS='|' read -r name status secs last <<< "$s"
    printf '%-7s %-26s %5ss  %s\n' "$status" "$name" "$secs" "$last" | tee -a "$log"
done
if [ "$agree" != true ]; then
    echo "FAIL memorization: exact match $(em cpu) on cpu vs $(em "$backend") on $backend" | tee -a "$log"
fi
exit $failed
