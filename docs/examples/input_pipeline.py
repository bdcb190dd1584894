"""A PyTorch input pipeline over four streams, as the README traces it:

    python -m bench trace docs/examples/input_pipeline.py:step            pinned batches
    python -m bench trace docs/examples/input_pipeline.py:pageable_step   the same from pageable memory

Each of 8 batches of 32 MiB is uploaded, multiplied by a matrix twice and downloaded, on its own stream.
"""

import torch

BATCHES, STREAMS = 8, 4
streams = [torch.cuda.Stream() for _ in range(STREAMS)]
pinned = torch.rand(BATCHES, 8192, 1024).pin_memory()  # 32 MiB a batch
pageable = pinned.clone()
results = torch.empty_like(pinned).pin_memory()
weight = torch.rand(1024, 1024, device="cuda") / 1024


def run(batches: torch.Tensor) -> None:
    for index in range(BATCHES):
        with torch.cuda.stream(streams[index % STREAMS]):
            x = batches[index].to("cuda", non_blocking=True)
            y = torch.relu(x @ weight @ weight)
            results[index].copy_(y, non_blocking=True)


def step() -> None:
    run(pinned)


def pageable_step() -> None:
    run(pageable)
