"""A training step as users write it: PyTorch, the loss logged every step.

    python -m bench syncs docs/examples/train_step.py:step     # which line waits for the GPU?
"""

import torch

model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096),
                            torch.nn.ReLU(), torch.nn.Linear(4096, 10)).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
batch = torch.randn(8192, 4096, device="cuda")
labels = torch.randint(0, 10, (8192,), device="cuda")
losses = []


def step():
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(batch), labels)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
