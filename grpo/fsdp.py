"""Parameter sharding with PyTorch FSDP2 (``torch.distributed.fsdp.fully_shard``), the ``dist.strategy: fsdp`` switch.

The launcher (``torchrun`` / ``accelerate launch``, any ``--config_file``) only starts one process per device; the
sharding is done here, by the trainers, when the run's config says ``dist: {strategy: fsdp}``:

* :func:`shard_model` applies ``fully_shard`` to every block of the model's block lists (``transformer_blocks``,
  ``single_transformer_blocks``, ``blocks``, ... : each ``nn.ModuleList`` child of the root), then to the root.
  Every parameter ``W [d0, ...]`` becomes a ``DTensor`` sharded on dim 0 over the ``N`` ranks (rank ``r`` holds rows
  ``chunk(W, N)[r]``, ``ceil(d0 / N)`` rows at most), frozen and trainable alike, in its own dtype (a bf16 base and
  fp32 LoRA weights may be mixed). A block's full weights exist only between its all-gather in the forward (and
  again in the backward) and its reshard: peak parameter memory ~ ``|W| / N + max_block |W_block|``.
* Gradients: the backward reduce-scatters each block's gradients, averaged over ranks, into the local shards (FSDP's
  replacement of DDP's all-reduce: do NOT also call :func:`grpo.distributed.average_gradients`). With each rank's
  loss scaled by ``N * local_rows / global_rows`` the result is the gradient of the global mean, as in DDP.
* Every forward and backward through a sharded model is a collective: all ranks must run the same sequence of
  forward/backward calls (a rank with no rows runs a dummy one with zero weight; evaluation runs on every rank).
* Checkpoints hold FULL state dicts, independent of the world size: :func:`full_trainable_state_dict` /
  :func:`full_optimizer_state_dict` gather them onto rank 0's CPU (the format of an unsharded ``state_dict()`` /
  ``optimizer.state_dict()``, so a 1-process or DDP run loads them unchanged), and
  :func:`load_full_trainable_state_dict` / :func:`load_full_optimizer_state_dict` shard a full state dict back onto
  any number of ranks.

FSDP2 runs on CPU with gloo (``all_gather_into_tensor`` / ``reduce_scatter_tensor``) in torch >= 2.13, which is how
the tests exercise it; on GPUs the device mesh is CUDA (NCCL).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.distributed as dist


@dataclass
class DistConfig:
    """The YAML ``dist:`` section: how the model is replicated over the launched processes.

    ``strategy``: ``ddp`` keeps a full replica per process and all-reduces the gradients (the default); ``fsdp``
    shards parameters, gradients and optimizer state over the processes (FSDP2, per block then the root), for
    denoisers/policies too large for a replica per device. With one process both are the same unsharded run.
    ``reshard_after_forward``: free each block's gathered weights after its forward (less memory, one more
    all-gather per block in the backward); False keeps them until the backward (ZeRO-2 like).
    ``mixed_precision`` (``vla-rl train``): ``bf16`` runs the policy's network forwards (image encoder, fuse MLP,
    velocity / mean network) under ``torch.autocast(bfloat16)`` in rollouts, evaluation, SFT and the RL update,
    their outputs cast to fp32; master weights, optimizer state, the SDE / Gaussian log-prob math and the loss stay
    fp32. Under ``strategy: fsdp`` the shards stay fp32 (all-gathered fp32, cast by autocast) so that the sharded
    update computes exactly what the fp32 replica's rollouts computed. ``diffusion-rl train`` sets its precision with
    ``model.dtype`` instead and rejects ``bf16`` here."""

    strategy: Literal["ddp", "fsdp"] = "ddp"  # ddp (a replica per process, gradients
                                              # all-reduced) or fsdp (FSDP2 shards)
    reshard_after_forward: bool = True  # fsdp: free gathered weights after each block's forward
    mixed_precision: Literal["fp32", "bf16"] = "fp32"  # vla-rl: bf16 autocast of the policy forwards


def _mesh(model: torch.nn.Module):
    """A 1-D device mesh over all ranks on the device type of ``model``'s parameters (CPU/gloo or CUDA/NCCL)."""
    from torch.distributed.device_mesh import init_device_mesh

    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("dist.strategy=fsdp needs torch.distributed initialized (launch with torchrun / "
                           "accelerate launch and more than one process)")
    return init_device_mesh(next(model.parameters()).device.type, (dist.get_world_size(),))


def block_lists(model: torch.nn.Module) -> list[str]:
    """Names of the model's direct ``nn.ModuleList`` children (the repeated transformer blocks)."""
    return [n for n, m in model.named_children() if isinstance(m, torch.nn.ModuleList) and len(m)]


def shard_model(model: torch.nn.Module, reshard_after_forward: bool = True,
                blocks: list[str] | None = None) -> list[str]:
    """``fully_shard`` every block of ``blocks`` (default :func:`block_lists`), then the root; returns the block lists.

    Must run after the parameters are final (LoRA injected, dtypes set) and before the optimizer is built: FSDP
    replaces the module's parameters by ``DTensor`` parameters. Needs an initialized process group."""
    from torch.distributed.fsdp import fully_shard

    mesh = _mesh(model)
    names = block_lists(model) if blocks is None else list(blocks)
    missing = [n for n in names if not isinstance(getattr(model, n, None), torch.nn.ModuleList)]
    if missing:
        raise ValueError(f"FSDP block list(s) {missing} are not nn.ModuleList children of {type(model).__name__}; "
                         f"it has {block_lists(model)}")
    for n in names:
        for block in getattr(model, n):
            fully_shard(block, mesh=mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward)
    return names


def submodule_units(model: torch.nn.Module) -> list[str]:
    """Qualified names of the FSDP units :func:`shard_submodules` wraps, children before parents (post-order).

    Units: every element of every ``nn.ModuleList`` anywhere in the tree (the repeated blocks of a transformer,
    e.g. a LeRobot policy's ``...layers.3``, or an image encoder's conv stages) and every direct child of the root
    (for a policy without block lists: its image encoder, text embedding, fuse MLP, action head), each only if it
    holds parameters. The root itself is wrapped last and owns whatever parameters are left."""
    names: list[str] = []
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.ModuleList):
            names += [f"{name}.{i}" if name else str(i) for i, m in enumerate(mod)
                      if any(True for _ in m.parameters())]
    names += [n for n, m in model.named_children()
              if not isinstance(m, torch.nn.ModuleList) and any(True for _ in m.parameters())]
    depth = {n: n.count(".") for n in names}
    return sorted(dict.fromkeys(names), key=lambda n: -depth[n])  # deepest first: FSDP2 wraps bottom-up


def shard_submodules(model: torch.nn.Module, reshard_after_forward: bool = True,
                     forward_methods: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    """``fully_shard`` every unit of :func:`submodule_units` (deepest first), then the root; returns the units.

    The generic counterpart of :func:`shard_model` for models whose blocks are not direct ``ModuleList``
    children (the VLA policies). Same preconditions: parameters final, optimizer not yet built, process group up.
    FSDP gathers a unit's weights around its ``forward`` only; ``forward_methods`` ``{unit name ("" = the root):
    (method, ...)}`` names other entry points that are called instead (e.g. a policy's ``chunk_log_prob``, an
    action head's ``log_prob``), registered with ``register_fsdp_forward_method`` (a unit or method the model
    lacks is skipped)."""
    from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method

    mesh = _mesh(model)
    units = submodule_units(model)
    for n in units:
        fully_shard(model.get_submodule(n), mesh=mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward)
    for n, methods in (forward_methods or {}).items():
        if n and n not in units:
            continue
        mod = model.get_submodule(n)
        for m in methods:
            if callable(getattr(mod, m, None)):
                register_fsdp_forward_method(mod, m)
    return units


@torch.no_grad()
def copy_full_parameters(sharded: torch.nn.Module, replica: torch.nn.Module) -> None:
    """Copy the full value of every parameter of ``sharded`` (FSDP ``DTensor`` shards, all-gathered) into the same
    name in the plain ``replica`` (a full copy on every rank, e.g. for no-grad rollouts whose number of forward
    calls differs between ranks). A collective: every rank calls it; the copies are bit-identical to the shards."""
    dst = dict(replica.named_parameters())
    for name, p in sharded.named_parameters():
        dst[name].copy_(full_tensor(p.detach()).to(dst[name].device, dst[name].dtype))


def _options(**kw):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, **kw)


def trainable_names(model: torch.nn.Module) -> list[str]:
    """Names of the parameters with ``requires_grad``, in ``named_parameters()`` order (= the optimizer's order when
    it was built from ``[p for p in model.parameters() if p.requires_grad]``)."""
    return [n for n, p in model.named_parameters() if p.requires_grad]


def full_trainable_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The trainable parameters as full (unsharded) CPU tensors ``{name: [full shape]}`` on rank 0, ``{}`` elsewhere.

    A collective: every rank must call it."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    sd = get_model_state_dict(model, options=_options(cpu_offload=True, ignore_frozen_params=True))
    keep = set(trainable_names(model))
    return {k: v for k, v in sd.items() if k in keep}


def load_full_trainable_state_dict(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Shard a full ``{name: tensor}`` (e.g. from :func:`full_trainable_state_dict` or an unsharded run) into the
    model (every rank passes the same full dict); a name the model lacks is an error."""
    from torch.distributed.checkpoint.state_dict import set_model_state_dict

    params = dict(model.named_parameters())
    unknown = [k for k in state if k not in params]
    if unknown:
        raise KeyError(f"checkpoint holds parameters {unknown[:5]} that this model does not have")
    set_model_state_dict(model, dict(state), options=_options(strict=False))


def full_optimizer_state_dict(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """The optimizer state, full, on rank 0's CPU (``{}`` elsewhere), in ``optimizer.state_dict()``'s format for the
    unsharded model: state keyed by the parameter's index in :func:`trainable_names` order (not by name).

    A collective: every rank must call it."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    if not optimizer.state:  # never stepped (the same on every rank): get_optimizer_state_dict would initialize the
        # state with a zero-lr step (Adam's step count 1), which changes the next update's bias correction
        return optimizer.state_dict() if dist.get_rank() == 0 else {}
    osd = get_optimizer_state_dict(model, optimizer, options=_options(cpu_offload=True))
    if not osd:
        return {}
    index = {n: i for i, n in enumerate(trainable_names(model))}
    return {"state": {index[k]: v for k, v in osd["state"].items()},
            "param_groups": [{**g, "params": [index[n] for n in g["params"]]} for g in osd["param_groups"]]}


def load_full_optimizer_state_dict(model: torch.nn.Module, optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Shard a full optimizer state dict in ``optimizer.state_dict()`` format (indices in :func:`trainable_names`
    order, as saved by :func:`full_optimizer_state_dict` or an unsharded run) onto this rank's shards."""
    from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

    names = trainable_names(model)
    bad = [i for g in state["param_groups"] for i in g["params"] if not 0 <= int(i) < len(names)]
    if bad:
        raise KeyError(f"optimizer state refers to parameter indices {bad[:5]}; this model has {len(names)} trainable")
    osd = {"state": {names[int(i)]: v for i, v in state["state"].items()},
           "param_groups": [{**g, "params": [names[int(i)] for i in g["params"]]} for g in state["param_groups"]]}
    set_optimizer_state_dict(model, optimizer, osd, options=_options())


def full_tensor(t: torch.Tensor) -> torch.Tensor:
    """A ``DTensor``'s full value (a collective: all ranks call it), any other tensor itself."""
    from torch.distributed.tensor import DTensor

    return t.full_tensor() if isinstance(t, DTensor) else t


def shard_like(full: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``full`` laid out like ``like`` (a ``DTensor``: the same mesh and placements; otherwise ``full`` itself).
    Every rank passes the same ``full``; each keeps its shard."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    if not isinstance(like, DTensor):
        return full
    return distribute_tensor(full.to(like.device, like.dtype), like.device_mesh, like.placements)
