"""A training loop as users write it, built from train_step.py: 50 steps over batches uploaded from pinned memory,
the loss logged every 10 steps, one evaluation half way, a checkpoint at the end (scripts/gate_proof.py gates it).

    python -m bench syncs docs/examples/train_loop.py:train    # which lines wait: the logging, the evaluation, ...
    python -m bench trace docs/examples/train_loop.py:train    # its uploads, kernels and waits
"""

import io

import torch

STEPS, LOG_EVERY, BATCHES = 50, 10, 4
model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                            torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
inputs = torch.randn(BATCHES, 2048, 1024).pin_memory()  # the input batches, on the host
labels = torch.randint(0, 10, (BATCHES, 2048)).pin_memory()
held_out = torch.randn(2048, 1024, device="cuda")
held_out_labels = torch.randint(0, 10, (2048,), device="cuda")


def evaluate() -> float:
    with torch.no_grad():
        correct = (model(held_out).argmax(dim=1) == held_out_labels).float().mean()
    return correct.item()


def train() -> tuple[list[float], float]:
    losses, accuracy = [], 0.0
    for step in range(STEPS):
        x = inputs[step % BATCHES].to("cuda", non_blocking=True)
        y = labels[step % BATCHES].to("cuda", non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if step % LOG_EVERY == 0:
            losses.append(loss.item())
        if step == STEPS // 2:
            accuracy = evaluate()
    checkpoint = io.BytesIO()
    torch.save(model.state_dict(), checkpoint)
    return losses, accuracy
