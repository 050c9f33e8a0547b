"""Serving: how an inference engine spends a GPU's memory and time.

Owns the engines' memory rules — Hugging Face ``generate`` and vLLM / SGLang pools
(:mod:`.engines`, :mod:`.vllm_rules`) —, the weight and KV-cache storage formats
(:mod:`.formats`), the one KV-cache formula (:mod:`.kv`), latency and throughput
(:mod:`.speed`), and the serving estimate that :func:`core.estimate.estimate` carries
(:mod:`.inference`). Changed serving plans that would fit are :mod:`core.advice`'s.
"""
