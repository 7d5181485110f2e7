"""Why the progress encoder's Spearman is low (docs/RESULTS.md#a-progress-encoder-for-srpo): does it order the expert's
episodes of a task it never saw, and the policy's failures there, against the progress to the named ball and to the
nearest one?

    python bench/diag_progress_failures.py ENCODER.safetensors [--states 2000000]

ENCODER: a file from ``bench/bench_progress.py`` trained without reach / reach_one (``progress_seed0_without_reach
.safetensors`` under its ``--out``). Validation states by default (``bench_progress.SPLITS["val"]``)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402


def main(argv=None) -> int:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    p = ArgumentParser(prog="diag_progress_failures.py", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("encoder", help="a progress encoder .safetensors file")
    p.add_argument("--states", type=int, default=2_000_000, help="first initial state (validation by default)")
    p.add_argument("--groups", type=int, default=6, help="reach groups of 6 policy episodes")
    a = p.parse_args(argv)
    if not (Path(a.encoder).is_file() and a.states >= 0 and a.groups >= 1):  # (was: a traceback after the imports)
        p.error(f"encoder {a.encoder!r} (expected an existing .safetensors file), --states {a.states} (>= 0), "
                f"--groups {a.groups} (>= 1)")
    from scipy.stats import spearmanr

    import vla_rl
    from vla_rl.policy import SmallVLA, policy_config_from_dict
    from vla_rl.rollout import EnvPool, EpisodeSpec, run_episodes
    from world_models.progress_encoder import load_progress_encoder, record_expert_episodes, time_to_go

    torch.set_num_threads(1)
    enc = load_progress_encoder(a.encoder, "encoder")
    meta = json.loads((Path(vla_rl.__file__).parent / "assets/tabletop_base/config.json").read_text())["policy"]
    meta["flow"]["eta"] = 0.7
    pol = SmallVLA.from_pretrained("builtin:tabletop_base", policy_config_from_dict(meta)).eval()
    for t in ("reach_one", "reach"):
        cs = []
        for f, s in record_expert_episodes(f"tabletop/{t}", 10, a.states, max_steps=40):
            with torch.no_grad():
                r = enc.encode_frames(torch.as_tensor(f).permute(0, 3, 1, 2)[None])[0, :, 0].numpy()
            cs.append(spearmanr(r, time_to_go(s)).statistic)
        print(f"expert {t}: per-episode Spearman(output, time to go) mean {np.nanmean(cs):.2f}, min "
              f"{np.nanmin(cs):.2f}")
    pool = EnvPool({"image_size": 32, "cameras": ["agentview", "wrist"]}, "agentview")
    specs = [EpisodeSpec("tabletop/reach", a.states + g, g, g * 16 + k) for g in range(a.groups) for k in range(6)]
    batch = run_episodes(pol, pool, specs, 40, stochastic=True, noise_key=(0, 0))
    envs = pool.get("tabletop/reach", len(specs))  # the envs the episodes ran in, still at their last state
    named, nearest, out, fail = [], [], [], []
    for e, env in zip(batch.episodes, envs):
        u = getattr(env, "unwrapped", env)
        lay, g = u.layout, u.grip_pos()
        nearest.append(max(max(0.0, 1 - math.dist(g, u.target_pos(j)) / math.dist(lay.hand, lay.objects[j]))
                           for j in range(len(lay.objects))))
        named.append(e.progress)
        fail.append(not e.success)
        with torch.no_grad():
            out.append(float(enc.encode_frames(torch.as_tensor(e.frames[-1]).permute(2, 0, 1)[None, None])[0, 0, 0]))
    f, r = np.array(fail), -np.array(out)
    print(f"reach failures ({int(f.sum())}): Spearman(-output of the last frame, progress to the named ball) "
          f"{spearmanr(r[f], np.array(named)[f]).statistic:.2f}; to the nearest ball "
          f"{spearmanr(r[f], np.array(nearest)[f]).statistic:.2f}")
    pool.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
