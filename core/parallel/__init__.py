"""Multi-GPU layouts: how the model, the state and the batch are cut across ranks.

Owns where each rank sits (:mod:`.layout`: data, tensor, pipeline and context parallel
degrees, pipeline stages), what share of the weights, gradients and optimizer state a rank
keeps under DDP, FSDP2 and ZeRO (:mod:`.state`), how activations split under tensor,
sequence, context and pipeline parallelism (:mod:`.acts`), and what the ranks exchange each
step over which link (:mod:`.comm`). It takes the single-GPU terms as inputs and never
imports :mod:`core.training`, which assembles the per-rank phases from it.
"""
