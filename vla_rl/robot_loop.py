"""The real-world RL loop: rounds of episodes on a LeRobot ``Robot``, success marked per episode, a GRPO update from
the recorded episodes between rounds, through the same trainer code as ``vla-rl train``.

    vla-rl robot-loop configs/robot/loop_sims.yaml [key=value ...] [--dry-run]
    vla-rl robot-loop configs/robot/loop_sims.yaml --robot.type so100_follower --robot.port /dev/ttyACM0 \\
        --robot.id my_arm --robot.cameras "{...}" robot.instruction="pick up the cube" robot.camera_map="{...}"

A robot in LeRobot's own flags (``--robot.type``, ``--robot.<field>``: :mod:`vla_rl.robot_args`) sets ``robot.type``
and ``robot.config.<field>``; the robot's ``RobotConfig`` is built and checked before anything else runs.

One round ``r`` (:meth:`RobotTrainer.rollout` + :meth:`vla_rl.trainer.VLARLTrainer.step`, unchanged)::

    plan     groups_per_round groups x vla.grpo.group_size episodes (grouping below), specs as vla-rl train's
    record   for each episode not yet in the dataset:
               reset     the sims robot: robot.reset_episode(init_seed); a real robot: the operator sets up the scene
                         and presses Enter (``ready``)
               run       vla_rl.deploy.run_episode, stochastic: chunks sampled through the flow SDE, joint-limit
                         clipping, the robot's rate, max episode time; every frame and each chunk's sampling data
                         (denoising chain, old log-probs, step mask) into the LeRobotDataset <output_dir>/episodes
               success   the operator's y/n (``judge``: a keyboard prompt, or any callable) or the robot's own report
    read     the round's episodes back from the dataset (LeRobotDataset): a RolloutBatch of the decision points
             (the very observations the policy saw: images are stored losslessly), records, old log-probs
    reward   VLARLTrainer.rewards: binary success, or SRPO (vla.rl.reward: srpo): success 1, failures graded by the
             latent distance of their recorded frames (vla.env.video_camera) to the round's successes (rewards.srpo)
    update   dynamic sampling, GRPO advantages (grpo.train_step.compute_advantages), the clipped PG update that
             recomputes the log-probs of the stored chains (VLARLTrainer.update): the PPO ratio is 1 on the first
             minibatch, since the weights that sampled the round are the ones it starts from
    save     a checkpoint per round (<output_dir>/checkpoints/step_<r>), resumable

Groups (``grouping``): ``state``: ``group_size`` consecutive episodes from one initial state (the sims robot resets
to the same ``init_seed``; on a real robot the operator sets the scene up the same way for the group), GRPO's group
as in ``vla-rl train``; ``round``: every episode of a round is one group, each from its own initial state
(batch-relative advantages, for robots whose scene cannot be put back the same way).

Resume: the checkpoint holds the policy and optimizer after the last finished round; the dataset holds every
finished episode with its round and index (``rl.round``, ``rl.episode``). A rerun continues at the next round and
reuses the episodes of an unfinished round already recorded (robot time is the expensive part): the same weights
sampled them. Ctrl-C holds the robot still and disconnects it (vla_rl.deploy); the interrupted episode is dropped.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, TextIO

import numpy as np
import torch

from grpo.config import check_resume_config, config_to_dict
from grpo.distributed import keyed_generator

from .config import EnvConfig, VLARLConfig
from .deploy import (
    RECORD_PREFIX,
    SUCCESS_KEY,
    DeployConfig,
    check_joint_limits,
    check_policy_fits_robot,
    connect_robot,
    robot_joints,
    run_episode,
    safe_stop,
    sampling_features,
)
from .policy import IMAGE_PREFIX, STATE_KEY
from .rollout import Episode, EpisodeSpec, RolloutBatch
from .trainer import VLARLTrainer

DATASET_DIR = "episodes"  # <output_dir>/episodes: the LeRobotDataset of every round's episodes
REPO_ID = "local/robot_loop"
# the finished episode's summary (steps, round, episode, group, robot_success, ...) -> success
Judge = Callable[[dict], bool]
Ready = Callable[[dict], None]  # returns when the scene is set up for the episode described


@dataclass
class RobotSection:
    type: str = "sims"  # a registered LeRobot robot type (RobotConfig choice); sims: the
                        # simulated robot over a sims task
    task: str = "tabletop/reach_one"  # the task's name (episodes of one task are compared); the sims robot simulates it
    env_kwargs: dict[str, Any] = field(  # sims robot: sims.make's kwargs
        default_factory=lambda: {"image_size": 32, "cameras": ["agentview", "wrist"]})
    config: dict[str, Any] = field(default_factory=dict)  # other fields of the robot's LeRobot RobotConfig (a real arm:
                                                          # port, id, cameras; also --robot.<field> flags)
    instruction: str = ""  # the instruction given to the policy (empty: the robot's own; the sims robot has its task's)
    fps: float = 20.0  # control ticks per second (the robot's rate)
    max_episode_s: float = 10.0  # wall-clock limit of one episode
    max_steps: int = 0  # tick limit of one episode (0: only max_episode_s)
    joint_limits: list[list[float]] = field(default_factory=lambda: [[-1.0], [1.0]])  # [low, high] actions are clipped
        # to (1 or A values each); [] for none
    camera_map: dict[str, str] = field(default_factory=dict)  # policy camera -> robot camera (default: the same name)
    stop_on_success: bool = True  # end an episode when the robot reports success (the sims robot does)
    realtime: bool = True  # hold fps (false: as fast as possible, for a simulated robot)

    def __post_init__(self) -> None:
        if self.fps <= 0 or self.max_episode_s <= 0 or self.max_steps < 0:
            raise ValueError(f"robot.fps and robot.max_episode_s must be > 0 and robot.max_steps >= 0; got "
                             f"{self.fps}, {self.max_episode_s}, {self.max_steps}")
        if self.joint_limits and (len(self.joint_limits) != 2
                                  or not all(isinstance(x, list) for x in self.joint_limits)):
            raise ValueError(f"robot.joint_limits={self.joint_limits}: expected [[low...], [high...]] or []")
        if self.joint_limits:
            check_joint_limits(self.joint_limits, ["_"] * max(len(x) for x in self.joint_limits))


@dataclass
class RobotLoopConfig:
    seed: int = 0  # seeds initial states and the policy's sampling noise (per round, group and episode)
    output_dir: str = "runs/robot_loop"  # checkpoints, metrics.jsonl, the episodes dataset
                                         # (episodes/) and the final policy/
    resume: bool = True  # continue from output_dir's latest checkpoint (and its recorded episodes) when there is one
    policy_path: str = ""  # the policy to start from: a vla-rl run's policy/ (LeRobot layout or
                           # SmallVLA); vla.policy describes it
    rounds: int = 3  # rounds of (episodes on the robot -> success -> one GRPO update)
    groups_per_round: int = 2  # groups per round, each of vla.grpo.group_size episodes
    grouping: Literal["state", "round"] = "state"  # state: a group shares its initial state;
                                                   # round: the round is one group
    success: Literal["operator", "robot"] = "operator"  # who marks success: the operator (y/n per
                                                        # episode) or the robot's report
    recompute_one_by_one: bool = True  # the update recomputes log-probs one decision point at a time, as the robot
                                       # sampled them (rl.grad_accum = rl.minibatch_size): bit-identical to the robot's
    robot: RobotSection = field(default_factory=RobotSection)  # the LeRobot robot, its rate, limits and episode length
    vla: VLARLConfig = field(default_factory=VLARLConfig)  # policy, rl (lr, epochs, minibatch, reward), grpo, srpo,
                                                           # device: vla-rl train's keys

    def inactive_keys(self) -> dict[str, str]:
        """The ``vla:`` section's keys its mode reads nowhere (:meth:`VLARLConfig.inactive_keys`, e.g.
        ``vla.rl.sim_progress_noise`` without ``vla.rl.reward=sim_progress``), refused as vla-rl train refuses them
        (:func:`grpo.config.check_inactive_keys`)."""
        return {f"vla.{k}": why for k, why in self.vla.inactive_keys().items()}

    @property
    def episodes_per_round(self) -> int:
        return self.groups_per_round * self.vla.grpo.group_size


def vla_config(cfg: RobotLoopConfig) -> VLARLConfig:
    """The trainer's config: ``cfg.vla`` with the loop's run keys, one task (the robot's), no SFT (the policy starts
    from ``policy_path``), ``rl.iterations = rounds``, ``rl.groups_per_task = groups_per_round``, and with
    ``recompute_one_by_one`` ``rl.grad_accum = rl.minibatch_size``: every recomputation is a batch of one decision
    point, like the robot's sampling, so the log-probs equal the recorded ones bit for bit (CPU kernels round
    differently at other batch sizes: measured max |d log p| 9.5e-7 for the tiny SmolVLA batched over 8 rows); the
    same update, one optimizer step per minibatch (vla_rl.trainer, ``rl.grad_accum``)."""
    import copy

    v = copy.deepcopy(cfg.vla)
    v.seed, v.output_dir, v.resume = cfg.seed, cfg.output_dir, cfg.resume
    v.env = EnvConfig(tasks=[cfg.robot.task], max_episode_steps=max(1, cfg.robot.max_steps),
                      kwargs=dict(cfg.robot.env_kwargs),
                      video_camera=v.env.video_camera, stop_on_success=cfg.robot.stop_on_success)
    v.sft.init_policy, v.sft.steps = cfg.policy_path, 0
    v.rl.iterations, v.rl.groups_per_task = cfg.rounds, cfg.groups_per_round
    v.rl.eval_every, v.rl.num_videos, v.rl.save_every = 0, 0, 1
    if cfg.recompute_one_by_one:  # micro-batches of one row: the batch size of the robot's sampling
        v.rl.grad_accum = v.rl.minibatch_size
    return v


# ---- the operator ----------------------------------------------------------------------------------------------
def keyboard_judge(inp: TextIO | None = None, out: TextIO | None = None) -> Judge:
    """The operator's y/n per episode, read from ``inp`` (stdin), the question on ``out`` (stderr). Anything else is
    asked again; a closed input raises ``EOFError`` (the loop then stops the robot safely)."""

    def judge(info: dict) -> bool:
        i, o = inp or sys.stdin, out or sys.stderr
        hint = " (the robot reports success)" if info.get("robot_success") else ""
        while True:
            o.write(f"round {info.get('round', 0) + 1}, episode {info.get('episode', 0) + 1} (group "
                    f"{info.get('group', 0)}, {info['steps']} ticks, stopped: {info['stopped']}){hint}: success? "
                    "[y/n] ")
            o.flush()
            line = i.readline()
            if not line:
                o.write("\n")
                raise EOFError("the operator's input closed while waiting for y/n (success: operator reads stdin)")
            a = line.strip().lower()
            if a in ("y", "yes"):
                return True
            if a in ("n", "no"):
                return False
            o.write(f"  answer y or n, not {line.strip()!r}\n")

    return judge


def keyboard_ready(inp: TextIO | None = None, out: TextIO | None = None) -> Ready:
    """For a robot that cannot reset itself: ask the operator to set up the scene, wait for Enter."""

    def ready(ep: dict) -> None:
        i, o = inp or sys.stdin, out or sys.stderr
        same = " (the same setup as the rest of its group)" if ep.get("grouping") == "state" else ""
        o.write(f"round {ep['round'] + 1}, episode {ep['episode'] + 1}: set up the scene for group "
                f"{ep['group']}{same}, "
                "then press Enter ")
        o.flush()
        if not i.readline():
            o.write("\n")
            raise EOFError("the operator's input closed while waiting for Enter (scene setup)")

    return ready


def robot_judge(info: dict) -> bool:
    """Success as the robot reported it (the sims robot's ``last_info["success"]``)."""
    return bool(info["robot_success"])


# ---- reading a round back ----------------------------------------------------------------------------------------
def episode_index_of(root: str | Path) -> dict[tuple[int, int], int]:
    """``(round, episode in round) -> dataset episode index`` of every episode recorded at ``root`` (the last
    recording wins, should one be there twice)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    if not (Path(root) / "meta" / "info.json").is_file():
        return {}
    ds = LeRobotDataset(REPO_ID, root=root)
    cols = {k: _column(ds, k) for k in ("episode_index", "rl.round", "rl.episode")}
    out: dict[tuple[int, int], int] = {}
    for ep, r, e in zip(cols["episode_index"], cols["rl.round"], cols["rl.episode"]):
        out[(int(r), int(e))] = int(ep)
    return out


def _column(ds, key: str) -> np.ndarray:
    """One scalar per-frame column of a LeRobotDataset, without decoding its other features."""
    return np.asarray(ds.hf_dataset.with_format(None)[key]).reshape(-1)


def _uint8_image(x: torch.Tensor) -> torch.Tensor:
    """LeRobot's float ``[3, H, W]`` in [0, 1] -> the stored uint8 ``[H, W, 3]`` (exact for ``image`` features)."""
    return (x.permute(1, 2, 0) * 255.0).round().clamp(0, 255).to(torch.uint8)


def read_round(root: str | Path, rnd: int, specs: list[EpisodeSpec], cameras: dict[str, str], video_camera: str
               ) -> RolloutBatch:
    """Round ``rnd``'s episodes (in ``specs`` order) from the LeRobotDataset at ``root`` as a :class:`RolloutBatch`.

    ``cameras``: policy camera -> robot camera (the dataset's ``observation.images.<robot camera>``) for the
    decision points' observations; ``video_camera``: the robot camera whose frames SRPO embeds. A decision point is a
    frame with ``rl.decision``: its observation, ``rl.record.*`` (reshaped to the record's shapes), ``rl.old_logp``,
    ``rl.step_mask``, ``rl.chunk``."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    index = episode_index_of(root)
    missing = [e for e in range(len(specs)) if (rnd, e) not in index]
    if missing:
        raise RuntimeError(f"round {rnd + 1}: episodes {missing} are not in the dataset at {root}")
    ds = LeRobotDataset(REPO_ID, root=root)
    frame_eps = _column(ds, "episode_index")
    rec_keys = [k for k in ds.features if k.startswith(RECORD_PREFIX)]
    if f"{IMAGE_PREFIX}{video_camera}" not in ds.features:
        raise KeyError(f"vla.env.video_camera={video_camera!r}: the dataset has no {IMAGE_PREFIX}{video_camera}; its "
                       f"cameras: {sorted(k[len(IMAGE_PREFIX):] for k in ds.features if k.startswith(IMAGE_PREFIX))}")
    episodes: list[Episode] = []
    rows: dict[str, list] = {"task": [], STATE_KEY: [], **{IMAGE_PREFIX + c: [] for c in cameras}}
    recs: dict[str, list] = {k: [] for k in rec_keys}
    logp, mask, owner, chunk = [], [], [], []
    for e, spec in enumerate(specs):
        ep = Episode(spec=spec)
        for i in np.nonzero(frame_eps == index[(rnd, e)])[0].tolist():
            fr = ds[i]
            ep.instruction = fr["task"]
            ep.length += 1
            ep.success = ep.success or bool(fr[SUCCESS_KEY])
            ep.frames.append(_uint8_image(fr[IMAGE_PREFIX + video_camera]).numpy())
            ep.states.append(fr[STATE_KEY].float().numpy())
            if bool(fr["rl.decision"]):
                rows["task"].append(fr["task"])
                rows[STATE_KEY].append(fr[STATE_KEY].float())
                for c, rc in cameras.items():
                    rows[IMAGE_PREFIX + c].append(_uint8_image(fr[IMAGE_PREFIX + rc]))
                for k in rec_keys:
                    recs[k].append(fr[k].reshape(ds.features[k]["shape"]))
                logp.append(fr["rl.old_logp"].reshape(-1))
                mask.append(fr["rl.step_mask"].reshape(-1).bool())
                owner.append(e)
                chunk.append(int(fr["rl.chunk"]))
        episodes.append(ep)
    obs = {k: (v if k == "task" else torch.stack(v)) for k, v in rows.items()}
    record = {k[len(RECORD_PREFIX):]: torch.stack(v) for k, v in recs.items()}
    return RolloutBatch(episodes, obs, record, torch.stack(logp).float(), torch.stack(mask),
                        torch.tensor(owner, dtype=torch.long), chunk_of=torch.tensor(chunk, dtype=torch.long),
                        env_steps=sum(e.length for e in episodes), policy_calls=len(owner))


# ---- the trainer on a robot ----------------------------------------------------------------------------------------
class RobotTrainer(VLARLTrainer):
    """:class:`VLARLTrainer` whose rollout is a round on ``robot`` recorded to a LeRobotDataset and read back (module
    docstring); rewards, advantages, update, logging and checkpoints are the trainer's own."""

    def __init__(self, cfg: RobotLoopConfig, robot, judge: Judge | None = None, ready: Ready | None = None,
                 quiet: bool = False):
        self.loop_cfg, self.robot = cfg, robot
        self.judge = judge or (robot_judge if cfg.success == "robot" else keyboard_judge())
        self.ready = ready or keyboard_ready()
        self.dataset_root = Path(cfg.output_dir) / DATASET_DIR
        self.say: Callable[[str], None] = ((lambda m: None) if quiet
                                           else (lambda m: print(m, file=sys.stderr, flush=True)))
        super().__init__(vla_config(cfg), quiet=quiet)
        if self.dist.world_size > 1:
            raise ValueError("vla-rl robot-loop drives one robot from one process; run it without torchrun")
        r = cfg.robot
        self.deploy_cfg = DeployConfig(fps=r.fps, max_episode_s=r.max_episode_s, max_steps=r.max_steps,
                                       joint_limits=tuple(r.joint_limits) if r.joint_limits else None,
                                       camera_map=dict(r.camera_map), task=self.task_instruction,
                                       stop_on_success=r.stop_on_success,
                                       seed=cfg.seed, realtime=r.realtime, stochastic=True)

    # probed from the robot, not a sims env: its instruction, state and action sizes
    def probe(self) -> tuple[dict[str, str], int, int]:
        r = self.loop_cfg.robot
        self.task_instruction = r.instruction or str(getattr(self.robot, "instruction", "") or "")
        if not self.task_instruction and hasattr(self.robot, "reset_episode"):  # the sims robot knows it once connected
            self.robot.connect()
            self.task_instruction = str(self.robot.instruction)
        if not self.task_instruction:
            raise ValueError("robot.instruction is empty and the robot gives none; set robot.instruction")
        return {r.task: self.task_instruction}, len(robot_joints(self.robot)), len(self.robot.action_features)

    def round_specs(self, rnd: int) -> list[EpisodeSpec]:
        """Round ``rnd``'s episodes: ``grouping: state``: vla-rl train's groups (:meth:`make_specs`: initial states
        drawn per round, ``group_size`` episodes each); ``round``: one group, every episode its own initial state."""
        specs = self.make_specs(rnd)
        if self.loop_cfg.grouping == "round":
            rng = np.random.default_rng([self.loop_cfg.seed, rnd, 13])
            seeds = rng.choice(self.cfg.rl.train_seed_range, len(specs), replace=False)
            specs = [EpisodeSpec(s.env_name, int(x), 0, s.seed) for s, x in zip(specs, seeds)]
        return specs

    def _open_dataset(self, sampling: dict):
        """The episodes dataset for appending: created with the robot's + the sampling features, or reopened (its
        features must be the same: the same robot and policy)."""
        from lerobot.datasets.lerobot_dataset import LeRobotDataset

        from .deploy import create_dataset, dataset_features

        want = {**dataset_features(self.robot), **sampling}
        if not (self.dataset_root / "meta" / "info.json").is_file():
            return create_dataset(self.dataset_root, self.robot, self.loop_cfg.robot.fps, REPO_ID, sampling)
        ds = LeRobotDataset(REPO_ID, root=self.dataset_root)
        have = {k: (v["dtype"], tuple(v["shape"])) for k, v in ds.features.items() if k in want or k.startswith("rl.")}
        need = {k: (v["dtype"], tuple(v["shape"])) for k, v in want.items()}
        if have != need:
            diff = sorted(k for k in set(have) | set(need) if have.get(k) != need.get(k))
            raise ValueError(f"the episodes dataset {self.dataset_root} was recorded with other features ({diff}): "
                             "another robot or policy; use another output_dir")
        return ds

    def _probe_sampling(self) -> dict:
        """The ``rl.*`` features, from one sample of the policy on a blank observation of the robot's shapes."""
        feats = self.robot.observation_features
        cams = self.policy.cfg.cameras if self.policy.cfg.use_images else []
        dev = next(self.policy.parameters()).device
        batch: dict[str, Any] = {STATE_KEY: torch.zeros(1, len(robot_joints(self.robot)), device=dev),
                                 "task": [self.task_instruction]}
        for c in cams:
            rc = self.deploy_cfg.camera_map.get(c, c)
            if rc not in feats:
                raise KeyError(f"policy camera {c!r} maps to robot camera {rc!r}, which the robot does not have; its "
                               f"cameras: {sorted(k for k, v in feats.items() if isinstance(v, tuple))}")
            batch[IMAGE_PREFIX + c] = torch.zeros((1, *feats[rc]), dtype=torch.uint8, device=dev)
        return sampling_features(self.policy.sample_chunk(batch, stochastic=True,
                                                          generator=torch.Generator().manual_seed(0)))

    def record_round(self, rnd: int, specs: list[EpisodeSpec], todo: list[int]) -> None:
        """Run and record episodes ``todo`` of round ``rnd`` (module docstring)."""
        connect_robot(self.robot)
        ds = self._open_dataset(self._probe_sampling())
        self.policy.eval()
        try:
            for e in todo:
                s = specs[e]
                tags = {"round": rnd, "episode": e, "group": s.group_id, "init_seed": s.init_seed}
                if hasattr(self.robot, "reset_episode"):
                    self.robot.reset_episode(s.init_seed)
                else:
                    self.ready({**tags, "grouping": self.loop_cfg.grouping})
                gen = keyed_generator(self.loop_cfg.seed, rnd, s.group_id, s.seed)
                info = run_episode(self.policy, self.robot, self.deploy_cfg, self.task_instruction, gen, ds, rl=tags,
                                   judge=lambda inf: self.judge({**inf, **tags}))
                self.say(f"round {rnd + 1} episode {e + 1}/{len(specs)} (group {s.group_id}): {info['steps']} ticks, "
                         f"{'success' if info['success'] else 'failure'} ({info['stopped']}, {info['seconds']:.1f}s)")
        finally:
            ds.finalize()

    def rollout(self, it: int) -> tuple[list[EpisodeSpec], range, RolloutBatch]:
        """Round ``it``: record the episodes not yet in the dataset, then read them all back (module docstring)."""
        specs = self.round_specs(it)
        have = episode_index_of(self.dataset_root)
        todo = [e for e in range(len(specs)) if (it, e) not in have]
        if len(todo) < len(specs):
            self.say(f"round {it + 1}: {len(specs) - len(todo)} episodes already recorded, reused")
        if todo:
            self.record_round(it, specs, todo)
        cams = {c: self.deploy_cfg.camera_map.get(c, c)
                for c in (self.policy.cfg.cameras if self.policy.cfg.use_images else [])}
        video = self.deploy_cfg.camera_map.get(self.cfg.env.video_camera, self.cfg.env.video_camera)
        return specs, range(len(specs)), read_round(self.dataset_root, it, specs, cams, video)

    def progress(self) -> dict[str, Any]:
        return {**super().progress(), "robot_loop": config_to_dict(self.loop_cfg)}  # checked on resume

    def load_state_dict(self, st: dict[str, Any]) -> None:
        super().load_state_dict(st)
        saved = st["trainer"].get("robot_loop")
        if saved is not None:
            check_resume_config(saved, self.loop_cfg, str(st["__path__"]),  # (a serial port may re-enumerate)
                                ignore=("rounds", "resume", "robot.realtime", "robot.config.port"))


def run_robot_loop(cfg: RobotLoopConfig, robot=None, judge: Judge | None = None, ready: Ready | None = None,
                   quiet: bool = False) -> dict[str, Any]:
    """``cfg.rounds`` rounds (module docstring) on ``robot`` (default: built from ``cfg.robot`` by LeRobot's
    ``make_robot_from_config``). Returns ``{"rounds", "resumed", "success_per_round", "episodes", "dataset", "policy",
    "interrupted"}``; writes ``<output_dir>/policy`` (the final policy, its own layout) after the last round."""
    from grpo.metrics import MetricsLogger

    from .deploy import make_robot

    t0 = time.time()
    if robot is None:
        robot = make_robot(cfg.robot.type, cfg.robot.task, dict(cfg.robot.env_kwargs), cfg.seed,
                           Path(cfg.output_dir) / ".calibration", extra=dict(cfg.robot.config), where="robot.config.",
                           type_key="robot.type")
    if cfg.success == "robot" and not hasattr(robot, "last_info"):
        raise ValueError(f"success=robot, but the {cfg.robot.type} robot reports no success (no last_info); "
                         "use success=operator")
    tr = RobotTrainer(cfg, robot, judge, ready, quiet)
    check_policy_fits_robot(tr.policy, robot, dict(cfg.robot.camera_map), "robot.camera_map={{{c}: <robot camera>}}")
    names = list(robot.action_features)
    resumed = tr.maybe_resume()  # first: a checkpoint refused (its weights, its state) leaves no log files
    tr.logger = MetricsLogger(tr.out, config=config_to_dict(cfg))
    if not resumed:
        tr.sft_done = True
        tr.save()  # round 0: the starting policy
    start = tr.iteration
    rates: list[float] = []
    interrupted = False
    try:
        for rnd in range(start, cfg.rounds):
            scal = tr.step()
            tr.save()
            rates.append(scal["rollout/success_rate"])
            tr.say(f"round {rnd + 1}/{cfg.rounds}: success {scal['rollout/success_rate']:.3f}, reward "
                   f"{scal['reward/mean']:.3f}, groups kept {scal['rollout/groups_kept']}, update on "
                   f"{int(scal.get('loss/rows', 0))} decision points (ratio "
                   f"{scal.get('loss/ratio', float('nan')):.4f}); checkpoint saved")
    except KeyboardInterrupt:
        interrupted = True
        tr.say(f"interrupted in round {tr.iteration + 1}: robot stopped; its finished episodes are kept "
               f"in {tr.dataset_root}; rerun to resume")
    finally:
        safe_stop(robot, names)
        tr.logger.close()
    if not interrupted:
        tr.policy.save_pretrained(tr.out / "policy")
    n = len(episode_index_of(tr.dataset_root))
    return {"rounds": tr.iteration, "resumed": resumed, "success_per_round": rates, "episodes": n,
            "dataset": str(tr.dataset_root), "policy": str(tr.out / "policy"), "interrupted": interrupted,
            "wall_s": round(time.time() - t0, 1), "trainer": tr}


# ---- CLI -----------------------------------------------------------------------------------------------------------
def check_robot_loop_inputs(cfg: RobotLoopConfig, writes: bool = True, flagged: tuple[str, ...] = ()) -> None:
    """Before anything is built or written: sizes, the robot (``robot.type`` + ``robot.config`` as LeRobot's
    ``RobotConfig``, built without hardware; ``flagged``: the fields given as ``--robot.<field>`` flags, which its
    errors name so), the policy at ``policy_path`` (kind matching ``vla.policy``), the output directory."""
    from grpo.preflight import check_resumable, check_run_kind, check_sizes, check_writable_dir

    from .policies.factory import POLICY_KINDS
    from .preflight import check_task, known_tasks

    if cfg.vla.rl.reward == "sim_progress":
        raise ValueError("vla.rl.reward=sim_progress: a robot's recorded episodes carry no simulator progress "
                         "(expected binary, srpo or a reward server http://HOST:PORT)")
    check_sizes(("rounds", cfg.rounds, 1), ("groups_per_round", cfg.groups_per_round, 1),
                ("vla.grpo.group_size", cfg.vla.grpo.group_size, 1 if cfg.grouping == "round" else 2))
    if cfg.episodes_per_round < 2:
        raise ValueError(f"groups_per_round x vla.grpo.group_size = {cfg.episodes_per_round}: a round needs >= 2 "
                         "episodes to compare")
    if cfg.robot.type == "sims":
        check_task("robot.task", cfg.robot.task, known_tasks())
    from .deploy import robot_config_of

    robot_config_of(cfg.robot.type, cfg.robot.task, dict(cfg.robot.env_kwargs), cfg.seed, None, dict(cfg.robot.config),
                    flagged, "robot.config.", "--robot.type" if "type" in flagged else "robot.type")  # no hardware
    if not cfg.policy_path:
        raise ValueError("policy_path is empty: name the policy to start from (a vla-rl run's policy/ directory)")
    if not writes:
        return
    p = Path(cfg.policy_path)
    if not (p / "config.json").is_file():
        raise FileNotFoundError(f"policy_path={cfg.policy_path!r}: no saved policy there (expected config.json + "
                                "model.safetensors, e.g. runs/<run>/policy)")
    saved = json.loads((p / "config.json").read_text())
    kind = "lerobot" if saved.get("type") in POLICY_KINDS["lerobot"] else "builtin"
    if kind != cfg.vla.policy.kind or (kind == "lerobot" and saved["type"] != cfg.vla.policy.type):
        raise ValueError(f"policy_path={cfg.policy_path!r} holds a {kind} {saved.get('type', 'small_vla')} policy, but "
                         f"vla.policy is kind={cfg.vla.policy.kind!r} type={cfg.vla.policy.type!r}; set vla.policy to "
                         "the config it was trained with")
    check_writable_dir(cfg.output_dir, "output_dir")
    check_run_kind(cfg.output_dir, type(cfg))  # not another command's run directory
    if cfg.resume:
        check_resumable(Path(cfg.output_dir) / "checkpoints")


def add_parser(sub) -> None:
    from grpo.cli import add_config_help

    lp = sub.add_parser("robot-loop", help="real-world RL: episodes on a LeRobot robot, success marked, GRPO between "
                                           "rounds",
                        description=__doc__.split("\n\n")[0])
    add_config_help(lp, lambda: RobotLoopConfig)
    lp.add_argument("config", help="a robot-loop YAML (e.g. configs/robot/loop_sims.yaml)")
    lp.add_argument("overrides", nargs="*", help="key=value overrides, e.g. rounds=5 success=robot")
    lp.add_argument("--dry-run", action="store_true",
                    help="print the resolved config and the cost per round, then exit")
    lp.epilog = ("A real arm in LeRobot's own flags: --robot.type TYPE and --robot.FIELD VALUE per field of its "
                 "RobotConfig (they set robot.type and robot.config.FIELD), e.g. --robot.type so100_follower "
                 "--robot.port /dev/ttyACM0 --robot.id my_arm; checked against LeRobot's config class before anything "
                 "runs (also with --dry-run).")


SIMS_SECTION_FIELDS = ("task", "env_kwargs")  # the sims robot's fields the robot section holds itself (robot.task, ...)


def apply_robot_flags(section: RobotSection, flags) -> tuple[str, ...]:
    """LeRobot's ``--robot.type`` / ``--robot.<field>`` flags (:func:`vla_rl.robot_args.split_robot_flags`) onto the
    robot section: the type to ``robot.type``, each field (its value parsed as draccus does) to
    ``robot.config.<field>``, the sims robot's ``task`` / ``env_kwargs`` to ``robot.task`` / ``robot.env_kwargs``.
    Returns the fields flagged."""
    from .robot_args import parse_flag_values, robot_fields

    kind, raw = robot_fields(flags)
    if kind is not None:
        section.type = kind
    vals = parse_flag_values(raw)
    for k, v in vals.items():
        if section.type == "sims" and k in SIMS_SECTION_FIELDS:
            setattr(section, k, v)
        else:
            section.config[k] = v
    return tuple(raw) + (("type",) if kind is not None else ())


def cmd_robot_loop(args: argparse.Namespace) -> int:
    """``vla-rl robot-loop CONFIG [key=value ...] [--dry-run]``: bad input is one line and exit 2, nothing written."""
    import lerobot  # noqa: F401  (first: without lerobot, grpo.cli.run_command's one line names make lerobot)

    from grpo.cli import config_command

    def run(cfg: RobotLoopConfig) -> int:
        flagged = apply_robot_flags(cfg.robot, args.robot_flags)
        check_robot_loop_inputs(cfg, writes=not args.dry_run, flagged=flagged)
        if args.dry_run:
            from grpo.config import dump_config

            ticks = cfg.robot.max_steps or int(cfg.robot.max_episode_s * cfg.robot.fps)
            print(dump_config(cfg))
            print(f"per round: {cfg.episodes_per_round} episodes ({cfg.groups_per_round} groups x "
                  f"{cfg.vla.grpo.group_size}), at most {ticks} ticks / {cfg.robot.max_episode_s:g} s each; success by "
                  f"{cfg.success}; {cfg.vla.rl.inner_epochs} update epoch(s) over the recorded decision points")
            return 0
        try:
            res = run_robot_loop(cfg)
        except EOFError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        res.pop("trainer")
        print(json.dumps(res))
        return 130 if res["interrupted"] else 0

    return config_command(RobotLoopConfig, args.config, args.overrides, False, run)
