#!/usr/bin/env bash
# On the GPU machine: environment, GPU tests, a sweep (timed), its plots, and the C++ bandwidth comparison.
# Everything lands in results/ and plots/ and is tarred, with the log, into $OUT (device tool) or ./gpu-out.
#   bash scripts/gpu_check.sh [all|tests|sweep] [sweep arguments...]      (default: all, the default sweep)
set -uo pipefail
what=${1:-all}
shift || true
out=${OUT:-gpu-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
log="$out/gpu_check.log"
{
  echo "== $(date -u +%FT%TZ) gpu_check $what $*, commit ${BENCH_GIT_COMMIT:-unknown}"
  nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  python3 -m bench env
  if [ "$what" = tests ] || [ "$what" = all ]; then
    echo "== GPU tests"
    timeout 200 python3 -m pytest -v -m gpu tests 2>&1 | tail -40
  fi
  if [ "$what" = sweep ] || [ "$what" = all ]; then
    echo "== sweep $*"
    start=$(date +%s)
    timeout 420 python3 -m bench sweep "$@"
    echo "sweep wall time: $(( $(date +%s) - start )) s"
    newest=$(ls results/*.parquet | grep -v '\..*\.parquet$' | sort | tail -1)
    python3 -m bench plot "$newest"
    if python3 -c "import pandas as pd, sys; sys.exit(0 if (pd.read_parquet('$newest')['experiment'] == 'bandwidth').any() else 1)"; then
      echo "== C++ reference (cudaMemcpyAsync loop timed with events)"
      if nvcc -O2 -o /tmp/reference_bandwidth scripts/reference_bandwidth.cu; then
        reference="${newest%.parquet}-reference-cpp.csv"
        /tmp/reference_bandwidth > "$reference" && python3 scripts/compare_reference.py "$newest" "$reference"
      fi
    fi
  fi
} 2>&1 | tee "$log"
tar czf "$out/artifacts.tgz" results plots
ls -la "$out"
