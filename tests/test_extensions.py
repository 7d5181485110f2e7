"""Extension points without forking: a small external package built in a temporary directory (on PYTHONPATH in a
subprocess, like a user's own code) provides a diffusion model adapter, a reward, a sims task, a VLA policy and an
SRPO encoder; each is named by an import path in the config, checked when the config loads, and trained through for
one iteration end to end by the real CLIs. A class that lacks part of its protocol is one clear error at start
(exit 2)."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PKG = {
    "__init__.py": "",
    "mark.py": """
        import os

        def mark(what):  # the test reads which extension point ran
            with open(os.environ["MY_EXT_MARKS"], "a") as f:
                f.write(what + "\\n")
        """,
    "models.py": """
        from diffusion_rl.adapters import SD3Adapter
        from .mark import mark

        class DampedSD3(SD3Adapter):
            \"\"\"A user's adapter: the built-in SD3 wrapper with a damped velocity (a stand-in for one's own model).\"\"\"

            def __init__(self, pipe, cfg):
                super().__init__(pipe, cfg)
                mark("adapter")

            def velocity(self, latents, sigma, cond):
                return 0.9 * super().velocity(latents, sigma, cond)

        class Broken:
            \"\"\"Lacks most of the protocol.\"\"\"

            def encode_prompts(self, prompts):
                return {}
        """,  # noqa: E501  (a plugin file's source, kept as written)
    "rewards.py": """
        import types
        from .mark import mark

        def redness(batch):
            mark("reward")
            im = batch.images
            return types.SimpleNamespace(total=im[:, 0].mean((1, 2)) - im[:, 1:].mean((1, 2, 3)), components={})

        not_callable = 3
        """,
    "tasks.py": """
        import sims
        from sims.tabletop.env import TabletopEnv
        from .mark import mark

        def far_reach(**kw):
            mark("task")
            return TabletopEnv("reach", **kw)

        sims.register("mine/far_reach", far_reach)
        """,
    "policies.py": """
        from vla_rl.policy import SmallVLA

        class MyPolicy(SmallVLA):
            \"\"\"A user's policy: the built-in one, subclassed.\"\"\"

        class NoLogProb:
            def sample_chunk(self, batch, stochastic=True, generator=None):
                return None
        """,
    "encoders.py": """
        import torch
        from .mark import mark

        class MeanColour(torch.nn.Module):
            \"\"\"A user's SRPO encoder: each frame's mean colour.\"\"\"

            def __init__(self, path):
                super().__init__()
                mark(f"encoder_built:{path}")

            @torch.no_grad()
            def encode_frames(self, video):
                mark("encoder")
                return video.float().mean(dim=(3, 4))

        class NoFrames(torch.nn.Module):
            def __init__(self, path):
                super().__init__()
        """,
}


@pytest.fixture(scope="module")
def ext(tmp_path_factory):
    root = tmp_path_factory.mktemp("ext")
    pkg = root / "my_ext"
    pkg.mkdir()
    for name, src in PKG.items():
        (pkg / name).write_text(textwrap.dedent(src))
    return root


def run(ext, tmp_path, *args):
    marks = tmp_path / "marks.txt"
    env = {**os.environ, "PYTHONPATH": f"{ext}{os.pathsep}{ROOT}", "MY_EXT_MARKS": str(marks),
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    return res, (set(marks.read_text().split()) if marks.exists() else set())


def test_diffusion_adapter_and_reward_from_a_user_package(ext, tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(textwrap.dedent(f"""
        output_dir: {tmp_path / 'run'}
        model: {{kind: sd3, height: 16, width: 16, lora: {{rank: 4, alpha: 8}}, tiny: {{with_vae: false}},
                 adapter: "my_ext.models:DampedSD3"}}
        sampler: {{num_steps: 4, eta: 1.0}}
        grpo: {{group_size: 4}}
        train: {{iterations: 1, prompts_per_iter: 2, eval_steps: 4, log_images: false}}
        reward: {{name: "my_ext.rewards:redness"}}
        prompts: {{source: list, prompts: [a red circle, a blue square], num_eval: 2}}
        """))
    res, marks = run(ext, tmp_path, "diffusion_rl.cli", "train", str(cfg))
    assert res.returncode == 0, res.stderr[-3000:]
    assert marks == {"adapter", "reward"}
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    it = [r for r in rows if "reward/mean" in r]
    assert len(it) == 1 and it[0]["cost/backward"] > 0 and it[0]["onpolicy/max_abs_dlogp"] == 0.0

    for over, expect in (("model.adapter=my_ext.models:Broken",
                          "model.adapter='my_ext.models:Broken': Broken lacks velocity"),
                         ("reward.name=my_ext.rewards:not_callable", "lacks __call__"),
                         ("reward.name=my_ext.nope:score", "cannot import module 'my_ext.nope'"),
                         ("model.adapter=my_ext.models", "expected 'package.module:Name'")):
        res, _ = run(ext, tmp_path, "diffusion_rl.cli", "train", str(cfg), over, f"output_dir={tmp_path / 'bad'}")
        assert res.returncode == 2 and expect in res.stderr and "Traceback" not in res.stderr, (over, res.stderr)
        assert not (tmp_path / "bad").exists()


def test_sims_task_from_a_user_package(ext, tmp_path):
    from .vla_rl.test_trainer_e2e import TINY

    out = tmp_path / "vla"
    res, marks = run(ext, tmp_path, "vla_rl.cli", "train", "configs/vla/tabletop_reach.yaml", *TINY,
                     f"output_dir={out}", "rl.iterations=1", "rl.reward=binary", "rl.num_videos=0",
                     "env.plugins=[my_ext.tasks]", "env.tasks=[mine/far_reach]")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "task" in marks
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("rollout/success_rate" in r for r in rows)
    res, _ = run(ext, tmp_path, "vla_rl.cli", "train", "configs/vla/tabletop_reach.yaml",
                 f"output_dir={tmp_path / 'b'}",
                 "env.plugins=[my_ext.tasks]", "env.tasks=[mine/other]")
    assert res.returncode == 2 and "env.tasks: ['mine/other'] not registered" in res.stderr, res.stderr
    assert not (tmp_path / "b").exists()


def test_policy_class_from_a_user_package(ext, monkeypatch):
    """policy.kind's import-path hook (grpo.plugins.resolve_policy_class), which the policy factory calls first."""
    from grpo.plugins import resolve_policy_class

    monkeypatch.syspath_prepend(str(ext))
    cls = resolve_policy_class("my_ext.policies:MyPolicy")
    from vla_rl.policy import SmallVLA

    assert issubclass(cls, SmallVLA) and resolve_policy_class("builtin") is None
    with pytest.raises(ValueError, match="NoLogProb lacks chunk_log_prob .*forward .*save_pretrained"):
        resolve_policy_class("my_ext.policies:NoLogProb")


def test_policy_kind_import_path_trains_and_evaluates(ext, tmp_path):
    """policy.kind: my_ext.policies:MyPolicy through vla-rl train (SFT + one RL iteration) and vla-rl eval; a class
    that lacks the protocol stops the run at load with one line, exit 2, nothing written."""
    from .vla_rl.test_trainer_e2e import TINY

    out = tmp_path / "vla"
    res, _ = run(ext, tmp_path, "vla_rl.cli", "train", "configs/vla/tabletop_reach.yaml", *TINY, f"output_dir={out}",
                 "rl.iterations=1", "rl.reward=binary", "rl.num_videos=0", "policy.kind=my_ext.policies:MyPolicy")
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("rollout/success_rate" in r for r in rows)
    res, _ = run(ext, tmp_path, "vla_rl.cli", "eval", str(out), "--episodes", "1")
    assert res.returncode == 0 and '"success_rate"' in res.stdout, res.stderr[-3000:]
    res, _ = run(ext, tmp_path, "vla_rl.cli", "train", "configs/vla/tabletop_reach.yaml",
                 f"output_dir={tmp_path / 'b'}",
                 "policy.kind=my_ext.policies:NoLogProb")
    assert res.returncode == 2 and "NoLogProb lacks chunk_log_prob" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "b").exists()


def test_srpo_encoder_from_a_user_package(ext, tmp_path):
    """srpo.encoder: my_ext.encoders:MeanColour through vla-rl train: built with srpo.encoder_path, its encode_frames
    embeds the episodes of SRPO's reward; a class without encode_frames stops the run at load (exit 2, one line)."""
    from .vla_rl.test_trainer_e2e import TINY

    out = tmp_path / "vla"
    res, marks = run(ext, tmp_path, "vla_rl.cli", "train", "configs/vla/tabletop_reach.yaml", *TINY,
                     f"output_dir={out}", "rl.iterations=1", "rl.reward=srpo", "rl.num_videos=0",
                     "srpo.encoder=my_ext.encoders:MeanColour", "srpo.encoder_path=/w/enc.pt")
    assert res.returncode == 0, res.stderr[-3000:]
    assert {"encoder_built:/w/enc.pt", "encoder"} <= marks
    res, _ = run(ext, tmp_path, "vla_rl.cli", "train", "configs/vla/tabletop_reach.yaml",
                 f"output_dir={tmp_path / 'b'}", "srpo.encoder=my_ext.encoders:NoFrames")
    assert res.returncode == 2 and "NoFrames lacks encode_frames" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "b").exists()
