"""Hypothesis strategies for plans, shared by the property tests."""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from hypothesis import strategies as st

from core.catalogue import load_gpus, load_models
from core.dtypes import Autocast, CacheType, Dtype, GgufQuant, KvDtype, Quant, WeightFormat
from core.errors import PlanError
from core.inputs import (
    LLAMA4_VLLM_FROM,
    PER_TOKEN_HEAD_KV,
    SGLANG_ENABLE_MULTIMODAL_FROM,
    SGLANG_MM_DISABLED_FAMILIES,
    release_keeps_kv,
    release_loads,
)
from core.mac import MAC_ATTENTION, MAC_OPTIMIZERS
from core.model import LORA_TARGETS, MIXER_TARGETS, ModelSpec
from core.plan import (
    LN_TUNING_FAMILIES,
    VBLORA_VECTOR_LENGTH,
    Accounting,
    Attention,
    CheckpointPolicy,
    Engine,
    Hardware,
    Inference,
    LessonSettings,
    LoraSettings,
    Method,
    Optimizer,
    OptimizerImpl,
    Parallelism,
    Plan,
    Precision,
    Preset,
    RoadVariant,
    SglangVersion,
    Strategy,
    TorchVersion,
    TransformersVersion,
    VllmVersion,
    Workload,
    hybrid_vllm_lines,
    lora_on,
    precision_fields,
    serving_refusal,
)
from core.runtime import runs_mps

models = st.sampled_from([m.spec for m in load_models()])


def serving_tensor_parallel(model: ModelSpec, most: int) -> list[int]:
    """The serving TP degrees up to ``most`` vLLM accepts for ``model`` (Plan validation:
    they divide the attention heads, and divide the KV heads or are a multiple of them)."""
    kv = model.num_kv_heads
    degrees = [t for t in range(1, most + 1) if model.num_heads % t == 0 and ((kv % t) if t < kv else (t % kv)) == 0]
    return [t for t in degrees if _splits_state(model, t)]


def _splits_state(model: ModelSpec, tensor_parallel: int) -> bool:
    """A hybrid's recurrent state splits evenly over the degree (core.hybrid, vLLM's divide())."""
    try:
        return model.hybrid is None or bool(model.hybrid.state_elements(tensor_parallel))
    except PlanError:
        return False


def kv_formats(model: ModelSpec, engine: Engine) -> list[KvDtype]:
    """The KV formats ``engine`` keeps for ``model`` at its newest release (core.plan.serving_refusal: the
    per-token-head ones on vLLM only, not for a latent-attention or hybrid model, int4 for a power-of-2 head); the
    release drawn must then keep the one drawn (core.inputs.release_keeps_kv: int8 and fp8_per_token_head from vLLM
    0.20, int4 from 0.25)."""
    newest = Inference(engine=engine, vllm_version=list(VllmVersion)[-1])
    return [
        k for k in KvDtype if k not in PER_TOKEN_HEAD_KV or serving_refusal(model, replace(newest, kv_dtype=k)) is None
    ]


gpu_ids = st.sampled_from([g.id for g in load_gpus()] + ["custom"])


def _some_of(draw: st.DrawFn, targets: tuple[str, ...]) -> tuple[str, ...]:
    """IA3's feedforward modules: some of the targets (Plan refuses others, as PEFT does)."""
    return tuple(t for t in targets if draw(st.booleans()))


# Prompt learning and LN tuning are modelled on one GPU or DDP (Plan refuses other strategies); prefix
# tuning under SDPA, LN tuning on the families whose default targets are every norm (LN_TUNING_FAMILIES).
# PEFT's trainable-tokens method (branch h61mts2) likewise, with at least one row (Plan._check_trainable_tokens_method).
PROMPT_METHODS: Final = (
    Method.PROMPT_TUNING,
    Method.P_TUNING,
    Method.PREFIX_TUNING,
    Method.LN_TUNING,
    Method.TRAINABLE_TOKENS,
)
# LoHa and LoKr (branch h53lyco) likewise on one GPU or DDP, on dense models, not on the head, without
# per-op checkpointing (Plan._check_lycoris); VeRA (branch h53vera), OFT (h54oft), AdaLoRA (h54ada) and MiSS (h58peft)
# under the same refusals.
# FourierFT and RoAd (h76peft) too; VB-LoRA, RandLoRA and SHiRA (h78peft).
LYCORIS: Final = (
    Method.LOHA, Method.LOKR, Method.VERA, Method.OFT, Method.ADALORA, Method.MISS, Method.FOURIERFT, Method.ROAD,
    Method.VBLORA, Method.RANDLORA, Method.SHIRA, Method.BOFT,
)  # fmt: skip


# torchao's low-bit AdamW: refused under a DeepSpeed ZeRO stage (Plan._check_ao_zero, branch h60opt).
AO_OPTIMIZERS: Final = (Optimizer.AO_ADAMW_8BIT, Optimizer.AO_ADAMW_4BIT, Optimizer.AO_ADAMW_FP8)


def _rank(draw: st.DrawFn, spec: ModelSpec, method: Method, targets: list[str]) -> int:
    """A rank from 1 to 1,024; FourierFT's (its n_frequency) at most the entries of its smallest target's weight, as
    PEFT and Plan._check_fourierft refuse more."""
    rank = draw(st.integers(1, 1024))
    if method is Method.FOURIERFT:
        entries = [i * o for i, o in spec.adapted_shapes(tuple(targets), False)]
        rank = min([rank, *entries])
    if method is Method.SHIRA:  # r·(in + out) at most in·out on every target (PEFT and Plan._check_vblora_shira)
        rank = max(1, min([rank, *(i * o // (i + o) for i, o in spec.adapted_shapes(tuple(targets), False))]))
    return rank


def vblora_targets(spec: ModelSpec, targets: list[str]) -> list[str]:
    """The targets whose sides are whole bank vectors (VB-LoRA's vector_length: Plan._check_vblora_shira)."""

    def whole(names: tuple[str, ...]) -> bool:
        return all(n % VBLORA_VECTOR_LENGTH == 0 for i, o in spec.adapted_shapes(names, False) for n in (i, o))

    keep = [t for t in targets if whole((t,))]
    return keep if keep and whole(tuple(keep)) else []


def boft_block(spec: ModelSpec, targets: tuple[str, ...]) -> int:
    """A BOFT block size that divides every target's input width (BOFTConfig's 4 where it does: Plan._check_boft)."""
    ins = [i for i, _ in spec.adapted_shapes(targets, False)]
    return next(b for b in (4, 2, 1) if all(i % b == 0 for i in ins))


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    spec = draw(models)
    engine = draw(st.sampled_from(list(Engine)))
    if spec.hybrid is None and draw(st.booleans()):  # a hybrid's override is its exact count (core.hybrid)
        spec = replace(spec, params_override=draw(st.integers(1, 10**15)))
    method = draw(st.sampled_from(list(Method)))
    if method is Method.LN_TUNING and spec.family not in LN_TUNING_FAMILIES:
        method = Method.PREFIX_TUNING
    if method in LYCORIS and spec.num_experts > 1:
        method = Method.LORA
    frozen = draw(st.integers(1, spec.num_layers)) if method is Method.FROZEN else draw(st.integers(0, spec.num_layers))
    # A latent-attention model (DeepSeek, Kimi K2) has no k_proj / v_proj (nor q_proj with a q_lora_rank)
    # and no llama.cpp cache in the planner: Plan refuses those (Plan._check_latent_attention).
    reachable = spec.adapter_targets() if spec.latent_attention else LORA_TARGETS
    targets = draw(st.lists(st.sampled_from(reachable), min_size=1, unique=True))
    if spec.recurrent_mixer:  # a hybrid (Mamba-2, Gated DeltaNet): the targets picking it leaves (core.plan.lora_on)
        targets = list(lora_on(spec, LoraSettings(targets=tuple(targets))).targets)
    moe = spec.num_experts > 1 and not spec.recurrent_mixer and not spec.first_k_dense_replace
    if moe and not spec.adapted_rows(tuple(targets), False):  # MLP targets alone reach nothing there under 5.x
        targets.append("q_proj")  # (Plan._check_moe_targets; the plans drawn run the default release, 5.x)
    if method is Method.VBLORA:  # only targets whose widths divide by the bank's vector length; else LoRA
        whole = vblora_targets(spec, targets)
        method, targets = (method, whole) if whole else (Method.LORA, targets)
    if spec.latent_attention and engine is Engine.LLAMACPP:
        engine = Engine.VLLM
    # Chunked attention (Llama 4) is served on vLLM 0.8 or later only (core.plan.serving_refusal).
    if spec.chunked_attention:
        engine = Engine.VLLM
    # A hybrid recurrent model is served on vLLM 0.11 - 0.34, one stage, a TP its mixer splits (serving_refusal).
    hybrid = spec.hybrid is not None
    if hybrid:
        engine = Engine.VLLM
    versions = (
        sorted(hybrid_vllm_lines(spec))
        if hybrid
        else list(VllmVersion)[list(VllmVersion).index(LLAMA4_VLLM_FROM) :]
        if spec.chunked_attention
        else list(VllmVersion)
    )
    head = method is not Method.IA3 and method not in LYCORIS and draw(st.booleans())
    gpu = draw(gpu_ids)
    # An Apple GPU: one GPU, and only the settings PyTorch's MPS backend runs (core.mac; the Plan refuses others).
    mac = runs_mps(gpu)
    one = st.just(1)
    plan = Plan(
        model=spec,
        model_id=draw(st.sampled_from(["", "gpt2", "x"])),
        method=method,
        lora=LoraSettings(
            rank=_rank(draw, spec, method, targets),
            alpha=draw(st.floats(0.5, 512)),
            # The output head: a LoRA / DoRA target (IA3 on it is refused).
            targets=tuple(t for t in (*LORA_TARGETS, *MIXER_TARGETS) if t in targets) + (("lm_head",) if head else ()),
            ia3_feedforward=_some_of(draw, tuple(t for t in LORA_TARGETS if t in targets)),
            # LitGPT's adapters (branch h41adapt): Adapter v1 refuses a start layer with no block above it.
            adapter_prompt_length=draw(st.integers(1, 64)),
            adapter_start_layer=draw(st.integers(0, spec.num_layers - 1)),
            adapter_quantised=draw(st.booleans()),
            lokr_factor=draw(st.integers(-1, 64)),
            trainable_tokens=draw(st.integers(1, spec.vocab_size)) if method is Method.TRAINABLE_TOKENS else 0,
            road_variant=draw(st.sampled_from(list(RoadVariant))),
            # BOFT (branch h80boft): a block size every target's width divides, else PEFT refuses the target.
            oft_block_size=boft_block(spec, tuple(targets)) if method is Method.BOFT else 32,  # else OFTConfig's 32
        ),
        quant=draw(st.sampled_from(list(Quant))),
        double_quant=draw(st.booleans()),
        frozen_layers=frozen,
        **precision_fields(draw(st.sampled_from(list(Precision)))),
        # Muon refuses adapters, experts and sharding (Plan._check_muon): tests/core/test_low_bit_optimizers.py draws
        # it; LoRA-FA refuses all but PEFT's LoRA / QLoRA (Plan._check_lora_fa): tests/core/test_lora_fa.py; GaLore
        # refuses adapters, experts and sharding as Muon does (Plan._check_galore): tests/core/test_galore.py
        optimizer=(
            optimizer := draw(
                st.sampled_from(
                    [
                        o
                        for o in (MAC_OPTIMIZERS if mac else list(Optimizer))
                        if o not in (Optimizer.MUON, Optimizer.LORA_FA, Optimizer.GALORE_ADAMW)
                        # Adafactor with trainable tokens is refused (Plan._check_trainable_tokens_method)
                        and not (method is Method.TRAINABLE_TOKENS and o is Optimizer.ADAFACTOR)
                    ]
                )
            )
        ),
        # torch.optim.RMSprop has no fused implementation (Plan._check_new_optimizers): drawn again below
        optimizer_impl=OptimizerImpl.FOREACH if optimizer is Optimizer.RMSPROP else OptimizerImpl.FUSED,
        checkpointing=method is not Method.PREFIX_TUNING and draw(st.booleans()),  # PEFT refuses it
        checkpoint_policy=draw(
            st.sampled_from([c for c in CheckpointPolicy if c is not CheckpointPolicy.OP or method not in LYCORIS])
        ),
        checkpoint_every=draw(st.integers(1, 64)),
        attention=Attention.SDPA
        if method is Method.PREFIX_TUNING
        else draw(st.sampled_from(MAC_ATTENTION if mac else list(Attention))),
        chunked_loss=draw(st.booleans()),
        workload=Workload(
            micro_batch=draw(st.integers(1, 1024)),
            seq_len=draw(st.integers(1, 1_000_000)),
            grad_accum=draw(st.integers(1, 1024)),
            tokens=draw(st.integers(0, 10**13)),
            eval_batch=draw(st.integers(0, 1024)),
        ),
        hardware=Hardware(
            gpu=gpu,
            utilisation=draw(st.floats(0.01, 1.0)),
            headroom=draw(st.floats(0.0, 0.9)),
            price_per_gpu_hour=draw(st.sampled_from([0.0, 0.5]) | st.floats(0.01, 100.0)),
            custom_memory_gb=draw(st.floats(1.0, 1000.0)),
            custom_tflops=draw(st.floats(1.0, 5000.0)),
            peak_tflops_override=draw(st.sampled_from([0.0, 100.0])),
            torch_version=draw(st.sampled_from(list(TorchVersion))),
            nccl_avoid_record_streams=draw(st.booleans()),
        ),
        parallel=Parallelism(
            nodes=draw(one if mac else st.integers(1, 512)),
            gpus_per_node=draw(one if mac else st.integers(1, 8)),
            # torchao's low-bit AdamW under ZeRO is refused (Plan._check_ao_zero); no FSDP on a Mac (core.mac._fsdp)
            strategy=Strategy.DDP
            if method in PROMPT_METHODS + LYCORIS
            else draw(
                st.sampled_from(
                    [
                        s
                        for s in Strategy
                        if not (s.deepspeed and optimizer in AO_OPTIMIZERS) and not (mac and s is Strategy.FSDP)
                    ]
                )
            ),
        ),
        inference=Inference(
            weight_dtype=(weight := draw(st.sampled_from(list(WeightFormat)))),
            kv_dtype=(kv := draw(st.sampled_from(kv_formats(spec, engine)))),
            concurrent=draw(st.integers(1, 4096)),
            context=draw(st.integers(1, 1_000_000)),
            engine=engine,
            new_tokens=draw(st.integers(0, 100_000)),
            # llama.cpp splits layers, not tensors (Plan refuses tensor parallelism with it).
            tensor_parallel=1
            if engine is Engine.LLAMACPP or mac
            else draw(st.sampled_from(serving_tensor_parallel(spec, 64))),
            # a release that loads the weights drawn (core.inputs.release_loads: mxfp4 from vLLM 0.10 / SGLang 0.5.1,
            # bitsandbytes to vLLM 0.27; core.plan._weight_format_refusal)
            # and keeps the KV format drawn (release_keeps_kv; core.plan._kv_format_refusal)
            vllm_version=draw(
                st.sampled_from([v for v in versions if release_loads(weight, v) and release_keeps_kv(kv, v)])
            ),
            sglang_version=(
                sglang_version := draw(st.sampled_from([v for v in SglangVersion if release_loads(weight, v)]))
            ),
            # SGLang's --enable-multimodal: Gemma 3 / Llama 4 on SGLang refuse it before 0.4.6 (core.plan
            # _sglang_multimodal_refusal); any other plan takes it and ignores it
            sglang_enable_multimodal=draw(st.booleans())
            and not (
                engine is Engine.SGLANG
                and spec.vision_family in SGLANG_MM_DISABLED_FAMILIES
                and list(SglangVersion).index(sglang_version) < list(SglangVersion).index(SGLANG_ENABLE_MULTIMODAL_FROM)
            ),
            # transformers loads FP8 weights from 4.49 (Plan refuses earlier releases with them).
            transformers_version=draw(st.sampled_from(list(TransformersVersion)[4:])),
            gguf_quant=draw(st.sampled_from(list(GgufQuant))),
            gpu_layers=draw(st.integers(0, 1000)),
            # llama.cpp's --n-cpu-moe: a mixture of experts only (Plan validation refuses it for a dense model)
            cpu_moe_layers=draw(st.integers(0, 1000)) if spec.num_experts > 1 else 0,
            # the host memory the CPU-kept weights are read from: DDR4-3200 / DDR5-5600 dual channel, 8-channel DDR5
            host_bandwidth_gb_s=draw(st.sampled_from((51.2, 89.6, 307.2))),
            cache_type=draw(st.sampled_from(list(CacheType))),  # flash attention on: every type allowed
            pipeline_parallel=draw(one if mac or hybrid else st.integers(1, min(16, spec.num_layers))),
            replicas=draw(st.integers(1, 1000)),
            gpu_memory_utilization=draw(st.floats(0.01, 1.0)),
            max_num_seqs=draw(st.integers(0, 10_000)),
            max_num_batched_tokens=draw(st.integers(0, 1_000_000)),
            mem_fraction_static=draw(st.one_of(st.just(0.0), st.floats(0.01, 1.0))),  # 0: SGLang's default
        ),
        accounting=draw(st.sampled_from(list(Accounting))),
        lesson=LessonSettings(
            activations_gb=draw(st.floats(0.0, 1000.0)), trainable_override=draw(st.integers(0, 10**12))
        ),
    )
    # Precision: the old one-word setting above (what version-2 files hold), a named preset,
    # or custom roles; any optimizer implementation.
    how = draw(st.sampled_from(["precision", "preset", "custom"]))
    if how == "preset":
        plan = plan.with_changes(preset=draw(st.sampled_from([p for p in Preset if p is not Preset.CUSTOM])))
    elif how == "custom":
        dtypes = st.sampled_from(list(Dtype))
        plan = plan.with_changes(
            weight_dtype=draw(dtypes),
            base_dtype=draw(dtypes),
            adapter_dtype=draw(dtypes),
            autocast=draw(st.sampled_from(list(Autocast))),
        )
    impls = [i for i in OptimizerImpl if not (plan.optimizer is Optimizer.RMSPROP and i is OptimizerImpl.FUSED)]
    return plan.with_changes(optimizer_impl=draw(st.sampled_from(impls)))
