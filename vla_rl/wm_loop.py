"""World-VLA-Loop as one command: train the world model on simulator data, RL the VLA inside it, check the
policy in the real simulator, add the policy's failures and near-successes to the data, fine-tune, repeat.

    vla-rl loop configs/world_models/loop_reach_one.yaml [key=value ...] [--dry-run | --plan]   # the demo (make
    demo-wm)

Stages (all logged to ``<output_dir>/metrics.jsonl`` and TensorBoard with ``grpo.metrics.MetricsLogger``;
step = cycle)::

    data      SANS-style mix of successes / near-successes / failures / random episodes (world_models.data),
              plus a held-out mix from disjoint initial states
    models    video world model (frames + success head), proprio state model, IDM (world_models.fit); cycle-0
              metrics on the held-out mix: open-loop frame MSE vs the simulator under the same actions (and the
              copy-first-frame baseline), success agreement, IDM action error
    policy    SFT of the VLA in the real simulator (VLARLTrainer with rl.iterations=0)
    cycle c   1. register "wm/<task>" in sims' registry (world_models.wm_env.register_world_model_env)
              2. VLARLTrainer, unchanged, with env.tasks=["wm/<task>"]: GRPO inside the world model
              3. real-simulator evaluation (vla_rl.rollout.evaluate) on held-out initial states
              4. fresh real rollouts of the policy (world_models.data.collect_policy_episodes with the policy as
                 its ``act``, :func:`policy_actor`): the world model's action-following error on them *before*
                 they are added (frame MSE, IDM-decoded action error, success agreement)
              5. add the failed and near-success rollouts to the data; fine-tune world model + state model
              6. log ``cycle/*``

Every cycle's record also counts its real-simulator interaction (:func:`interaction`): ``real/<source>_episodes``
and ``_env_steps`` per source (cycle 0: ``sans_train``, ``sans_heldout``, ``sft_demo`` -- the kept demos; an expert
try that failed is not counted --, ``sft_eval``, ``eval``, and ``start_pool_resets``; cycle c: ``policy_rollout``,
``eval``) and the running totals ``real/{train,eval}_{episodes,env_steps}_total``.

:func:`run_cycle` is one cycle c, :func:`run_cycle_zero` the models + policy stage; the checkpointing, logging and
resume around them live in ``_run_cycles``.

The loop is the VLA frontend's: ``world_models`` is the library it drives (data, models, reports, the world-model
env) and knows nothing of the VLA.

Devices: ``device`` (``auto``: CUDA when available) places the world model, state model, IDM and the VLA; the
data (uint8 episodes; training windows are cut per batch, ``world_models.windows.WindowSet``), the start pool and
every metric stay in CPU RAM, and batches move to the models.

The world model is a module's worth of tensors and the policy a ``save_pretrained`` directory, so every stage
is checkpointed under ``output_dir`` (``sft/``, ``cycle_<c>/``: ``world_model.pt`` and ``vla/``). After every completed
cycle (cycle 0: data, models and SFT) the loop's own state -- cycle, history, best record, the world model, state
model and IDM weights and the grown training data -- is saved atomically as ``<output_dir>/loop_state/step_<c>``
(grpo.checkpoint); a run that stopped (SIGINT / SIGTERM: at the next stage boundary; a crash; a kill) resumes from
the last completed cycle when the same command is run again (``resume: true``, the default), and reruns the
interrupted one from its start; every stage is seeded per cycle, so the resumed history equals an uninterrupted one.
A damaged loop state is reported (one line) and left as it is; a config that differs (other than ``cycles``) is
refused. The policy with the best real-simulator success so far (cycle 0 = after SFT) is kept as
``<output_dir>/checkpoints/best`` (a ``save_pretrained`` directory with ``best.json``: metric, value, cycle), swapped
atomically (grpo.checkpoint.publish_best).
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from grpo.checkpoint import best_record, improves, latest_checkpoint, load_checkpoint, publish_best, save_checkpoint
from grpo.cli import config_command
from grpo.config import MAX_EPISODES, ConfigError, check_resume_config, config_to_dict
from grpo.device import check_device_name, device_of, resolve_device
from grpo.metrics import MetricsLogger
from grpo.preflight import check_resumable
from grpo.signals import GracefulExit
from world_models.data import Trajectories, collect_policy_episodes, collect_sans, state_predictor_error
from world_models.fit import WM_CAMERA, DataConfig, ModelsConfig, empty_models, finetune, fit_models, world_model_report
from world_models.idm import idm_action_error
from world_models.wm_env import StartPool, register_world_model_env

from .config import VLARLConfig
from .policies import TrainablePolicy, load_policy
from .policy import batch_to
from .rollout import EnvPool, EvalResult, evaluate, obs_to_batch
from .trainer import VLARLTrainer


@dataclass
class WorldLoopConfig:
    seed: int = 0  # seeds data, models, SFT and RL (reproducible from it)
    output_dir: str = "runs/wm_loop"  # where models, metrics and the VLA runs go
    resume: bool = True  # continue after output_dir's last completed cycle (loop_state/) when there is one
    # where the world model, state model, IDM and the VLA run ("auto": CUDA when available, else CPU; the VLA
    # stages use the same unless vla.device names another); data, start pools and windows stay in CPU RAM
    device: str = "auto"  # auto, cpu, cuda or cuda:<i> for the models and the VLA
    data: DataConfig = field(default_factory=DataConfig)  # the SANS-style simulator data the world model learns from
    models: ModelsConfig = field(default_factory=ModelsConfig)  # world model, success head, state model and IDM
    vla: VLARLConfig = field(default_factory=VLARLConfig)  # the VLA's SFT + GRPO settings (vla-rl train's config)
    cycles: int = 3  # RL-in-the-world-model cycles
    rl_iterations: int = 10  # GRPO iterations inside the world model per cycle
    real_eval_episodes: int = 32  # held-out real-simulator initial states
    rollouts_per_cycle: int = 16  # fresh real rollouts of the policy per cycle (metrics, then added to the data)
    policy_seed_offset: int = 400_000  # initial states of the policy's fresh real rollouts start here

    def __post_init__(self) -> None:
        try:
            check_device_name(self.device)
        except ValueError as e:
            raise ConfigError(f"device: {e}") from None
        if self.cycles < 0 or self.rl_iterations < 0:
            raise ValueError(f"cycles and rl_iterations must be >= 0, got {self.cycles} and {self.rl_iterations}")
        if self.models.wm.image_size != self.data.image_size:  # (it is fed the recorded frames as they are)
            raise ValueError(f"models.wm.image_size={self.models.wm.image_size}: expected data.image_size="
                             f"{self.data.image_size} (the world model learns from and imagines the recorded frames)")
        if self.vla.rl.reward == "sim_progress":
            raise ValueError("vla.rl.reward=sim_progress: the world model's imagined episodes carry no simulator "
                             "progress (expected binary, srpo or a reward server http://HOST:PORT)")
        for name in ("rollouts_per_cycle", "policy_seed_offset"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("real_eval_episodes", "rollouts_per_cycle"):  # (1e9: rolled out for days)
            if getattr(self, name) > MAX_EPISODES:
                raise ValueError(f"{name}={getattr(self, name)}: expected at most {MAX_EPISODES} episodes")
        self._check_seed_ranges()
        pol = self.vla.policy
        if pol.use_images and list(pol.cameras) != [WM_CAMERA]:
            raise ConfigError(f"vla.policy.cameras={list(pol.cameras)}: the world model imagines only the "
                              f"{WM_CAMERA!r} camera, so the policy can read only [{WM_CAMERA}] (and the state: with "
                              "vla.env.kwargs.object_state=true it holds the object positions too)")

    def _check_seed_ranges(self) -> None:
        """The initial states of the world model's training episodes (``data.train_seed_offset + i``), of its held-out
        ones (``data.test_seed_offset + i``) and of the policy's fresh rollouts that join the training data
        (``policy_seed_offset + 1000 c + i``) are disjoint, and the trained-on ones lie below the VLA's held-out states
        (``vla.rl.eval_seed_offset`` / ``test_seed_offset``); else ``ValueError`` (was: accepted, a world model trained
        on the episodes it is scored on, or on the states the policy is evaluated on)."""
        d = self.data
        test = ("data.test_seed_offset", d.test_seed_offset, d.test_seed_offset + sum(d.test.values()))
        trained = [("data.train_seed_offset", d.train_seed_offset, d.train_seed_offset + sum(d.train.values()))]
        if self.cycles > 0 and self.rollouts_per_cycle > 0:
            trained.append(("policy_seed_offset", self.policy_seed_offset,
                            self.policy_seed_offset + 1000 * (self.cycles - 1) + self.rollouts_per_cycle))
        held_out = min(self.vla.rl.eval_seed_offset, self.vla.rl.test_seed_offset)
        for key, lo, hi in trained:
            if lo < hi and lo < test[2] and test[1] < hi and test[1] < test[2]:
                raise ValueError(f"{key}={lo}: its training states {lo}..{hi - 1} overlap the world model's held-out "
                                 f"states {test[1]}..{test[2] - 1} ({test[0]}={test[1]}); expected disjoint ranges")
            if lo < hi and hi > held_out:
                raise ValueError(f"{key}={lo}: its training states {lo}..{hi - 1} reach the VLA's held-out states "
                                 f"(from {held_out}: vla.rl.eval_seed_offset / test_seed_offset); expected them below")

    def inactive_keys(self) -> dict[str, str]:
        """The ``vla:`` section's keys its mode reads nowhere (:meth:`VLARLConfig.inactive_keys`, e.g.
        ``vla.rl.sim_progress_noise`` without ``vla.rl.reward=sim_progress``), refused as vla-rl train refuses them
        (:func:`grpo.config.check_inactive_keys`)."""
        out = {f"vla.{k}": why for k, why in self.vla.inactive_keys().items()}
        # the keys the loop sets itself in every VLA run it starts (LoopRun.vla_cfg; was: accepted and ignored)
        sets = "vla-rl loop (it sets this key in every VLA run it starts: "
        out.update({"vla.output_dir": sets + "output_dir/sft and output_dir/cycle_<c>/vla)",
                    "vla.resume": sets + "a fresh VLA run per stage; the loop itself resumes by resume)",
                    "vla.rl.iterations": sets + "0 for the SFT stage, rl_iterations per cycle)",
                    "vla.rl.eval_every": sets + "0; the loop evaluates in the real simulator by real_eval_episodes)",
                    "vla.rl.num_videos": sets + "0)"})
        if list(self.vla.env.tasks) != [self.data.task]:
            out["vla.env.tasks"] = (f"vla-rl loop (its one task is data.task={self.data.task!r}, not "
                                    f"{list(self.vla.env.tasks)}; expected vla.env.tasks=[{self.data.task}] or no "
                                    "vla.env.tasks)")
        return out


def policy_actor(policy: TrainablePolicy, stochastic: bool = True, seed: int = 0):
    """The VLA as ``act(env, obs, t, info) -> action[A]`` for ``world_models.data.collect_policy_episodes``: chunked
    (LeRobot's interface, ``select_action``: a new chunk when the action queue runs dry), the queue reset at the
    start of every episode (``t == 0``), noise drawn from one CPU generator seeded ``seed`` (the policy moves it)."""
    gen = torch.Generator().manual_seed(seed)
    dev = device_of(policy)

    @torch.no_grad()
    def act(env, obs, t, info):
        if t == 0:
            policy.reset()
        batch = batch_to(obs_to_batch([obs], policy.cfg.cameras, policy.cfg.use_images), dev)
        return policy.select_action(batch, stochastic=stochastic, generator=gen)[0].clamp(-1, 1).cpu().numpy()

    return act


def _vla_cfg(cfg: WorldLoopConfig, **changes) -> Any:
    """A copy of ``cfg.vla`` with dotted ``changes`` (``{"rl.iterations": 0}``)."""
    out = copy.deepcopy(cfg.vla)
    for key, val in changes.items():
        node = out
        parts = key.split(".")
        for p in parts[:-1]:
            node = getattr(node, p)
        if not hasattr(node, parts[-1]):
            raise AttributeError(f"VLARLConfig has no field {key!r}")
        setattr(node, parts[-1], val)
    return out


def run_loop(cfg: WorldLoopConfig, quiet: bool = False) -> dict[str, Any]:
    """The loop of the module docstring; returns ``history`` (one record per cycle, cycle 0 = after SFT), the final
    ``models``, the ``train`` / ``test`` trajectories and the last ``policy_dir``. Writes
    ``<output_dir>/history.json``."""
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    t_start = time.time()
    dev = resolve_device(cfg.device)
    out = Path(cfg.output_dir)
    saved = read_loop_state(cfg)  # before anything is written: a damaged state or another config is one line
    done = -1 if saved is None else int(saved["cycle"])  # the last completed cycle
    out.mkdir(parents=True, exist_ok=True)
    _forget_after(out, done)  # an interrupted cycle's partial outputs and metrics rows: it reruns from its start
    # the loop's tracker run
    logger = MetricsLogger(out, config=config_to_dict(cfg), log=cfg.vla.log, resume=cfg.resume)
    if saved is not None:
        say(f"resuming after cycle {done} ({saved['__path__']})")
    with GracefulExit() as stop:
        res = _run_cycles(cfg, out, dev, saved, logger, stop, say)
    logger.close()
    history = res["history"]
    if res["stopped"]:
        when = (f"stopped after cycle {history[-1]['cycle']}; run the same command to resume" if history else
                "stopped before the first cycle completed (cycle 0: data, world model, SFT); nothing to resume from, "
                "the same command starts it again")
        say(f"{res['stopped']}: {when} (outputs in {out.resolve()})")
        return res
    (out / "history.json").write_text(json.dumps(history, indent=1))
    say(f"real-sim success per cycle: {[round(h['real_success'], 3) for h in history]} ({time.time() - t_start:.0f}s); "
        f"outputs in {out.resolve()}")
    if history and "real/train_episodes_total" in history[-1]:
        say(real_line(history[-1]))
    return res


LOOP_STATE = "loop_state"


def read_loop_state(cfg: WorldLoopConfig) -> dict[str, Any] | None:
    """The last completed cycle's saved state of ``cfg.output_dir`` (None: a fresh run, or ``resume: false``); a
    damaged one, or one saved under another config (``cycles`` may differ), raises ValueError (one line)."""
    root = Path(cfg.output_dir) / LOOP_STATE
    if not cfg.resume:
        return None
    check_resumable(root, keys=("config",))
    latest = latest_checkpoint(root)
    if latest is None:
        return None
    try:
        st = load_checkpoint(latest)
    except Exception as e:  # noqa: BLE001 - any unreadable file: one line naming it, the state left untouched
        raise ValueError(f"resume: cannot read {latest} ({type(e).__name__}: {e}); it was left untouched: move it "
                         "away or set resume=false") from None
    check_resume_config(st["config"], cfg, str(latest), ignore=("resume", "cycles", "vla.log"))
    return st


def _forget_after(out: Path, done: int) -> None:
    """Drop what cycles after ``done`` left (an interrupted run's ``cycle_<c>/`` and ``metrics.jsonl`` rows with
    ``step > done``; ``done = -1``: a fresh run, also ``sft/`` and an old ``loop_state/`` under ``resume: false``), so
    the rerun writes them as an uninterrupted run would."""
    import shutil

    for d in [*out.glob("cycle_*"), *([out / "sft", out / LOOP_STATE] if done < 0 else [])]:
        tail = d.name.removeprefix("cycle_")
        if d.is_dir() and (not tail.isdigit() or int(tail) > done):
            shutil.rmtree(d)
    metrics = out / "metrics.jsonl"
    if metrics.is_file():
        keep = [ln for ln in metrics.read_text().splitlines() if ln.strip() and json.loads(ln).get("step", 0) <= done]
        metrics.write_text("".join(ln + "\n" for ln in keep))


def _save_loop_state(out: Path, cfg: WorldLoopConfig, cycle: int, history: list, best: dict | None, policy_dir: Path,
                     models: dict, train: Trajectories) -> None:
    """``out/loop_state/step_<cycle>`` (atomic, the previous one removed): what the next cycle starts from."""
    state = {"cycle": cycle, "history": history, "best": best, "policy_dir": str(policy_dir.relative_to(out)),
             "config": config_to_dict(cfg), "train": {f: getattr(train, f) for f in train.__dataclass_fields__}}
    for name in ("wm", "state", "idm"):
        state[f"model_{name}"] = {k: v.detach().cpu() for k, v in models[name].state_dict().items()}  # own file each
    save_checkpoint(out / LOOP_STATE, cycle, state, keep_last=1)


def _env_kwargs(cfg: WorldLoopConfig) -> dict:
    """The VLA's env kwargs at the world model's image size."""
    return dict(cfg.vla.env.kwargs, image_size=cfg.data.image_size)


def _sim_kwargs(cfg: WorldLoopConfig) -> dict:
    """The simulator's own kwargs for data collection (e.g. ``object_state``)."""
    return {k: v for k, v in _env_kwargs(cfg).items() if k not in ("image_size", "cameras")}


@dataclass
class LoopRun:
    """What every cycle of one loop run shares: the config, the output directory, the held-out data, the world
    model's start pool and the real simulator's env pool (the latter two made once the models exist)."""

    cfg: WorldLoopConfig
    out: Path
    test: Trajectories  # the held-out SANS mix (world-model reports)
    vla_device: str  # where the VLA runs (the loop's device unless vla.device names one)
    starts: StartPool | None = None  # the world-model env's initial states (from the real simulator)
    pool: EnvPool | None = None  # the real simulator's envs for the held-out evaluation

    @property
    def env_kwargs(self) -> dict:
        return _env_kwargs(self.cfg)

    @property
    def sim_kw(self) -> dict:
        return _sim_kwargs(self.cfg)

    def vla_cfg(self, output_dir: Path, **changes) -> Any:
        """``cfg.vla`` for one VLA run of the loop under ``output_dir`` (fresh, on ``vla_device``, logging to
        TensorBoard only: the loop's own logger carries the tracker run) with dotted ``changes``."""
        inner_log = [b for b in self.cfg.vla.log.backends if b == "tensorboard"]
        return _vla_cfg(self.cfg, output_dir=str(output_dir), resume=False, device=self.vla_device,
                        **{"env.kwargs": self.env_kwargs, "log.backends": inner_log, **changes})

    def real_eval(self, policy: TrainablePolicy) -> EvalResult:
        """``policy`` in the real simulator on the ``real_eval_episodes`` held-out initial states."""
        cfg = self.cfg
        seeds = cfg.vla.rl.heldout_seeds(cfg.real_eval_episodes)  # vla.rl.eval_split's states
        return evaluate(policy, self.pool, [cfg.data.task], seeds, cfg.vla.env.max_episode_steps, seed=cfg.seed)


def data_steps(traj: Trajectories) -> int:
    """Real-simulator steps ``traj``'s episodes took: each runs the fixed horizon (``actions [N, T, A]``: N * T)."""
    return int(traj.actions.shape[0] * traj.actions.shape[1])


def eval_steps(res: EvalResult) -> int:
    """Real-simulator steps of an evaluation: the sum of its episodes' lengths (an episode stops on success)."""
    return int(sum(e.length for e in res.episodes))


REAL_TOTALS = ("real/train_episodes", "real/train_env_steps", "real/eval_episodes", "real/eval_env_steps")


def interaction(counts: dict[str, int], before: dict[str, Any] | None) -> dict[str, int]:
    """One cycle's real-simulator interaction record: ``counts`` (``real/<source>_episodes`` / ``_env_steps`` of
    this cycle) and the run's running totals ``real/{train,eval}_{episodes,env_steps}_total`` (``before``: the
    previous cycle's record). *train*: episodes whose data trains a model (the SANS mix, the SFT demos, the
    policy's fresh rollouts); *eval*: episodes only measured (real-sim evaluations, the held-out SANS mix)."""
    train_src = ("sans_train", "sft_demo", "policy_rollout")
    eval_src = ("sans_heldout", "sft_eval", "eval")
    out = dict(counts)
    for kind, srcs in (("train", train_src), ("eval", eval_src)):
        for unit in ("episodes", "env_steps"):
            key = f"real/{kind}_{unit}_total"
            out[key] = int((before or {}).get(key, 0)) + sum(int(counts.get(f"real/{s}_{unit}", 0)) for s in srcs)
    return out


@dataclass
class CycleOut:
    """One cycle's result: its ``cycle/*`` record, the policy it trained (and its directory), the grown data."""

    rec: dict[str, Any]
    policy: TrainablePolicy
    policy_dir: Path
    train: Trajectories


def run_cycle(run: LoopRun, c: int, models: dict, train: Trajectories, policy_dir: Path,
              stop: GracefulExit, before: dict[str, Any] | None = None) -> CycleOut | None:
    """Cycle ``c >= 1`` of the World-VLA-Loop (module docstring): GRPO of the policy at ``policy_dir`` inside the
    world model, its real-simulator success, fresh real rollouts (the world model's error on them), the failures and
    near-successes added to ``train``, world model + state model fine-tuned on it (``models`` in place); the record
    counts the cycle's real-simulator episodes and steps (:func:`interaction`, totals on from ``before``, the previous
    cycle's record). None when the signal stopped the VLA run (or came before the real evaluation)."""
    cfg, d, m = run.cfg, run.cfg.data, run.cfg.models
    tc = time.time()
    cdir = run.out / f"cycle_{c}"
    # 1. the world model as an env
    wm_name = "wm/" + d.task.split("/", 1)[-1]
    register_world_model_env(wm_name, models["wm"], models["state"], run.starts, d.task, threshold=m.success_threshold,
                             seed=cfg.seed + c, sampling_steps=m.env_sampling_steps)
    # 2. RL inside it
    vcfg = run.vla_cfg(cdir / "vla", seed=cfg.vla.seed + c,
                       **{"env.tasks": [wm_name], "sft.init_policy": str(policy_dir),
                          "rl.iterations": cfg.rl_iterations, "rl.eval_every": 0, "rl.num_videos": 0})
    summary = VLARLTrainer(vcfg, quiet=True).train()
    if summary["stopped"] or stop.requested:  # the signal reached the VLA run (or came between stages)
        stop.requested = stop.requested or summary["stopped"]
        return None
    policy = summary["policy"]
    # 3. evaluate in the real simulator
    ev = run.real_eval(policy)
    # 4. collect real data with the policy; the world model's error on it before it is added
    seeds = [cfg.policy_seed_offset + c * 1000 + i for i in range(cfg.rollouts_per_cycle)]
    fresh = collect_policy_episodes(policy_actor(policy, stochastic=True, seed=cfg.seed + c), d.task, seeds, d.horizon,
                                    d.image_size, camera=WM_CAMERA, env_kwargs=run.sim_kw)
    on_policy = world_model_report(models["wm"], fresh, models["idm"], m.success_threshold, cfg.seed,
                                   m.env_sampling_steps, models["state"])
    # 5. add the failures and near-successes; fine-tune the world model on the grown data
    add = [i for i, k in enumerate(fresh.kinds) if not k.endswith("_success")]
    if add:
        train = train.cat(fresh.subset(add))
    ft_loss = finetune(models, m, train, m.wm_finetune_steps, cfg.seed + c) if m.wm_finetune_steps > 0 else []
    held = world_model_report(models["wm"], run.test, models["idm"], m.success_threshold, cfg.seed,
                              m.env_sampling_steps, models["state"])
    real = {"real/policy_rollout_episodes": len(fresh), "real/policy_rollout_env_steps": data_steps(fresh),
            "real/eval_episodes": len(ev.episodes), "real/eval_env_steps": eval_steps(ev)}
    rec = {"cycle": c, "real_success": ev.success_rate, "wm_success_before_rl": summary["sft_success"],
           "wm_success_after_rl": summary["final_success"],
           "policy_rollouts/real_success": float(fresh.episode_success.float().mean()),
           **{f"wm_on_policy/{k}": v for k, v in on_policy.items()},
           **{f"wm_heldout/{k}": v for k, v in held.items()},
           "data/episodes": len(train), "data/added": len(add),
           "wm/finetune_loss": float(np.mean(ft_loss[-50:])) if ft_loss else float("nan"),
           **interaction(real, before), "time/cycle_s": time.time() - tc}
    return CycleOut(rec, policy, cdir / "vla" / "policy", train)


def run_cycle_zero(run: LoopRun, train: Trajectories, dev, stop: GracefulExit,
                   say) -> tuple[dict, CycleOut | None]:
    """Cycle 0: world model, success head, state model and IDM fitted on the collected ``train`` data (their
    held-out report), the policy SFT-trained in the real simulator and evaluated there. Returns the models and the
    cycle's result (None when ``stop`` was requested before SFT); sets ``run.starts`` and ``run.pool``."""
    cfg, d, m, test = run.cfg, run.cfg.data, run.cfg.models, run.test
    models = fit_models(cfg, train, cfg.seed, say, device=dev)
    run.starts = StartPool.from_sim(d.task, range(d.start_pool), d.image_size, WM_CAMERA, env_kwargs=run.sim_kw)
    idm_err = idm_action_error(models["idm"], test.videos, test.actions)
    rep = world_model_report(models["wm"], test, models["idm"], m.success_threshold, cfg.seed, m.env_sampling_steps,
                             models["state"])
    rep.update(state_predictor_error(models["state"], test))
    say("cycle 0 world model on held-out SANS: " + ", ".join(f"{k} {v:.4f}" for k, v in rep.items()))
    if stop.requested:
        return models, None
    sft_dir = run.out / "sft"
    sft = VLARLTrainer(run.vla_cfg(sft_dir, **{"env.tasks": [d.task], "rl.iterations": 0, "rl.num_videos": 0}),
                       quiet=True)
    sft.train()
    run.pool = EnvPool(run.env_kwargs, cfg.vla.env.video_camera)
    policy = load_policy(sft_dir / "policy").to(run.vla_device)
    ev = run.real_eval(policy)
    sft_evals = list(sft.evals.values())  # the SFT run's own real-sim evaluations (after SFT, final)
    real = {"real/sans_train_episodes": len(train), "real/sans_train_env_steps": data_steps(train),
            "real/sans_heldout_episodes": len(test), "real/sans_heldout_env_steps": data_steps(test),
            "real/start_pool_resets": d.start_pool,  # initial observations only: a reset each, no step
            "real/sft_demo_episodes": int((sft.sft_record or {}).get("demos", 0)),
            "real/sft_demo_env_steps": int((sft.sft_record or {}).get("demo_steps", 0)),
            "real/sft_eval_episodes": sum(int(e["episodes"]) for e in sft_evals),
            "real/sft_eval_env_steps": int(round(sum(e["episodes"] * e["mean_length"] for e in sft_evals))),
            "real/eval_episodes": len(ev.episodes), "real/eval_env_steps": eval_steps(ev)}
    rec = {"cycle": 0, "real_success": ev.success_rate, **{f"wm_heldout/{k}": v for k, v in rep.items()},
           "idm/heldout_mse": idm_err["mse"], "idm/heldout_r2": idm_err["r2"], "data/episodes": len(train),
           **interaction(real, None)}
    return models, CycleOut(rec, policy, sft_dir / "policy", train)


def real_line(rec: dict[str, Any]) -> str:
    """The run's real-simulator interaction so far (:func:`interaction`'s totals in ``rec``)."""
    return (f"real-simulator interaction: {rec['real/train_episodes_total']} training episodes "
            f"({rec['real/train_env_steps_total']} steps: SANS data, SFT demos, the policy's fresh rollouts), "
            f"{rec['real/eval_episodes_total']} evaluation episodes ({rec['real/eval_env_steps_total']} steps)")


def cycle_line(rec: dict[str, Any]) -> str:
    """The console line of cycle ``rec["cycle"]`` (:func:`run_cycle`'s record)."""
    op = {k.removeprefix("wm_on_policy/"): v for k, v in rec.items() if k.startswith("wm_on_policy/")}
    return (f"cycle {rec['cycle']}: WM-imagined success {rec['wm_success_before_rl']:.3f} -> "
            f"{rec['wm_success_after_rl']:.3f}; real-sim success {rec['real_success']:.3f}; on the policy's real "
            f"rollouts: frame MSE {op['frame_mse']:.4f} (copy {op['copy_first_frame_mse']:.4f}), action-following MSE "
            f"{op['action_following_mse']:.4f} (IDM on real {op['idm_on_real_mse']:.4f}), success agreement "
            f"{op['episode_success_agreement']:.3f}; +{rec['data/added']} episodes; held-out frame MSE "
            f"{rec['wm_heldout/frame_mse']:.4f}; {rec['time/cycle_s']:.0f}s")


def _run_cycles(cfg: WorldLoopConfig, out: Path, dev, saved: dict | None, logger: MetricsLogger, stop: GracefulExit,
                say) -> dict[str, Any]:
    """Cycle 0 (data, models, SFT; or the saved state) and cycles ``1..cfg.cycles`` (:func:`run_cycle`), each
    completed one checkpointed (best policy, world model, loop state) and logged; stops at a stage boundary when
    ``stop.requested`` (or a VLA run inside was stopped by the signal)."""
    d, m = cfg.data, cfg.models
    t0 = time.time()
    sim_kw = _sim_kwargs(cfg)
    # (the order of a fresh run's stages is kept: each is seeded, but fit_models seeds torch's global generator)
    train = Trajectories(**saved["train"]) if saved is not None else \
        collect_sans(d.task, d.train, d.horizon, d.image_size, cfg.seed, d.train_seed_offset, d.noise, WM_CAMERA,
                     env_kwargs=sim_kw, near_progress=d.near_progress)
    test = collect_sans(d.task, d.test, d.horizon, d.image_size, cfg.seed + 1, d.test_seed_offset, d.noise, WM_CAMERA,
                        env_kwargs=sim_kw, near_progress=d.near_progress)
    vla_device = cfg.vla.device if cfg.vla.device != "auto" else str(dev)  # the loop's device unless vla sets one
    run = LoopRun(cfg, out, test, vla_device)  # its start pool and env pool follow once the models exist

    if saved is not None:  # the last completed cycle's data, models, policy, history and best record
        run.starts = StartPool.from_sim(d.task, range(d.start_pool), d.image_size, WM_CAMERA, env_kwargs=sim_kw)
        run.pool = EnvPool(run.env_kwargs, cfg.vla.env.video_camera)
        models = empty_models(m, train, dev)
        for name in ("wm", "state", "idm"):
            models[name].load_state_dict(saved[f"model_{name}"])
        history, best, start = list(saved["history"]), saved["best"], int(saved["cycle"]) + 1
        policy_dir = out / saved["policy_dir"]
        policy = load_policy(policy_dir).to(vla_device)
    else:  # cycle 0: fit the world model on the collected data, SFT the policy in the real simulator
        say(f"data: train {train.counts()}, held-out {test.counts()}, {time.time() - t0:.0f}s")
        models, res = run_cycle_zero(run, train, dev, stop, say)
        if res is None:
            return {"history": [], "models": models, "train": train, "test": test, "policy_dir": None,
                    "stopped": stop.requested}
        history, policy, policy_dir = [res.rec], res.policy, res.policy_dir
        best = keep_best_policy(out / "checkpoints", policy, res.rec["real_success"], 0, None)
        _save_loop_state(out, cfg, 0, history, best, policy_dir, models, train)
        logger.log(0, {k: v for k, v in res.rec.items() if k != "cycle"})
        say(f"cycle 0: real-sim success after SFT {res.rec['real_success']:.3f}")
        start = 1

    for c in range(start, cfg.cycles + 1):
        if stop.requested:
            break
        res = run_cycle(run, c, models, train, policy_dir, stop, history[-1])
        if res is None:
            break
        rec, policy, policy_dir, train = res.rec, res.policy, res.policy_dir, res.train
        history.append(rec)
        best = keep_best_policy(out / "checkpoints", policy, rec["real_success"], c, best)
        torch.save({"wm": models["wm"].state_dict(), "state": models["state"].state_dict()},
                   out / f"cycle_{c}" / "world_model.pt")
        _save_loop_state(out, cfg, c, history, best, policy_dir, models, train)
        logger.log(c, {k: v for k, v in rec.items() if k != "cycle" and v is not None})
        say(cycle_line(rec))
    run.pool.close()
    return {"history": history, "models": models, "train": train, "test": test, "policy_dir": str(policy_dir),
            "stopped": stop.requested}


def keep_best_policy(root: Path, policy: TrainablePolicy, value: float, cycle: int, best: dict | None) -> dict | None:
    """Save ``policy`` as ``root/best`` (with ``best.json``) when its real-simulator success beats ``best``; returns
    the record now kept."""
    if not improves(best, value):
        return best
    rec = best_record("real_success", value, cycle)

    def write(d: Path) -> None:
        tmp = d.with_name(f"{d.name}.tmp")
        policy.save_pretrained(tmp)
        (tmp / "best.json").write_text(json.dumps(rec))
        tmp.replace(d)

    publish_best(root, f"best-cycle_{cycle}", write)
    return rec


def run_loop_command(config: str | None, overrides: list[str], dry_run: bool = False,
                     plan: Callable[[WorldLoopConfig], str] | None = None) -> int:
    """``vla-rl loop CONFIG [key=value ...] [--dry-run | --plan]`` (a bad config: one line on stderr, exit 2);
    ``plan(cfg)`` returns the ``--plan`` text (vla_rl.plan.plan_text), printed instead of running."""
    from grpo.config import dump_config

    from .preflight import check_loop_inputs

    def run(cfg: WorldLoopConfig) -> int:
        check_loop_inputs(cfg, writes=not (dry_run or plan))  # before any data, model or file is made
        if plan is not None:
            print(plan(cfg))
            return 0
        if dry_run:
            print(dump_config(cfg))
            return 0
        run_loop(cfg)
        return 0

    return config_command(WorldLoopConfig, config, overrides, False, run)
