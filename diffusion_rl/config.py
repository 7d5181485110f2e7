"""The diffusion frontend's config: one dataclass per YAML section (TRL-style config, trainer in :mod:`.trainer`).

    cfg = grpo.config.load_config(DiffusionRLConfig, "configs/diffusion/shapes_branch.yaml", ["train.lr=1e-4"])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from grpo.config import MAX_BATCH, free_on_resume, require_at_least, require_at_most, require_weight_decay
from grpo.fsdp import DistConfig
from grpo.monitors import MonitorConfig
from grpo.trackers import LogConfig
from grpo.train_step import GRPOConfig
from grpo.trainer_base import LoopConfig
from rewards.remote import MAX_RETRIES, MAX_TIMEOUT_S, RemoteRewardConfig, build_remote_reward, is_url

from .adapters import ModelConfig
from .branch import BranchConfig
from .pool_config import PoolConfig
from .prompts import PromptConfig
from .sampling import SamplerConfig


@dataclass
class RewardConfig:
    name: str = "shapes_verifier"  # a name of rewards.build_reward, "package.module:attr" (a callable or a class), or a
                                   # reward server's address http://HOST:PORT (diffusion-rl serve-reward)
    kwargs: dict[str, Any] = field(default_factory=dict)  # keyword arguments of the reward's constructor (a reward
                                                          # server: checked against its serve-reward --kwargs)
    retries: int = free_on_resume("extra attempts when the reward raises (then the run stops, naming the batch's "
                                  "prompts); a server's requests retry by reward.remote.retries", default=2)
    retry_backoff_s: float = free_on_resume("seconds before the first retry (doubled per retry)", default=0.5)
    remote: RemoteRewardConfig = field(  # the reward server (rewards.remote): used when reward.name or
        # reward.remote.url is http://HOST:PORT
        default_factory=RemoteRewardConfig)
    overlap: int = 1  # split each iteration's rollout into this many parts (flat: samples, tree: trees), each scored in
                      # the background while the next rolls out (1: roll out, then score)

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError(f"reward.retries must be >= 0, got {self.retries}")
        if self.retries > MAX_RETRIES:  # the waits double (was: 1e9 accepted; the 1025th wait overflowed)
            raise ValueError(f"reward.retries={self.retries}: expected at most {MAX_RETRIES} (the waits double: "
                             f"retry_backoff_s x 2**{MAX_RETRIES - 1} before the last)")
        if self.retry_backoff_s < 0:
            raise ValueError(f"reward.retry_backoff_s must be >= 0 (seconds), got {self.retry_backoff_s}")
        if self.retry_backoff_s > MAX_TIMEOUT_S:
            raise ValueError(f"reward.retry_backoff_s={self.retry_backoff_s:g}: expected at most {MAX_TIMEOUT_S} "
                             "seconds (a day)")
        self.remote.validate("reward.remote")
        if self.overlap < 1:
            raise ValueError(f"reward.overlap must be >= 1 (1: no overlap), got {self.overlap}")
        if is_url(self.name) or self.remote.url:  # reward.kwargs, when given, must be the server's (checked at start)
            build_remote_reward(self.name, self.remote, "reward.name")  # both addresses agree, the URL parses
        elif ":" in self.name:  # a user's reward: imported and checked now (grpo.plugins.REWARD)
            from grpo.plugins import REWARD, load_checked

            load_checked(self.name, REWARD, "reward.name")
        elif not self.name.strip():  # (a built-in name is looked up when the reward is built: a job may inject its
            # own reward under a name of its own, e.g. diffusion_rl.align_world_model's "eva")
            from rewards import available_rewards

            raise ValueError(f"reward.name is empty (expected a reward: one of {', '.join(available_rewards())}; or "
                             "package.module:attr, or a reward server's http://HOST:PORT)")


@dataclass
class TrainConfig(LoopConfig):
    """The loop (:class:`grpo.trainer_base.LoopConfig`: iterations, lr and its schedule, inner epochs, cadence,
    on-policy check) and diffusion-rl's own settings."""

    prompts_per_iter: int = 2  # prompts per iteration (flat: each gets grpo.group_size samples; tree: one tree each)
    weight_decay: float = 0.0  # AdamW weight decay
    updates_per_iter: int = 1  # optimizer steps per epoch (the trained steps are split into this many chunks)
    ema_decay: float = 0.0  # > 0: keep an EMA of the trainable weights, used for evaluation
    use_tracker: bool = False  # per-prompt stat tracker (DDPO/Flow-GRPO) instead of per-batch groups
    tracker_buffer: int = 32  # rewards kept per prompt by the stat tracker
    tracker_min_count: int = 16  # rewards a prompt needs before its own statistics are used (else the batch's)
    eval_steps: int = 10  # ODE steps of the evaluation sampler
    log_images: bool = True  # write before/after evaluation image grids
    # the objective: "grpo" (clipped policy gradient on the SDE step log-probs, grpo.loss) or "nft" (DiffusionNFT,
    # grpo.nft_loss: flow-matching regression on the final samples, re-noised at nft_timesteps logit-normal times per
    # sample, contrasting the implicit positive/negative policies built from the pre-update velocity; no log-probs)
    loss: Literal["grpo", "nft"] = "grpo"  # grpo (clipped PG on SDE log-probs) or nft (DiffusionNFT)
    nft_beta: float = 1.0  # DiffusionNFT's beta: how far the implicit positive/negative policies
                           # move from the old velocity
    nft_timesteps: int = 2  # re-noising times per final sample and iteration (split over updates_per_iter chunks)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.nft_beta <= 0 or self.nft_timesteps < 1:
            raise ValueError(f"train.nft_beta must be > 0 and train.nft_timesteps >= 1, got {self.nft_beta}, "
                             f"{self.nft_timesteps}")
        require_at_least("train", self, prompts_per_iter=1, updates_per_iter=1, weight_decay=0.0, ema_decay=0.0,
                         eval_steps=1, tracker_buffer=1, tracker_min_count=1)
        require_weight_decay("train", self.weight_decay, self.lr)
        require_at_most("train", self, prompts_per_iter=MAX_BATCH,  # (each draws its group: 1e9 filled the memory)
                        eval_steps=10_000)  # (as sampler.num_steps: 1e9 ODE steps hung eval and the first evaluation)
        if self.ema_decay >= 1:
            raise ValueError(f"train.ema_decay must be < 1 (0 turns the EMA off), got {self.ema_decay}")
        if self.tracker_min_count > self.tracker_buffer:  # a prompt's own statistics would never be used
            raise ValueError(f"train.tracker_min_count={self.tracker_min_count}: expected <= train.tracker_buffer="
                             f"{self.tracker_buffer} (the rewards a prompt keeps)")


@dataclass
class DiffusionRLConfig:
    seed: int = 0  # seeds prompts, noise and initial weights (a run is reproducible from it)
    output_dir: str = "runs/diffusion"  # where checkpoints, metrics.jsonl, TensorBoard and images go
    resume: bool = free_on_resume("continue from output_dir's latest checkpoint when there is one", default=True)
    model: ModelConfig = field(default_factory=ModelConfig)  # the denoiser, its weights, precision and LoRA
    sampler: SamplerConfig = field(default_factory=SamplerConfig)  # the denoising schedule and SDE used for rollouts
    branch: BranchConfig = field(default_factory=BranchConfig)  # BranchGRPO tree rollouts
                                                                # (enabled: false means flat GRPO)
    grpo: GRPOConfig = field(default_factory=lambda: GRPOConfig(group_size=8, clip_low=1e-4, kl_coef=0.0),
                             metadata={"help": "advantages, clipped loss and KL (shared with vla-rl)"})
    train: TrainConfig = field(default_factory=TrainConfig)  # iterations, learning rate,
                                                             # evaluation and checkpoint cadence
    reward: RewardConfig = field(default_factory=RewardConfig)  # the reward model or verifier
    prompts: PromptConfig = field(default_factory=PromptConfig)  # the training / evaluation prompt source
    pool: PoolConfig = field(default_factory=PoolConfig)  # enabled: pool-then-train (diffusion_rl.pool_rollout)
    dist: DistConfig = free_on_resume("ddp (replicas) or fsdp (sharded denoiser), grpo.fsdp",
                                      default_factory=DistConfig)
    log: LogConfig = field(default_factory=LogConfig)  # trackers besides metrics.jsonl: tensorboard, wandb,
                                                       # mlflow, trackio (grpo.trackers)
    eval: MonitorConfig = field(default_factory=MonitorConfig)  # gold monitors on evaluation samples (colour_variance,
                                                                # low_freq_ratio, reward names) and the reward-hacking
                                                                # alarm

    def __post_init__(self) -> None:
        if self.branch.enabled:  # the tree fits the schedule (split steps inside it, one factor or one per split)
            self.branch.make_tree(self.sampler.num_steps)
        sc = self.sampler
        if sc.sde == "ode" or sc.eta == 0:  # no step draws noise (grpo.flow_sde: std 0, log-prob 0)
            what = "sampler.sde=ode" if sc.sde == "ode" else "sampler.eta=0"
            why = ("the children of a tree's split would be copies of one sample (BranchGRPO: they differ by the "
                   "split step's noise)" if self.branch.enabled else
                   "every log-prob is 0, so train.loss=grpo has no gradient" if self.train.loss == "grpo" else
                   "with sampler.same_init_noise=true every sample of a group is the same image"
                   if sc.same_init_noise else "")
            if why:
                raise ValueError(f"{what}: no step draws noise, and {why}; expected an SDE kind (e.g. flow_grpo) "
                                 "with sampler.eta > 0")

    def inactive_keys(self) -> dict[str, str]:
        """Keys the chosen mode reads nowhere (:func:`grpo.config.check_inactive_keys` refuses them when given).

        A key of one mode given while another mode is chosen is refused. Kept: the settings of a switchable
        section (``branch:`` / ``pool:`` with ``enabled: false``) and of the other objective's ``grpo`` clip/KL
        keys, so one YAML compares arms by toggling one key (``branch.enabled``, ``train.loss``)."""
        out: dict[str, str] = {}
        if self.branch.enabled:
            why = "branch.enabled=true (BranchGRPO: a tree's leaves are the group and its credit is depth-wise)"
            out.update({k: why for k in ("grpo.group_size", "grpo.advantage", "grpo.std_mode", "grpo.reward_weights",
                                         "train.use_tracker", "train.tracker_buffer", "train.tracker_min_count")})
        elif self.train.use_tracker:
            why = "train.use_tracker=true (the per-prompt stat tracker computes the advantages)"
            out.update({k: why for k in ("grpo.advantage", "grpo.std_mode", "grpo.reward_weights")})
        else:
            why = "train.use_tracker=false (per-batch groups)"
            out.update({k: why for k in ("train.tracker_buffer", "train.tracker_min_count")})
            out.update(self.grpo.inactive_keys())
        if self.train.loss != "nft":
            why = "train.loss='grpo' (these are DiffusionNFT's settings)"
            out.update({k: why for k in ("train.nft_beta", "train.nft_timesteps")})
        if not (is_url(self.reward.name) or self.reward.remote.url):
            out["reward.remote"] = (f"reward.name={self.reward.name!r} (they set up a reward server's client: "
                                    "reward.name=http://HOST:PORT)")
        # a prompt file or list under the built-in sampler is read nowhere; between file and list a recipe's own key
        # may stay while one override flips prompts.source (the project's "arms differ by one key" rule)
        if self.prompts.source not in ("file", "list"):
            for key, source in (("prompts.file", "file"), ("prompts.prompts", "list")):
                out[key] = f"prompts.source={self.prompts.source!r} (it is read with prompts.source={source})"
        if not self.model.adapter:  # (a user's adapter class may read any of them)
            if self.model.kind not in ("flux", "flux_kontext"):
                out["model.guidance"] = (f"model.kind={self.model.kind!r} (FLUX's distilled guidance; classifier-free "
                                         "guidance is sampler.cfg_scale)")
            if self.model.kind not in ("wan", "wan22"):
                out["model.num_frames"] = f"model.kind={self.model.kind!r} (the frames of a Wan video model)"
        from .checkpoints import is_single_file

        if not (self.model.path and is_single_file(self.model.path)):
            out["model.components"] = (f"model.path={self.model.path!r} (it completes a single-file checkpoint, "
                                       "model.path=*.safetensors)")
        return out
