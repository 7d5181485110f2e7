"""``vla-rl train CFG --plan`` and ``vla-rl loop CFG --plan``: memory and cost of a VLA recipe and
of the World-VLA-Loop's models, computed on the meta device and fake tensors (:mod:`grpo.fake_trace`), the way
``diffusion-rl train --dry-run --plan`` plans a denoiser. Nothing is loaded, allocated or written.

VLA (``vla-rl train``). The built-in policy (or a user's class) says what to trace itself
(``plan_passes``, e.g. :meth:`vla_rl.policy.SmallVLA.plan_passes`) and is built on the meta device with the recipe's
policy config; its state / action sizes and an instruction come from one reset of the first task's
simulator (the trainer's own probe; when that simulator is not installed, the size is said to be assumed). Two passes
are traced: the rollout (the fused context and one velocity call of the flow head, no grad, for all of an iteration's
episodes at once, as the vectorized rollout calls it) and one training minibatch (``chunk_log_prob`` of
``rl.minibatch_size`` stored chunks + backward of the clipped objective's ``-logp``). A LeRobot policy
(``policy.kind: lerobot``) is not importable here (LeRobot is not in this venv), so SmolVLA is counted from its
architecture: the SmolVLM2-500M backbone built with transformers on the meta device, its text model cut to
``num_vlm_layers`` (16), plus the action expert (a Llama-style stack 0.75x as wide, every second layer
cross-attending to the backbone's keys/values) and its projections; with ``train_expert_only`` only the expert and
projections train (450.0 M in all: the published size). Its pass is traced as: the backbone's forward over the
prefix (2 cameras at 512 px = 64 tokens each after SmolVLM's pixel shuffle, 48 instruction tokens, 1 state token; no
grad unless the VLM trains) and, per flow step, the expert over the action chunk: self-attention layers attend to the
prefix's cached keys/values and the chunk's own, cross-attention layers to the prefix's through the expert's
k/v projections (LeRobot's SmolVLMWithExpertModel with its KV cache), + backward for the training minibatch.
pi0 / pi0.5 (``type: pi0 | pi05``) likewise from their architecture (:func:`plan_pi`): PaliGemma (SigLIP So400m/14,
Gemma 2B) + the Gemma-300M action expert attending jointly over the prefix and the chunk in every layer (3.501 B /
3.617 B, pi0.5 with its adaptive norms). Grouped-query keys/values are repeated to the query heads before attention,
as LeRobot's eager attention does (and keeps them for the backward).

Memory per GPU (:func:`policy_memory`), for DDP and FSDP on each GPU count: fp32 weights 4 P, gradients 4 T and
AdamW moments 8 T for the T trained parameters (FSDP: a full replica for the rollouts + 16 P / N for the sharded
training copy, the trainer's layout; it trains every parameter), a frozen KL reference copy 4 P when
``grpo.kl_coef > 0``, then the larger of the rollout call's and the training micro-batch's transients for the rank's
rows. FLOPs per iteration: policy calls x rollout FLOPs per row (x flow steps), and inner epochs x calls x training
FLOPs per row; seconds at a stated sustained throughput, GPU compute only (simulation, rendering and the SRPO reward
are not FLOPs of the policy and are not in it). Activations are traced in fp32 (``dist.mixed_precision=bf16``
autocasts the forwards: an upper bound then).

World-VLA-Loop (``vla-rl loop``). The video world model (:class:`world_models.video_wm.VideoWorldModel`, a
WanTransformer3DModel over pixel patches + the success head), the state model, the IDM and the VLA are built on the
meta device; the world model's training step (``loss`` on ``models.wm_batch`` windows + backward) and one denoiser
call of the imagined rollout (all RL episodes at once, no grad) are traced. GPU memory: the training phase (world
model weights, gradients, AdamW: 16 B / parameter, + the step's activations) and the RL phase (the world model's fp32
weights for inference, one imagined chunk's transient, the VLA's training state). Host memory: the episodes as uint8
frames and the success head's imagined float samples (one rollout_video in flight), from the data sizes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from grpo.fake_trace import GiB, Trace, trace_pass

H100_TF32_TFLOPS = 494.0  # H100 SXM dense TF32 tensor-core peak (NVIDIA datasheet): the policies train in fp32
H100_BF16_TFLOPS = 989.0  # dense bf16 (dist.mixed_precision=bf16)
SMOLVLA_PUBLISHED = 0.45  # billions: LeRobot's SmolVLA paper / smolvla_base model card ("450M parameters")


@dataclass
class PolicyPlan:
    name: str
    params: int
    trainable: int
    rollout: Trace  # one call over `rollout_rows` rows (per flow step for the flow head)
    rollout_rows: int
    train: Trace  # one minibatch of `train_rows` rows, forward + backward
    train_rows: int
    flow_steps: int
    notes: list[str]


def episodes_and_calls(cfg) -> tuple[int, int]:
    """An iteration's episodes and policy calls (vla_rl.rollout.cost_per_iteration's upper bounds)."""
    from .rollout import cost_per_iteration

    c = cost_per_iteration(cfg)
    return c["episodes"], c["policy_calls"]


# ---- the built-in policy ------------------------------------------------------------------------------------------
def probe_task(env_cfg) -> tuple[str, int, int, str]:
    """(instruction, state dim, action dim, how they were found) of the first task: one reset of its simulator."""
    try:
        import numpy as np

        import sims

        env = sims.make(env_cfg.tasks[0], **dict(env_cfg.kwargs))
        try:
            obs, _ = env.reset(seed=0, options={"init_seed": 0})
            return (str(obs["instruction"]), int(np.asarray(obs["state"]).shape[-1]), int(env.action_space.shape[0]),
                    f"probed on {env_cfg.tasks[0]}")
        finally:
            env.close()
    except Exception as e:  # a simulator that is not installed: sizes assumed (they change a few input weights only)
        return "pick up the object", 9, 7, f"assumed state 9 / action 7 ({type(e).__name__} probing {env_cfg.tasks[0]})"


def plan_builtin(cfg) -> PolicyPlan:
    """The recipe's policy of ``policy.kind: builtin`` (or a user's class): the passes it describes itself
    (``plan_passes``, the policy protocol's planning hook) traced, a rollout call and a training minibatch."""
    import copy

    from .policies.factory import policy_class

    text, sdim, adim, how = probe_task(cfg.env)
    pcfg = copy.deepcopy(cfg.policy)
    pcfg.state_dim, pcfg.action_dim = pcfg.state_dim or sdim, pcfg.action_dim or adim
    cls = policy_class(pcfg)
    if not callable(getattr(cls, "plan_passes", None)):
        raise ValueError(f"policy.kind={pcfg.kind!r}: {cls.__name__} has no plan_passes(cfg, instruction, "
                         "rollout_rows, train_rows) classmethod, so --plan cannot trace it (see "
                         "vla_rl.policy.SmallVLA.plan_passes)")
    episodes, _ = episodes_and_calls(cfg)
    mb = cfg.rl.minibatch_size
    pp = cls.plan_passes(pcfg, text, episodes, mb)
    m = pp["build"]()
    n = sum(p.numel() for p in m.parameters())
    t = sum(p.numel() for p in m.parameters() if p.requires_grad)
    return PolicyPlan(pp["label"], n, t, trace_pass(pp["build"], pp["rollout_inputs"], pp["rollout"], grad=False),
                      episodes, trace_pass(pp["build"], pp["train_inputs"], pp["train"]), mb, pp["calls_per_step"],
                      [f"state/action dims {pcfg.state_dim}/{pcfg.action_dim}: {how}"])


# ---- SmolVLA (LeRobot) from its architecture ----------------------------------------------------------------------
# SmolVLM2-500M-Video-Instruct (HuggingFaceTB), the backbone LeRobot's SmolVLA loads, as transformers configs
SMOLVLM2_500M = dict(
    text_config=dict(model_type="llama", vocab_size=49280, hidden_size=960, intermediate_size=2560,
                     num_hidden_layers=32,
                     num_attention_heads=15, num_key_value_heads=5, head_dim=64, rms_norm_eps=1e-5,
                     max_position_embeddings=8192, tie_word_embeddings=False),
    vision_config=dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
                       image_size=512, patch_size=16),
    scale_factor=4, tie_word_embeddings=False)  # its own lm_head (SmolVLM2-500M: 507 M parameters; LeRobot freezes it)
# lerobot.policies.smolvla.configuration_smolvla defaults (restated): the backbone's first 16 text layers, an expert
# 0.75x as wide with as many layers, self-attention every 2nd layer (cross-attention to the backbone otherwise),
# state and actions padded to 32, a 48-token instruction, images resized with padding to 512
SMOLVLA = dict(num_vlm_layers=16, expert_width_multiplier=0.75, self_attn_every_n_layers=2, max_state_dim=32,
               max_action_dim=32, tokenizer_max_length=48, image_tokens=64)


SMOLVLM2_NAME = "HuggingFaceTB/SmolVLM2-500M-Video-Instruct"
SMOLVLA_KEYS = ("num_vlm_layers", "expert_width_multiplier", "self_attn_every_n_layers", "max_state_dim",
                "max_action_dim",
                "tokenizer_max_length")  # policy.lerobot keys the plan follows


def smolvla_settings(policy) -> dict:
    """SmolVLA's architecture settings: LeRobot's defaults with the recipe's ``policy.lerobot`` overrides of
    :data:`SMOLVLA_KEYS`; what the plan cannot size (another policy type or backbone, another image size, fewer expert
    layers) is refused with one line."""
    lr = dict(policy.lerobot)
    if policy.type != "smolvla":
        raise ValueError(f"--plan sizes the built-in VLA and LeRobot's SmolVLA, pi0 and pi0.5; policy.type="
                         f"{policy.type!r} is not planned (use --dry-run: it counts a downloaded checkpoint's "
                         "parameters)")
    name = lr.get("vlm_model_name", SMOLVLM2_NAME)
    if name != SMOLVLM2_NAME:
        raise ValueError(f"--plan sizes SmolVLA on its published backbone {SMOLVLM2_NAME}; "
                         f"policy.lerobot.vlm_model_name={name!r} is another one (use --dry-run)")
    if tuple(lr.get("resize_imgs_with_padding", (512, 512))) != (512, 512) or int(lr.get("num_expert_layers", -1)) > 0:
        raise ValueError("--plan sizes SmolVLA at resize_imgs_with_padding [512, 512] with num_expert_layers <= 0; "
                         f"got {list(lr.get('resize_imgs_with_padding', (512, 512)))} and "
                         f"{lr.get('num_expert_layers', -1)}")
    return {**SMOLVLA, **{k: lr[k] for k in SMOLVLA_KEYS if k in lr}}


def _expert_intermediate(hidden: int, multiplier: int = 4, multiple_of: int = 256) -> int:
    """The expert's MLP width (SwiGLU sizing, as LeRobot's smolvlm_with_expert.get_intermediate_size):
    ``multiplier * floor(2 hidden / 3)`` rounded up to a multiple of 256 (720 -> 2048)."""
    d = multiplier * int(2 * hidden / 3)
    return multiple_of * ((d + multiple_of - 1) // multiple_of)


def _smolvla_parts(arch: dict):
    """Builders of SmolVLA's two halves on the meta device for the settings ``arch`` (:func:`smolvla_settings`):
    the SmolVLM2 backbone with its text model cut to ``num_vlm_layers``, and the action expert with its projections."""
    import copy

    import transformers

    cfg = transformers.SmolVLMConfig(**copy.deepcopy(SMOLVLM2_500M))
    cfg.text_config.num_hidden_layers = arch["num_vlm_layers"]
    tc = cfg.text_config
    width = int(tc.hidden_size * arch["expert_width_multiplier"])
    ecfg = transformers.LlamaConfig(vocab_size=1, hidden_size=width, intermediate_size=_expert_intermediate(width),
                                    num_hidden_layers=arch["num_vlm_layers"],
                                    num_attention_heads=tc.num_attention_heads,
                                    num_key_value_heads=tc.num_key_value_heads, head_dim=tc.head_dim)

    def vlm():
        with torch.device("meta"):
            return transformers.SmolVLMForConditionalGeneration(cfg)

    def expert():
        """The expert's decoder stack (no token embedding); cross-attention layers take the backbone's keys and
        values (``num_key_value_heads x head_dim`` wide) instead of their own hidden states."""
        with torch.device("meta"):
            m = transformers.LlamaModel(ecfg)
            m.embed_tokens = None
            kv = tc.num_key_value_heads * tc.head_dim
            for i, layer in enumerate(m.layers):
                if i % arch["self_attn_every_n_layers"]:
                    layer.self_attn.k_proj = torch.nn.Linear(kv, kv, bias=False)
                    layer.self_attn.v_proj = torch.nn.Linear(kv, kv, bias=False)
            s, a = arch["max_state_dim"], arch["max_action_dim"]
            m.smolvla_projections = torch.nn.ModuleDict({  # state -> backbone width; actions, time -> expert width
                "state_proj": torch.nn.Linear(s, tc.hidden_size), "action_in_proj": torch.nn.Linear(a, width),
                "action_out_proj": torch.nn.Linear(width, a), "action_time_mlp_in": torch.nn.Linear(2 * width, width),
                "action_time_mlp_out": torch.nn.Linear(width, width)})
        return m

    return vlm, expert, width



def prefix_expert_traces(vlm, expert, prefix_inputs, prefix_pass, expert_inputs, expert_pass, episodes: int, mb: int,
                         expert_only: bool, steps: int, cache_bytes_per_row: int) -> tuple[Trace, Trace]:
    """A prefix-cached flow VLA's (SmolVLA, pi0, pi0.5) rollout call over ``episodes`` rows and training minibatch of
    ``mb`` rows, from one traced prefix pass and one traced expert pass each. A rollout call: the prefix once, then
    the expert once per flow step over the cached prefix keys / values (``cache_bytes_per_row``: their fp32 bytes);
    a training minibatch: the prefix once (with gradients unless only the expert trains), then every step's expert
    pass kept for the backward of the summed log-probs."""
    roll = trace_pass(vlm, lambda m: prefix_inputs(m, episodes), prefix_pass, grad=False)
    roll_e = trace_pass(expert, lambda m: expert_inputs(episodes), expert_pass, grad=False)
    tr_p = trace_pass(vlm, lambda m: prefix_inputs(m, mb), prefix_pass, grad=not expert_only)
    tr_e = trace_pass(expert, lambda m: expert_inputs(mb), expert_pass)
    rollout = Trace(roll.flops + steps * roll_e.flops, max(roll.peak, cache_bytes_per_row * episodes + roll_e.peak))
    train = Trace(tr_p.flops + steps * tr_e.flops, tr_p.peak + cache_bytes_per_row * mb + steps * tr_e.peak)
    return rollout, train


def plan_smolvla(cfg) -> PolicyPlan:
    """LeRobot's SmolVLA (``policy.kind: lerobot``, ``type: smolvla``) from its architecture (module docstring)."""
    arch = smolvla_settings(cfg.policy)
    vlm, expert, width = _smolvla_parts(arch)
    v, e = vlm(), expert()
    nv, ne = sum(p.numel() for p in v.parameters()), sum(p.numel() for p in e.parameters())
    expert_only = bool(dict(cfg.policy.lerobot).get("train_expert_only", True))
    episodes, _ = episodes_and_calls(cfg)
    mb, cams, chunk = cfg.rl.minibatch_size, len(cfg.policy.cameras), cfg.policy.chunk_size
    prefix = cams * arch["image_tokens"] + arch["tokenizer_max_length"] + 1

    tc = SMOLVLM2_500M["text_config"]
    hd, kvh = tc["head_dim"], tc["num_key_value_heads"]
    kv, groups = kvh * hd, tc["num_attention_heads"] // kvh
    layers = arch["num_vlm_layers"]

    def prefix_inputs(m, rows):
        return {"inputs_embeds": torch.randn(rows, prefix, 960), "pixel_values": torch.randn(rows * cams, 3, 512, 512)}

    def prefix_pass(m, x):
        """The vision tower on every camera image (SigLIP patches + positions, encoder, norm; the connector's pixel
        shuffle + projection to 64 tokens), then the cut text model over the prefix (+ backward when the VLM trains).
        The patch positions of a full 512 px image are 0..1023 in order, so the position table is added as is
        (transformers' SmolVLM computes them per image from the patch mask with a data-dependent loop, which fake
        tensors cannot run)."""
        vm = m.model.vision_model
        h = vm.embeddings.patch_embedding(x["pixel_values"]).flatten(2).transpose(1, 2)
        h = h + vm.embeddings.position_embedding.weight
        img = m.model.connector(vm.post_layernorm(vm.encoder(inputs_embeds=h).last_hidden_state))
        out = m.model.text_model(inputs_embeds=x["inputs_embeds"], use_cache=False).last_hidden_state
        if torch.is_grad_enabled():
            (out.square().mean() + img.square().mean()).backward()

    def expert_inputs(rows):
        return {"actions": torch.randn(rows, chunk, arch["max_action_dim"]), "time": torch.randn(rows, chunk, width),
                "k": torch.randn(layers, rows, prefix, kv), "v": torch.randn(layers, rows, prefix, kv)}

    def expert_pass(m, x):
        """One velocity call of the action expert over the chunk, as LeRobot's SmolVLMWithExpertModel runs it with the
        prefix cached: in self-attention layers (every 2nd, from 0) the chunk's queries attend to the prefix's cached
        keys/values and the chunk's own; in the others they attend to the prefix's keys/values through the expert's
        k_proj / v_proj (320 -> 320). Grouped-query attention (15 query heads, 5 kv heads of 64) by SDPA; RoPE and the
        attention mask are elementwise and left out (no matmul FLOPs). Backward of a scalar when grad is on."""
        import torch.nn.functional as F

        proj = m.smolvla_projections
        a = proj["action_in_proj"](x["actions"])
        h = proj["action_time_mlp_out"](F.silu(proj["action_time_mlp_in"](torch.cat([a, x["time"]], -1))))
        B, n, _ = h.shape
        heads = lambda t: t.view(B, t.shape[1], -1, hd).transpose(1, 2)  # noqa: E731
        for i, layer in enumerate(m.layers):
            at = layer.self_attn
            hn = layer.input_layernorm(h)
            if i % arch["self_attn_every_n_layers"] == 0:
                k = torch.cat([x["k"][i], at.k_proj(hn)], 1)
                v = torch.cat([x["v"][i], at.v_proj(hn)], 1)
            else:
                k, v = at.k_proj(x["k"][i]), at.v_proj(x["v"][i])
            o = F.scaled_dot_product_attention(heads(at.q_proj(hn)), heads(k).repeat_interleave(groups, 1),
                                               heads(v).repeat_interleave(groups, 1))
            h = h + at.o_proj(o.transpose(1, 2).reshape(B, n, -1))
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        out = proj["action_out_proj"](m.norm(h))
        if torch.is_grad_enabled():
            out.float().square().mean().backward()

    rollout, train = prefix_expert_traces(vlm, expert, prefix_inputs, prefix_pass, expert_inputs, expert_pass, episodes,
                                          mb, expert_only, cfg.policy.flow.num_steps, 2 * layers * prefix * kv * 4)
    return PolicyPlan("LeRobot SmolVLA (from its architecture; LeRobot not installed here)", nv + ne,
                      ne if expert_only else nv + ne, rollout, episodes, train, mb, 1,
                      [f"backbone {nv / 1e6:.1f} M (SmolVLM2-500M, text cut to {layers} layers), action expert + "
                       f"projections {ne / 1e6:.1f} M; total {(nv + ne) / 1e9:.3f} B, published {SMOLVLA_PUBLISHED:g} "
                       "B",
                       f"prefix {prefix} tokens ({cams} cameras x {arch['image_tokens']} + "
                       f"{arch['tokenizer_max_length']} text + 1 state); chunk {chunk}; {cfg.policy.flow.num_steps} "
                       "flow steps a call"])


# ---- pi0 / pi0.5 (LeRobot, Physical Intelligence) from their architecture --------------------------------------------
# lerobot.policies.pi0 / pi05 (restated): PaliGemma (SigLIP So400m/14 at 224 px -> 256 tokens an image, the linear
# projector to 2048, Gemma 2B: 18 layers 2048 wide, MLP 16384, 8 query heads / 1 kv head of 256) + an action expert
# Gemma 300M (18 layers 1024 wide, MLP 4096, same heads) with its token embedding removed (its lm_head stays in the
# checkpoint, unused) + projections; every layer attends jointly over the prefix's and the chunk's keys/values.
# pi0: the state is one projected token of the chunk, the flow time is concatenated to the actions (action_time_mlp);
# pi0.5: the state is text in the prompt (200 tokens), the time conditions adaptive RMS norms (a 1024 -> 3 x 1024
# dense layer per norm: scale, shift, gate).
PALIGEMMA_TEXT = dict(hidden_size=2048, intermediate_size=16384, num_hidden_layers=18, num_attention_heads=8,
                      num_key_value_heads=1, head_dim=256, vocab_size=257152, hidden_activation="gelu_pytorch_tanh")
PI_EXPERT = dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=18, num_attention_heads=8,
                 num_key_value_heads=1, head_dim=256, vocab_size=257152, hidden_activation="gelu_pytorch_tanh")
PI_PUBLISHED = 3.3  # billions: the pi0 paper (Black et al. 2024): "3B" PaliGemma VLM + "300M" action expert
PI_KEYS = ("tokenizer_max_length", "max_state_dim", "max_action_dim")


class _AdaRMS(torch.nn.Module):
    """pi0.5's adaptive RMS norm (restated from openpi's patched GemmaRMSNorm): ``x / rms(x) * (1 + scale) + shift``
    and a residual ``gate``, ``(scale, shift, gate) = dense(cond)`` with ``cond[B, D]`` the flow-time embedding."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dense = torch.nn.Linear(dim, 3 * dim)

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scale, shift, gate = self.dense(cond)[:, None].chunk(3, -1)
        return x * torch.rsqrt(x.float().square().mean(-1, keepdim=True) + 1e-6) * (1 + scale) + shift, gate


def pi_settings(policy) -> dict:
    """pi0 / pi0.5 settings: LeRobot's defaults with the recipe's ``policy.lerobot`` overrides of :data:`PI_KEYS`;
    other backbones, expert variants or image sizes are refused with one line."""
    lr = dict(policy.lerobot)
    for key, default in (("paligemma_variant", "gemma_2b"), ("action_expert_variant", "gemma_300m")):
        if lr.get(key, default) != default:
            raise ValueError(f"--plan sizes {policy.type} with {key}={default!r} (the published model); got "
                             f"policy.lerobot.{key}={lr[key]!r} (use --dry-run)")
    if tuple(lr.get("image_resolution", (224, 224))) != (224, 224):
        raise ValueError(f"--plan sizes {policy.type} at image_resolution [224, 224]; got "
                         f"{list(lr['image_resolution'])}")
    base = {"tokenizer_max_length": 48 if policy.type == "pi0" else 200, "max_state_dim": 32, "max_action_dim": 32}
    return {**base, **{k: lr[k] for k in PI_KEYS if k in lr}}


def _pi_parts(pi05: bool, arch: dict):
    """Builders of PaliGemma and of the action expert (+ projections, + pi0.5's adaptive norms) on the meta device."""
    import transformers

    vcfg = transformers.PaliGemmaConfig(text_config=dict(model_type="gemma", **PALIGEMMA_TEXT), vocab_size=257152,
                                        image_token_index=257152, projection_dim=2048)
    vcfg.vision_config.image_size, vcfg.vision_config.intermediate_size = 224, 4304
    vcfg.vision_config.projection_dim = 2048
    ecfg = transformers.GemmaConfig(**PI_EXPERT)
    w = ecfg.hidden_size

    def vlm():
        with torch.device("meta"):
            return transformers.PaliGemmaForConditionalGeneration(vcfg)

    def expert():
        with torch.device("meta"):
            m = transformers.GemmaForCausalLM(ecfg)
            m.model.embed_tokens = None
            a, st = arch["max_action_dim"], arch["max_state_dim"]
            if pi05:
                for layer in m.model.layers:
                    layer.input_layernorm, layer.post_attention_layernorm = _AdaRMS(w), _AdaRMS(w)
                m.model.norm = _AdaRMS(w)
                proj = {"action_in_proj": torch.nn.Linear(a, w), "action_out_proj": torch.nn.Linear(w, a),
                        "time_mlp_in": torch.nn.Linear(w, w), "time_mlp_out": torch.nn.Linear(w, w)}
            else:
                proj = {"action_in_proj": torch.nn.Linear(a, w), "action_out_proj": torch.nn.Linear(w, a),
                        "state_proj": torch.nn.Linear(st, w), "action_time_mlp_in": torch.nn.Linear(2 * w, w),
                        "action_time_mlp_out": torch.nn.Linear(w, w)}
            m.pi_projections = torch.nn.ModuleDict(proj)
        return m

    return vlm, expert, w


def plan_pi(cfg) -> PolicyPlan:
    """LeRobot's pi0 / pi0.5 (``policy.kind: lerobot``, ``type: pi0 | pi05``) from their architecture."""
    import torch.nn.functional as F

    pi05 = cfg.policy.type == "pi05"
    arch = pi_settings(cfg.policy)
    vlm, expert, width = _pi_parts(pi05, arch)
    v, e = vlm(), expert()
    nv, ne = sum(p.numel() for p in v.parameters()), sum(p.numel() for p in e.parameters())
    unused = e.lm_head.weight.numel()  # the expert's lm_head: in the checkpoint, never used, no gradient
    expert_only = bool(dict(cfg.policy.lerobot).get("train_expert_only", False))  # LeRobot's default: all trained
    episodes, _ = episodes_and_calls(cfg)
    mb, cams, chunk = cfg.rl.minibatch_size, len(cfg.policy.cameras), cfg.policy.chunk_size
    prefix = cams * 256 + arch["tokenizer_max_length"]
    suffix = chunk + (0 if pi05 else 1)  # pi0: the state token + the actions
    hd, layers, groups = PI_EXPERT["head_dim"], PI_EXPERT["num_hidden_layers"], PI_EXPERT["num_attention_heads"]

    def prefix_inputs(m, rows):
        return {"inputs_embeds": torch.randn(rows, prefix, PALIGEMMA_TEXT["hidden_size"]),
                "pixel_values": torch.randn(rows * cams, 3, 224, 224)}

    def prefix_pass(m, x):
        """SigLIP on every camera image + the projector, then Gemma 2B over the prefix (+ backward if it trains)."""
        img = m.model.multi_modal_projector(m.model.vision_tower(x["pixel_values"]).last_hidden_state)
        out = m.model.language_model(inputs_embeds=x["inputs_embeds"], use_cache=False).last_hidden_state
        if torch.is_grad_enabled():
            (out.square().mean() + img.square().mean()).backward()

    def expert_inputs(rows):
        return {"actions": torch.randn(rows, chunk, arch["max_action_dim"]), "time": torch.randn(rows, width),
                "state": torch.randn(rows, 1, arch["max_state_dim"]),
                "k": torch.randn(layers, rows, prefix, hd), "v": torch.randn(layers, rows, prefix, hd)}

    def expert_pass(m, x):
        """One velocity call of the expert over the chunk with the prefix's keys/values cached (every layer attends
        jointly over prefix + chunk; 8 query heads share the 1 kv head). RoPE and masks are elementwise, left out."""
        proj, g = m.pi_projections, m.model
        a = proj["action_in_proj"](x["actions"])
        if pi05:
            cond = proj["time_mlp_out"](F.silu(proj["time_mlp_in"](x["time"])))
            h = a
        else:
            t = x["time"][:, None].expand(-1, chunk, -1)
            h = proj["action_time_mlp_out"](F.silu(proj["action_time_mlp_in"](torch.cat([a, t], -1))))
            h = torch.cat([proj["state_proj"](x["state"]), h], 1)
        B, n, _ = h.shape
        heads = lambda t: t.view(B, t.shape[1], -1, hd).transpose(1, 2)  # noqa: E731
        for i, layer in enumerate(g.layers):
            at = layer.self_attn
            hn, gate = layer.input_layernorm(h, cond) if pi05 else (layer.input_layernorm(h), 1.0)
            k = torch.cat([x["k"][i], at.k_proj(hn)], 1)
            v = torch.cat([x["v"][i], at.v_proj(hn)], 1)
            o = F.scaled_dot_product_attention(heads(at.q_proj(hn)), heads(k).repeat_interleave(groups, 1),
                                               heads(v).repeat_interleave(groups, 1))
            h = h + gate * at.o_proj(o.transpose(1, 2).reshape(B, n, -1))
            hn, gate = layer.post_attention_layernorm(h, cond) if pi05 else (layer.post_attention_layernorm(h), 1.0)
            h = h + gate * layer.mlp(hn)
        hn = g.norm(h, cond)[0] if pi05 else g.norm(h)
        out = proj["action_out_proj"](hn[:, -chunk:])
        if torch.is_grad_enabled():
            out.float().square().mean().backward()

    rollout, train = prefix_expert_traces(vlm, expert, prefix_inputs, prefix_pass, expert_inputs, expert_pass, episodes,
                                          mb, expert_only, cfg.policy.flow.num_steps, 2 * layers * prefix * hd * 4)
    name = "pi0.5" if pi05 else "pi0"
    return PolicyPlan(f"LeRobot {name} (from its architecture; LeRobot not installed here)", nv + ne,
                      (ne - unused) if expert_only else (nv + ne - unused), rollout, episodes, train, mb, 1,
                      [f"PaliGemma {nv / 1e9:.3f} B (SigLIP So400m/14 + Gemma 2B), action expert + projections "
                       f"{ne / 1e9:.3f} B (of which its unused lm_head {unused / 1e6:.1f} M: no gradient, no AdamW "
                       f"state); total {(nv + ne) / 1e9:.3f} B, published {PI_PUBLISHED:g} B (pi0 paper: 3 B VLM + "
                       "300 M expert)",
                       f"prefix {prefix} tokens ({cams} cameras x 256 + {arch['tokenizer_max_length']} text); chunk "
                       f"{suffix} tokens; {cfg.policy.flow.num_steps} flow steps a call"])


# ---- memory, FLOPs, the printed plan --------------------------------------------------------------------------------
def policy_memory(p: PolicyPlan, cfg, strategy: str = "ddp", gpus: int = 1) -> dict[str, float] | None:
    """Bytes per GPU (module docstring) on ``gpus`` ranks: fp32 weights, gradients + AdamW of the trained ones, a KL
    reference when ``grpo.kl_coef > 0``, and the larger of the rollout's and the training micro-batch's transients,
    each scaled to the rank's rows (``ceil(episodes / gpus)`` in a rollout call, ``ceil(ceil(minibatch / gpus) /
    rl.grad_accum)`` in a backward; activations are linear in the rows). ``fsdp`` (vla_rl.trainer: rollouts use a full
    replica, the update a sharded copy) holds the replica plus weights, gradients and AdamW / ``gpus``; it needs every
    parameter trained (None otherwise)."""
    if strategy == "fsdp" and p.trainable != p.params:
        return None
    roll_rows = math.ceil(p.rollout_rows / gpus)
    train_rows = math.ceil(math.ceil(p.train_rows / gpus) / max(1, cfg.rl.grad_accum))
    out = {"weights": 4 * p.params}
    if strategy == "fsdp":
        out["sharded copy+grads+AdamW"] = 16 * p.params / gpus
    else:
        out["grads+AdamW"] = 12 * p.trainable
    out["KL ref"] = 4 * p.params if cfg.grpo.kl_coef > 0 else 0
    out["rollout"] = p.rollout.peak * roll_rows / p.rollout_rows
    out["train"] = p.train.peak * train_rows / p.train_rows
    out["peak"] = sum(v for k, v in out.items() if k not in ("rollout", "train")) + max(out["rollout"], out["train"])
    return out


def policy_flops(p: PolicyPlan, cfg) -> dict[str, float]:
    """FLOPs of an iteration: every policy call's rollout pass, and ``rl.inner_epochs`` training passes per call."""
    _, calls = episodes_and_calls(cfg)
    per_row_roll = p.rollout.flops / p.rollout_rows * p.flow_steps
    per_row_train = p.train.flops / p.train_rows
    out = {"rollout": calls * per_row_roll, "train": cfg.rl.inner_epochs * calls * per_row_train}
    out["total"] = out["rollout"] + out["train"]
    return out


def plan_policy(cfg) -> PolicyPlan:
    if cfg.policy.kind == "lerobot":
        return plan_pi(cfg) if cfg.policy.type in ("pi0", "pi05") else plan_smolvla(cfg)
    return plan_builtin(cfg)


def _rate(cfg, peak_tflops: float | None) -> float:
    if peak_tflops:
        return peak_tflops
    return H100_BF16_TFLOPS if getattr(cfg.dist, "mixed_precision", "fp32") == "bf16" else H100_TF32_TFLOPS


def _size(b: float) -> str:
    return f"{b / GiB:.2f} GiB" if b >= 0.1 * GiB else f"{b / 2 ** 20:.1f} MiB"


def format_policy_plan(p: PolicyPlan, cfg, gpus: tuple[int, ...] = (1, 8), gpu_mem_gb: float = 80.0,
                       peak_tflops: float | None = None, mfu: float = 0.4) -> str:
    rate = _rate(cfg, peak_tflops)
    f = policy_flops(p, cfg)
    L = [f"plan: {p.name}, fp32 weights, fake-tensor trace (no weights loaded)",
         f"parameters (meta device): {p.params / 1e6:.3f} M, trained {p.trainable / 1e6:.3f} M",
         *("  " + n for n in p.notes),
         f"traced: rollout call over {p.rollout_rows} rows {p.rollout.flops / 1e9:.2f} GFLOP"
         + (f" per flow step (x{p.flow_steps})" if p.flow_steps > 1 else "") + f", {_size(p.rollout.peak)}; "
         f"training minibatch of {p.train_rows} rows {p.train.flops / 1e9:.2f} GFLOP, {_size(p.train.peak)}",
         f"memory per GPU (activations for the rank's rows, rl.grad_accum={cfg.rl.grad_accum}):"]
    for strategy in ("ddp", "fsdp"):
        for n in gpus:
            m = policy_memory(p, cfg, strategy, n)
            if m is None:
                L.append(f"  {strategy:5s} {n:2d} GPU(s)  n/a (dist.strategy=fsdp trains every parameter; this recipe "
                         "freezes some)")
                continue
            L.append(f"  {strategy:5s} {n:2d} GPU(s)  " + "  ".join(f"{k} {_size(v)}" for k, v in m.items())
                     + f"   fits {gpu_mem_gb:g} GB: {'yes' if m['peak'] <= gpu_mem_gb * 1e9 else 'NO'}")
    L.append(f"FLOPs per iteration: {f['total'] / 1e12:.2f} TFLOP (rollout {f['rollout'] / 1e12:.2f}, train "
             f"{f['train'] / 1e12:.2f}); GPU compute "
             + ", ".join(f"{f['total'] / (n * rate * 1e12 * mfu):.2f} s/iter on {n} GPU(s)" for n in gpus)
             + f" at {rate:g} TFLOP/s x {mfu:.0%} MFU (simulation, rendering and the reward not included)")
    return "\n".join(L)


# ---- the World-VLA-Loop ----------------------------------------------------------------------------------------------
@dataclass
class LoopPlan:
    wm_params: int
    other_params: dict[str, int]
    wm_train: Trace
    wm_rollout: Trace
    rollout_rows: int
    policy: PolicyPlan
    host: dict[str, float]
    notes: list[str]


def plan_loop(cfg) -> LoopPlan:
    """The World-VLA-Loop's models of a ``vla-rl loop`` config (module docstring): the world model's training step and
    one imagined-chunk denoiser call traced, the other models counted, the VLA planned, host memory from the data."""
    import copy

    from world_models.data import StatePredictor
    from world_models.idm import InverseDynamicsModel
    from world_models.video_wm import VideoWorldModel

    _, sdim, adim, how = probe_task(cfg.vla.env)
    m = cfg.models
    wcfg = copy.deepcopy(m.wm)
    if m.success_state:
        wcfg.state_dim = sdim
        if m.success_state_points:
            wcfg.state_points = tuple(int(p) for p in m.success_state_points)
            wcfg.state_camera = tuple(float(c) for c in m.success_camera)
        wcfg.__post_init__()

    def build_wm():
        with torch.device("meta"):
            return VideoWorldModel(wcfg)

    wm = build_wm()
    n_wm = sum(p.numel() for p in wm.parameters())
    with torch.device("meta"):
        others = {"state model": sum(p.numel() for p in StatePredictor(sdim, adim).parameters()),
                  "IDM": sum(p.numel() for p in InverseDynamicsModel(copy.deepcopy(m.idm)).parameters())}
    B, S, K, C = m.wm_batch, wcfg.image_size, wcfg.chunk, wcfg.context_frames

    def train_inputs(w):
        x = {"context": torch.rand(B, C, 3, S, S), "actions": torch.randn(B, K, wcfg.action_dim),
             "future": torch.rand(B, K, 3, S, S), "success": torch.zeros(B, K)}
        if wcfg.state_dim:
            x["state"] = torch.randn(B, K, wcfg.state_dim)
        if wcfg.text_dim:
            x["text"] = torch.rand(B, wcfg.text_dim)
        return x

    def train(w, x):
        w.train()
        w.loss(**x)["loss"].backward()

    rows = len(cfg.vla.env.tasks) * cfg.vla.rl.groups_per_task * cfg.vla.grpo.group_size

    def roll_inputs(w):
        return {"x": torch.randn(rows, 3, K, S, S), "s": torch.full((rows,), 0.5),
                "ctx": torch.rand(rows, C, 3, S, S) * 2 - 1,
                "a": torch.randn(rows, K, wcfg.action_dim)}

    def roll(w, x):  # one denoiser call of an imagined chunk (x env_sampling_steps per chunk)
        w.eval()
        w.velocity(x["x"], x["s"], x["ctx"], x["a"])

    vla = copy.deepcopy(cfg.vla)
    policy = plan_policy(vla)
    d = cfg.data
    eps = sum(dict(d.train).values()) + sum(dict(d.test).values())
    frame = 3 * d.image_size ** 2
    grown = cfg.cycles * cfg.rollouts_per_cycle
    n_train = sum(dict(d.train).values()) + grown
    host = {"episodes (uint8)": (eps + grown) * (d.horizon + 1) * frame,
            "imagined success samples (float32)": (m.success_imagined_rollouts if m.success_imagined else 0)
            * n_train * d.horizon * frame * 4 * (m.success_imagined_fraction > 0)}
    host["one rollout_video in flight (float32)"] = n_train * d.horizon * frame * 4 if m.success_imagined else 0
    host["peak"] = sum(host.values())
    return LoopPlan(n_wm, others, trace_pass(build_wm, train_inputs, train),
                    trace_pass(build_wm, roll_inputs, roll, grad=False),
                    rows, policy, host, [f"state/action dims {sdim}/{adim}: {how}"])


def format_loop_plan(p: LoopPlan, cfg, gpu_mem_gb: float = 80.0, peak_tflops: float | None = None,
                     mfu: float = 0.4) -> str:
    m = cfg.models
    rate = peak_tflops or H100_TF32_TFLOPS
    chunks = math.ceil(cfg.vla.env.max_episode_steps / m.wm.chunk)
    wm_train_mem = 16 * p.wm_params + p.wm_train.peak
    pol = policy_memory(p.policy, cfg.vla)
    rl_mem = 4 * p.wm_params + p.wm_rollout.peak + pol["peak"]
    imagine = chunks * m.env_sampling_steps * p.wm_rollout.flops  # one RL iteration's imagined episodes
    pf = policy_flops(p.policy, cfg.vla)
    train_flops = (m.wm_steps + cfg.cycles * m.wm_finetune_steps) * p.wm_train.flops
    rl_flops = cfg.cycles * cfg.rl_iterations * (imagine + pf["total"])
    sec = lambda f: f / (rate * 1e12 * mfu)  # noqa: E731
    L = [f"plan: World-VLA-Loop on {cfg.data.task}, fp32, fake-tensor trace (no weights loaded); one GPU",
         f"parameters (meta device): world model {p.wm_params / 1e9:.3f} B (WanTransformer3DModel {m.wm.layers} layers "
         f"x {m.wm.hidden_heads * m.wm.head_dim} wide + tokens + success head), "
         + ", ".join(f"{k} {v / 1e6:.2f} M" for k, v in p.other_params.items())
         + f", VLA {p.policy.params / 1e6:.3f} M", *("  " + n for n in p.notes),
         f"world-model training step (batch {m.wm_batch}): {p.wm_train.flops / 1e12:.2f} TFLOP, activations "
         f"{p.wm_train.peak / GiB:.2f} GiB; imagined chunk: one denoiser call over {p.rollout_rows} episodes "
         f"{p.wm_rollout.flops / 1e12:.2f} TFLOP, {p.wm_rollout.peak / GiB:.2f} GiB (x{m.env_sampling_steps} steps x "
         f"{chunks} chunks an episode)",
         f"GPU memory (GiB): world-model training {wm_train_mem / GiB:.2f} (weights+grads+AdamW "
         f"{16 * p.wm_params / GiB:.2f} + activations {p.wm_train.peak / GiB:.2f}); RL in the world model "
         f"{rl_mem / GiB:.2f} (world model weights {4 * p.wm_params / GiB:.2f} + imagined chunk "
         f"{p.wm_rollout.peak / GiB:.2f} + VLA {pol['peak'] / GiB:.2f}); peak {max(wm_train_mem, rl_mem) / GiB:.2f}"
         f"   fits {gpu_mem_gb:g} GB: {'yes' if max(wm_train_mem, rl_mem) <= gpu_mem_gb * 1e9 else 'NO'}",
         f"  largest models.wm_batch whose world-model training fits {gpu_mem_gb:g} GB (activations linear in the "
         f"batch): {max(0, int((gpu_mem_gb * 1e9 - 16 * p.wm_params) // (p.wm_train.peak / m.wm_batch)))}",
         "host memory (GiB, from the data sizes): " + ", ".join(f"{k} {v / GiB:.2f}" for k, v in p.host.items()),
         f"FLOPs: world model {m.wm_steps} + {cfg.cycles} x {m.wm_finetune_steps} steps {train_flops / 1e15:.1f} PFLOP "
         f"({sec(train_flops) / 3600:.1f} GPU-h); RL {cfg.cycles} x {cfg.rl_iterations} iterations "
         f"{rl_flops / 1e15:.2f} PFLOP ({sec(imagine + pf['total']):.1f} s/iter imagining + VLA update) at {rate:g} "
         f"TFLOP/s x {mfu:.0%} MFU "
         "(simulation, success-head fitting and evaluation not included)"]
    return "\n".join(L)


# ---- the command line ------------------------------------------------------------------------------------------------
def plan_text(cfg, loop: bool, gpus: str = "1,8", gpu_mem: float = 80.0, peak_tflops: float | None = None,
              mfu: float = 0.4) -> str:
    """``--plan``: the plan of a train config (``loop=False``) or a World-VLA-Loop config, as printed. Bad options
    raise ValueError with one line naming them."""
    from grpo.preflight import check_plan_flags

    counts = check_plan_flags(gpus, gpu_mem, peak_tflops, mfu)
    if loop:
        return format_loop_plan(plan_loop(cfg), cfg, gpu_mem, peak_tflops, mfu)
    return format_policy_plan(plan_policy(cfg), cfg, counts, gpu_mem, peak_tflops, mfu)
