"""Serving: how an inference engine spends a GPU's memory and time.

``formats`` names the weight and cache storage formats and their sizes; ``kv`` is the one
home of the KV-cache formula; ``engines`` lays out memory as Hugging Face ``generate`` and
vLLM do; ``speed`` turns the layout into latency and throughput; ``remedies`` proposes
changed plans when a serving plan does not fit.
"""
