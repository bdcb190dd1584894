"""An independent check of the library truth table: the same calls, judged another way.

    python scripts/check_library_verdicts.py RESULTS.parquet [OUT.csv]

bench judges a call by a numba spin kernel that stamps its start and end into host-mapped memory. Here the spin is a
CuPy RawKernel (compiled by NVRTC) busy-waiting 200 ms, followed on the same stream by a CUDA event; right after the
call returns, ``cudaEventQuery`` says whether the GPU had finished the spin (the call waited) or not (it returned
while the GPU was busy). No numba, no mapped memory, a different spin length. For PyTorch calls,
PyTorch's own detector (``torch.cuda.set_sync_debug_mode("warn")``) is asked too: it warns on synchronizing calls it
knows of. Only the ``same`` placement of calls that use a stream bench can name is checked (not JAX's: its own
streams); calls bench found slower than the spin (compilations) are left out. Prints one line per call and the
agreement; writes the table as CSV.
"""

import os
import sys
import warnings

import pandas as pd

from bench import catalogs
from bench.results import store
from bench.catalogs import catalog
from bench.platform.libraries import BY_NAME
from bench.experiments import registry

SPIN_MS = 200.0
SPIN = r"""
__device__ unsigned long long now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
extern "C" __global__ void spin(unsigned long long nanoseconds) {
    unsigned long long start = now();
    while (now() - start < nanoseconds) { }
}
"""


def main() -> int:
    import cupy

    from bench.experiments.library import _Streams

    rows = store.read(sys.argv[1], store.suite_schema(registry()))
    bench = rows[(rows["experiment"] == "library") & (rows["placement"] == "same") & (rows["status"] == "ok")]
    kernel = cupy.RawKernel(SPIN, "spin")
    nanoseconds = cupy.uint64(int(SPIN_MS * 1e6))
    made: dict[str, object] = {}
    lines = []
    for _, row in bench.iterrows():
        call = catalog()[row["call"]]
        if call.fresh or call.stream == "own" or row["idle_host_ms"] > SPIN_MS / 4:
            continue
        if call.library not in made:
            made[call.library] = catalogs.kit(call.library)
        kit = made[call.library]
        streams = _Streams(BY_NAME[call.library])
        with streams.current():
            call.prepare(kit, streams.call).call()  # warm: its first call (module loading) is not the question
            prepared = call.prepare(kit, streams.call)
        cupy.cuda.runtime.deviceSynchronize()
        spinning = streams.spinning(call, "same")
        done = cupy.cuda.Event(disable_timing=True)
        with spinning:
            kernel((1,), (1,), (nanoseconds,))
            done.record(spinning)
        warned = None
        with streams.current():
            if call.library == "torch":
                import torch

                torch.cuda.set_sync_debug_mode("warn")
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    prepared.call()
                torch.cuda.set_sync_debug_mode("default")
                warned = any("synchroniz" in str(warning.message) for warning in caught)
            else:
                prepared.call()
            waited = done.done
        cupy.cuda.runtime.deviceSynchronize()
        prepared.cleanup()
        verdict = "waits-for-device" if waited else "does not wait"
        agrees = (row["verdict"] == "waits-for-device") == waited
        lines.append({"call": row["call"], "bench": row["verdict"], "event query": verdict, "agrees": agrees,
                      "torch sync debug mode warned": warned})
        print(f"{'ok ' if agrees else 'DIFFERS'} {row['call']:<52} bench: {row['verdict']:<17} event: {verdict}"
              + ("" if warned is None else f"   torch sync debug mode: {'warned' if warned else 'silent'}"))
    table = pd.DataFrame(lines)
    if len(sys.argv) > 2:
        table.to_csv(sys.argv[2], index=False)
    torch_rows = table[table["torch sync debug mode warned"].notna()]
    waits = torch_rows["bench"] == "waits-for-device"
    print(f"agreement with the event query: {int(table['agrees'].sum())} of {len(table)} calls")
    if len(torch_rows):
        print(f"PyTorch's sync debug mode warned on {int(torch_rows.loc[waits, 'torch sync debug mode warned'].sum())}"
              f" of the {int(waits.sum())} PyTorch calls bench found waiting, and on "
              f"{int(torch_rows.loc[~waits, 'torch sync debug mode warned'].sum())} of the {int((~waits).sum())} "
              "that did not wait")
    return 0 if table["agrees"].all() else 1


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    os._exit(status)  # PyTorch's tensors outliving the context at interpreter exit would abort the process
