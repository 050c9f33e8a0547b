"""Every flag ``vllm serve`` and ``python -m sglang.launch_server`` define: the reader of a pasted launch command
(:mod:`core.files.launch.serve_command`) tells a flag the engine has from one it does not, and a switch from a flag
that takes a value, by these tables.

Read from the released wheels on PyPI (``pip download --no-deps vllm==X`` / ``sglang==X``, unzipped; the option
strings of every ``add_argument`` call, a dataclass-built flag's switch-ness from its field's ``bool`` type):

* vLLM 0.8.5, 0.10.2 and 0.19.0: ``vllm/engine/arg_utils.py`` (``EngineArgs.add_cli_args``,
  ``AsyncEngineArgs.add_cli_args``; from 0.10 most flags come from the config dataclasses through ``get_kwargs``,
  whose ``bool`` fields get ``argparse.BooleanOptionalAction`` and so a ``--no-`` spelling too) and
  ``vllm/entrypoints/openai/cli_args.py`` (``make_arg_parser``; 0.10 on: ``FrontendArgs``' fields). The union of
  the three: a flag one release dropped (``--swap-space``, gone by 0.19) is still vLLM's.
* SGLang 0.4.3.post4, 0.4.6, 0.4.7, 0.4.10, 0.5.1, 0.5.10, 0.5.11 (``sglang/srt/server_args.py``
  ``ServerArgs.add_cli_args``) and 0.5.23 (the annotated fields of ``sglang/srt/arg_groups/fields/*.py``, with their
  ``aliases`` and ``cli_name``, that ``arg_groups/arg_utils.py`` ``add_cli_args_from_dataclass`` turns into flags,
  plus the ones ``server_args.py`` still adds by hand). A flag that was a switch in any release read is a switch.

These tables say whether a flag is the engine's at all and whether it takes a value. Which release takes it is
the per-release sets below (``vllm_release_flags``, ``sglang_release_flags``), read from every covered release's
wheels by tools/engine_flags/.

Neither engine turns argparse's prefix matching off (vLLM's ``FlexibleArgumentParser`` in
``vllm/utils/argparse_utils.py`` 0.19.0 and ``vllm/utils/__init__.py`` 0.10.2 pass no ``allow_abbrev``; SGLang's
parser is a plain ``argparse.ArgumentParser``): ``--tp`` is SGLang's ``--tp-size``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

# Why a word of a pasted command is left out of the plan when nothing more specific applies: the readers of every
# engine (serve_command, gguf_command) list it so, and FlagNote.ignored_line strips it to show the reason alone.
NO_EFFECT: Final = "no effect on memory or speed"


def flag_names(text: str) -> frozenset[str]:
    """The flags of a table written as words, a few to a line."""
    return frozenset(text.split())


# The option strings ``vllm serve`` accepts in each release line the planner covers (core.inputs VllmVersion): read
# from each line's last wheel by tools/engine_flags/vllm_serve_flags.py, whose docstring says how; the file's header
# names each wheel and its commit. One option a line, with the lines that take it ("--swap-space 0.6-0.17").
VLLM_SERVE_FLAGS_FILE: Final = "engine_flags/vllm_serve.txt"
# The same for ``python -m sglang.launch_server`` in each SGLang release the planner covers (core.inputs
# SglangVersion): read by tools/engine_flags/sglang_server_flags.py from each release's own wheel (X.Y.Z, the one an
# export's ``pip install sglang==X.Y.Z`` installs) and its last .postN (0.4.6.post5 has 22 flags 0.4.6 has not,
# --pp-size among them); the header names each wheel and its parser's name (``prog``). Columns are wheel versions.
SGLANG_SERVER_FLAGS_FILE: Final = "engine_flags/sglang_server.txt"


@functools.lru_cache(maxsize=2)
def _release_table(name: str) -> tuple[dict[str, frozenset[str]], dict[str, str], dict[str, dict[str, set[str]]]]:
    """Release line ("0.19", "0.5.10") -> the option strings its parser has, -> its parser's ``prog`` where the
    header names one (``# sglang 0.5.23 wheel W prog sglang serve``), and -> the values it takes for the options
    whose choices the file records (``--quantization=mxfp4 0.10-0.34``; ``--load-format=* ...``: any value)."""
    from core.resources import resource_path

    lines: list[str] = []
    out: dict[str, set[str]] = {}
    progs: dict[str, str] = {}
    values: dict[str, dict[str, set[str]]] = {}
    for row in resource_path(name).read_text(encoding="utf-8").splitlines():
        if row.startswith("# lines "):
            lines = row.split()[2:]
            out = {line: set() for line in lines}
            values = {line: {} for line in lines}
        elif row.startswith("# sglang ") and " prog " in row:
            progs[row.split()[2]] = row.partition(" prog ")[2]
        elif row and not row.startswith("#"):
            flag, spans = row.split()
            for span in spans.split(","):
                first, _, last = span.partition("-")
                for line in lines[lines.index(first) : lines.index(last or first) + 1]:
                    if "=" in flag:
                        option, _, value = flag.partition("=")
                        values[line].setdefault(option, set()).add(value)
                    else:
                        out[line].add(flag)
    return {line: frozenset(flags) for line, flags in out.items()}, progs, values


ANY_VALUE: Final = "*"  # tools/engine_flags/choices.py ANY: the release's parser has no choices for the option


@dataclass(frozen=True)
class Choices:
    """The values one release takes for one option: argparse's ``choices``, or (``free``) any value, beside which
    ``names`` are the ones the release knows where it checks them after parsing (vLLM 0.9 on: ``--quantization``,
    ModelConfig's "Unknown quantization method"); ``names`` sorted (vLLM's get_kwargs sorts a Literal's; the
    0.6-0.8 lists and SGLang's keep the source's order, which the file does not)."""

    names: tuple[str, ...]
    free: bool

    def takes(self, value: str) -> bool:
        return value in self.names or (self.free and not self.names)


def _choices(sets: Iterable[set[str]]) -> Choices | None:
    found = [s for s in sets if s]
    if not found:
        return None
    union: set[str] = set().union(*found)
    return Choices(tuple(sorted(union - {ANY_VALUE})), ANY_VALUE in union)


def vllm_release_flags(line: str) -> frozenset[str]:
    """The option strings ``vllm serve`` of release line ``line`` ("0.19", or a VllmVersion) accepts; empty for a
    line the file does not hold."""
    return _release_table(VLLM_SERVE_FLAGS_FILE)[0].get(str(line), frozenset())


def vllm_release_values(line: str, option: str) -> Choices | None:
    """What ``vllm serve`` of ``line`` takes for ``option`` (``--quantization``, ``--kv-cache-dtype``, ``--dtype``,
    ``--load-format``: tools/engine_flags/choices.py VLLM_OPTIONS); None for another option or line."""
    return _choices([_release_table(VLLM_SERVE_FLAGS_FILE)[2].get(str(line), {}).get(option, set())])


def sglang_release_flags(version: str, every_patch: bool = False) -> frozenset[str]:
    """The option strings ``python -m sglang.launch_server`` of wheel ``version`` ("0.5.10", "0.4.6.post5", or a
    SglangVersion) accepts; with ``every_patch``, those any wheel read of its release (X.Y.Z and its last .postN)
    accepts: a command that names no .postN. Empty for a release the file does not hold."""
    table = _release_table(SGLANG_SERVER_FLAGS_FILE)[0]
    if not every_patch:
        return table.get(str(version), frozenset())
    release = str(version).partition(".post")[0]
    return frozenset().union(*(f for v, f in table.items() if v.partition(".post")[0] == release))


def sglang_wheels() -> tuple[str, ...]:
    """The SGLang wheels the table was read from, oldest first ("0.4.0", "0.4.0.post2", ...)."""
    return tuple(_release_table(SGLANG_SERVER_FLAGS_FILE)[0])


def sglang_release_values(version: str, option: str, every_patch: bool = False) -> Choices | None:
    """What ``python -m sglang.launch_server`` of wheel ``version`` takes for ``option`` (tools/engine_flags/choices.py
    SGLANG_OPTIONS); with ``every_patch``, what any wheel of its release takes. None for another option or release."""
    table = _release_table(SGLANG_SERVER_FLAGS_FILE)[2]
    release = str(version).partition(".post")[0]
    wheels = [v for v in table if (v.partition(".post")[0] == release if every_patch else v == str(version))]
    return _choices([table[v].get(option, set()) for v in wheels])


def releases_taking(
    option: str,
    value: str,
    releases: Iterable[str],
    values_of: Callable[[str, str], Choices | None],
    current: str,
) -> tuple[str, str]:
    """The first of ``releases`` (oldest first) after ``current`` that takes ``value`` for ``option``, and the last
    before it that does; "" where none does."""
    order = list(releases)
    taking = [r for r in order if (c := values_of(r, option)) is not None and c.takes(value)]
    at = order.index(current) if current in order else len(order)
    later = [r for r in taking if order.index(r) > at]
    earlier = [r for r in taking if order.index(r) < at]
    return (later[0] if later else ""), (earlier[-1] if earlier else "")


def sglang_prog(version: str) -> str:
    """The name SGLang's argparse gives itself in its error line: ``launch_server.py`` (``ArgumentParser()`` under
    ``python -m``), ``sglang serve`` where the release names it (0.5.10 on)."""
    return _release_table(SGLANG_SERVER_FLAGS_FILE)[1].get(str(version), "launch_server.py")


VLLM_SWITCHES: Final = flag_names(
    """
    --aggregate-engine-logging --allow-credentials --allow-deprecated-quantization --async-scheduling
    --calculate-kv-scales --cudagraph-metrics --data-parallel-external-lb --data-parallel-hybrid-lb
    --disable-async-output-proc --disable-cascade-attn --disable-chunked-mm-input --disable-custom-all-reduce
    --disable-fastapi-docs --disable-frontend-multiprocessing --disable-hybrid-kv-cache-manager
    --disable-log-requests --disable-log-stats --disable-mm-preprocessor-cache --disable-nccl-for-dp-synchronization
    --disable-sliding-window --disable-uvicorn-access-log --enable-auto-tool-choice --enable-chunked-prefill
    --enable-dbo --enable-elastic-ep --enable-ep-weight-filter --enable-eplb --enable-expert-parallel
    --enable-flashinfer-autotune --enable-force-include-usage --enable-layerwise-nvtx-tracing --enable-log-deltas
    --enable-log-outputs --enable-log-requests --enable-logging-iteration-details --enable-lora --enable-mfu-metrics
    --enable-mm-embeds --enable-multimodal-encoder-data-parallel --enable-offline-docs --enable-prefix-caching
    --enable-prompt-adapter --enable-prompt-embeds --enable-prompt-tokens-details --enable-reasoning
    --enable-request-id-headers --enable-return-routed-experts --enable-server-load-tracking --enable-sleep-mode
    --enable-ssl-refresh --enable-tokenizer-info-endpoint --enable-tower-connector-lora --enforce-eager
    --eplb-log-balancedness --exclude-tools-when-tool-choice-none --fail-on-environ-validation --fully-sharded-loras
    --headless --interleave-mm-strings --kv-cache-metrics --kv-sharing-fast-prefill --language-model-only
    --log-error-stack --mm-encoder-only --multi-step-stream-outputs --no-allow-credentials
    --no-allow-deprecated-quantization --no-async-scheduling --no-calculate-kv-scales --no-cudagraph-metrics
    --no-data-parallel-external-lb --no-data-parallel-hybrid-lb --no-disable-cascade-attn
    --no-disable-chunked-mm-input --no-disable-custom-all-reduce --no-disable-fastapi-docs
    --no-disable-frontend-multiprocessing --no-disable-hybrid-kv-cache-manager --no-disable-log-requests
    --no-disable-nccl-for-dp-synchronization --no-disable-sliding-window --no-disable-uvicorn-access-log
    --no-enable-auto-tool-choice --no-enable-chunked-prefill --no-enable-dbo --no-enable-elastic-ep
    --no-enable-ep-weight-filter --no-enable-eplb --no-enable-expert-parallel --no-enable-flashinfer-autotune
    --no-enable-force-include-usage --no-enable-layerwise-nvtx-tracing --no-enable-log-deltas
    --no-enable-log-outputs --no-enable-log-requests --no-enable-logging-iteration-details --no-enable-lora
    --no-enable-mfu-metrics --no-enable-mm-embeds --no-enable-offline-docs --no-enable-prefix-caching
    --no-enable-prompt-adapter --no-enable-prompt-embeds --no-enable-prompt-tokens-details
    --no-enable-request-id-headers --no-enable-return-routed-experts --no-enable-server-load-tracking
    --no-enable-sleep-mode --no-enable-ssl-refresh --no-enable-tokenizer-info-endpoint
    --no-enable-tower-connector-lora --no-enforce-eager --no-eplb-log-balancedness
    --no-exclude-tools-when-tool-choice-none --no-fail-on-environ-validation --no-fully-sharded-loras
    --no-interleave-mm-strings --no-kv-cache-metrics --no-kv-sharing-fast-prefill --no-language-model-only
    --no-log-error-stack --no-mm-encoder-only --no-multi-step-stream-outputs --no-ray-workers-use-nsight
    --no-return-tokens-as-token-ids --no-scheduler-reserve-full-isl --no-skip-mm-profiling --no-skip-tokenizer-init
    --no-specialize-active-lora --no-tokens-only --no-trust-remote-code --no-trust-request-chat-template
    --no-use-tqdm-on-load --ray-workers-use-nsight --return-tokens-as-token-ids --scheduler-reserve-full-isl
    --skip-mm-profiling --skip-tokenizer-init --specialize-active-lora --tokens-only --trust-remote-code
    --trust-request-chat-template --use-tqdm-on-load --use-v2-block-manager -dpe -dph -ep
    """
)

VLLM_VALUED: Final = flag_names(
    """
    --additional-config --all2all-backend --allowed-headers --allowed-local-media-path --allowed-media-domains
    --allowed-methods --allowed-origins --api-key --api-server-count --attention-backend --attention-config
    --block-size --chat-template --chat-template-content-format --code-revision --collect-detailed-traces
    --compilation-config --config --config-format --convert --cp-kv-cache-interleave-size --cpu-offload-gb
    --cpu-offload-params --cuda-graph-sizes --cudagraph-capture-sizes --data-parallel-address
    --data-parallel-backend --data-parallel-rank --data-parallel-rpc-port --data-parallel-size
    --data-parallel-size-local --data-parallel-start-rank --dbo-decode-token-threshold --dbo-prefill-token-threshold
    --dcp-comm-backend --dcp-kv-cache-interleave-size --decode-context-parallel-size --default-chat-template-kwargs
    --default-mm-loras --device --disable-access-log-for-endpoints --distributed-executor-backend
    --distributed-timeout-seconds --download-dir --dtype --ec-transfer-config --enable-lora-bias --eplb-config
    --eplb-step-interval --eplb-window-size --expert-placement-strategy --gdn-prefill-backend --generation-config
    --gpu-memory-utilization --guided-decoding-backend --guided-decoding-disable-additional-properties
    --guided-decoding-disable-any-whitespace --guided-decoding-disable-fallback --h11-max-header-count
    --h11-max-incomplete-event-size --hf-config-path --hf-overrides --hf-token --host --ignore-patterns
    --io-processor-plugin --kernel-config --kv-cache-dtype --kv-cache-dtype-skip-layers --kv-cache-memory-bytes
    --kv-cache-metrics-sample --kv-events-config --kv-offloading-backend --kv-offloading-size --kv-transfer-config
    --limit-mm-per-prompt --load-format --log-config-file --logits-processor-pattern --logits-processors
    --logprobs-mode --long-lora-scaling-factors --long-prefill-token-threshold --lora-dtype --lora-extra-vocab-size
    --lora-modules --lora-target-modules --mamba-block-size --mamba-cache-dtype --mamba-cache-mode
    --mamba-ssm-cache-dtype --master-addr --master-port --max-cpu-loras --max-cudagraph-capture-size --max-log-len
    --max-logprobs --max-long-partial-prefills --max-lora-rank --max-loras --max-model-len --max-num-batched-tokens
    --max-num-partial-prefills --max-num-seqs --max-parallel-loading-workers --max-prompt-adapter-token
    --max-prompt-adapters --max-seq-len-to-capture --media-io-kwargs --middleware --mm-encoder-attn-backend
    --mm-encoder-tp-mode --mm-processor-cache-gb --mm-processor-cache-type --mm-processor-kwargs
    --mm-shm-cache-max-object-size-mb --mm-tensor-ipc --model --model-impl --model-loader-extra-config --moe-backend
    --nnodes --node-rank --num-gpu-blocks-override --num-lookahead-slots --num-redundant-experts
    --num-scheduler-steps --offload-backend --offload-group-size --offload-num-in-group --offload-params
    --offload-prefetch-step --optimization-level --otlp-traces-endpoint --override-attention-dtype
    --override-generation-config --override-neuron-config --override-pooler-config --performance-mode
    --pipeline-parallel-size --pooler-config --port --preemption-mode --prefill-context-parallel-size
    --prefix-caching-hash-algo --profiler-config --prompt-adapters --pt-load-map-location
    --qlora-adapter-name-or-path --quantization --reasoning-config --reasoning-parser --reasoning-parser-plugin
    --renderer-num-workers --response-role --revision --root-path --rope-scaling --rope-theta --runner
    --safetensors-load-strategy --scheduler-cls --scheduler-delay-factor --scheduling-policy --seed
    --served-model-name --show-hidden-metrics-for-version --shutdown-timeout --speculative-config --ssl-ca-certs
    --ssl-cert-reqs --ssl-certfile --ssl-ciphers --ssl-keyfile --stream-interval --structured-outputs-config
    --swap-space --task --tensor-parallel-size --tokenizer --tokenizer-mode --tokenizer-pool-extra-config
    --tokenizer-pool-size --tokenizer-pool-type --tokenizer-revision --tool-call-parser --tool-parser-plugin
    --tool-server --ubatch-size --uds --uvicorn-log-level --video-pruning-rate --weight-transfer-config --worker-cls
    --worker-extension-cls -O -ac -asc -cc -dcp -dp -dpa -dpb -dpl -dpn -dpp -dpr -n -pcp -pp -q -r -sc -tp
    """
)

# The last line: DeprecatedAction (nargs=0) flags, switches wherever read, once listed as taking a value:
# --enable-flashmla (sglang 0.4.6 server_args.py line 850, the action's __init__ at line 1348),
# --prefill-round-robin-balance and --enable-piecewise-cuda-graph (0.5.11 lines 5137, 6145).
SGLANG_SWITCHES: Final = flag_names(
    """
    --abort-on-priority-when-disabled --allow-auto-truncate --checkpoint-engine-wait-weights-before-ready
    --collect-tokens-histogram --constrained-json-disable-any-whitespace --dcp-replicate-q-proj --debug-cuda-graph
    --debug-tensor-dump-prefill-only --delete-ckpt-after-loading --disable-aiter-allreduce-fusion-in-decode
    --disable-aiter-allreduce-fusion-in-prefill --disable-attn-tp-gather --disable-chunked-prefix-cache
    --disable-cuda-graph --disable-cuda-graph-padding --disable-custom-all-reduce --disable-decode-cuda-graph
    --disable-fast-image-processor --disable-flashinfer-autotune --disable-flashinfer-cutlass-moe-fp4-allgather
    --disable-hybrid-swa-memory --disable-mla --disable-outlines-disk-cache --disable-overlap-schedule
    --disable-piecewise-cuda-graph --disable-prefill-cuda-graph --disable-priority-preemption --disable-radix-cache
    --disable-shared-experts-fusion --disable-tokenizer-batch-decode --disaggregation-decode-enable-offload-kvcache
    --disaggregation-decode-enable-radix-cache --disaggregation-enable-kv-checksum --dllm-fdfo --elastic-ep-rejoin
    --enable-adaptive-dispatch-to-encoder --enable-aiter-allreduce-fusion --enable-amd-monokernel
    --enable-attn-tp-input-scattered --enable-breakable-cuda-graph --enable-broadcast-mm-inputs-process
    --enable-cache-report --enable-cp-decode-attn-tp --enable-cudagraph-gc --enable-custom-logit-processor
    --enable-decoder-swa-bounded-replay --enable-deepep-moe --enable-deepseek-v4-fp4-indexer
    --enable-dense-mlp-attn-tp --enable-deterministic-inference --enable-double-sparsity --enable-dp-attention
    --enable-dp-attention-local-control-broadcast --enable-dp-lm-head --enable-draft-weights-cpu-backup
    --enable-dsa-cache-layer-split --enable-dsa-fused-indexer --enable-dynamic-batch-tokenizer
    --enable-dynamic-chunking --enable-elastic-expert-backup --enable-encoder-swa-bounded-replay --enable-ep-moe
    --enable-eplb --enable-expert-distribution-metrics --enable-flashinfer-allreduce-fusion
    --enable-flashinfer-cutlass-moe --enable-flashinfer-mla --enable-flashinfer-mxfp4-moe
    --enable-flashinfer-trtllm-moe --enable-flexkv --enable-forward-pass-metrics --enable-fp32-lm-head
    --enable-fused-moe-sum-all-reduce --enable-fused-qk-norm-rope --enable-hicache --enable-hierarchical-cache
    --enable-hisparse --enable-http-worker-reuseport --enable-http2 --enable-int8-mamba-checkpoint
    --enable-kv-cache-sharding --enable-layernorm-sp --enable-layerwise-nvtx-marker --enable-lean-attention
    --enable-linear-replayssm --enable-linear-replayssm-spec --enable-linker-mla-dedup --enable-lmcache
    --enable-lora --enable-lora-overlap-loading --enable-mamba-cache-stochastic-rounding
    --enable-megamoe-for-layernorm-sp --enable-memory-saver --enable-metrics --enable-metrics-for-all-schedulers
    --enable-mfu-metrics --enable-mis --enable-mixed-chunk --enable-mm-global-cache --enable-mscclpp
    --enable-multi-layer-eagle --enable-multimodal --enable-nan-detection --enable-nccl-nvls
    --enable-nsa-prefill-context-parallel --enable-nvidia-megakernel --enable-p2p-check
    --enable-page-major-kv-layout --enable-paged-experts --enable-pd-role-switch --enable-pdmux
    --enable-precise-embedding-interpolation --enable-prefill-context-parallel --enable-prefill-cp
    --enable-prefill-delayer --enable-prefix-mm-cache --enable-priority-scheduling --enable-profile-cuda-graph
    --enable-quant-communications --enable-request-time-stats-logging --enable-response-store
    --enable-return-aux-hidden-states --enable-return-hidden-states --enable-return-indexer-topk
    --enable-return-routed-experts --enable-scattered-sconv --enable-session-radix-cache
    --enable-shared-experts-attn-tp --enable-single-batch-overlap --enable-ssl-refresh --enable-streaming-session
    --enable-strict-thinking --enable-symm-mem --enable-tf32-matmul --enable-tokenizer-batch-encode
    --enable-torch-compile --enable-torch-compile-debug-mode --enable-torch-symm-mem --enable-tp-lm-head-all-to-all
    --enable-trace --enable-triton-kernel-moe --enable-two-batch-overlap --enable-unified-cache-external-linker
    --enable-unified-memory --enable-w4a4-mxfp4-megamoe --enable-waterfill --enable-watermark
    --enable-weights-cpu-backup --encoder-only --enforce-disable-flashinfer-allreduce-fusion
    --enforce-piecewise-cuda-graph --enforce-shared-experts-fusion --experts-shared-outer-loras
    --export-metrics-to-file --flashinfer-mla-disable-ragged --grpc-mode --incremental-streaming-output
    --is-embedding --keep-mm-feature-on-device --language-model-only --language-only --log-requests
    --lora-strict-loading --lora-use-virtual-experts --mlx-enable-sampling --mm-enable-dp-encoder
    --no-experts-shared-outer-loras --no-lora-strict-loading --no-record-nolora-graph --ple-offload-embedding
    --pre-warm-nccl --prefill-only-disable-kv-cache --quantize-and-serve --record-nolora-graph
    --remote-instance-weight-loader-start-seed-via-transfer-engine --return-input-ids --return-output-ids
    --schedule-low-priority-values-first --show-time-cost --skip-server-warmup --skip-tokenizer-init --sleep-on-idle
    --smg-grpc-mode --speculative-adaptive --speculative-dspark-align-verify-tokens-to-graph-tier
    --speculative-enable-w4a4-mxfp4-megamoe --speculative-skip-dp-mlp-sync --speculative-use-block-verification
    --speculative-use-rejection-sampling --stream-output --stream-response-default-include-usage
    --strip-thinking-cache --triton-attention-reduce-in-fp32 --trust-mm-content-hashes --trust-remote-code
    --trust-request-chat-template --use-ray --weight-loader-disable-mmap --weight-loader-drop-cache-after-load
    --weight-loader-prefetch-checkpoints
    --enable-flashmla --enable-piecewise-cuda-graph --prefill-round-robin-balance
    """
)

SGLANG_VALUED: Final = flag_names(
    """
    --admin-api-key --allowed-media-domains --api-key --asr-max-buffer-seconds --asr-max-concurrent-sessions
    --attention-backend --attention-context-parallel-size --attention-data-parallel-size --attn-cp-size
    --attn-dp-size --base-gpu-id --batch-notify-size --bf16-gemm-backend --boundary-reduction
    --bucket-e2e-request-latency --bucket-inter-token-latency --bucket-time-to-first-token --c128-page-size
    --chat-template --chunked-prefill-size --completion-template --config --constrained-json-max-whitespace-cnt
    --constrained-json-whitespace-pattern --context-bucket --context-length --cp-strategy --cpu-offload-gb
    --crash-dump-folder --cuda-graph-backend-decode --cuda-graph-backend-prefill --cuda-graph-bs
    --cuda-graph-bs-decode --cuda-graph-bs-prefill --cuda-graph-config --cuda-graph-max-bs
    --cuda-graph-max-bs-decode --cuda-graph-max-bs-prefill --cuda-graph-max-seq-len-prefill
    --cuda-graph-prefill-max-context --custom-sigquit-handler --custom-weight-loader --data-parallel-size
    --dcp-comm-backend --dcp-size --debug-tensor-dump-inject --debug-tensor-dump-input-file
    --debug-tensor-dump-layers --debug-tensor-dump-output-folder --decode-attention-backend
    --decode-context-parallel-size --decode-log-interval --decoupled-spec-bind-endpoint
    --decoupled-spec-connect-endpoints --decoupled-spec-rank --decoupled-spec-role --decrypted-config-file
    --decrypted-draft-config-file --deepep-config --deepep-dispatcher-output-dtype --deepep-mode --deepep-v2-mode
    --default-chat-template-kwargs --default-priority-value --detokenizer-worker-num --device
    --disaggregation-bootstrap-port --disaggregation-decode-allocation-policy --disaggregation-decode-dp
    --disaggregation-decode-extra-slots --disaggregation-decode-host-receive-threshold
    --disaggregation-decode-polling-interval --disaggregation-decode-retraction-backup --disaggregation-decode-tp
    --disaggregation-ib-device --disaggregation-mode --disaggregation-prefill-pp --disaggregation-transfer-backend
    --dist-init-addr --dist-timeout --dllm-algorithm --dllm-algorithm-config --download-dir --dp-size
    --ds-channel-config-path --ds-heavy-channel-num --ds-heavy-channel-type --ds-heavy-token-num
    --ds-sparse-decode-threshold --dsa-decode-backend --dsa-paged-mqa-logits-backend --dsa-prefill-backend
    --dsa-topk-backend --dsa-triton-union --dsv4-attn-backend --dsv4-prefill-backend --dtype --dwdp-size
    --dynamic-batch-tokenizer-batch-size --dynamic-batch-tokenizer-batch-timeout --elastic-ep-backend
    --elastic-ep-initial-size --elastic-ep-join-mode --elastic-ep-join-rank-offset --elastic-ep-scale-timeout
    --encoder-bootstrap-port --encoder-register-urls
    --encoder-transfer-backend --encoder-urls --engine-info-bootstrap-port --ep --ep-dispatch-algorithm
    --ep-num-redundant-experts --ep-size --eplb-algorithm --eplb-min-rebalancing-utilization-threshold
    --eplb-rebalance-layers-per-chunk --eplb-rebalance-num-iterations --expert-balancedness-report-mode
    --expert-distribution-recorder-buffer-size --expert-distribution-recorder-mode --expert-parallel-size
    --export-metrics-to-file-dir --extra-metric-labels --fastapi-root-path --file-storage-path
    --flashinfer-a2a-dispatch-type --flashinfer-allreduce-fusion-backend --flashinfer-autotune-skip-ops
    --flashinfer-mxfp4-moe-precision --flexkv-config-file --forward-hooks --forward-pass-metrics-ipc-name
    --forward-pass-metrics-worker-id --fp4-gemm-backend --fp8-gemm-backend --fuseep-mode --gated-launch-port
    --gc-threshold --gc-warning-threshold-secs --generation-tokens-buckets --gpu-id-step --grammar-backend
    --grpc-http-sidecar-port --grpc-port --grpc-response-timeout-secs --hf-chat-template-name
    --hicache-host-memory-fraction --hicache-host-memory-mode --hicache-io-backend --hicache-mem-layout
    --hicache-ratio --hicache-size --hicache-storage-backend --hicache-storage-backend-extra-config
    --hicache-storage-prefetch-policy --hicache-storage-prefetch-retry-max-attempts
    --hicache-storage-prefetch-retry-poll-interval --hicache-write-policy
    --hierarchical-sparse-attention-extra-config --hisparse-config --host --http2-initial-connection-window-size
    --http2-max-concurrent-streams --hybrid-kvcache-ratio --image-processor-backend --impl --init-expert-location
    --int8-mamba-ckpt-size --json-model-override-args --kt-cpuinfer --kt-max-deferred-experts-per-token --kt-method
    --kt-num-gpu-experts --kt-threadpool-count --kt-weight-path --kv-cache-dtype --kv-canary --kv-canary-real-data
    --kv-canary-sweep-interval --kv-events-config --limit-mm-data-per-request --linear-attn-backend
    --linear-attn-decode-backend --linear-attn-prefill-backend --linear-attn-verify-backend
    --linear-replayssm-cache-len --lmcache-config-file --load-balance-method --load-format --load-publish-endpoint
    --load-snapshot-publish-interval --log-level --log-level-http --log-requests-format --log-requests-level
    --log-requests-target --lora-backend --lora-drain-wait-threshold --lora-eviction-policy --lora-paths
    --lora-target-modules --mamba-backend --mamba-cache-philox-rounds --mamba-full-memory-ratio
    --mamba-max-states-per-path --mamba-radix-cache-strategy --mamba-scheduler-strategy --mamba-ssm-dtype
    --mamba-track-interval --max-ep-size --max-loaded-loras --max-lora-chunk-size --max-lora-rank
    --max-loras-per-batch --max-mamba-cache-size --max-micro-batch-size --max-prefill-tokens --max-queued-requests
    --max-running-requests --max-total-tokens --media-url-max-file-size-mb --mem-fraction-static
    --min-free-slots-delay --mm-attention-backend --mm-feature-transport --mm-global-cache-backend
    --mm-io-worker-num --mm-preprocess-cache-size-mb --mm-process-config --mm-processor-worker-num --model
    --model-checksum --model-config-parser --model-impl --model-loader-extra-config --model-path
    --modelexpress-config --modelopt-checkpoint-restore-path --modelopt-checkpoint-save-path --modelopt-export-path
    --modelopt-quant --moe-a2a-backend --moe-data-parallel-size --moe-dense-tp-size --moe-dp-size
    --moe-runner-backend --monokernel-backend --mooncake-ib-device --msprobe-dump-config
    --multi-item-scoring-delimiter --n-share-experts-fusion --nccl-init-addr --nccl-port --nnodes --node-rank
    --nsa-decode-backend --nsa-prefill-backend --nsa-prefill-cp-mode --num-continuous-decode-steps
    --num-reserved-decode-tokens --numa-node --offload-group-size --offload-mode --offload-num-in-group
    --offload-prefetch-step --optimistic-prefill-attempts --otlp-service-name --otlp-traces-endpoint --page-size
    --paged-experts-num-resident --pdlb-url --pdmux-config-path --piecewise-cuda-graph-compiler
    --piecewise-cuda-graph-max-tokens --piecewise-cuda-graph-tokens --pipeline-parallel-size --ple-offload-backend
    --ple-offload-dir --port --pp-async-batch-depth --pp-max-micro-batch-size --pp-size --preferred-sampling-params
    --prefill-attention-backend --prefill-cp-mode --prefill-decode-interval --prefill-decode-interval-min-bs
    --prefill-delayer-forward-passes-buckets --prefill-delayer-max-delay-ms --prefill-delayer-max-delay-passes
    --prefill-delayer-queue-min-ratio --prefill-delayer-token-usage-low-watermark
    --prefill-delayer-wait-seconds-buckets --prefill-kv-cache-dequant-dtype --prefill-max-requests
    --priority-scheduling-preemption-threshold --prompt-tokens-buckets
    --qsa-indexer-dtype --quantization --quantization-param-path --radix-cache-backend --radix-eviction-policy
    --radix-eviction-policy-config --random-seed --reasoning-parser --remote-instance-weight-loader-backend
    --remote-instance-weight-loader-seed-instance-ip --remote-instance-weight-loader-seed-instance-service-port
    --remote-instance-weight-loader-send-weights-group-ports --retraction-policy --return-aux-hidden-state-layer-ids
    --return-hidden-states-mode --revision --rl-on-policy-target --rl-quant-profile --sampling-backend
    --sampling-defaults --sampling-mask-max-tokens --schedule-conservativeness --schedule-policy
    --scheduler-recv-interval --served-model-name --shared-experts-tp-size --sidecar --sidecar-args --sm-group-num
    --smg-http-sidecar-port --soft-watchdog-timeout --spec-trace-dir --speculative-accept-threshold-acc
    --speculative-accept-threshold-single --speculative-adaptive-config --speculative-algorithm
    --speculative-attention-mode --speculative-dflash-block-size --speculative-dflash-draft-window-size
    --speculative-domino-candidate-pool-size --speculative-draft-attention-backend
    --speculative-draft-kv-cache-dtype --speculative-draft-load-format --speculative-draft-model
    --speculative-draft-model-path --speculative-draft-model-quantization --speculative-draft-model-revision
    --speculative-draft-sink-size --speculative-draft-window-size --speculative-dsa-topk-backend
    --speculative-dspark-block-size --speculative-dspark-confidence-sts-path --speculative-dspark-sps-table-path
    --speculative-eagle-topk --speculative-moe-a2a-backend --speculative-moe-runner-backend
    --speculative-ngram-capacity --speculative-ngram-external-corpus-max-tokens
    --speculative-ngram-external-corpus-path --speculative-ngram-external-sam-budget --speculative-ngram-match-type
    --speculative-ngram-max-bfs-breadth --speculative-ngram-max-trie-depth --speculative-ngram-min-bfs-breadth
    --speculative-num-draft-tokens --speculative-num-steps --speculative-token-map --ssl-ca-certs --ssl-certfile
    --ssl-keyfile --ssl-keyfile-password --startup-weight-load-mode --stream-interval --swa-full-tokens-ratio
    --swa-prefix-tails --tbo-token-distribution-threshold --tensor-parallel-size --tokenizer-backend
    --tokenizer-metrics-allowed-custom-labels --tokenizer-metrics-custom-labels-header --tokenizer-mode
    --tokenizer-path --tokenizer-worker-num --tool-call-parser --tool-server --torch-compile-max-bs --torchao-config
    --tp-size --trace-modules --triton-attention-num-kv-splits --triton-attention-split-tile-size
    --unified-cache-external-linker-backend --unified-cache-external-linker-config --uno-lora-path
    --uvicorn-access-log-exclude-prefixes --warmups --watchdog-timeout --watermark-config --weight-cache-mode
    --weight-cache-socket --weight-cache-timeout --weight-loader-prefetch-num-threads --weight-version
    """
)


# llama.cpp: ggml-org/llama.cpp common/arg.cpp at 145b6280 (the commit core.files.launch.llamacpp reads its flags at),
# every ``add_opt(common_arg(...))`` of every program (llama-server, llama-cli, llama-completion and the examples share
# one table; a flag of another program is still llama.cpp's). A handler of no value or a bool one (``args_neg``, the
# ``--no-`` forms) is a switch; one value hint, a valued flag; two hints (``--lora-scaled FNAME SCALE``) take two.
# ``common_params_parse_ex`` turns ``_`` into ``-`` in a ``--`` flag's name and matches names exactly (no prefixes).
# Older builds' spellings read the same way: ``-fa`` and ``--color`` were switches before they took on|off|auto
# (:data:`LLAMACPP_OPTIONAL_VALUE`).
LLAMACPP_SWITCHES: Final = flag_names(
    """
    -h --help --usage --version -cl --cache-list --completion-bash --verbose-prompt --display-prompt
    --no-display-prompt --swa-full -kvu --kv-unified --context-shift --no-context-shift --perf --no-perf --show-timings
    --no-show-timings -e --escape --no-escape --prompt-cache-all --prompt-cache-ro -sp --special -cnv --conversation
    -no-cnv --no-conversation -st --single-turn -i --interactive -if --interactive-first -mli --multiline-input
    --in-prefix-bos --warmup --no-warmup --spm-infill --ignore-eos -kvo --kv-offload -nkvo --no-kv-offload --repack -nr
    --no-repack --no-host --hellaswag --winogrande --multiple-choice --kl-divergence -cb --cont-batching -nocb
    --no-cont-batching --mmproj-auto --no-mmproj --no-mmproj-auto --mmproj-offload --no-mmproj-offload --mlock --mmap
    --no-mmap --list-devices --cpu-moe -cmoe --cpu-moe-draft -cmoed --check-tensors --op-offload --no-op-offload
    --process-output --ppl --no-ppl --show-statistics --parse-special -pps -tgs --webui --no-webui --embedding
    --embeddings --reranking --rerank --metrics --props --slots --no-slots --models-autoload --no-models-autoload
    --jinja --no-jinja --prefill-assistant --no-prefill-assistant --lora-init-without-apply --simple-io --log-disable -v
    --verbose --log-verbose --offline --log-prefix --log-timestamps --tts-use-guide-tokens --diffusion-visual
    --tts-oute-default --embd-gemma-default --fim-qwen-1.5b-default --fim-qwen-3b-default --fim-qwen-7b-default
    --fim-qwen-7b-spec --fim-qwen-14b-spec --fim-qwen-30b-default --gpt-oss-20b-default --gpt-oss-120b-default
    --vision-gemma-4b-default --vision-gemma-12b-default
    """
)
LLAMACPP_VALUED: Final = flag_names(
    """
    -t --threads -tb --threads-batch -C --cpu-mask -Cr --cpu-range --cpu-strict --prio --poll -Cb --cpu-mask-batch -Crb
    --cpu-range-batch --cpu-strict-batch --prio-batch --poll-batch -lcs --lookup-cache-static -lcd
    --lookup-cache-dynamic -c --ctx-size -n --predict --n-predict -b --batch-size -ub --ubatch-size --keep
    --ctx-checkpoints --swa-checkpoints --cache-ram -cram --chunks -fa --flash-attn -p --prompt -sys --system-prompt -f
    --file -sysf --system-prompt-file --in-file -bf --binary-file -ptc --print-token-count --prompt-cache -r
    --reverse-prompt --in-prefix --in-suffix --samplers -s --seed --sampling-seq --sampler-seq --temp --top-k --top-p
    --min-p --top-nsigma --xtc-probability --xtc-threshold --typical --repeat-last-n --repeat-penalty
    --presence-penalty --frequency-penalty --dry-multiplier --dry-base --dry-allowed-length --dry-penalty-last-n
    --dry-sequence-breaker --dynatemp-range --dynatemp-exp --mirostat --mirostat-lr --mirostat-ent -l --logit-bias
    --grammar --grammar-file -j --json-schema -jf --json-schema-file --pooling --attention --rope-scaling --rope-scale
    --rope-freq-base --rope-freq-scale --yarn-orig-ctx --yarn-ext-factor --yarn-attn-factor --yarn-beta-slow
    --yarn-beta-fast -gan --grp-attn-n -gaw --grp-attn-w -ctk --cache-type-k -ctv --cache-type-v --hellaswag-tasks
    --winogrande-tasks --multiple-choice-tasks --save-all-logits --kl-divergence-base --ppl-stride --ppl-output-type
    -dt --defrag-thold -np --parallel -ns --sequences -mm --mmproj -mmu --mmproj-url --image --audio
    --image-min-tokens --image-max-tokens --rpc --numa -dev --device --override-tensor -ot --override-tensor-draft
    -otd --n-cpu-moe -ncmoe --n-cpu-moe-draft -ncmoed -ngl --gpu-layers --n-gpu-layers -sm --split-mode -ts
    --tensor-split -mg --main-gpu -fit --fit -fitt --fit-target -fitc --fit-ctx --override-kv --lora --control-vector
    -a --alias -m --model -mu --model-url -dr --docker-repo -hf -hfr --hf-repo -hfd -hfrd --hf-repo-draft -hff
    --hf-file -hfv -hfrv --hf-repo-v -hffv --hf-file-v -hft --hf-token --context-file --chunk-size --chunk-separator
    --junk --pos -o --output --output-file -ofreq --output-frequency --output-format --save-frequency --chunk
    --from-chunk -npp -ntg -npl --embd-normalize --embd-output-format --embd-separator --cls-separator --host --port
    --path --api-prefix --api-key --api-key-file --ssl-key-file --ssl-cert-file --chat-template-kwargs -to --timeout
    --threads-http --cache-reuse --slot-save-path --media-path --models-dir --models-preset --models-max
    --reasoning-format --reasoning-budget --chat-template --chat-template-file -sps --slot-prompt-similarity
    --positive-file --negative-file --pca-batch --pca-iter --method --log-file --log-colors -lv --verbosity
    --log-verbosity -td --threads-draft -tbd --threads-batch-draft -Cd --cpu-mask-draft -Crd --cpu-range-draft
    --cpu-strict-draft --prio-draft --poll-draft -Cbd --cpu-mask-batch-draft -Crbd --cpu-range-batch-draft
    --cpu-strict-batch-draft --prio-batch-draft --poll-batch-draft --draft-max --draft --draft-n --draft-min
    --draft-n-min --draft-p-split --draft-p-min -cd --ctx-size-draft -devd --device-draft -ngld --gpu-layers-draft
    --n-gpu-layers-draft -md --model-draft -ctkd --cache-type-k-draft -ctvd --cache-type-v-draft -mv --model-vocoder
    --tts-speaker-file --diffusion-steps --diffusion-eps --diffusion-algorithm --diffusion-alg-temp
    --diffusion-block-length --diffusion-cfg-scale --diffusion-add-gumbel-noise -lr --learning-rate -lr-min
    --learning-rate-min -decay-epochs --learning-rate-decay-epochs -wd --weight-decay -val-split --val-split -epochs
    --epochs -opt --optimizer -co --color
    """
)
LLAMACPP_TWO_VALUES: Final = flag_names(
    "--lora-scaled --control-vector-scaled --control-vector-layer-range --spec-replace"
)
# Flags whose value older builds did not take: a bare ``-fa`` (flash attention on) and ``--color`` (colours on) were
# switches; at 145b6280 both take on|off|auto (``is_truthy`` / ``is_falsey`` / ``is_autoy``: on enabled true 1,
# off disabled false 0, auto -1). The word after one is its value only when it is one of these.
LLAMACPP_OPTIONAL_VALUE: Final = flag_names("-fa --flash-attn -co --color")
LLAMACPP_ON_OFF: Final = {
    **dict.fromkeys(("on", "enabled", "true", "1"), True),
    **dict.fromkeys(("off", "disabled", "false", "0"), False),
    **dict.fromkeys(("auto", "-1"), None),
}

# The variables llama.cpp reads as flags: ggml-org/llama.cpp common/arg.cpp at 145b6280, every ``.set_env("...")``
# with the option's spellings (a ``/`` parts a bool option's ``--no-`` spellings, ``args_neg``). The environment is
# read first, then the command line (``common_params_parse_ex``: "warn: %s environment variable is set, but will be
# overwritten by command line argument"): a flag given wins over its variable. A switch's variable sets it only when
# ``is_truthy`` (on enabled true 1); a bool option's takes ``is_truthy`` / ``is_falsey`` (off disabled false 0), any
# other value an error, and ``LLAMA_ARG_NO_<NAME>`` set to anything turns it off (``get_value_from_env``).
LLAMACPP_ENV: Final = {
    line.split()[0]: tuple(line.split()[1:])
    for line in """
    LLAMA_ARG_THREADS -t --threads
    LLAMA_ARG_CTX_SIZE -c --ctx-size
    LLAMA_ARG_N_PREDICT -n --predict --n-predict
    LLAMA_ARG_BATCH -b --batch-size
    LLAMA_ARG_UBATCH -ub --ubatch-size
    LLAMA_ARG_SWA_FULL --swa-full
    LLAMA_ARG_CTX_CHECKPOINTS --ctx-checkpoints --swa-checkpoints
    LLAMA_ARG_CACHE_RAM --cache-ram -cram
    LLAMA_ARG_KV_UNIFIED --kv-unified -kvu
    LLAMA_ARG_CONTEXT_SHIFT --context-shift / --no-context-shift
    LLAMA_ARG_FLASH_ATTN -fa --flash-attn
    LLAMA_ARG_PERF --perf / --no-perf
    LLAMA_ARG_SHOW_TIMINGS --show-timings / --no-show-timings
    LLAMA_ARG_TOP_K --top-k
    LLAMA_ARG_POOLING --pooling
    LLAMA_ARG_ROPE_SCALING_TYPE --rope-scaling
    LLAMA_ARG_ROPE_SCALE --rope-scale
    LLAMA_ARG_ROPE_FREQ_BASE --rope-freq-base
    LLAMA_ARG_ROPE_FREQ_SCALE --rope-freq-scale
    LLAMA_ARG_YARN_ORIG_CTX --yarn-orig-ctx
    LLAMA_ARG_YARN_EXT_FACTOR --yarn-ext-factor
    LLAMA_ARG_YARN_ATTN_FACTOR --yarn-attn-factor
    LLAMA_ARG_YARN_BETA_SLOW --yarn-beta-slow
    LLAMA_ARG_YARN_BETA_FAST --yarn-beta-fast
    LLAMA_ARG_GRP_ATTN_N -gan --grp-attn-n
    LLAMA_ARG_GRP_ATTN_W -gaw --grp-attn-w
    LLAMA_ARG_KV_OFFLOAD -kvo --kv-offload / -nkvo --no-kv-offload
    LLAMA_ARG_REPACK --repack / -nr --no-repack
    LLAMA_ARG_NO_HOST --no-host
    LLAMA_ARG_CACHE_TYPE_K -ctk --cache-type-k
    LLAMA_ARG_CACHE_TYPE_V -ctv --cache-type-v
    LLAMA_ARG_DEFRAG_THOLD -dt --defrag-thold
    LLAMA_ARG_N_PARALLEL -np --parallel
    LLAMA_ARG_CONT_BATCHING -cb --cont-batching / -nocb --no-cont-batching
    LLAMA_ARG_MMPROJ -mm --mmproj
    LLAMA_ARG_MMPROJ_URL -mmu --mmproj-url
    LLAMA_ARG_MMPROJ_AUTO --mmproj-auto / --no-mmproj --no-mmproj-auto
    LLAMA_ARG_MMPROJ_OFFLOAD --mmproj-offload / --no-mmproj-offload
    LLAMA_ARG_IMAGE_MIN_TOKENS --image-min-tokens
    LLAMA_ARG_IMAGE_MAX_TOKENS --image-max-tokens
    LLAMA_ARG_RPC --rpc
    LLAMA_ARG_MLOCK --mlock
    LLAMA_ARG_MMAP --mmap / --no-mmap
    LLAMA_ARG_NUMA --numa
    LLAMA_ARG_DEVICE -dev --device
    LLAMA_ARG_CPU_MOE --cpu-moe -cmoe
    LLAMA_ARG_N_CPU_MOE --n-cpu-moe -ncmoe
    LLAMA_ARG_CPU_MOE_DRAFT --cpu-moe-draft -cmoed
    LLAMA_ARG_N_CPU_MOE_DRAFT --n-cpu-moe-draft -ncmoed
    LLAMA_ARG_N_GPU_LAYERS -ngl --gpu-layers --n-gpu-layers
    LLAMA_ARG_SPLIT_MODE -sm --split-mode
    LLAMA_ARG_TENSOR_SPLIT -ts --tensor-split
    LLAMA_ARG_MAIN_GPU -mg --main-gpu
    LLAMA_ARG_FIT -fit --fit
    LLAMA_ARG_FIT_TARGET -fitt --fit-target
    LLAMA_ARG_FIT_CTX -fitc --fit-ctx
    LLAMA_ARG_ALIAS -a --alias
    LLAMA_ARG_MODEL -m --model
    LLAMA_ARG_MODEL_URL -mu --model-url
    LLAMA_ARG_DOCKER_REPO -dr --docker-repo
    LLAMA_ARG_HF_REPO -hf -hfr --hf-repo
    LLAMA_ARG_HFD_REPO -hfd -hfrd --hf-repo-draft
    LLAMA_ARG_HF_FILE -hff --hf-file
    LLAMA_ARG_HF_REPO_V -hfv -hfrv --hf-repo-v
    LLAMA_ARG_HF_FILE_V -hffv --hf-file-v
    LLAMA_ARG_HOST --host
    LLAMA_ARG_PORT --port
    LLAMA_ARG_STATIC_PATH --path
    LLAMA_ARG_API_PREFIX --api-prefix
    LLAMA_ARG_WEBUI --webui / --no-webui
    LLAMA_ARG_EMBEDDINGS --embedding --embeddings
    LLAMA_ARG_RERANKING --reranking --rerank
    LLAMA_API_KEY --api-key
    LLAMA_ARG_SSL_KEY_FILE --ssl-key-file
    LLAMA_ARG_SSL_CERT_FILE --ssl-cert-file
    LLAMA_CHAT_TEMPLATE_KWARGS --chat-template-kwargs
    LLAMA_ARG_TIMEOUT -to --timeout
    LLAMA_ARG_THREADS_HTTP --threads-http
    LLAMA_ARG_CACHE_REUSE --cache-reuse
    LLAMA_ARG_ENDPOINT_METRICS --metrics
    LLAMA_ARG_ENDPOINT_PROPS --props
    LLAMA_ARG_ENDPOINT_SLOTS --slots / --no-slots
    LLAMA_ARG_MODELS_DIR --models-dir
    LLAMA_ARG_MODELS_PRESET --models-preset
    LLAMA_ARG_MODELS_MAX --models-max
    LLAMA_ARG_MODELS_AUTOLOAD --models-autoload / --no-models-autoload
    LLAMA_ARG_JINJA --jinja / --no-jinja
    LLAMA_ARG_THINK --reasoning-format
    LLAMA_ARG_THINK_BUDGET --reasoning-budget
    LLAMA_ARG_CHAT_TEMPLATE --chat-template
    LLAMA_ARG_CHAT_TEMPLATE_FILE --chat-template-file
    LLAMA_ARG_PREFILL_ASSISTANT --prefill-assistant / --no-prefill-assistant
    LLAMA_LOG_FILE --log-file
    LLAMA_LOG_COLORS --log-colors
    LLAMA_OFFLINE --offline
    LLAMA_LOG_VERBOSITY -lv --verbosity --log-verbosity
    LLAMA_LOG_PREFIX --log-prefix
    LLAMA_LOG_TIMESTAMPS --log-timestamps
    LLAMA_ARG_DRAFT_MAX --draft-max --draft --draft-n
    LLAMA_ARG_DRAFT_MIN --draft-min --draft-n-min
    LLAMA_ARG_DRAFT_P_SPLIT --draft-p-split
    LLAMA_ARG_DRAFT_P_MIN --draft-p-min
    LLAMA_ARG_CTX_SIZE_DRAFT -cd --ctx-size-draft
    LLAMA_ARG_N_GPU_LAYERS_DRAFT -ngld --gpu-layers-draft --n-gpu-layers-draft
    LLAMA_ARG_MODEL_DRAFT -md --model-draft
    LLAMA_ARG_CACHE_TYPE_K_DRAFT -ctkd --cache-type-k-draft
    LLAMA_ARG_CACHE_TYPE_V_DRAFT -ctvd --cache-type-v-draft
    """.strip().splitlines()
}

# Which llama.cpp programs take an option: ggml-org/llama.cpp common/arg.cpp at 145b6280, each ``add_opt``'s
# ``.set_examples({...})`` and ``.set_excludes({...})``. ``common_params_parser_init``'s ``add_opt`` keeps an option
# for a program only where its examples name the program's ``LLAMA_EXAMPLE_*`` or ``LLAMA_EXAMPLE_COMMON`` (an
# option's default, ``common_arg::examples`` in common/arg.h) and its excludes do not; any other is no option of that
# program at all: on its command line ``common_params_parse_ex`` stops ("error: invalid argument: X"), and its
# variable is never looked at (only the kept options' ``get_value_from_env`` is asked). The programs' examples:
# llama-server LLAMA_EXAMPLE_SERVER, llama-cli LLAMA_EXAMPLE_CLI, llama-completion LLAMA_EXAMPLE_COMPLETION. Listed:
# the options not all three take, under the programs that do ("none": another tool's, llama-perplexity's,
# llama-imatrix's, llama-speculative's, ...). ``./main`` and ``./server`` (before June 2024's rename) are older than
# the per-program sets (ggml-org/llama.cpp #9308, September 2024, "Better support for multiple examples"; before it
# one gpt_params_find_arg took every flag in every program): they take every option.
LLAMACPP_TAKEN_BY: Final = {
    option: frozenset(line.split(":")[0].split()) - {"none"}
    for line in """
    none: -lcs --lookup-cache-static -lcd --lookup-cache-dynamic --chunks --in-file --attention --hellaswag
      --hellaswag-tasks --winogrande --winogrande-tasks --multiple-choice --multiple-choice-tasks --kl-divergence
      --save-all-logits --kl-divergence-base --ppl-stride --ppl-output-type -ns --sequences --context-file --chunk-size
      --chunk-separator --junk --pos -o --output --output-file -ofreq --output-frequency --output-format
      --save-frequency --process-output --ppl --no-ppl --chunk --from-chunk --show-statistics --parse-special -pps -tgs
      -npp -ntg -npl --embd-normalize --embd-output-format --embd-separator --cls-separator --positive-file
      --negative-file --pca-batch --pca-iter --method -Cd --cpu-mask-draft -Crd --cpu-range-draft --cpu-strict-draft
      --prio-draft --poll-draft -Cbd --cpu-mask-batch-draft -Crbd --cpu-range-batch-draft --cpu-strict-batch-draft
      --prio-batch-draft --poll-batch-draft --draft-p-split --tts-speaker-file --diffusion-steps --diffusion-visual
      --diffusion-eps --diffusion-algorithm --diffusion-alg-temp --diffusion-block-length --diffusion-cfg-scale
      --diffusion-add-gumbel-noise -lr --learning-rate -lr-min --learning-rate-min -decay-epochs
      --learning-rate-decay-epochs -wd --weight-decay -val-split --val-split -epochs --epochs -opt --optimizer
      --tts-oute-default
    llama-server: --spm-infill --pooling -cb --cont-batching -nocb --no-cont-batching -a --alias --host --port --path
      --api-prefix --webui --no-webui --embedding --embeddings --reranking --rerank --api-key --api-key-file
      --ssl-key-file --ssl-cert-file -to --timeout --threads-http --cache-reuse --metrics --props --slots --no-slots
      --slot-save-path --media-path --models-dir --models-preset --models-max --models-autoload --no-models-autoload
      --prefill-assistant --no-prefill-assistant -sps --slot-prompt-similarity --lora-init-without-apply -td
      --threads-draft -tbd --threads-batch-draft -mv --model-vocoder --tts-use-guide-tokens --embd-gemma-default
      --fim-qwen-1.5b-default --fim-qwen-3b-default --fim-qwen-7b-default --fim-qwen-7b-spec --fim-qwen-14b-spec
      --fim-qwen-30b-default
    llama-server llama-cli: --ctx-checkpoints --swa-checkpoints --cache-ram -cram -mm --mmproj -mmu --mmproj-url
      --mmproj-auto --no-mmproj --no-mmproj-auto --mmproj-offload --no-mmproj-offload --image-min-tokens
      --image-max-tokens --override-tensor-draft -otd --cpu-moe-draft -cmoed --n-cpu-moe-draft -ncmoed
      --chat-template-kwargs --draft-max --draft --draft-n --draft-min --draft-n-min --draft-p-min -cd --ctx-size-draft
      -devd --device-draft -ngld --gpu-layers-draft --n-gpu-layers-draft -md --model-draft --spec-replace
      --gpt-oss-20b-default --gpt-oss-120b-default --vision-gemma-4b-default --vision-gemma-12b-default
    llama-cli llama-completion: --display-prompt --no-display-prompt -co --color -p --prompt -sys --system-prompt -f
      --file -sysf --system-prompt-file -bf --binary-file -cnv --conversation -no-cnv --no-conversation -st
      --single-turn -mli --multiline-input --simple-io
    llama-cli: --show-timings --no-show-timings --image --audio
    llama-completion: -ptc --print-token-count --prompt-cache --prompt-cache-all --prompt-cache-ro -i --interactive
      -if --interactive-first --in-prefix-bos --in-prefix --in-suffix -gan --grp-attn-n -gaw --grp-attn-w
    """.replace("\n      ", " ")
    .strip()
    .splitlines()
    for option in line.split(":", 1)[1].split()
}


# The first llama.cpp build with the per-program option sets: #9308 ("common : refactor arg parser") is merge commit
# 1b9ae5189cd279c6b45e36d43e4f9ccae628d02f (2024-09-07), and the ggml-ci run of that commit prints
# "main: build = 3683 (1b9ae518)" (LLAMA_BUILD_NUMBER, `git rev-list --count`, the number its release tag b3683
# carries). The repository (1.4 GB) was over what could be fetched here, so `git tag --contains` was not run.
LLAMACPP_PER_PROGRAM_FROM: Final = 3683


def llamacpp_takes(program: str, flag: str, build: int | None = None) -> bool:
    """Whether llama.cpp's ``program`` has the option ``flag`` (any spelling); an older build's ``main`` / ``server``,
    an unknown program and any program of a ``build`` before the per-program sets take them all."""
    if build is not None and build < LLAMACPP_PER_PROGRAM_FROM:
        return True
    taken = LLAMACPP_TAKEN_BY.get(flag)
    return taken is None or program not in ("llama-server", "llama-cli", "llama-completion") or program in taken


# The keys SGLang 0.5.23 refuses in a ``--config`` YAML (sglang/srt/utils/server_args_config_parser.py
# ``ConfigArgumentMerger``: an option whose action is neither store_true nor one that takes one value raises
# "Unsupported config option 'KEY' with action 'X'" before anything is parsed; keys as ``_config_keys`` spells
# them, the dest and every long spelling with ``_``). From the 0.5.23 wheel: the fields of
# sglang/srt/arg_groups/fields/*.py with ``action=argparse.BooleanOptionalAction`` (both spellings), the two
# ``DeprecatedStoreTrueAction`` flags of server_args.py (``nargs=0``) and ``--lora-paths`` (``LoRAPathAction`` with
# ``nargs="*"``).
_BOOLEAN_OPTIONAL_0_5_23: Final = flag_names(
    """
    enable_tf32_matmul enable_decoder_swa_bounded_replay enable_fused_qk_norm_rope enable_dsa_fused_indexer
    ple_offload_embedding dllm_fdfo experts_shared_outer_loras lora_strict_loading mm_enable_dp_encoder
    dcp_replicate_q_proj enable_tp_lm_head_all_to_all speculative_enable_w4a4_mxfp4_megamoe
    """
)
SGLANG_CONFIG_REFUSED: Final = {
    **{key: "BooleanOptionalAction" for name in _BOOLEAN_OPTIONAL_0_5_23 for key in (name, f"no_{name}")},
    "disable_cuda_graph": "DeprecatedStoreTrueAction",
    "enable_dp_attention": "DeprecatedStoreTrueAction",
    "lora_paths": "LoRAPathAction",
}


def refused_options(flags: list[str], accepted: frozenset[str]) -> tuple[list[str], list[str]]:
    """An export's option words less those ``accepted`` (a release's parser, above) lacks, each with its value (the
    next word, where it is no option), and the options left out, in order. Nothing is left out where ``accepted``
    is empty (a release the tables do not hold)."""
    if not accepted:
        return list(flags), []
    kept: list[str] = []
    refused: list[str] = []
    skip = False
    for i, word in enumerate(flags):
        if skip:
            skip = False
            continue
        if word.startswith("-") and word.partition("=")[0] not in accepted:
            refused.append(word.partition("=")[0])
            skip = "=" not in word and i + 1 < len(flags) and not flags[i + 1].startswith("-")
            continue
        kept.append(word)
    return kept, refused


def first_release_with(flag: str, releases: Iterable[str], flags_of: Callable[[str], frozenset[str]]) -> str:
    """The first of ``releases`` (oldest first) whose parser takes ``flag``; "" where none does."""
    return next((r for r in releases if flag in flags_of(r)), "")
