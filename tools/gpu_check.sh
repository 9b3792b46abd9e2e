#!/usr/bin/env bash
# The GPU half of docs/testing.md and docs/performance.md, in named stages, on a machine with an
# NVIDIA GPU, a CUDA toolkit and a GPU build of Paddle. Run from the repository root:
#
#   bash tools/gpu_check.sh setup gpu-tests checks graph hostile demo
#   QUICK=1 bash tools/gpu_check.sh setup bench kernel-bench
#
# Stages:
#   setup         build the op library for this GPU (FDSPEC_CUDA_ARCHS, default: nvidia-smi's)
#   gpu-tests     the whole suite with pytest-xdist (GPU tests against CPU and the references)
#   gpu-marked    only the tests marked gpu
#   checks        the Paddle-free kernel harnesses and compute-sanitizer (tests/cuda/run_cuda_checks.sh)
#   graph         the CUDA-graph capture and replay tests
#   hostile       the hostile-input suite on CPU and GPU tensors, its tables in $OUT/hostile.*.md
#   demo          the demo on the GPU
#   run-demo      the README's main command in a fresh copy of the tree, as a user runs it
#   bench         every GPU benchmark routine (python -m benchmarks; QUICK=1 passes --quick)
#   kernel-bench  the Paddle-free kernel benchmarks (benchmarks/kernels/)
# Environment: PYTHON (default python3), PADDLE_SITE (a directory put first on PYTHONPATH, for a
# Paddle installed outside the interpreter's site-packages), OUT (logs and results, default
# results/gpu), QUICK.
set -uo pipefail
py=${PYTHON:-python3}
export PYTHONPATH=${PADDLE_SITE:+$PADDLE_SITE:}$PWD CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} PYTHONUNBUFFERED=1
OUT=${OUT:-results/gpu}
mkdir -p "$OUT"
arch=${FDSPEC_CUDA_ARCHS:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')}
arch=${arch:-90}
jobs=$(( $(nproc) > 12 ? 12 : $(nproc) ))
for stage in "$@"; do
  case "$stage" in
    setup)
      FDSPEC_CUDA_ARCHS=$arch $py setup_ops.py build > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
      tail -1 "$OUT/build.log"
      $py -c "import zlib, paddle; from fastdeploy_spec import ops; print('paddle', paddle.__version__, \
'ops cuda', ops.with_cuda(), 'gpus', paddle.device.cuda.device_count())"
      ;;
    gpu-tests)  # a test that crashes its worker is reported and the run goes on
      $py -m pytest -q -p no:cacheprovider -n "$jobs" -rfE tests 2>&1 | tee "$OUT/pytest_gpu.log" | tail -30
      ;;
    gpu-marked)
      $py -m pytest -q -p no:cacheprovider -n "$jobs" -m gpu -rfE tests 2>&1 | tee "$OUT/pytest_gpu_marked.log" | tail -20
      ;;
    checks)
      CHECKS_LOGDIR="$OUT/cuda_checks" bash tests/cuda/run_cuda_checks.sh "$arch" build 2>&1 | tee "$OUT/cuda_checks.log"
      ;;
    graph)
      $py -m pytest -q -p no:cacheprovider -rA tests/test_graph_replay.py 2>&1 | grep -E "PASS|FAIL|SKIP|passed|failed|Error"
      ;;
    hostile)  # proof: test_hostile_suite[gpu] passed, the gpu table's last row 0 in every failure column
      FDSPEC_HOSTILE_REPORT="$OUT/hostile" $py -m pytest -q -p no:cacheprovider -rA tests/test_hostile_inputs.py \
        2>&1 | tee "$OUT/hostile.log" | grep -E "^(PASSED|FAILED|ERROR).*hostile_suite|passed|failed" | tail -6
      cat "$OUT/hostile.gpu.md" 2>/dev/null || echo "no GPU table: test_hostile_suite[gpu] did not run"
      ;;
    demo)
      $py -m examples.demo --device gpu --out "$OUT/demo" 2>&1 | tail -30
      ;;
    run-demo)
      fresh=$(mktemp -d) out_abs=$(cd "$OUT" && pwd)
      git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$fresh"
      (cd "$fresh" && env -u CUDA_HOME -u FDSPEC_CUDA_ARCHS PYTHONPATH="${PADDLE_SITE:-}" \
        bash scripts/run_demo.sh --out "$out_abs/run_demo") 2>&1 | tee "$OUT/run_demo.log" | tail -22
      rm -rf "$fresh"
      ;;
    bench)
      for r in ngram hybrid suffix suffix_cache mtp logprobs; do
        $py -m benchmarks --routine "$r" ${QUICK:+--quick} --out "$OUT/bench_$r" 2>&1 | tee "$OUT/bench_$r.log" | tail -25
      done
      ;;
    kernel-bench)
      bash benchmarks/kernels/build.sh "${arch}a" build
      for b in ngram suffix mtp; do
        build/bench_${b}_kernels ${QUICK:+--quick} --json "$OUT/bench_${b}_kernels.json" 2>&1 | tail -30
      done
      ;;
    *) echo "unknown stage $stage (see the header of $0)"; exit 2 ;;
  esac
done
