"""The runtime's own memory: what the CUDA driver and PyTorch's libraries hold beside the tensors.

One home for the terms every process pays whatever it computes — the CUDA context, cuBLAS's
workspace, the caching allocator's reserve — read by the training overhead bucket and by
every serving engine's rules.
"""

from __future__ import annotations

from typing import Final

from core.units import MiB

# The CUDA context of a PyTorch process (driver, kernels of the loaded libraries with lazy
# loading) sits outside the caching allocator: about 300-600 MiB on current drivers
# (PyTorch "CUDA semantics" notes; nvidia-smi of an idle process). 512 MiB is assumed.
CUDA_CONTEXT_BYTES: Final = 512 * MiB
# cuBLAS workspace PyTorch keeps per handle and takes from its caching allocator at the first
# matmul (aten/src/ATen/cuda/CublasHandlePool.cpp): ":4096:8" = 8 × 4 MiB on Hopper and newer,
# 4096 KiB × 2 + 16 KiB × 8 elsewhere; 32 MiB, the size the cuBLAS documentation recommends
# for Hopper (cublasSetWorkspace), is used for every card.
CUBLAS_WORKSPACE_BYTES: Final = 32 * MiB
# Caching-allocator reserve: reserved minus allocated at the peak, from splitting 2 MiB
# and larger segments (PyTorch "CUDA memory management"). Assumed 5 % of the peak.
ALLOCATOR_RESERVE_FRACTION: Final = 0.05
