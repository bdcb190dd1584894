#!/usr/bin/env bash
# On a GPU machine: the environment, then each step in order. Results land in results/ (logs in results/_logs/);
# a tarball of what this call wrote under results/ and plots/ goes to $OUT (device tool) or ./gpu-out after every step.
#   bash scripts/gpu_check.sh STEP...
# A step is one argument:
#   "tests PYTEST-ARGS"         the GPU tests: "tests tests" for all, or named files
#   "startup"                   where an experiment's process spends its first seconds (scripts/startup.py)
#   "profile-children [MODE]"   every experiment's process under cProfile (scripts/profile_children.py)
#   "torch-import"              how long importing PyTorch and asking for CUDA take on this machine
#   "quick"                     a timed --quick sweep into results/_quick/
#   "sweep [sweep args]"        a timed sweep, then its figures (into $PLOTS, default plots/)
#   "full SECONDS [sweep args]" a --full sweep into results/_full/, interrupted after SECONDS and resumed by later
#                               "full" steps; its figures into plots/full/ once complete
#   "full-part [sweep args]"    a timed --full sweep of part of the grid (--experiments, --axis) into
#                               results/_full_parts/ (the "full" step resumes the newest file of results/_full/):
#                               the grid in parts that each fit one device call; its wall time is theirs summed
#   "agree-full"                the --full grid of the experiments the agreement check reads (bandwidth, blocking,
#                               serialization; overlap's pinned pipelines at 256 MiB) into results/_agreement/
#   "firstcall-compile"         the firstcall experiment's compiling steps (--full only) into results/_full/
#   "agree-repeat"              the --full bandwidth grid again, into results/_repeat/: the full grid's own
#                               reproducibility, which the agreement check reads
#   "agree"                     the default sweep against results/_agreement/ (and _repeat/) of this machine
#   "reference"                 the C++ cudaMemcpyAsync loop against the newest bandwidth results
#   "paths-reference"           the C++ SM-copy, latency, round-trip and launch loops (scripts/reference_paths.cu)
#                               against the newest results
#   "nvbandwidth"               NVIDIA's nvbandwidth (v0.8, 66746a3), built here from the source carried in
#                               .peers/ (not in git: fetch it, see the README), against the newest run of this
#                               GPU in results/, results/_fresh/ or results/_nvbandwidth/ (compare_nvbandwidth.py)
#   "nvbandwidth-peer"          nvbandwidth's device-to-device and all-GPU host tests against the newest results
#                               with peer rows (scripts/compare_nvbandwidth_peer.py)
#   "latency-diagnosis", "bidir-diagnosis"  the C++ chase with 21 and 2001 launches (SM clock sampled) beside bench's;
#                               bench's BIDIR beside nvbandwidth's, three times each
#   "chase-swap"                bench's and the C++ DRAM chase, each on its own chain and on the other's
#   "cold-profile"              what each experiment compiles on a fresh machine, and how long its --quick takes
#   "devices"                   bandwidth on every GPU one after another, then --concurrent, into results/_devices/
#   "multi [sweep args]"        the multi-GPU experiments (peer, hostlinks, crossgpu) over every GPU, then figures
#   "nvbandwidth-sweep"         bench's figures nvbandwidth is compared with, at 256 MiB and 1 MiB, on this machine
#   "machine"                   CPUs, NUMA nodes, GPU topology, CUDA headers and libraries of this machine
#   "library-check"             the library truth table against an independent method (CUDA events, PyTorch's
#                               sync debug mode)
#   "faulty EXPERIMENT:N [args]" a sweep with an illegal-address kernel after N rows of EXPERIMENT
#   "syncs-cases"               bench syncs on users' code (PyTorch, CuPy, numba-cuda, JAX, threads, timm, transformers;
#                               two GPUs where visible), each case's waits marked in its own code, against independent
#                               methods (scripts/syncs_cases.py): a row per case into results/_syncs/*-syncs-cases.parquet
#                               and .json, a summary table at the end of the log
#   "syncs TARGET [args]"       python -m bench syncs TARGET, its rows into results/_syncs/
#   "trace-cases"               bench trace on PyTorch and CuPy stream pipelines and on the overlap experiment's own
#                               (scripts/trace_cases.py) into results/_trace/, timelines into $PLOTS/<gpu>/
#   "trace-overhead"            the same pipelines' event makespans untraced and traced (scripts/trace_overhead.py)
#   "copy-drift [SECONDS]"      how reproducible the copies' bound is: duplex copies back to back
#                               (scripts/copy_rate_drift.py, 30 s unless given) into results/_trace/
#   "trace TARGET [args]"       python -m bench trace TARGET, its rows into results/_trace/
#   "trace-readme"              the README's trace: docs/examples/input_pipeline.py's pageable_step and step, each
#                               with its output (.txt), rows, timeline (--plot) and Perfetto export (.json)
#   "ddp-trace [RUNS]"          a PyTorch DDP training step on every GPU under torchrun, traced by each rank and
#                               merged, against no_sync() plus one all-reduce and CUDA events (scripts/ddp_trace.py),
#                               into results/_trace/ (needs torch and two or more GPUs)
#   "answers [args]"            the tools' command-line time against T0 (scripts/answer_times.py) into results/_answers/
#   "trace-tiny [args]"         tracing's cost on tiny kernels against CUPTI alone (scripts/trace_tiny.py) into
#                               results/_trace/<stamp>-<gpu>-<uuid>-<commit>-tiny.json and .parquet
#   "fixtures"                  the pytest fixtures' cost (benchmarks/test_fixtures.py) into results/_benchmarks/
#   "gate-proof"                the gate's four edits (scripts/gate_proof.py) into results/_gates/<stamp>-<gpu>-<uuid>/
#   "profiler-agree [args]"     bench trace against bench trace --from of the PyTorch profiler's trace of the same
#                               steps (scripts/profiler_agree.py) into results/_trace/<stamp>-<gpu>-<uuid>-profiler/
#   "integrations"              the Lightning and Hugging Face callbacks' GPU tests (tests/test_gpu_integrations.py), each
#                               test's directory with the tables the callback saved kept in results/_integrations/
#   "notebook"                  docs/examples/notebook.ipynb executed (scripts/notebook_proof.py) into
#                               results/_notebook/<stamp>-<gpu>-<uuid>.ipynb (needs nbclient and ipykernel)
#   "claims [args]" (--measure to measure what the results lack), "report [args]", "benchmarks [pytest args]", "compare OLD NEW"
set -uo pipefail
# Every row names the commit it measured (bench.platform.env.git_commit): a copy of the tree sent to a GPU machine has no .git
# of its own (or a stale one), so the caller says which commit it is: BENCH_GIT_COMMIT=$(git rev-parse HEAD) here.
[ -n "${BENCH_GIT_COMMIT:-}" ] || { echo "gpu_check: set BENCH_GIT_COMMIT to the commit of this tree" >&2; exit 2; }
export BENCH_GIT_COMMIT
out=${OUT:-gpu-out}
mkdir -p "$out" results/_logs results/_references results/_syncs results/_trace
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0  # never NVLink multicast (NVLS), whatever a library would choose
stamp=$(date -u +%Y%m%dT%H%M%SZ)
log="results/_logs/$stamp-gpu_check.log"
began=$(mktemp)  # what this call wrote is what is newer: only that goes back (the device returns files of limited size)
pack() { find results plots -type f -newer "$began" -print0 | tar czf "$out/artifacts.tgz" --null -T -; }
[ $# -gt 0 ] || set -- tests sweep

newest() { ls results/*.parquet 2>/dev/null | sort | tail -1; }

timed() {  # run a command, then say how long it took from process start to exit
  local start
  start=$(date +%s%N)
  "$@"
  echo "wall time (process start to exit) of: $*: $(( ($(date +%s%N) - start) / 1000000 )) ms"
}

sweep() {  # figures into $PLOTS (default plots/: the headline GPU's; another GPU's go to plots/<its kind>)
  timed python3 -m bench sweep "$@"
  python3 -m bench plot "$(newest)" --out "${PLOTS:-plots}"
}

full() {  # a --full sweep into results/_full/, resumed across steps (each under the device's command limit)
  local limit=$1; shift
  local file
  file=$(ls results/_full/*.parquet 2>/dev/null | sort | tail -1)
  local start
  start=$(date +%s%N)
  if [ -n "$file" ]; then
    timeout -s TERM "$limit" python3 -m bench sweep --full "$@" --resume "$file"
  else
    timeout -s TERM "$limit" python3 -m bench sweep --full "$@" --out results/_full
  fi
  echo "full sweep step wall time: $(( ($(date +%s%N) - start) / 1000000 )) ms"
  file=$(ls results/_full/*.parquet 2>/dev/null | sort | tail -1)
  if python3 -c "import sys, bench.results.store as s; sys.exit(0 if s.read_metadata('$file').get('complete') else 1)"; then
    python3 -m bench plot "$file" --out plots/full
  fi
}

paths_reference() {
  local results reference
  results=$(newest)
  nvcc -O2 -o /tmp/reference_paths scripts/reference_paths.cu || return
  reference="results/_references/$(basename "${results%.parquet}")-reference-paths.csv"
  /tmp/reference_paths > "$reference" && python3 scripts/compare_paths.py "$results" "$reference"
}

nvbandwidth_build() {  # built with nvcc alone: this machine has Boost's headers but not its program_options library,
  # so that library's sources (boost-1.83.0, matching the headers) are compiled in from .peers/boost_program_options
  local build=/tmp/nvbandwidth
  [ -d .peers/nvbandwidth ] || { echo "no nvbandwidth source in .peers/nvbandwidth"; return 1; }
  [ -x "$build" ] && return
  (cd .peers/nvbandwidth && nvcc -O3 -std=c++17 -arch=sm_90 -I. -DGIT_VERSION='"v0.8-66746a3"' \
    testcase.cpp testcases_ce.cpp testcases_sm.cpp kernels.cu memcpy.cpp nvbandwidth.cpp multinode_memcpy.cpp \
    multinode_testcases.cpp output.cpp json_output.cpp json/jsoncpp.cpp \
    $(ls ../boost_program_options/src/*.cpp | grep -v winmain) \
    -L/usr/local/cuda/lib64/stubs -lnvidia-ml -lcuda -o "$build") || { echo "nvbandwidth did not build"; return 1; }
}

nvbandwidth_peer() {  # nvbandwidth's GPU-to-GPU and all-GPU host tests against the newest results with peer rows
  local build=/tmp/nvbandwidth results reference
  nvbandwidth_build || return
  results=$(python3 - <<'EOF'
import glob, pandas as pd
files = sorted(glob.glob("results/*.parquet"))
print(next((f for f in reversed(files) if (pd.read_parquet(f, columns=["experiment"])["experiment"] == "peer").any()),
           ""))
EOF
)
  [ -n "$results" ] || { echo "no peer results"; return; }
  reference="results/_references/$(basename "${results%.parquet}")-nvbandwidth-peer.json"
  "$build" -b 256 -j -t device_to_device_memcpy_read_ce device_to_device_memcpy_write_ce \
    device_to_device_bidirectional_memcpy_read_ce device_to_device_bidirectional_memcpy_write_ce \
    device_to_device_memcpy_read_sm device_to_device_memcpy_write_sm \
    device_to_device_bidirectional_memcpy_read_sm device_to_device_bidirectional_memcpy_write_sm \
    device_to_device_latency_sm host_to_all_memcpy_ce all_to_host_memcpy_ce > "$reference"
  python3 scripts/compare_nvbandwidth_peer.py "$results" "$reference"
}

cold_profile() {  # what a fresh machine compiles, experiment by experiment: a --quick sweep of each alone, and the
  # numba-cuda and CuPy cache files it left
  local marker=/tmp/cold-marker name start
  for name in $(python3 -c "from bench.experiments import registry; print(' '.join(n for n, e in registry().items() if e.gpus == 1))"); do
    touch "$marker"; start=$(date +%s%N)
    python3 -m bench sweep --quick --experiments "$name" --out /tmp/cold-profile > /dev/null 2>&1
    echo "$name: $(( ($(date +%s%N) - start) / 1000000 )) ms; new numba-cuda cache files:" \
      "$(find src -newer "$marker" -name '*.nbc' | wc -l), new CuPy kernels: $(find ~/.cupy -newer "$marker" -type f | wc -l)"
    find src -newer "$marker" -name '*.nbi' -printf '    numba %f\n'
  done
}

latency_diagnosis() {  # bench's DRAM chase read 5-8% below the C++ one: do the C++ loop's 21 launches (30 ms)
  # leave the GPU's clocks low? The C++ chase with 21 and 2001 launches and bench's, the SM clock sampled meanwhile
  nvcc -O2 -o /tmp/reference_paths scripts/reference_paths.cu || return
  local clocks=/tmp/clocks.csv sampler reps
  for reps in 21 2001; do
    nvidia-smi -i 0 --query-gpu=clocks.sm --format=csv,noheader,nounits -lms 20 > "$clocks" & sampler=$!
    ONLY_CHASE=1 CHASE_REPS=$reps /tmp/reference_paths | grep chase_device
    kill "$sampler"; wait "$sampler" 2>/dev/null
    echo "C++ $reps launches: SM MHz samples (count value): $(sort -n "$clocks" | uniq -c | tr -s ' \n' ' ')"
  done
  nvidia-smi -i 0 --query-gpu=clocks.sm --format=csv,noheader,nounits -lms 20 > "$clocks" & sampler=$!
  python3 -m bench sweep --experiments latency --axis memory=device --out /tmp/latency-diagnosis > /dev/null
  kill "$sampler"; wait "$sampler" 2>/dev/null
  python3 -c "import pandas as pd; r = pd.read_parquet('/tmp/latency-diagnosis'); print(r[['bytes', 'ns_per_access', 'n_samples', 'sm_clock_seen_mhz']].to_string(index=False))"
  echo "bench: SM MHz samples (count value): $(sort -n "$clocks" | uniq -c | tr -s ' \n' ' ')"
}

bidir_diagnosis() {  # bench's BIDIR H2D read 10% below nvbandwidth's: three of each, one after the other
  local i
  nvbandwidth_build || return
  for i in 1 2 3; do
    python3 -m bench sweep --experiments bandwidth --axis direction=BIDIR,H2D --axis host_memory=pinned \
      --sizes 256MiB --out "/tmp/bidir-$i" > /dev/null
    python3 -c "import pandas as pd; r = pd.read_parquet('/tmp/bidir-$i'); print('bench', $i, r[['direction', 'gbps', 'h2d_gbps', 'd2h_gbps']].round(2).to_string(index=False, header=False).replace(chr(10), ' | '))"
    /tmp/nvbandwidth -b 256 -j -t host_to_device_memcpy_ce host_to_device_bidirectional_memcpy_ce \
      device_to_host_bidirectional_memcpy_ce > /tmp/bidir-nvb.json
    python3 -c "import sys; sys.path.insert(0, 'scripts'); import compare_nvbandwidth as c; print('nvbandwidth', $i, c.nvbandwidth_values('/tmp/bidir-nvb.json'))"
  done
}

comparable_here() {  # the newest of these results files with bandwidth rows of this machine's GPU 0
  python3 - "$(nvidia-smi -i 0 --query-gpu=uuid --format=csv,noheader)" "$@" <<'PY'
import os, sys
import pandas as pd
import pyarrow.parquet as pq
uuid, paths = sys.argv[1], sorted(sys.argv[2:], key=os.path.basename, reverse=True)
columns = ["gpu_uuid", "experiment"]
for path in paths:
    if not set(columns) <= set(pq.read_schema(path).names):
        continue
    rows = pd.read_parquet(path, columns=columns)
    if ((rows["gpu_uuid"] == uuid) & (rows["experiment"] == "bandwidth")).any():
        print(path)
        break
PY
}

nvbandwidth() {  # against bench's results of this GPU only; never overwrites an earlier reference
  local build=/tmp/nvbandwidth results reference
  nvbandwidth_build || return
  results=$(comparable_here results/*.parquet results/_fresh/*.parquet results/_nvbandwidth/*.parquet)
  [ -n "$results" ] || { echo "nvbandwidth: no bench bandwidth results of this GPU to compare with"; return 1; }
  reference="results/_references/$(basename "${results%.parquet}")-nvbandwidth.json"
  [ -e "$reference" ] && reference="${reference%.json}-$stamp.json"
  "$build" -b 256 -j -t host_to_device_memcpy_ce device_to_host_memcpy_ce \
    host_to_device_bidirectional_memcpy_ce device_to_host_bidirectional_memcpy_ce device_local_copy \
    host_to_device_memcpy_sm device_to_host_memcpy_sm host_device_latency_sm > "$reference"
  python3 scripts/compare_nvbandwidth.py "$results" "$reference"
}

machine() {
  lscpu | grep -E "^(Model name|Socket|NUMA|CPU\(s\))"
  nvidia-smi topo -m
  python3 -c "import bench.platform.env as e; print('CPUs local to GPU 0:', e.cpu_ranges(e.local_cpus(e.collect(0).pci_bus_id)))"
  python3 -c "import cuda.bindings, cuda.core; print('cuda-bindings', cuda.bindings.__version__, 'cuda-core', cuda.core.__version__)"
  grep -n "cuMemcpyBatchAsync\b\|define cuMemcpyBatchAsync\|cuMemPrefetchAsync\b" /usr/local/cuda/include/cuda.h | head
  ls /usr/include/boost/program_options.hpp 2>&1; cmake --version 2>&1 | head -1
}

reference() {
  local bandwidth reference
  bandwidth=$(python3 - <<'EOF'
import glob, pandas as pd
files = sorted(f for f in glob.glob("results/*.parquet"))
with_bandwidth = [f for f in files if (pd.read_parquet(f, columns=["experiment"])["experiment"] == "bandwidth").any()]
print(with_bandwidth[-1] if with_bandwidth else "")
EOF
)
  [ -n "$bandwidth" ] || { echo "no bandwidth results"; return; }
  nvcc -O2 -o /tmp/reference_bandwidth scripts/reference_bandwidth.cu || return
  reference="results/_references/$(basename "${bandwidth%.parquet}")-reference-cpp.csv"
  mkdir -p results/_references
  /tmp/reference_bandwidth > "$reference" && python3 scripts/compare_reference.py "$bandwidth" "$reference"
}

{
  echo "== $(date -u +%FT%TZ) gpu_check, commit $BENCH_GIT_COMMIT"
  nvidia-smi --query-gpu=name,uuid,driver_version,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  python3 -m bench env
  for step in "$@"; do
    read -r -a words <<< "$step"
    echo "== $(date -u +%T) $step"
    case "${words[0]}" in
      tests) timeout 420 python3 -m pytest -v -m gpu -p no:cacheprovider "${words[@]:1}" > "results/_logs/$stamp-tests.txt" 2>&1; grep -v Warning "results/_logs/$stamp-tests.txt" | tail -80 ;;
      startup) python3 scripts/startup.py ;;
      torch-import) python3 -c "import time; t = time.perf_counter(); import torch; a = time.perf_counter(); \
torch.cuda.is_available(); print(f'import torch {a - t:.2f} s, torch.cuda.is_available() {time.perf_counter() - a:.2f} s')" ;;
      profile-children) python3 scripts/profile_children.py "${words[@]:1}" ;;
      quick) timed python3 -m bench sweep --quick --out results/_quick ;;
      sweep) sweep "${words[@]:1}" ;;
      full) full "${words[@]:1}" ;;
      full-part) timed python3 -m bench sweep --full "${words[@]:1}" --out results/_full_parts ;;
      firstcall-compile)
        timed python3 -m bench sweep --full --experiments firstcall --axis call=numba-first-call,cupy-first-compile \
          --out results/_full ;;
      agree-full)
        timed python3 -m bench sweep --full --experiments bandwidth,blocking,serialization --out results/_agreement
        timed python3 -m bench sweep --full --experiments overlap --axis host_memory=pinned --sizes 256MiB \
          --out results/_agreement ;;
      agree-repeat) timed python3 -m bench sweep --full --experiments bandwidth --out results/_repeat ;;
      agree)
        repeat=(); [ -d results/_repeat ] && repeat=(results/_repeat)
        python3 scripts/agreement.py "$(newest)" results/_agreement "${repeat[@]}" \
          | tee "results/_logs/$stamp-agreement.txt" ;;
      paths-reference) paths_reference ;;
      nvbandwidth) nvbandwidth ;;
      nvbandwidth-peer) nvbandwidth_peer ;;
      latency-diagnosis) latency_diagnosis ;;
      cold-profile) cold_profile ;;
      chase-swap)
        nvcc -O2 -o /tmp/reference_paths scripts/reference_paths.cu \
          && python3 scripts/chase_swap.py /tmp/reference_paths | tee "results/_logs/$stamp-chase-swap.txt" ;;
      bidir-diagnosis) bidir_diagnosis ;;
      devices)  # every GPU's bandwidth, one GPU after another, then all at once, and what changed between them
        timed python3 -m bench sweep --devices all --experiments bandwidth --out results/_devices
        timed python3 -m bench sweep --devices all --concurrent --experiments bandwidth --out results/_devices
        python3 -m bench compare $(ls results/_devices/*.parquet | sort | tail -2) \
          | tee "results/_logs/$stamp-devices-one-after-another-vs-concurrent.txt" ;;
      multi) sweep --devices all --experiments peer,hostlinks,crossgpu "${words[@]:1}" ;;
      nvbandwidth-sweep)
        timed python3 -m bench sweep --experiments bandwidth,zerocopy,latency --sizes 1MiB,256MiB \
          --axis host_memory=pinned,device --out results/_nvbandwidth ;;
      machine) machine ;;
      reference) reference ;;
      faulty) python3 scripts/inject_fault.py "${words[@]:1}" ;;
      library-check) python3 scripts/check_library_verdicts.py "$(newest)" "results/_references/$(basename "$(newest)" .parquet)-library-check.csv" ;;
      syncs-cases) timeout 480 python3 scripts/syncs_cases.py results/_syncs ;;
      syncs)
        name=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | tr -c 'A-Za-z0-9\n' - | head -1)
        timeout 300 python3 -m bench syncs --save "results/_syncs/$stamp-$name-$(basename "${words[1]%%:*}" .py).parquet" \
          "${words[@]:1}" ;;
      trace-cases) timeout 540 python3 scripts/trace_cases.py results/_trace "${PLOTS:-plots}" ;;
      trace-overhead)
        name=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | tr -c 'A-Za-z0-9\n' - | head -1)
        timeout 300 python3 scripts/trace_overhead.py "results/_trace/$stamp-$name-overhead.json" ;;
      copy-drift)
        name=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | tr -c 'A-Za-z0-9\n' - | head -1)
        slug=$name-$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | cut -c5-12)
        timeout 300 python3 scripts/copy_rate_drift.py "results/_trace/$stamp-$slug-copy-drift.json" \
          --seconds "${words[1]:-30}" | tee "results/_trace/$stamp-$slug-copy-drift.txt" ;;
      trace)
        name=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | tr -c 'A-Za-z0-9\n' - | head -1)
        timeout 300 python3 -m bench trace --save "results/_trace/$stamp-$name-$(basename "${words[1]%%:*}" .py).parquet" \
          "${words[@]:1}" ;;
      trace-readme)
        name=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | tr -c 'A-Za-z0-9\n' - | head -1)
        slug=$name-$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | cut -c5-12)
        for fn in pageable_step step; do
          timeout 300 python3 -m bench trace --save "results/_trace/$stamp-$slug-readme-$fn.parquet" \
            --plot "${PLOTS:-plots}/$slug/trace-readme-$fn.png" --perfetto "results/_trace/$stamp-$slug-readme-$fn.json" \
            docs/examples/input_pipeline.py:$fn \
            | tee "results/_trace/$stamp-$slug-readme-$fn.txt"
        done ;;
      ddp-trace)
        timeout 540 torchrun --standalone --nproc-per-node "$(nvidia-smi -L | wc -l)" scripts/ddp_trace.py \
          results/_trace --runs "${words[1]:-20}" ;;
      claims) timeout 300 python3 -m bench claims "${words[@]:1}" ;;
      report) timeout 300 python3 -m bench report "${words[@]:1}" ;;
      compare) timeout 300 python3 -m bench compare "${words[@]:1}" ;;
      benchmarks) timeout 300 python3 -m pytest --benchmark-only -p no:cacheprovider "${words[@]:1}" 2>&1 | tail -80 ;;
      answers) timeout 580 python3 scripts/answer_times.py --out results/_answers "${words[@]:1}" ;;
      trace-tiny|fixtures|gate-proof|profiler-agree|notebook|integrations)
        name=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | tr -c 'A-Za-z0-9\n' - | head -1)
        slug=$name-$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | cut -c5-12)
        case "${words[0]}" in
          trace-tiny) mkdir -p results/_trace
            timeout 580 python3 scripts/trace_tiny.py "results/_trace/$stamp-$slug-${BENCH_GIT_COMMIT:0:7}-tiny.json" \
              "${words[@]:1}" ;;
          fixtures) mkdir -p results/_benchmarks
            timeout 120 python3 -m pytest --benchmark-only -p no:cacheprovider benchmarks/test_fixtures.py \
              --benchmark-json "results/_benchmarks/$stamp-$slug-${BENCH_GIT_COMMIT:0:7}-fixtures.json" 2>&1 | tail -20 ;;
          gate-proof) mkdir -p results/_gates
            timeout 580 python3 scripts/gate_proof.py "results/_gates/$stamp-$slug" ;;
          profiler-agree)
            timeout 580 python3 scripts/profiler_agree.py "results/_trace/$stamp-$slug-profiler" "${words[@]:1}" ;;
          integrations) mkdir -p results/_integrations
            timeout 420 python3 -m pytest -v -m gpu -p no:cacheprovider tests/test_gpu_integrations.py \
              --basetemp "results/_integrations/$stamp-$slug" > "results/_integrations/$stamp-$slug.txt" 2>&1
            grep -v Warning "results/_integrations/$stamp-$slug.txt" | tail -40 ;;
          notebook) mkdir -p results/_notebook
            timeout 580 python3 scripts/notebook_proof.py "results/_notebook/$stamp-$slug.ipynb" ;;
        esac ;;
      *) echo "unknown step: $step" ;;
    esac
    pack  # after every step: a call cut short still brings back what finished
  done
} 2>&1 | tee "$log"
pack
ls -la "$out"
