#!/usr/bin/env bash
# Runs on the GPU machine (Paddle 2.6.2 staged by the workplace's prepare-paddle-gpu.sh), from the repo root,
# the stages named:
#   setup           install the staged Paddle 2.6.2 (/root/pd), build the op library for sm_90
#   tests           the whole suite in one process; gpu-tests: the same with pytest-xdist;
#                   gpu-marked: only the tests marked gpu, with pytest-xdist
#   checks          the Paddle-free kernel harnesses and compute-sanitizer (tests/cuda/run_cuda_checks.sh)
#   graph           the CUDA-graph replay test
#   bench-ngram, bench-hybrid   every row warm and cold L2 (gpu_us, gpu_cold_us in $OUT/bench_*.json)
#   bench-logprobs, bench-mtp, demo
#   run-demo        the README's main command as a user here runs it: bash scripts/run_demo.sh in a
#                   fresh copy of the tree (no build, no venv), the staged Paddle on PYTHONPATH
#   pad-to-max      the GPU tests of pad_to_max: ngram_match / hybrid_mtp_ngram grids and named cases,
#                   FastDeploy-shaped NgramProposer, graph replay with pad_to_max
#   bench-suffix    suffix_match per-step device time (warm, cold L2) and the host path
#   suffix          suffix_match's and the global cache's GPU tests (tests/test_suffix_match.py,
#                   tests/test_suffix_cache.py, the fuzz tests) and their kernel harnesses
#   bench-suffix-cache  the global cache: insert + query per step at B 8/64/256 with 1k/10k/100k cached
#                   responses (warm, cold L2, memory per cached token), then the GPU soak (20k
#                   requests); QUICK=1 for --quick (no 100k case) and a 5k-request soak
#   bench-kernels   ngram_match / hybrid_mtp_ngram at the kernel layer, warm and cold, no Paddle
#                   (tests/cuda/bench_ngram_kernels.cu; notes in docs/perf/ngram_notes.md)
#   hostile         the hostile-input suite on CPU and GPU tensors (tests/hostile_cases.py), its table
#                   per place in $OUT/hostile.{cpu,gpu}.md, and the named-error checks of the old file
#   toolchain, diag the compilers and C++ runtimes involved, and bad-input tests with Paddle's stack
# Logs and results go to $OUT (or ./results/gpu when OUT is unset).
set -uo pipefail
export PYTHONPATH=/root/pdsite:$PWD CUDA_HOME=/usr/local/cuda PYTHONUNBUFFERED=1 MAX_JOBS=16
OUT=${OUT:-results/gpu}
mkdir -p "$OUT"
py=python3
for stage in "$@"; do
  case "$stage" in
    setup)
      [ -d /root/pdsite/paddle ] || bash /root/pd/install.sh 2>&1 | tail -3
      FDSPEC_CUDA_ARCHS=90 $py setup_ops.py build > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
      tail -1 "$OUT/build.log"
      $py -c "import zlib, paddle; from fastdeploy_spec import ops; print('paddle', paddle.__version__, 'ops cuda', ops.with_cuda(), 'gpus', paddle.device.cuda.device_count())"
      ;;
    tests)
      $py -m pytest -q -p no:cacheprovider --maxfail=40 -rf tests 2>&1 | tee "$OUT/pytest.log" | tail -25
      ;;
    gpu-tests)
      # pytest-xdist workers: a test that crashes its process is reported and the run goes on.
      $py -m pytest -q -p no:cacheprovider -n 12 -rfE tests 2>&1 | tee "$OUT/pytest_gpu.log" \
        | grep -vE "^\s*$" | tail -45
      ;;
    gpu-marked)
      # Only the tests marked gpu (GPU tensors, GPU against CPU and the reference).
      $py -m pytest -q -p no:cacheprovider -n 12 -m gpu -rfE tests 2>&1 | tee "$OUT/pytest_gpu_marked.log" \
        | grep -vE "^\s*$" | tail -25
      ;;
    checks)
      # Reuses binaries in build/ that are newer than their sources, else compiles them here.
      CHECKS_LOGDIR="$OUT/cuda_checks" bash tests/cuda/run_cuda_checks.sh 90 build 2>&1 | tee "$OUT/cuda_checks.log"
      ;;
    bench-ngram)
      $py scripts/bench_ngram.py --out "$OUT" 2>&1 | tee "$OUT/bench_ngram.log" | tail -55
      ;;
    bench-hybrid)
      $py scripts/bench_hybrid.py --out "$OUT" 2>&1 | tee "$OUT/bench_hybrid.log" | tail -55
      ;;
    bench-suffix)
      $py scripts/bench_suffix.py --out "$OUT" 2>&1 | tail -30
      ;;
    suffix)
      $py -m pytest -q -p no:cacheprovider -rfE tests/test_suffix_match.py tests/test_suffix_cache.py \
        tests/test_fuzz.py -k suffix 2>&1 | tee "$OUT/pytest_suffix.log" | tail -15
      HARNESSES="suffix_match_vs_cpu suffix_cache_vs_cpu" CHECKS_LOGDIR="$OUT/cuda_checks_suffix" \
        bash tests/cuda/run_cuda_checks.sh 90 build 2>&1 | tee "$OUT/cuda_checks_suffix.log"
      ;;
    bench-kernels)
      mkdir -p build
      $CUDA_HOME/bin/nvcc -std=c++17 -O3 -lineinfo -DFDSPEC_WITH_CUDA -Icustom_ops -I$CUDA_HOME/include/cccl \
        -gencode=arch=compute_90,code=sm_90 tests/cuda/bench_ngram_kernels.cu \
        custom_ops/ngram_match/ngram_match.cu custom_ops/ngram_match/ngram_match_cpu.cc \
        custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram.cu custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram_cpu.cc \
        -o build/bench_ngram_kernels && build/bench_ngram_kernels --json "$OUT/bench_ngram_kernels.json" 2>&1 | tail -30

      ;;
    bench-suffix-cache)
      $py scripts/bench_suffix_cache.py --out "$OUT" ${QUICK:+--quick} 2>&1 | tee "$OUT/bench_suffix_cache.log" | tail -30
      soak_requests=20000; [ -n "${QUICK:-}" ] && soak_requests=5000
      $py scripts/bench_suffix_cache.py --soak --soak-requests "$soak_requests" 2>&1 \
        | tee "$OUT/soak_suffix_cache.log" | tail -5
      ;;
    bench-logprobs)
      $py scripts/bench_logprobs.py --out "$OUT" 2>&1 | tail -30
      ;;
    bench-mtp)
      $py scripts/bench_mtp.py --out "$OUT" 2>&1 | tail -30
      ;;
    hostile)
      # Each place's cases run in child processes: a crash or a hang is a reported outcome, and a
      # correct call after each family checks that no CUDA error stuck. Proof: "N passed" with
      # test_hostile_suite[gpu] among them, and the gpu table's last row with 0 in every failure column.
      FDSPEC_HOSTILE_REPORT="$OUT/hostile" $py -m pytest -q -p no:cacheprovider -rA tests/test_hostile_inputs.py \
        2>&1 | tee "$OUT/hostile.log" | grep -E "^(PASSED|FAILED|ERROR).*hostile_suite|passed|failed" | tail -6
      cat "$OUT/hostile.gpu.md" 2>/dev/null || echo "no GPU table: test_hostile_suite[gpu] did not run"
      ;;
    graph)
      $py -m pytest -q -p no:cacheprovider -rA tests/test_graph_replay.py 2>&1 | grep -E "PASS|FAIL|SKIP|passed|failed|Error" | tail -8
      ;;
    demo)
      $py -m fastdeploy_spec.demo --device gpu --out "$OUT/demo" 2>&1 | tail -30
      ;;
    run-demo)
      [ -d /root/pdsite/paddle ] || bash /root/pd/install.sh 2>&1 | tail -3
      fresh=$(mktemp -d) out_abs=$(cd "$OUT" && pwd)
      tar -cf - --exclude=./fastdeploy_spec/_lib --exclude=./build --exclude=./results \
        --exclude='./.venv*' --exclude=__pycache__ . | tar -xf - -C "$fresh"
      (cd "$fresh" && env -u CUDA_HOME -u FDSPEC_CUDA_ARCHS PYTHONPATH=/root/pdsite \
        bash scripts/run_demo.sh --out "$out_abs/run_demo") 2>&1 | tee "$OUT/run_demo.log" | tail -22
      rm -rf "$fresh"
      ;;
    pad-to-max)
      $py -m pytest -q -p no:cacheprovider -n 12 -m gpu -rfE tests/test_ngram_match.py \
        tests/test_hybrid_mtp_ngram.py tests/test_fd_config.py -k "pad_to_max or pad_length or upstream or cudagraph" \
        2>&1 | tee "$OUT/pytest_pad_to_max.log" | tail -8
      $py -m pytest -q -p no:cacheprovider -rA tests/test_graph_replay.py 2>&1 \
        | grep -E "PASS|FAIL|SKIP|passed|failed|Error" | tail -8
      ;;
    toolchain)
      $py -c "import sysconfig; print('CC', sysconfig.get_config_var('CC'), '| CXX', sysconfig.get_config_var('CXX'))"
      /opt/gcc/bin/g++ --version 2>&1 | head -1; g++ --version 2>&1 | head -1
      for l in $(ldd fastdeploy_spec/_lib/fastdeploy_spec_ops.so | grep -E "stdc|gcc_s" | awk '{print $3}'); do
        echo "$l newest: $(strings "$l" | grep -E '^GLIBCXX_3\.4\.[0-9]+$' | sort -V | tail -1)"; done
      $py -c "import zlib, paddle, os; print([l for l in open('/proc/self/maps').read().split() if 'libstdc++' in l][:1])"
      ;;
    diag)
      lib=$(ls /root/pdsite/paddle/base/libpaddle.so)
      echo "libpaddle cxx11-ABI symbols: $(nm -DC "$lib" | grep -c 'abi:cxx11')"
      strings -a "$lib" | grep -m2 "GCC: ("
      command -v gdb || echo "no gdb"
      for t in "tests/test_hybrid_mtp_ngram.py::test_random_grid[1-3-7-5-8-cpu]" \
               "tests/test_ngram_match.py::test_wrong_dtype_names_the_tensor[token_ids_all]" \
               "tests/test_decode_step_ops.py::test_verify_edge_cases[fewer_positions_than_columns-cpu]"; do
        echo "== $t"
        FLAGS_call_stack_level=2 timeout 120 $py -m pytest -q -p no:cacheprovider -p no:faulthandler -x "$t" 2>&1 \
          | grep -vE "^\s*$|Deprecat|warn" | tail -25
      done
      echo "== the same hybrid test against a CPU-only build"
      FDSPEC_CPU_ONLY=1 $py setup_ops.py build > "$OUT/build_cpu.log" 2>&1 || tail -5 "$OUT/build_cpu.log"
      FLAGS_call_stack_level=2 timeout 120 $py -m pytest -q -p no:cacheprovider -p no:faulthandler -x \
        "tests/test_hybrid_mtp_ngram.py::test_random_grid[1-3-7-5-8-cpu]" 2>&1 | grep -vE "^\s*$|Deprecat|warn" | tail -8
      ;;
    *) echo "unknown stage $stage"; exit 2 ;;
  esac
done
