"""Ground-truth GPU memory measurement for VRAM Planner's accuracy benchmark.

Run as ``python -m tools.measure CASES.json``; see README.md. This package must
not import torch at import time: the fake-CUDA backend has to preload a small
native library before torch initialises (see fake_cuda.py).
"""
