#!/usr/bin/env bash
# The GPU check: one command that a machine with an NVIDIA GPU and no network runs from a
# checkout plus the CUDA bundle (scripts/build-cuda.sh), in a few minutes:
#   1. engram selftest --backend cuda        (logits vs transformers, batching, a LoRA step and
#                                             AdamW steps vs CPU)
#   2. the tiny memorization run on cuda      (engram train --eval, against the same run on CPU)
#   3. engram bench train on Llama-3.1-8B's architecture, random bf16 weights, ranks 8, 256 and
#      2048, batch 8 of EnronQA-length examples (64 tokens, 16 labels): tokens/s, MFU, memory
#      (and the first rank again with the adapters' matmuls in bf16, --adapter-compute bf16)
#   4. engram bench generate on the same architecture at batch 1 and 16
#   5. engram selftest --backend wgpu         (where a Vulkan driver is present)
# Every figure goes into one JSON file; a summary table is printed at the end. Exit status 1 if
# any step failed.
#
#   scripts/gpu-check.sh [--engram PATH] [--backend cuda] [--arch CONFIG.json] [--dtype bf16]
#                        [--ranks 8,256,2048] [--out gpu-check.json] [--no-wgpu]
#
# --engram: the bundle's launcher (default: dist/engram-cuda-*/engram, else `engram` on PATH).
# The CPU parts run anywhere: CI runs
#   scripts/gpu-check.sh --engram target/debug/engram --backend cpu \
#       --arch tests/fixtures/tiny-f32/config.json --dtype f32 --ranks 4,8 --no-wgpu
set -uo pipefail
cd "$(dirname "$0")/.."

engram=""
backend=cuda
arch=configs/models/llama-3.1-8b-instruct.config.json
dtype=bf16
ranks=8,256,2048
out=gpu-check.json
wgpu=auto
while [ $# -gt 0 ]; do
    case "$1" in
        --engram) engram="$2"; shift 2 ;;
        --backend) backend="$2"; shift 2 ;;
        --arch) arch="$2"; shift 2 ;;
        --dtype) dtype="$2"; shift 2 ;;
        --ranks) ranks="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --no-wgpu) wgpu=no; shift ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
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

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
steps=()      # JSON objects, one per step
summary=()    # "name|ok|seconds|figure"
start_all=$(date +%s)

# run NAME FIGURE_CMD -- COMMAND...: runs COMMAND (its output shown and kept), records the step.
step() {
    local name="$1" json="$2"; shift 2
    local t0 t1 rc log="$work/$(echo "$name" | tr ' /' '__').log"
    echo
    echo "=== $name: $*"
    t0=$(date +%s)
    "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    t1=$(date +%s)
    local ok=true
    [ "$rc" -eq 0 ] || ok=false
    local result=null
    if [ -n "$json" ] && [ -s "$json" ]; then result=$(cat "$json"); fi
    local tail_text
    tail_text=$(tail -n 1 "$log" | sed 's/\\/\\\\/g; s/"/\\"/g' | tr -d '\r')
    steps+=("{\"name\": \"$name\", \"ok\": $ok, \"exit\": $rc, \"seconds\": $((t1 - t0)), \"last_line\": \"$tail_text\", \"result\": $result}")
    summary+=("$name|$ok|$((t1 - t0))|$(tail -n 1 "$log")")
}

step "selftest $backend" "$work/selftest.json" \
    "$engram" selftest --backend "$backend" --json "$work/selftest.json"

head -n 4 tests/fixtures/facts/synthetic-20.jsonl > "$work/facts4.jsonl"
memorize() {
    "$engram" train --backend "$1" --model tests/fixtures/tiny-f32 --facts "$work/facts4.jsonl" \
        --out "$work/memorize-$1" --rank 8 --epochs 60 --lr 1e-2 --warmup-epochs 0 \
        --constant-lr --dropout 0 --batch-size 4 --no-checkpoints --eval
}
step "memorization cpu" "" memorize cpu
if [ "$backend" != cpu ]; then
    step "memorization $backend" "" memorize "$backend"
fi

step "bench train" "$work/train.json" \
    "$engram" bench train --backend "$backend" --architecture "$arch" --random-weights \
    --dtype "$dtype" --ranks "$ranks" --batch 8 --seq-len 64 --label-len 16 --steps 10 \
    --warmup-steps 2 --json "$work/train.json"

# The same with the adapters' matmuls in bf16 (adapter_compute = "bf16"), at the first rank.
step "bench train bf16-lora" "$work/train-bf16.json" \
    "$engram" bench train --backend "$backend" --architecture "$arch" --random-weights \
    --dtype "$dtype" --ranks "${ranks%%,*}" --batch 8 --seq-len 64 --label-len 16 --steps 10 \
    --warmup-steps 2 --adapter-compute bf16 --json "$work/train-bf16.json"

step "bench generate" "$work/generate.json" \
    "$engram" bench generate --backend "$backend" --dtype "$dtype" --architecture "$arch" \
    --random-weights --batch 1,16 --new-tokens 32 --prompt-len 64 --json "$work/generate.json"

if [ "$wgpu" = yes ]; then
    step "selftest wgpu" "$work/selftest-wgpu.json" \
        "$engram" selftest --backend wgpu --json "$work/selftest-wgpu.json"
fi

# The memorization runs must agree on exact match.
em() { grep -o 'rephrased (trained) questions: [0-9]*/[0-9]*' "$work/memorization_$1.log" 2>/dev/null | awk '{print $NF}'; }
agree=true
if [ "$backend" != cpu ] && [ "$(em cpu)" != "$(em "$backend")" ]; then agree=false; fi

{
    echo "{"
    echo "  \"backend\": \"$backend\", \"architecture\": \"$arch\", \"dtype\": \"$dtype\","
    echo "  \"seconds\": $(( $(date +%s) - start_all )),"
    if [ "$backend" = cpu ]; then
        echo "  \"memorization_exact_match\": {\"cpu\": \"$(em cpu)\"},"
    else
        echo "  \"memorization_exact_match\": {\"cpu\": \"$(em cpu)\", \"$backend\": \"$(em "$backend")\", \"agree\": $agree},"
    fi
    echo "  \"steps\": ["
    for i in "${!steps[@]}"; do
        sep=","; [ "$i" -eq $(( ${#steps[@]} - 1 )) ] && sep=""
        echo "    ${steps[$i]}$sep"
    done
    echo "  ]"
    echo "}"
} > "$out"

echo
echo "=== summary ($(( $(date +%s) - start_all )) s; every figure in $out)"
failed=0
for s in "${summary[@]}"; do
    IFS='|' read -r name ok secs last <<< "$s"
    [ "$ok" = true ] || failed=1
    printf '%-4s %-22s %5ss  %s\n' "$([ "$ok" = true ] && echo ok || echo FAIL)" "$name" "$secs" "$last"
done
if [ "$agree" != true ]; then
    echo "FAIL memorization: exact match $(em cpu) on cpu vs $(em "$backend") on $backend"
    failed=1
fi
exit $failed
