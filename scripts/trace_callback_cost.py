"""What bench trace's driver-call callbacks cost one call: host µs per cudaMemcpyAsync, untraced, with CUPTI's
activity records only, with the records and the callbacks (bench trace's default), with the callbacks but no Python
stack taken, and with the records and an empty callback entered the two ways there are: cupti-python's
``subscribe`` (which builds a Python object of CUPTI's record per call) and bench's ctypes one
(:mod:`bench.usercode.driver_callbacks`). For a 4 KiB pinned copy (the call's own cost) and a 16 MiB pageable copy (a
call that blocks the host while it copies). The modes run one after another, not interleaved: differences of a
microsecond or two are within the machine's drift.

    python scripts/trace_callback_cost.py [--calls N]

Prints one line per copy and mode: the median host µs per call over N calls, after as many warm-up calls.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


class EmptyCupti:
    """cupti-python's own subscription with a callback that does nothing, on the calls bench trace watches."""

    def __init__(self) -> None:
        from cupti import cupti

        from bench.usercode.cuda_calls import waiting_callback_ids

        self.cupti, self.ids = cupti, list(waiting_callback_ids(cupti))
        self.handle = cupti.subscribe(lambda *arguments: None, None)

    def watch(self, on: bool) -> None:
        for callback_id in self.ids:
            self.cupti.enable_callback(int(on), self.handle, self.cupti.CallbackDomain.DRIVER_API, callback_id)

    def close(self) -> None:
        self.cupti.unsubscribe(self.handle)


def empty_callbacks(mode: str):
    """An empty callback on the watched calls, entered cupti-python's way or bench's ctypes way (None: neither)."""
    if mode == "empty callbacks, cupti-python":
        return EmptyCupti()
    if mode == "empty callbacks, ctypes":
        from cupti import cupti

        from bench.usercode.cuda_calls import waiting_callback_ids
        from bench.usercode.driver_callbacks import DriverCallbacks

        return DriverCallbacks(cupti, "bench empty", waiting_callback_ids(cupti), lambda *arguments: None, print)
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    arguments = parser.parse_args()
    if arguments.calls < 1:
        parser.error("--calls must be at least 1")
    import numpy as np

    from bench.platform.cuda import cupy, runtime
    from bench.platform.env import gpu_environment
    from bench.measure.memory import host_buffer
    from bench.usercode import activity
    from bench.usercode.activity import open_recorder

    environment = gpu_environment(0)
    print(f"{environment.device.gpu_name} {environment.device.gpu_uuid} {environment.host.git_commit}")
    stream = cupy.cuda.Stream(non_blocking=True)
    user_line = activity.places_of
    cases = {}
    for name, kind, nbytes in (("4 KiB pinned H2D", "pinned", 4096), ("16 MiB pageable H2D", "pageable", 16 << 20)):
        host = host_buffer(kind, nbytes)
        host.array.view(np.uint8)[:] = np.random.default_rng(0).integers(0, 255, nbytes, dtype=np.uint8)
        device = cupy.empty(nbytes, cupy.uint8)
        cases[name] = (host, device, nbytes)
    for name, (host, device, nbytes) in cases.items():
        for mode in ("untraced", "records only", "records and callbacks", "callbacks, no stacks",
                     "empty callbacks, cupti-python", "empty callbacks, ctypes"):
            recorder = None if mode == "untraced" else open_recorder(calls=mode in ("records and callbacks",
                                                                                    "callbacks, no stacks"))
            activity.places_of = (lambda frame, **options: ()) if mode == "callbacks, no stacks" else user_line
            empty = empty_callbacks(mode)
            try:
                if recorder:
                    recorder.start()
                if empty:
                    empty.watch(True)
                samples = []
                for index in range(2 * arguments.calls):
                    began = time.perf_counter()
                    runtime.memcpyAsync(device.data.ptr, host.ptr, nbytes, runtime.memcpyHostToDevice, stream.ptr)
                    ended = time.perf_counter()
                    stream.synchronize()
                    if index >= arguments.calls:
                        samples.append((ended - began) * 1e6)
                if recorder:
                    recorder.synchronize()
                    recorder.stop()
            finally:
                if empty:
                    empty.close()
                if recorder:
                    recorder.close()
            print(f"{name:<20} {mode:<30} {statistics.median(samples):9.2f} µs per call "
                  f"(min {min(samples):.2f}, max {max(samples):.2f})", flush=True)
    for host, device, _ in cases.values():
        host.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
