"""The VLA frontend's config: one dataclass per YAML section (TRL-style config, trainer in :mod:`.trainer`).

    cfg = grpo.config.load_config(VLARLConfig, "configs/vla/tabletop_reach_one.yaml", ["rl.iterations=10"])
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from grpo.config import MAX_BATCH, MAX_EPISODE_STEPS, MAX_SEED, free_on_resume, require_at_least, require_at_most
from grpo.device import check_device_name
from grpo.fsdp import DistConfig
from grpo.monitors import MonitorConfig
from grpo.trackers import LogConfig
from grpo.train_step import GRPOConfig
from grpo.trainer_base import LoopConfig
from rewards.remote import RemoteRewardConfig, build_remote_reward, is_url
from rewards.sim_progress import PROGRESS_SUITES, has_sim_progress
from rewards.srpo import PREDICTOR_KEYS, SRPOConfig

from .policy import PolicyConfig
from .sft import SFTConfig


@dataclass
class EnvConfig:
    tasks: list[str] = field(default_factory=lambda: ["tabletop/reach"])  # sims tasks trained together
    max_episode_steps: int = 60  # environment steps before an episode is cut
    kwargs: dict[str, Any] = field(default_factory=dict)  # passed to sims.make
    video_camera: str = "agentview"  # camera whose frames are recorded for SRPO and videos
    stop_on_success: bool = True  # end an episode at its first success
    plugins: list[str] = field(default_factory=list)  # user modules imported before sims.make (they register their
                                                      # tasks; docs/EXTENDING.md)

    def __post_init__(self) -> None:
        if self.plugins:  # imported now, so env.tasks may name the tasks they register
            from grpo.plugins import import_modules

            import_modules(self.plugins, "env.plugins")
            import sims

            known = set(sims.list_tasks())
            unknown = [t for t in self.tasks if t not in known and not t.startswith("libero/")]
            if unknown:
                raise ValueError(f"env.tasks: {unknown} not registered after importing env.plugins {self.plugins} "
                                 f"(a plugin registers with sims.registry.register('<suite>/<task>', factory))")
        if not self.tasks:
            raise ValueError("env.tasks is empty")
        dup = sorted({t for t in self.tasks if self.tasks.count(t) > 1})
        if dup:  # each task is one group of rollouts and one row of the evaluation, by name
            raise ValueError(f"env.tasks names {dup} more than once (expected distinct tasks; rl.groups_per_task sets "
                             "how many groups each task gets)")
        if self.max_episode_steps < 1:
            raise ValueError(f"env.max_episode_steps must be >= 1, got {self.max_episode_steps}")
        require_at_most("env", self, max_episode_steps=MAX_EPISODE_STEPS)  # (1e9: an episode that never ends)


REWARDS = ("binary", "srpo", "sim_progress")  # rl.reward's named rewards (besides a reward server's address)
# the components each named reward returns (grpo.advantage=gdpo normalizes each; grpo.reward_weights may name them)
REWARD_COMPONENTS = {"binary": ("success",), "srpo": ("success", "progress"), "sim_progress": ("success", "progress")}


@dataclass
class RLConfig(LoopConfig):
    """The loop (:class:`grpo.trainer_base.LoopConfig`: iterations, lr and its schedule, inner epochs, cadence,
    on-policy check) and the RL phase's own settings: groups, reward, evaluation."""

    section = "rl"

    iterations: int = free_on_resume("RL iterations (rollout -> reward -> advantages -> update)", default=30)
    inner_epochs: int = 2  # passes over the iteration's decision points
    eval_every: int = free_on_resume("iterations between held-out evaluations (0: before and after only)",
                                     default=10)
    save_every: int = free_on_resume("iterations between checkpoints", default=5)
    groups_per_task: int = 4  # initial states per task per iteration
    minibatch_size: int = 256  # decision points per optimizer step
    reward: str = "srpo"  # srpo (latent progress for failures), binary (success only), sim_progress (the simulator's
                          # own task-progress measure as a shaped reward for failures, successes 1: a dense simulator
                          # reward available only in simulation, the ceiling SRPO's latent progress approximates;
                          # rewards.sim_progress), or a reward server's address http://HOST:PORT (vla-rl serve-reward;
                          # it gets the episodes' videos and metadata)
    sim_progress_noise: float = 0.0  # rl.reward=sim_progress only, a measurement knob: Gaussian noise on each
        # failure's distance to go, in units of the batch's failures' spread, so the reward ranks failures like a
        # progress signal of Spearman ~ 1/sqrt(1 + s^2) with the simulator's (rewards.sim_progress); 0: the exact one
    remote: RemoteRewardConfig = field(  # the reward server's settings (rewards.remote) when rl.reward is
        # http://HOST:PORT
        default_factory=RemoteRewardConfig)
    dynamic_sampling: bool = True  # drop groups whose success rate is outside success_band (DAPO)
    success_band: tuple[float, float] = (0.0, 1.0)  # keep a group iff low < success rate < high
    train_seed_range: int = 100_000  # training initial states are drawn below this
    train_seeds: list[int] = field(default_factory=list)  # fixed training initial states (cycled); empty:
                                                          # draw below train_seed_range
    eval_split: Literal["validation", "test"] = "validation"  # held-out states of every evaluation: validation (tune)
        # or test. validation: rl.eval_seed_offset + i, where hyperparameters, recipes, encoders and early stops are
        # chosen; test: rl.test_seed_offset + i, for the reported numbers only (never choose anything by them)
    eval_seed_offset: int = 1_000_000  # the validation initial states start here (disjoint from training)
    test_seed_offset: int = 5_000_000  # the test initial states start here (disjoint from training and validation)
    eval_episodes: int = 32  # held-out initial states per task (of the rl.eval_split split)
    num_videos: int = free_on_resume("evaluation episodes saved as videos", default=4)
    grad_accum: int = free_on_resume("micro-batches per minibatch (per rank): one optimizer step per minibatch, the "
                                     "same update", default=1)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.reward not in REWARDS and not is_url(self.reward):
            raise ValueError(f"rl.reward={self.reward!r}: expected {', '.join(REWARDS)} or a reward server "
                             "http://HOST:PORT")
        if self.remote.url:
            raise ValueError(f"rl.remote.url={self.remote.url!r}: name the server in rl.reward=http://HOST:PORT")
        self.remote.validate("rl.remote")
        if is_url(self.reward):
            build_remote_reward(self.reward, self.remote, "rl.reward")  # the address parses
        if not (math.isfinite(self.sim_progress_noise) and self.sim_progress_noise >= 0):
            raise ValueError(f"rl.sim_progress_noise={self.sim_progress_noise}: expected a finite number >= 0")
        lo, hi = self.success_band
        if not (lo < hi and lo < 1 and hi > 0):  # a group's success rate is in [0, 1]: a band beyond it (e.g. [1, 2])
            # keeps no group and the run trains on nothing (was: accepted); [-0.5, 1.5] keeps every group
            raise ValueError(f"rl.success_band must be (low, high) with low < high, low < 1 and high > 0 (a group is "
                             f"kept iff low < its success rate < high), got {list(self.success_band)}")
        require_at_least("rl", self, groups_per_task=1, minibatch_size=1, train_seed_range=1, eval_seed_offset=0,
                         eval_episodes=1, num_videos=0, test_seed_offset=0)
        require_at_most("rl", self, groups_per_task=MAX_BATCH)  # (a typo's 1e9 would roll out for ever)
        # training states are drawn below it (was: numpy's OverflowError traceback at the first draw, after the SFT)
        require_at_most("rl", self, train_seed_range=MAX_SEED + 1)
        for name, off in (("eval_seed_offset", self.eval_seed_offset), ("test_seed_offset", self.test_seed_offset)):
            if off < self.train_seed_range:
                raise ValueError(f"rl.{name}={off}: expected >= rl.train_seed_range={self.train_seed_range} (held-out "
                                 "states must not be training states)")
        lo_v, lo_t = sorted((self.eval_seed_offset, self.test_seed_offset))
        if lo_t < lo_v + self.eval_episodes:
            raise ValueError(f"rl.eval_seed_offset={self.eval_seed_offset} and rl.test_seed_offset="
                             f"{self.test_seed_offset}: the validation and test states overlap for rl.eval_episodes="
                             f"{self.eval_episodes} (expected offsets at least that far apart)")
        if self.grad_accum < 1:
            raise ValueError(f"rl.grad_accum must be >= 1 (micro-batches per minibatch), got {self.grad_accum}")
        if self.train_seeds and min(self.train_seeds) < 0:
            raise ValueError(f"rl.train_seeds must be initial-state seeds >= 0, got {self.train_seeds}")
        held_out = min(self.eval_seed_offset, self.test_seed_offset)
        if self.train_seeds and max(self.train_seeds) >= held_out:  # (was: accepted: it trained on evaluation states)
            raise ValueError(f"rl.train_seeds={self.train_seeds}: expected seeds below {held_out} (rl.eval_seed_offset "
                             "and rl.test_seed_offset start the held-out states; training states must not be them)")

    def heldout_seeds(self, n: int | None = None) -> list[int]:
        """The ``n`` (default ``eval_episodes``) initial-state seeds of the ``eval_split`` split, per task."""
        off = self.test_seed_offset if self.eval_split == "test" else self.eval_seed_offset
        return [off + i for i in range(self.eval_episodes if n is None else n)]

    def split_line(self, n: int | None = None) -> str:
        """One line naming the evaluation split and its states, e.g. for a log or a results table."""
        seeds = self.heldout_seeds(n)
        return (f"evaluation split: {self.eval_split} initial states {seeds[0]}..{seeds[-1]} ({len(seeds)} per task; "
                f"validation from rl.eval_seed_offset={self.eval_seed_offset}, test from "
                f"rl.test_seed_offset={self.test_seed_offset})")


def check_sim_progress_tasks(tasks: list[str], key: str) -> None:
    """``rl.reward: sim_progress`` reads the simulator's own progress measure: every task must have one
    (:func:`rewards.sim_progress.has_sim_progress`), else ``ValueError`` (one line)."""
    bad = [t for t in tasks if not has_sim_progress(t)]
    if bad:
        raise ValueError(f"rl.reward=sim_progress: {key} {bad} report no dense simulator progress (expected tasks of "
                         f"{', '.join(s + '*' for s in PROGRESS_SUITES)}; elsewhere use srpo or binary)")


def check_reward_weights(reward: str, weights: dict[str, float], prefix: str) -> None:
    """GDPO's ``grpo.reward_weights`` may name only components the named ``rl.reward`` returns
    (:data:`REWARD_COMPONENTS`; a reward server's are known only when it answers), else ``ValueError`` (one line):
    the advantage step would raise it after the SFT phase and the first rollout; and not weight all of them 0 (unnamed
    components weigh 1)."""
    have = REWARD_COMPONENTS.get(reward)
    unknown = sorted(set(weights) - set(have)) if have is not None else []
    if unknown:
        raise ValueError(f"{prefix}grpo.reward_weights names {unknown}, which {prefix}rl.reward={reward} does not "
                         f"return (expected weights of its components {list(have)})")
    if have is not None and weights and all(weights.get(c, 1.0) == 0 for c in have):
        # every component weighted 0: every advantage is 0 and the run trains on nothing (was: accepted)
        raise ValueError(f"{prefix}grpo.reward_weights={weights}: every component of {prefix}rl.reward={reward} "
                         f"{list(have)} weighted 0 (expected a non-zero weight for at least one)")


@dataclass
class VLARLConfig:
    seed: int = 0  # seeds demos, initial states, noise and weights (reproducible from it)
    output_dir: str = "runs/vla_rl"  # where checkpoints, metrics.jsonl, TensorBoard and videos go
    resume: bool = free_on_resume("continue from output_dir's latest checkpoint when there is one", default=True)
    env: EnvConfig = field(default_factory=EnvConfig)  # the simulator tasks and episode length
    policy: PolicyConfig = field(default_factory=PolicyConfig)  # the policy architecture (built-in small VLA)
    sft: SFTConfig = field(default_factory=SFTConfig)  # the supervised warm-up on demos before RL
    rl: RLConfig = field(default_factory=RLConfig)  # the RL phase: iterations, groups, reward, evaluation
    srpo: SRPOConfig = field(default_factory=SRPOConfig)  # the SRPO progress reward (rl.reward: srpo; sim_progress
                                                          # reads its progress_max)
    grpo: GRPOConfig = field(default_factory=lambda: GRPOConfig(group_size=8, clip_low=0.2, clip_high=0.28,
                                                                adv_clip=None),
                             metadata={"help": "advantages, clipped loss and KL (shared with diffusion-rl)"})
    dist: DistConfig = free_on_resume("ddp (replicas) or fsdp (sharded training copy), grpo.fsdp",
                                      default_factory=DistConfig)
    log: LogConfig = field(default_factory=LogConfig)  # trackers besides metrics.jsonl: tensorboard, wandb,
                                                       # mlflow, trackio (grpo.trackers)
    eval: MonitorConfig = field(default_factory=MonitorConfig)  # the reward-hacking alarm: training reward rising while
                                                                # held-out real success falls (monitors stays [])
    device: str = free_on_resume("auto (cuda if available, else cpu; each rank's own GPU under torchrun), cpu, cuda, "
                                 "cuda:<i>", default="auto")

    def __post_init__(self) -> None:
        # the name only (a GPU config loads and dry-runs anywhere); the trainer resolves it after torch.distributed
        # picked this rank's GPU, and refuses a CUDA device on a machine without one
        check_device_name(self.device)
        self._check_cameras()
        flow = self.policy.flow
        if self.policy.head == "flow" and self.rl.iterations > 0 and (flow.eta == 0 or flow.sde_kind == "ode"):
            # (was: accepted; no action had a log-prob, a run whose updates did nothing, as diffusion-rl train and
            # toy refuse sampler.eta=0)
            what = "policy.flow.sde_kind=ode" if flow.sde_kind == "ode" else "policy.flow.eta=0"
            raise ValueError(f"{what}: no denoising step is an SDE step, so no action has a log-prob and GRPO has no "
                             "gradient; expected an SDE kind (e.g. flow_grpo) with policy.flow.eta > 0 (or "
                             "rl.iterations=0)")
        if self.rl.reward == "sim_progress":
            check_sim_progress_tasks(self.env.tasks, "env.tasks")
        check_reward_weights(self.rl.reward, self.grpo.reward_weights, "")
        self._check_sft_inputs()
        self._check_srpo_policy_encoder()

    def _check_srpo_policy_encoder(self) -> None:
        """``srpo.encoder: policy`` and ``srpo.scene_encoder: policy`` (``reference: predicted``) read the policy's
        own image encoder: the built-in policy has one with ``policy.use_images``, a LeRobot policy none (was: a dry
        run accepted it; the run refused it once the policy was built)."""
        pol, srpo = self.policy, self.srpo
        if self.rl.reward != "srpo" or not (pol.kind == "lerobot" or (pol.kind == "builtin" and not pol.use_images)):
            return
        what = "policy.kind=lerobot" if pol.kind == "lerobot" else "policy.use_images=false"
        if srpo.encoder == "policy":
            raise ValueError(f"srpo.encoder=policy with {what}: that policy has no image encoder to read; expected "
                             "another srpo.encoder (e.g. random_conv, proprio)")
        if srpo.reference == "predicted" and srpo.scene_encoder == "policy":
            raise ValueError(f"srpo.scene_encoder=policy (srpo.reference=predicted) with {what}: that policy has no "
                             "image encoder to read; expected srpo.scene_encoder=random_conv")

    def _check_sft_inputs(self) -> None:
        """SFT's random shift fits in its frames, and the demos it records lie below the held-out initial states
        (was: accepted; a shift of 1e6 px asked 192 TB after the run directory was written, and demos recorded on the
        validation states trained the policy on what it is evaluated on)."""
        sft, size = self.sft, self.policy.image_size
        if self.policy.use_images and size >= 1 and sft.image_shift >= size:
            raise ValueError(f"sft.image_shift={sft.image_shift}: expected less than policy.image_size={size} (the "
                             "random shift pads and crops each frame by up to that many pixels)")
        held_out = min(self.rl.eval_seed_offset, self.rl.test_seed_offset)
        if not sft.demo_path and not sft.init_policy and sft.demo_seed_offset + sft.demos_per_task > held_out:
            raise ValueError(f"sft.demo_seed_offset={sft.demo_seed_offset}: its {sft.demos_per_task} demo states per "
                             f"task reach {sft.demo_seed_offset + sft.demos_per_task - 1}; expected them below "
                             f"{held_out} (rl.eval_seed_offset and rl.test_seed_offset start the held-out states)")

    def _check_cameras(self) -> None:
        """``policy.cameras`` and ``env.video_camera`` must be cameras the env renders: those of ``env.kwargs.cameras``
        when given, else names the shipped sims know (``sims.config.CAMERAS``; a plugin's sim may name others);
        ``env.video_camera`` may also be the name of ``env.kwargs.extra_view`` (tabletop's extra render)."""
        from sims.config import CAMERAS, extra_view_name_size

        given = self.env.kwargs.get("cameras")
        if isinstance(given, str):
            given = [given]
        if given is not None:
            allowed, where = list(given), f"env.kwargs.cameras={list(given)}"
        elif not self.env.plugins:
            allowed, where = list(CAMERAS), f"the sims' cameras {list(CAMERAS)}"
        else:
            return
        wanted = [("policy.cameras", c) for c in (self.policy.cameras if self.policy.use_images else [])]
        for key, cam in wanted:
            if cam not in allowed:
                raise ValueError(f"{key}: camera {cam!r} is not rendered by the env (expected one of {where})")
        name, _ = extra_view_name_size(self.env.kwargs)  # tabletop's extra render (e.g. SRPO's progress encoder's view)
        if self.env.video_camera not in allowed and self.env.video_camera != name:
            raise ValueError(f"env.video_camera: camera {self.env.video_camera!r} is not rendered by the env (expected "
                             f"one of {where}" + (f" or the extra view {name!r}" if name else "") + ")")

    def inactive_keys(self) -> dict[str, str]:
        """Keys the chosen mode reads nowhere (:func:`grpo.config.check_inactive_keys` refuses them when given).

        Kept: the switchable sections (``srpo:`` when ``rl.reward`` is binary or sim_progress, which reads
        ``srpo.progress_max`` only; the other head's ``policy.flow`` / ``policy.gaussian``), so one YAML compares
        arms by toggling one key."""
        out: dict[str, str] = {}
        if not self.rl.dynamic_sampling:
            out["rl.success_band"] = "rl.dynamic_sampling=false (every group is kept)"
        if self.rl.train_seeds:
            out["rl.train_seed_range"] = "rl.train_seeds set (the fixed training states are cycled)"
        out.update(self.grpo.inactive_keys())
        if self.rl.reward != "sim_progress":
            out["rl.sim_progress_noise"] = f"rl.reward={self.rl.reward!r} (it degrades rl.reward=sim_progress)"
        if self.rl.reward == "srpo" and self.srpo.reference != "predicted":  # (was: accepted and read nowhere; the
            # switchable srpo: section under another rl.reward keeps them)
            for k in PREDICTOR_KEYS:
                out[f"srpo.{k}"] = (f"srpo.reference={self.srpo.reference!r} (the all-failure groups' predicted "
                                    "reference: srpo.reference=predicted)")
        if not is_url(self.rl.reward):
            out["rl.remote"] = (f"rl.reward={self.rl.reward!r} (they set up a reward server's client: "
                                "rl.reward=http://HOST:PORT)")
        if self.policy.kind == "builtin":
            for k in ("path", "lerobot"):
                out[f"policy.{k}"] = "policy.kind='builtin' (it configures a LeRobot policy)"
        elif self.policy.kind == "lerobot":
            for k in ("conv_channels", "text_dim", "max_text_len", "ctx_dim", "film", "flow.hidden", "flow.layers"):
                out[f"policy.{k}"] = ("policy.kind='lerobot' (the built-in VLA's architecture; policy.lerobot "
                                      "configures LeRobot's)")
        return out
