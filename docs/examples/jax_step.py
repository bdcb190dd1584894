"""A JAX step as users write it: a jitted two-layer product, its mean read back every step.

    python -m bench syncs docs/examples/jax_step.py:step     # which line waits for the GPU?
"""

import jax
import jax.numpy as jnp

key = jax.random.PRNGKey(0)
weights = jax.random.normal(key, (4096, 4096), dtype=jnp.float32) / 64
batch = jax.random.normal(key, (8192, 4096), dtype=jnp.float32)
means = []


@jax.jit
def forward(x, w):
    return jnp.maximum(x @ w, 0) @ w


def step():
    means.append(float(forward(batch, weights).mean()))
