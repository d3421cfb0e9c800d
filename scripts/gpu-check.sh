#!/usr/bin/env bash
# The GPU check: one command that a machine with an NVIDIA GPU and no network runs from a
# checkout plus the CUDA bundle (scripts/build-cuda.sh), inside one deadline. Steps, most
# valuable first, each with a time limit of its own (a hang or a slow compile cannot eat the
# rest; a step that no longer fits before the deadline is skipped and named):
#   1. engram selftest --backend cuda, cold, with the first kernel compiler of --compilers
#      (default llvm: CUBECL_CUDA_COMPILER), an empty kernel cache, 150 s, and autotune's
#      candidates compiled ahead on the host's other cores (ENGRAM_CUDA_COMPILE_AHEAD=on, off by
#      default until a GPU has shown that it works and pays). Where it ran to its report, the
#      rest of the run compiles ahead too; where it crashed or hung, the selftest runs cold again
#      with every kernel compiled on the device's thread (200 s; on an H200 that took 152 s,
#      before the selftest checked RoPE and attention in bf16 too), and so does the rest
#   2. the same again, warm                    (the cache from step 1: the warm start)
#   3. PEFT on the same random model and ranks (--peft-script, default
#                                               ../shared/peers/peft_random_bench.py, run by
#                                               --peft-python; skipped without it)
#   4. engram bench train at the first rank    (Llama-3.1-8B's architecture, random bf16 weights,
#                                               batch 8 × 64, 16 labels: tok/s, MFU, memory, the
#                                               first step's seconds and kernels compiled, where
#                                               the step's device time goes)
#   5. engram bench train at the first rank again, in a new process (the warm first step), and
#      then with --graph: the step captured once as a CUDA graph and replayed, beside the same
#      step run eagerly (their losses compared step by step)
#   6. the tiny memorization run on the backend and on the CPU (their exact match must agree), and
#      the backend's adapter loaded by PEFT (peft_check_adapter.py beside --peft-script); then the
#      same facts one per step with --graph (the run's step captured once and replayed; the CPU
#      runs the same step eagerly), whose exact match must agree too
#   7. where step 1 compiled ahead: the selftest cold again, every kernel compiled on the
#      device's thread, on an empty cache of its own (what compiling ahead bought step 1)
#   8. engram bench matmul                     (each matrix product of the 8B step, timed on the
#                                               device, beside torch's on the same shapes when
#                                               --peft-python is given; skinny products also
#                                               split along k)
#   9. engram bench matmul with each other compiler of --compilers (llvm,nvrtc compares the two:
#      an empty cache each, so its compile speed, and its kernels' speed on the same products;
#      NVRTC is looked for on the machine — a CUDA toolkit, or the nvidia-cuda-nvrtc wheel beside
#      torch — and skipped, named, where there is none)
#      Then the same with each CubeCL autotune level of --autotune-levels (default none; e.g.
#      minimal,extensive: CUBECL_AUTOTUNE_LEVEL, an empty cache each): what a cheaper or a
#      fuller autotune costs in compiling and gives in kernel speed
#  10. at each other rank: engram bench matmul on the adapters' products alone (each one's warm-up
#      is its compile and autotune time), then engram bench train; then bench train at the first
#      rank with bf16 adapter products
#  11. engram bench generate at batch 1 and 16
#  12. engram selftest --backend cuda with ENGRAM_TF32=off (f32 matmuls kept in f32: checked to
#                                               f32's tolerances; its own autotune results)
#  13. engram selftest --backend wgpu, twice   (where a Vulkan driver is present, or --wgpu;
#                                               --vulkan-deb DEB: Debian's libvulkan1 package,
#                                               unpacked when the machine has no libvulkan.so.1);
#      then cold again with CUBECL_COMPILE_THREADS=0 (every kernel compiled on the device's
#      thread: what compiling autotune's candidates ahead bought the first run); where the first
#      fails (a driver that refuses CubeCL's SPIR-V), once with CUBECL_WGPU_COMPILER=wgsl instead
#      of the other two
# Everything goes under --out DIR, as it is produced: gpu-check.json (every step's figures,
# rewritten after each step), gpu-check.log (every step's output), nvidia-smi.csv (utilization
# and memory every 250 ms, where nvidia-smi exists). A summary table is printed at the end; exit
# status 1 if a step failed or timed out. The JSON names the binary and, from the bundle's
# BUILD-INFO, the commit it was built from.
#
#   scripts/gpu-check.sh [--engram PATH] [--backend cuda] [--arch CONFIG.json] [--dtype bf16]
#                        [--ranks 8,256,2048] [--out DIR] [--deadline 540] [--no-wgpu|--wgpu]
#                        [--peft-python PY] [--peft-script PATH] [--kernel-cache DIR]
#                        [--compilers llvm] [--autotune-levels minimal] [--vulkan-deb DEB]
#
# --engram: the bundle's launcher (default: dist/engram-cuda-*/engram, else `engram` on PATH).
# --kernel-cache: where the run keeps compiled kernels (default: empty directories under the run's
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
compilers=llvm
vulkan_deb=""
autotune_levels=""
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
        --wgpu) wgpu=yes; shift ;;
        --peft-python) peft_python="$2"; shift 2 ;;
        --peft-script) peft_script="$2"; shift 2 ;;
        --kernel-cache) kcache="$2"; shift 2 ;;
        --compilers) compilers="$2"; shift 2 ;;
        --vulkan-deb) vulkan_deb="$2"; shift 2 ;;
        --autotune-levels) autotune_levels="$2"; shift 2 ;;
        -h|--help) awk 'NR > 1 { if (!/^#/) exit; print }' "$0"; exit 0 ;;
        *) echo "gpu-check.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
if [ -z "$engram" ]; then
    engram=$(ls dist/engram-cuda-*/engram 2>/dev/null | head -1)
    [ -n "$engram" ] || engram=$(command -v engram || true)
fi
[ -x "$engram" ] || { echo "gpu-check.sh: no engram binary (build the bundle with scripts/build-cuda.sh, or pass --engram)" >&2; exit 2; }
if [ "$wgpu" = auto ]; then
    wgpu=no
    for icd in /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json; do
        [ -f "$icd" ] && wgpu=yes
    done
fi
mkdir -p "$out" || { echo "gpu-check.sh: cannot create --out $out" >&2; exit 2; }
work=$(mktemp -d)
smi_pid=""
trap '[ -n "$smi_pid" ] && kill "$smi_pid" 2>/dev/null; rm -rf "$work"' EXIT
kernels_root="${kcache:-$work/kernels}"
export ENGRAM_KERNEL_CACHE="$kernels_root"
log="$out/gpu-check.log"
: > "$log"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used,power.draw --format=csv \
        -lms 250 > "$out/nvidia-smi.csv" 2>/dev/null &
    smi_pid=$!
fi

# The commit the bundle was built from (its BUILD-INFO; `-dirty` with local changes), for the
# figures' provenance.
build_info="$(dirname "$engram")/BUILD-INFO"
engram_commit=$(sed -n 's/^commit=//p' "$build_info" 2>/dev/null)
grep -qx 'dirty=true' "$build_info" 2>/dev/null && engram_commit="$engram_commit-dirty"
echo "engram: $engram${engram_commit:+ (built from $engram_commit)}" | tee -a "$log"

steps=()      # JSON objects, one per step
summary=()    # "name|status|seconds|last line"
start_all=$(date +%s)
failed=0

json_text() { sed 's/\\/\\\\/g; s/"/\\"/g' | tr -d '\r\n'; }

# The JSON of every step so far (rewritten after each, so a killed run keeps what it measured).
write_json() {
    {
        echo "{"
        echo "  \"engram\": \"$(echo "$engram" | json_text)\", \"engram_commit\": \"$engram_commit\","
        echo "  \"backend\": \"$backend\", \"architecture\": \"$arch\", \"dtype\": \"$dtype\","
        echo "  \"kernel_cache\": \"$kernels_root\", \"deadline_s\": $deadline,"
        echo "  \"cuda_compiler\": \"${CUBECL_CUDA_COMPILER:-}\", \"nvrtc\": \"${nvrtc_lib:-}\", \"nvrtc_headers\": \"${nvrtc_headers:-}\","
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

# Kernels a step's output says it compiled: its end-of-command line, else (a step killed at its
# limit) the last of the plain progress lines printed every 15 s; 0 where it says nothing.
kernels_seen() {
    local n
    n=$({ grep -o '^GPU kernels: [0-9]*' "$1"; grep -o 'compiling GPU kernels: [0-9]*' "$1"; } 2>/dev/null \
        | grep -o '[0-9]*$' | sort -n | tail -n 1)
    echo "${n:-0}"
}

# skipped NAME WHY DETAIL: records NAME as skipped, WHY in the JSON and DETAIL in the summary.
skipped() {
    steps+=("{\"name\": \"$1\", \"status\": \"skipped\", \"why\": \"$2\"}")
    summary+=("$1|skipped|0|$3")
    write_json
}

# step NAME LIMIT_S JSON_FILE COMMAND...: runs COMMAND under LIMIT_S seconds (less if the
# deadline is nearer; skipped under 20 s), its output shown and logged; records the step.
step() {
    local name="$1" limit="$2" json="$3"; shift 3
    local left=$(( deadline - ($(date +%s) - start_all) ))
    [ "$limit" -le "$left" ] || limit=$left
    if [ "$limit" -lt 20 ]; then
        skipped "$name" deadline "no time left before the ${deadline} s deadline"
        last_status=skipped
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
    steps+=("{\"name\": \"$name\", \"status\": \"$status\", \"exit\": $rc, \"seconds\": $((t1 - t0)), \"last_line\": \"$(echo "$last" | json_text)\", \"kernels_line\": \"$(grep '^GPU kernels: ' "$slog" | tail -n 1 | json_text)\", \"kernels_compiled\": $(kernels_seen "$slog"), \"result\": $result}")
    summary+=("$name|$status|$((t1 - t0))|$last")
    write_json
    last_status=$status
}

# NVRTC for CUBECL_CUDA_COMPILER=nvrtc: cudarc opens libnvrtc.so (or .so.12); a CUDA 13 machine
# has libnvrtc.so.13 (a toolkit's, or the nvidia-cuda-nvrtc wheel that torch depends on), which
# gets a libnvrtc.so link in a directory put first on LD_LIBRARY_PATH.
nvrtc_lib="" nvrtc_headers=""
find_nvrtc() {
    local cands=() py
    cands+=(/usr/local/cuda/lib64/libnvrtc.so* /usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so*)
    for py in "$peft_python" python3; do
        [ -n "$py" ] && command -v "$py" >/dev/null || continue
        local site
        site=$("$py" -c 'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null) || continue
        for d in $site; do cands+=("$d"/nvidia/*/lib/libnvrtc.so* "$d"/nvidia/cu*/lib/libnvrtc.so*); done
    done
    local c
    for c in "${cands[@]}"; do
        case "$c" in *builtins*|*alt*) continue ;; esac
        [ -f "$c" ] && { echo "$c"; return; }
    done
}
# use_compiler NAME [SUFFIX]: that compiler, its own kernel cache (NAME, or NAME-SUFFIX) and,
# for NVRTC with the machine's own headers, the CUDA root holding them, for what follows.
use_compiler() {
    export CUBECL_CUDA_COMPILER="$1"
    export ENGRAM_KERNEL_CACHE="$kernels_root/$1${2:+-$2}"
    mkdir -p "$ENGRAM_KERNEL_CACHE"
    if [ "$1" = nvrtc ] && [ "${nvrtc_headers:-bundle}" != bundle ]; then
        export CUDA_PATH="$work/cuda-nvrtc"
    else
        unset CUDA_PATH
    fi
}

# prepare_compiler NAME: makes NAME usable (for NVRTC: finds libnvrtc and its headers); fails,
# with the step recorded as skipped under STEP_NAME, where it cannot be.
prepare_compiler() {
    local comp="$1" step_name="$2"
    [ "$comp" = nvrtc ] || return 0
    nvrtc_lib=$(find_nvrtc)
    if [ -z "$nvrtc_lib" ]; then
        skipped "$step_name" "no libnvrtc on this machine" \
            "no libnvrtc (CUDA toolkit or nvidia-cuda-nvrtc wheel) found"
        return 1
    fi
    mkdir -p "$work/nvrtc-lib"
    ln -sfn "$nvrtc_lib" "$work/nvrtc-lib/libnvrtc.so"
    export LD_LIBRARY_PATH="$work/nvrtc-lib:$(dirname "$nvrtc_lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    # The headers of NVRTC's own CUDA version where the machine has them beside it (a toolkit,
    # or the wheels' include/), else the bundle's (CUDA 12.9); libdevice stays the bundle's (a
    # CUDA_PATH without it would make the launcher replace it).
    local inc
    inc="$(cd "$(dirname "$nvrtc_lib")/.." && pwd)/include"
    if [ -f "$inc/cuda_fp16.h" ]; then
        mkdir -p "$work/cuda-nvrtc"
        ln -sfn "$inc" "$work/cuda-nvrtc/include"
        ln -sfn "$(cd "$(dirname "$engram")" && pwd)/nvvm" "$work/cuda-nvrtc/nvvm"
        nvrtc_headers="$inc"
    else
        nvrtc_headers="bundle"
    fi
}

# bench_matmul TAG LIMIT RANK [ARGS...]: each matrix product of the step at RANK, timed on the
# device (with torch beside it where ARGS ask for the peer). Its kernels go to a cache of their
# own, empty at first: its compile figures are a cold start's, and bench train's cold start does
# not find the step's matmuls already tuned.
first_rank="${ranks%%,*}"
bench_matmul() {
    local tag="$1" limit="$2" rank="$3"; shift 3
    local file="$work/matmul$(echo "$tag" | tr ' ' '-').json"
    local cache="$kernels_root/matmul$(echo "$tag" | tr ' ' '-')"
    mkdir -p "$cache"
    step "bench matmul$tag" "$limit" "$file" \
        env ENGRAM_KERNEL_CACHE="$cache" \
        "$engram" bench matmul --backend "$backend" --architecture "$arch" --dtype "$dtype" \
        --rank "$rank" --batch 8 --seq-len 64 --label-len 16 --json "$file" "$@"
}
torch_peer=()
[ -n "$peft_python" ] && torch_peer=(--peer-python "$peft_python" --peer-script tests/peers/torch_matmul_bench.py)

IFS=',' read -ra comps <<< "$compilers"
chosen="${comps[0]}"
chosen_cache=""   # the first compiler's cache suffix: "" (compiling ahead) or "serial"
if [ "$backend" = cuda ]; then
    # The first compiler runs everything; the others, engram bench matmul (step 9).
    if ! prepare_compiler "$chosen" "selftest cuda $chosen cold ahead"; then
        chosen=llvm
    fi
    use_compiler "$chosen"
    # Cold, autotune's candidates compiled ahead on the host's other cores
    # (ENGRAM_CUDA_COMPILE_AHEAD=on; off by default until a GPU has shown that it works and pays).
    step "selftest cuda $chosen cold ahead" 150 "$work/selftest-$chosen-cold-ahead.json" \
        env ENGRAM_CUDA_COMPILE_AHEAD=on \
        "$engram" selftest --backend cuda --json "$work/selftest-$chosen-cold-ahead.json"
    if [ -s "$work/selftest-$chosen-cold-ahead.json" ]; then
        # It ran to its report, whatever its checks said: compiling ahead works on this machine,
        # and the rest of the run compiles ahead too.
        export ENGRAM_CUDA_COMPILE_AHEAD=on
    else
        # It crashed or hung: every kernel compiled on the device's thread, as upstream CubeCL
        # does, on an empty cache of its own, for this selftest and the rest of the run.
        chosen_cache=serial
        export ENGRAM_CUDA_COMPILE_AHEAD=off
        use_compiler "$chosen" "$chosen_cache"
        step "selftest cuda $chosen cold" 200 "$work/selftest-$chosen-cold.json" \
            "$engram" selftest --backend cuda --json "$work/selftest-$chosen-cold.json"
    fi
    step "selftest cuda $chosen warm" 40 "$work/selftest-warm.json" \
        "$engram" selftest --backend cuda --json "$work/selftest-warm.json"
else
    step "selftest $backend cold" 150 "$work/selftest-cold.json" \
        "$engram" selftest --backend "$backend" --json "$work/selftest-cold.json"
    if [ "$backend" != cpu ]; then
        step "selftest $backend warm" 60 "$work/selftest-warm.json" \
            "$engram" selftest --backend "$backend" --json "$work/selftest-warm.json"
    fi
fi

# PEFT before engram's own training benches: it is quick and sure, and every ratio needs it.
if [ -n "$peft_python" ]; then
    if [ -f "$peft_script" ]; then
        step "peft random bench" 100 "$work/peft.json" \
            "$peft_python" "$peft_script" "$arch" --ranks "$ranks" --batch 8 \
            --seq 64 --labels 16 --steps 10 --warmup 2 --generate "" --json "$work/peft.json"
    else
        skipped "peft random bench" "no $peft_script" "no $peft_script (pass --peft-script)"
    fi
fi

other_ranks="${ranks#*,}"; [ "$other_ranks" = "$ranks" ] && other_ranks=""
bench_train() {
    local tag="$1" r="$2" limit="$3"; shift 3
    local file="$work/train-$r$(echo "$tag" | tr ' ' '-').json"
    step "bench train r $r$tag" "$limit" "$file" \
        "$engram" bench train --backend "$backend" --architecture "$arch" --random-weights \
        --dtype "$dtype" --ranks "$r" --batch 8 --seq-len 64 --label-len 16 --steps 10 \
        --warmup-steps 2 --json "$file" "$@"
}
bench_train "" "$first_rank" 150

# A new process on the caches the first one filled: the warm first step. Then the step captured
# as a CUDA graph and replayed (a step of its own: a capture that fails costs only this row).
if [ "$backend" != cpu ]; then
    bench_train " warm" "$first_rank" 50
    bench_train " graph" "$first_rank" 90 --graph
fi

# Correct on the device: the tiny memorization run (its kernels mostly the selftest's, cached).
head -n 4 tests/fixtures/facts/synthetic-20.jsonl > "$work/facts4.jsonl"
memorize=(train --model tests/fixtures/tiny-f32 --facts "$work/facts4.jsonl" --rank 8 --epochs 60
          --lr 1e-2 --warmup-epochs 0 --constant-lr --dropout 0 --batch-size 4 --no-checkpoints
          --eval)
if [ "$backend" != cpu ]; then
    step "memorization $backend" 50 "" "$engram" "${memorize[@]}" --backend "$backend" \
        --out "$work/memorize-$backend"
fi
step "memorization cpu" 40 "" "$engram" "${memorize[@]}" --backend cpu --out "$work/memorize-cpu"
# The backend's adapter, loaded by PEFT on the fixture's base model.
# It imports peer_common.py from beside it: a copy of the PEFT script alone (as carried to a
# device machine) skips this step by name instead of silently.
peft_check="$(dirname "$peft_script")/peft_check_adapter.py"
if [ -n "$peft_python" ] && [ -f "$work/memorize-$backend/adapter_model.safetensors" ]; then
    missing=""
    for f in "$peft_check" "$(dirname "$peft_script")/peer_common.py"; do
        [ -f "$f" ] || missing="${missing:+$missing, }$f"
    done
    if [ -z "$missing" ]; then
        step "peft loads the $backend adapter" 40 "" "$peft_python" "$peft_check" \
            tests/fixtures/tiny-f32 "$work/memorize-$backend" --facts "$work/facts4.jsonl"
    else
        skipped "peft loads the $backend adapter" "no $missing" \
            "no $missing (keep them beside --peft-script)"
    fi
fi
# The same facts one per step (four steps an epoch: the first three are the capture's warm-up),
# the optimizer step captured as a graph and replayed (--graph); on the CPU the same fixed-shape
# step runs eagerly. (At lr 1e-2 these batch-1 steps do not settle; 3e-3 gives 4/4 on the CPU.)
memorize_graph=(train --model tests/fixtures/tiny-f32 --facts "$work/facts4.jsonl" --rank 8
                --epochs 60 --lr 3e-3 --warmup-epochs 0 --constant-lr --dropout 0 --batch-size 1
                --no-checkpoints --eval --graph)
if [ "$backend" != cpu ]; then
    step "memorization $backend graph" 60 "" "$engram" "${memorize_graph[@]}" --backend "$backend" \
        --out "$work/memorize-graph-$backend"
fi
step "memorization cpu graph" 30 "" "$engram" "${memorize_graph[@]}" --backend cpu \
    --out "$work/memorize-graph-cpu"

# The same-run comparison for compiling ahead: the selftest cold again with every kernel compiled
# on the device's thread, on an empty cache of its own (beside step 1's cold selftest).
if [ "$backend" = cuda ] && [ -z "$chosen_cache" ]; then
    mkdir -p "$kernels_root/$chosen-serial"
    step "selftest cuda $chosen cold serial" 200 "$work/selftest-$chosen-serial.json" \
        env ENGRAM_CUDA_COMPILE_AHEAD=off ENGRAM_KERNEL_CACHE="$kernels_root/$chosen-serial" \
        "$engram" selftest --backend cuda --json "$work/selftest-$chosen-serial.json"
fi

# Which of the step's products are slow, beside torch's on the same shapes.
matmul_tag=""; [ "$backend" = cuda ] && matmul_tag=" $chosen"
bench_matmul "$matmul_tag" 100 "$first_rank" "${torch_peer[@]}"

# The other kernel compilers: their compile speed (an empty cache each) and their kernels' speed
# on the same products.
if [ "$backend" = cuda ]; then
    for comp in "${comps[@]:1}"; do
        [ "$comp" = "$chosen" ] && continue
        if prepare_compiler "$comp" "bench matmul $comp"; then
            use_compiler "$comp"
            bench_matmul " $comp" 150 "$first_rank"
            use_compiler "$chosen" "$chosen_cache"
        fi
    done
fi
if [ -n "$autotune_levels" ] && [ "$backend" != cpu ]; then
    IFS=',' read -ra levels <<< "$autotune_levels"
    for level in "${levels[@]}"; do
        CUBECL_AUTOTUNE_LEVEL="$level" bench_matmul "${matmul_tag} autotune $level" 120 "$first_rank"
    done
fi

# The other ranks: their adapter products alone first (each product's warm-up is its compile and
# autotune time: where a rank's first step stalls, as r 256's did on an H200), then the step.
IFS=',' read -ra rest <<< "$other_ranks"
for r in "${rest[@]}"; do
    bench_matmul "$matmul_tag r $r" 90 "$r" --only lora --split-k off "${torch_peer[@]}"
    bench_train "" "$r" 120
done

# The same training with the adapters' matmuls in bf16 (adapter_compute = "bf16").
bench_train " bf16-lora" "$first_rank" 90 --adapter-compute bf16

step "bench generate" 90 "$work/generate.json" \
    "$engram" bench generate --backend "$backend" --dtype "$dtype" --architecture "$arch" \
    --random-weights --batch 1,16 --new-tokens 32 --prompt-len 64 --json "$work/generate.json"

# f32 matmuls kept in f32: the selftest to f32's tolerances (a cold start for the matmuls it
# chooses anew; the kernel cache keeps their autotune results in a database of their own).
if [ "$backend" = cuda ]; then
    export ENGRAM_TF32=off
    step "selftest cuda TF32 off" 150 "$work/selftest-tf32-off.json" \
        "$engram" selftest --backend cuda --json "$work/selftest-tf32-off.json"
    unset ENGRAM_TF32
fi

if [ "$wgpu" = yes ]; then
    # The Vulkan loader, where the machine has the NVIDIA ICD but no libvulkan.so.1.
    if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1' && [ -n "$vulkan_deb" ] && [ -f "$vulkan_deb" ]; then
        mkdir -p "$work/vulkan" && dpkg-deb -x "$vulkan_deb" "$work/vulkan" 2>/dev/null \
            || (cd "$work/vulkan" && ar x "$OLDPWD/$vulkan_deb" && tar xf data.tar.*)
        export LD_LIBRARY_PATH="$work/vulkan/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
    export ENGRAM_KERNEL_CACHE="$kernels_root/wgpu"
    step "selftest wgpu" 120 "$work/selftest-wgpu.json" \
        "$engram" selftest --backend wgpu --json "$work/selftest-wgpu.json"
    if [ "$last_status" != failed ]; then
        # Again on the same cache: SPIR-V (Vulkan adapters) is kept, so this compiles no kernel.
        step "selftest wgpu warm" 60 "$work/selftest-wgpu-warm.json" \
            "$engram" selftest --backend wgpu --json "$work/selftest-wgpu-warm.json"
        # Cold again, on an empty cache of its own, every kernel compiled on the device's
        # thread as upstream CubeCL does (CUBECL_COMPILE_THREADS=0): beside the first cold run,
        # which compiled autotune's candidates ahead on the host's other cores, what that buys.
        mkdir -p "$kernels_root/wgpu-serial"
        step "selftest wgpu serial" 120 "$work/selftest-wgpu-serial.json" \
            env CUBECL_COMPILE_THREADS=0 ENGRAM_KERNEL_CACHE="$kernels_root/wgpu-serial" \
            "$engram" selftest --backend wgpu --json "$work/selftest-wgpu-serial.json"
    else
        # The driver refused CubeCL's SPIR-V, or ran it wrong: WGSL instead, which needs no
        # rebuild (CUBECL_WGPU_COMPILER=wgsl), on a cache of its own.
        mkdir -p "$kernels_root/wgpu-wgsl"
        step "selftest wgpu wgsl" 120 "$work/selftest-wgpu-wgsl.json" \
            env CUBECL_WGPU_COMPILER=wgsl ENGRAM_KERNEL_CACHE="$kernels_root/wgpu-wgsl" \
            "$engram" selftest --backend wgpu --json "$work/selftest-wgpu-wgsl.json"
    fi
fi

# The memorization runs must agree on exact match.
em() { grep -o 'rephrased (trained) questions: [0-9]*/[0-9]*' "$work/memorization_$1.log" 2>/dev/null | awk '{print $NF}'; }
agree=true
if [ "$backend" != cpu ] && { [ "$(em cpu)" != "$(em "$backend")" ] \
    || [ "$(em cpu_graph)" != "$(em "${backend}_graph")" ]; }; then agree=false; failed=1; fi
steps+=("{\"name\": \"memorization exact match\", \"cpu\": \"$(em cpu)\", \"$backend\": \"$(em "$backend")\", \"cpu_graph\": \"$(em cpu_graph)\", \"${backend}_graph\": \"$(em "${backend}_graph")\", \"agree\": $agree}")
write_json

echo
echo "=== summary ($(( $(date +%s) - start_all )) s; every figure in $out/gpu-check.json)" | tee -a "$log"
for s in "${summary[@]}"; do
    IFS='|' read -r name status secs last <<< "$s"
    printf '%-7s %-28s %5ss  %s\n' "$status" "$name" "$secs" "${last:0:160}" | tee -a "$log"
done
# Where the benches' steps spent their device time (bench train's timed extra step).
for f in "$work"/bench_train_*.log; do
    [ -f "$f" ] || continue
    busy=$(grep -h 'the device was busy' "$f" | sed 's/^ *//')
    [ -n "$busy" ] && printf '%-36s %s\n' "$(basename "$f" .log | tr '_' ' ')" "$busy" | tee -a "$log"
    captured=$(grep -h 'captured step' "$f" | sed 's/^ *//')
    [ -n "$captured" ] && printf '%-36s %s\n' "$(basename "$f" .log | tr '_' ' ')" "$captured" | tee -a "$log"
done
# How the --graph memorization runs captured their step.
for f in "$work"/memorization_*_graph.log; do
    [ -f "$f" ] || continue
    grep -h '^step graph: ' "$f" | while read -r line; do
        printf '%-36s %s\n' "$(basename "$f" .log | tr '_' ' ')" "$line" | tee -a "$log"
    done
done
# Each matmul bench's step total, and torch's beside it.
for f in "$work"/bench_matmul*.log; do
    [ -f "$f" ] || continue
    grep -h "^one step's matmuls" "$f" | while read -r line; do
        printf '%-36s %s\n' "$(basename "$f" .log | tr '_' ' ')" "$line" | tee -a "$log"
    done
done
if [ "$agree" != true ]; then
    echo "FAIL memorization: exact match $(em cpu) on cpu vs $(em "$backend") on $backend; with --graph $(em cpu_graph) vs $(em "${backend}_graph")" | tee -a "$log"
fi
exit $failed
