#!/usr/bin/env bash
# On the GPU machine: the environment, then each step in order; results land in results/, a log of everything and a
# tarball of results/ and plots/ in $OUT (device tool) or ./gpu-out.
#   bash scripts/gpu_check.sh STEP...
# A step is one argument: "tests [pytest args]" (the GPU tests), "sweep [sweep args]" (a timed sweep, then its plots
# and, for bandwidth, the C++ reference), "faulty EXPERIMENT:N [sweep args]" (a sweep with an illegal-address kernel
# injected into EXPERIMENT after N rows), "claims [args]", "report [args]" or "benchmarks [pytest args]"
# (pytest --benchmark-only).
# Default: "tests" "sweep" (the GPU tests, then the default sweep).
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
log="$out/gpu_check.log"
[ $# -gt 0 ] || set -- tests sweep

sweep() {
  local start newest reference
  start=$(date +%s)
  timeout 540 python3 -m bench sweep "$@"
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
}

{
  echo "== $(date -u +%FT%TZ) gpu_check, commit ${BENCH_GIT_COMMIT:-unknown}"
  nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  python3 -m bench env
  for step in "$@"; do
    read -r -a words <<< "$step"
    echo "== $(date -u +%T) $step"
    case "${words[0]}" in
      tests) timeout 300 python3 -m pytest -v -m gpu -p no:cacheprovider "${words[@]:1}" tests 2>&1 | grep -v Warning | tail -60 ;;
      sweep) sweep "${words[@]:1}" ;;
      faulty) BENCH_INJECT_FAULT="${words[1]}" sweep "${words[@]:2}" ;;
      claims) timeout 300 python3 -m bench claims "${words[@]:1}" ;;
      report) timeout 300 python3 -m bench report "${words[@]:1}" ;;
      benchmarks) timeout 300 python3 -m pytest --benchmark-only -p no:cacheprovider "${words[@]:1}" 2>&1 | tail -80 ;;
      *) echo "unknown step: $step" ;;
    esac
    tar czf "$out/artifacts.tgz" results plots  # after every step: a call cut short still brings back what finished
  done
} 2>&1 | tee "$log"
tar czf "$out/artifacts.tgz" results plots
ls -la "$out"
