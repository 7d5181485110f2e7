"""Benchmark of ``world_models`` on the World-VLA-Loop demo task (``tabletop/reach_one``, 32x32): issue 7's numbers.

    python bench/bench_world_models.py                           # the make demo-wm loop + the rest, ~11 min, 2 cores
    python bench/bench_world_models.py --config configs/world_models/loop_reach.yaml --cycles 2   # the 3-ball reach

1. data: a SANS-style mix (successes / near-successes / failures / random) from sims' scripted expert, and a
   held-out mix from disjoint initial states;
2. IDM: held-out action MSE / MAE / R^2 (and R^2 of the motion dims dx, dy, dz);
3. encoder: the built-in video encoder's held-out time-contrastive loss before/after self-supervised training;
4. world model: open-loop frame MSE vs the simulator under the same actions over the whole horizon and the
   first chunk, vs the copy-first-frame baseline; success agreement (per frame, balanced, per episode);
5. World-VLA-Loop (``vla_rl.wm_loop.run_loop``, the config's cycles): per cycle real-sim success, WM-imagined
   success, the world model's action-following error on the policy's fresh real rollouts, reward agreement;
6. rollouts of the final policy inside the world model, batched (``WorldModelEnv.step_batch``) vs one env at a
   time, side by side;
7. EVA alignment (flat GRPO through ``diffusion_rl``): EVA reward, IDM-decoded action smoothness and frame
   MSE vs the simulator, before/after, on a copy of the loop's final world model.

Measured (2 CPU cores shared with one other job, 639 s): IDM held-out R^2 0.406 (dx 0.89, dy 0.43, dz 0.24,
gripper -0.13); TCN InfoNCE 4.857 -> 1.938; world model before the loop: open-loop frame MSE 0.0073 vs copy 0.0115,
success balanced accuracy 0.995, episode agreement 1.0, state model MSE 0.00004 (copy 0.0115); loop real-sim
success 0.297 -> 0.234 -> 0.438 -> 0.594 -> 0.688 (held-out frame MSE 0.0073 -> 0.0066, on-policy episode success
agreement 0.63-0.94); rollouts inside the world model (16 groups x 8 episodes) batched 697 env steps/s vs 230 one
at a time (3.0x, same success 0.453); EVA alignment (40 iterations, 48 s): EVA reward 0.962 -> 0.996, median
penalty 2.37 -> 2.22, IDM-decoded |acc| 0.316 -> 0.310 and |jerk| 0.569 -> 0.558 (smoother), frame MSE vs the
simulator 0.0034 -> 0.0034 (not worse).
"""

from __future__ import annotations

import copy
import os
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from grpo.config import load_config  # noqa: E402
from vla_rl.wm_loop import WorldLoopConfig, run_loop  # noqa: E402

CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "configs/world_models/loop_reach_one.yaml")


def fmt(d: dict, keys=None) -> str:
    keys = keys or list(d)
    return ", ".join(f"{k} {d[k]:.4f}" if isinstance(d[k], float) else f"{k} {d[k]}" for k in keys if k in d)


def _bench_wm_rollouts(cfg, policy_dir: str, groups: int = 16) -> None:
    """Rollouts of the final policy inside the world model (the loop's last ``wm/<task>`` env), batched (one
    world-model call per chunk for all envs: ``WorldModelEnv.step_batch``) vs one env at a time, side by side."""
    from vla_rl.policy import SmallVLA
    from vla_rl.rollout import EnvPool, EpisodeSpec, run_episodes

    policy = SmallVLA.from_pretrained(policy_dir)
    name = "wm/" + cfg.data.task.split("/", 1)[-1]
    g = cfg.vla.grpo.group_size
    specs = [EpisodeSpec(name, init_seed=i, group_id=i, seed=j) for i in range(groups) for j in range(g)]
    pool = EnvPool(dict(cfg.vla.env.kwargs, image_size=cfg.data.image_size), cfg.vla.env.video_camera)
    out = {}
    for batched in (True, False):
        t = time.time()
        r = run_episodes(policy, pool, specs, cfg.vla.env.max_episode_steps, noise_key=(0, 0), batch_envs=batched)
        out[batched] = (time.time() - t, r.env_steps, float(r.success.float().mean()))
    (tb, nb, sb), (tu, nu, su) = out[True], out[False]
    print(f"== rollouts inside the world model ({groups} groups x {g} episodes, final policy): batched {tb:.1f}s "
          f"({nb / tb:.0f} env steps/s, success {sb:.3f}) vs one env at a time {tu:.1f}s ({nu / tu:.0f} env steps/s, "
          f"success {su:.3f}): {tu / tb:.1f}x faster")


def main() -> None:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=CONFIG, help="a vla-rl loop config (default: the make demo-wm loop)")
    p.add_argument("--cycles", type=int, default=None, help="default: the config's")
    p.add_argument("--rl-iterations", type=int, default=None, help="default: the config's")
    p.add_argument("--wm-steps", type=int, default=None, help="default: the config's models.wm_steps")
    p.add_argument("--encoder-steps", type=int, default=200)
    p.add_argument("--align-iterations", type=int, default=40)
    p.add_argument("--output-dir", default=None)
    args = p.parse_args()
    from grpo.config import ConfigError

    try:  # the config and the flags as overrides, before any folder is made (was: a traceback after mkdtemp)
        load_config(WorldLoopConfig, args.config, ["output_dir=unused"] + [
            f"{k}={v}" for k, v in (("cycles", args.cycles), ("rl_iterations", args.rl_iterations),
                                    ("models.wm_steps", args.wm_steps)) if v is not None])
    except ConfigError as e:
        p.error(str(e))
    if min(args.encoder_steps, args.align_iterations) < 1:
        p.error(f"--encoder-steps {args.encoder_steps} / --align-iterations {args.align_iterations}: expected >= 1")
    if args.cycles is not None and args.cycles < 1:  # (was: the data and the world model, then a traceback: the
        p.error(f"--cycles {args.cycles}: expected >= 1 (the bench measures the world model's env, built in a cycle)")
    from grpo.preflight import check_not_inside_a_run, check_writable_dir

    if args.output_dir:  # (was: the loop written into another run's folder)
        try:
            check_writable_dir(args.output_dir, "--output-dir")
            check_not_inside_a_run(f"{args.output_dir}/loop", "--output-dir")
        except ValueError as e:
            p.error(str(e))
    # 1 unless set: 2 threads on 2 shared cores ran ~25x slower
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    out = args.output_dir or tempfile.mkdtemp(prefix="bench_wm_")
    t0 = time.time()
    over = [f"output_dir={out}/loop"] + [f"{k}={v}"
                                         for k, v in (("cycles", args.cycles), ("rl_iterations", args.rl_iterations),
                                                                  ("models.wm_steps", args.wm_steps)) if v is not None]
    cfg = load_config(WorldLoopConfig, args.config, over)
    res = run_loop(cfg, quiet=True)
    hist, models, train, test = res["history"], res["models"], res["train"], res["test"]
    h0 = hist[0]
    print(f"== data ({cfg.data.task}, {cfg.data.image_size}px, horizon {cfg.data.horizon}): initial train "
          f"{h0['data/episodes']} episodes, held-out {test.counts()}")
    from world_models.idm import idm_action_error

    idm = models["idm"]
    e = idm_action_error(idm, test.videos, test.actions)
    with torch.no_grad():
        pred = idm.decode_video(test.videos)
    tgt = test.actions
    r2 = [1 - float(((pred - tgt)[..., d] ** 2).mean()) / max(float(tgt[..., d].var()), 1e-12)
          for d in range(tgt.shape[-1])]
    print(f"== IDM (held-out): action MSE {e['mse']:.4f}, MAE {e['mae']:.4f}, R^2 {e['r2']:.3f}; R^2 per dim "
          f"(dx, dy, dz, gripper) {', '.join(f'{x:.2f}' for x in r2)}")

    from world_models.encoders import SmallEncoderConfig, SmallVideoEncoder, time_contrastive_loss, train_small_encoder

    torch.manual_seed(0)
    enc = SmallVideoEncoder(SmallEncoderConfig(dim=32, channels=(16, 32, 32), image_size=32))
    with torch.no_grad():
        before = float(time_contrastive_loss(enc.encode_frames(test.videos[:, :8]), enc.cfg.temperature))
    train_small_encoder(enc, train.videos, steps=args.encoder_steps, batch=8, frames=8)
    with torch.no_grad():
        after = float(time_contrastive_loss(enc.encode_frames(test.videos[:, :8]), enc.cfg.temperature))
    print(f"== encoder (built-in, TCN, {args.encoder_steps} steps): held-out InfoNCE {before:.3f} -> {after:.3f}")

    keys = ["frame_mse", "copy_first_frame_mse", "one_chunk_frame_mse", "one_chunk_copy_mse", "success_agreement",
            "success_balanced_acc", "episode_success_agreement", "action_following_mse", "idm_on_real_mse",
            "action_var"]
    print("== world model, held-out, before the loop: "
          + fmt({k[11:]: v for k, v in h0.items() if k.startswith("wm_heldout/")}, keys)
          + f", state model MSE {h0['wm_heldout/state_mse']:.5f} (copy {h0['wm_heldout/state_copy_mse']:.5f})")
    print(f"== World-VLA-Loop ({cfg.cycles} cycles x {cfg.rl_iterations} GRPO iterations in the world model)")
    print("cycle | real-sim success | WM success before->after RL | on-policy frame MSE (copy) | on-policy "
          "action-following MSE (IDM on real) | on-policy success agreement (episode) | held-out frame MSE | +episodes")
    for h in hist:
        if h["cycle"] == 0:
            print(f"    0 | {h['real_success']:.3f} (SFT)    |                             "
                  "|                            |                                    "
                  f"|                                       | {h['wm_heldout/frame_mse']:.4f}             |")
            continue
        print(f"{h['cycle']:5d} | {h['real_success']:.3f}            | {h['wm_success_before_rl']:.3f} -> "
              f"{h['wm_success_after_rl']:.3f}              | {h['wm_on_policy/frame_mse']:.4f} "
              f"({h['wm_on_policy/copy_first_frame_mse']:.4f})          | {h['wm_on_policy/action_following_mse']:.4f} "
              f"({h['wm_on_policy/idm_on_real_mse']:.4f})                  | {h['wm_on_policy/success_agreement']:.3f} "
              f"({h['wm_on_policy/episode_success_agreement']:.3f})                         | "
              f"{h['wm_heldout/frame_mse']:.4f}             | {h['data/added']}")

    _bench_wm_rollouts(cfg, res["policy_dir"])

    from diffusion_rl.align_world_model import align_world_model
    from rewards.eva import EmbodimentLimits, EVAConfig
    from world_models.eva_alignment import ConditionTable, alignment_report, calibrate_on_pretrained
    from world_models.windows import wm_windows

    wm = copy.deepcopy(models["wm"])
    c = wm.cfg
    w = wm_windows(test, c.context_frames, c.chunk, stride=4)
    ctx, act, fut = w.context, w.actions, w.future
    g = torch.Generator().manual_seed(0)
    pick = torch.randperm(ctx.shape[0], generator=g)[:16]
    table = ConditionTable(ctx[pick], act[pick], fut[pick])
    eva = calibrate_on_pretrained(wm, idm, table, EVAConfig(dt=1.0, w_jerk=0.5, limits=EmbodimentLimits(v_max=1.0)))
    rep0 = alignment_report(wm, idm, table, eva)
    ta = time.time()
    summary = align_world_model(wm, idm, table, eva, f"{out}/eva", [
        # eta 0.3, KL 0.03
        f"train.iterations={args.align_iterations}", "train.prompts_per_iter=4", "grpo.group_size=8"])
    rep1 = alignment_report(wm, idm, table, eva)
    print(f"== EVA alignment (flat GRPO, {args.align_iterations} iterations, P0 {eva.p0:.3f}, "
          f"{time.time() - ta:.0f}s): trainer eval reward {summary['eval_before']:.3f} -> {summary['eval_after']:.3f}")
    for k in rep0:
        print(f"   {k:20s} {rep0[k]:.4f} -> {rep1[k]:.4f}")
    print(f"total {time.time() - t0:.0f}s; outputs in {out}")


if __name__ == "__main__":
    main()
