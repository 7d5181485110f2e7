"""Per-call cost of the two policies at the CPU recipe's sizes: a rollout's sample_chunk on 128 observations and the
update's chunk_log_prob + backward on a 128-row minibatch (the recipe's minibatch), median of 5 after 1 warm-up.

    OMP_NUM_THREADS=1 .venv-lerobot/bin/python docs/lerobot_policy_cost.py      (numbers: docs/LEROBOT.md)
    OMP_NUM_THREADS=1 .venv-lerobot-pi/bin/python docs/lerobot_policy_cost.py pi0 pi05   (the toy pi0 / pi0.5 of
        tests/lerobot/pi: tiny_vlm / tiny_expert, the same cameras, chunk and flow steps)"""
import copy
import statistics
import sys
import tempfile
import time

import torch

from grpo.config import load_config
from vla_rl.config import VLARLConfig
from vla_rl.policies import make_policy

torch.set_num_threads(1)
cfg = load_config(VLARLConfig, "configs/vla/smolvla_reach_one_cpu.yaml", [])
PI = {"paligemma_variant": "tiny_vlm", "action_expert_variant": "tiny_expert", "image_resolution": [32, 32],
      "max_action_dim": 4}
for kind in sys.argv[1:] or ("builtin", "lerobot"):
    p = copy.deepcopy(cfg.policy)
    p.state_dim, p.action_dim = 9, 4  # tabletop/reach_one
    if kind == "builtin":
        p.kind, p.type, p.lerobot = "builtin", "", {}
    if kind == "pi0":
        p.type, p.lerobot = "pi0", {**PI, "max_state_dim": 9, "tokenizer_max_length": 16}
    if kind == "pi05":
        p.type, p.lerobot = "pi05", {**PI, "tokenizer_max_length": 48}  # 32 state bins in the prompt
    pol = make_policy(p, ["touch the red ball"], workdir=tempfile.mkdtemp())
    b = {"observation.state": torch.randn(128, 9), "task": ["touch the red ball"] * 128,
         **{f"observation.images.{c}": torch.randint(0, 255, (128, 32, 32, 3), dtype=torch.uint8) for c in p.cameras}}
    n = sum(x.numel() for x in pol.parameters())
    ts, tl = [], []
    for i in range(6):
        t0 = time.perf_counter()
        s = pol.sample_chunk(b, generator=torch.Generator().manual_seed(i))
        t1 = time.perf_counter()
        lp = pol.chunk_log_prob(b, s.record)
        lp.logp.sum().backward()
        t2 = time.perf_counter()
        if i:
            ts.append(t1 - t0)
            tl.append(t2 - t1)
    print(f"{kind}: {n/1e6:.3f} M params, sample_chunk(128) {statistics.median(ts)*1000:.0f} ms, "
          f"chunk_log_prob+backward(128) {statistics.median(tl)*1000:.0f} ms", flush=True)
