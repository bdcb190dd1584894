"""The documentation the catalogs cite, page by page: the CUDA runtime's and Programming Guide's, CuPy's, PyTorch's
and JAX's. Imports nothing, so that the analysis side (the claims) cites the same pages without the catalogs' code."""

SYNC_PAGE = "https://docs.nvidia.com/cuda/cuda-runtime-api/api-sync-behavior.html"
GUIDE_IMPLICIT = "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#implicit-synchronization"
GUIDE_ASYNC = ("https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html"
               "#concurrent-execution-between-host-and-device")
GUIDE_STREAMS = "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#creation-and-destruction-streams"
MEMORY_PAGE = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__MEMORY.html"
ASYNC_ALLOC_PAGE = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__MEMORY__POOLS.html"
STREAM_PAGE = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__STREAM.html"
EVENT_PAGE = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__EVENT.html"
ERROR_PAGE = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__ERROR.html"
DEVICE_PAGE = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DEVICE.html"
CUPY_DOCS = "https://docs.cupy.dev/en/stable/reference/generated/"
TORCH_DOCS = "https://docs.pytorch.org/docs/stable/"
JAX_DOCS = "https://docs.jax.dev/en/latest/"
JAX_ASYNC = JAX_DOCS + "async_dispatch.html"
