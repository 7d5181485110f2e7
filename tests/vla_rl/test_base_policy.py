"""Pretrained base policies: ``sft.base_policy`` (a directory or ``builtin:<name>``) is fine-tuned on the few demos
with its own vocabulary and state normalization; an architecture mismatch is a clear error."""

import pytest
import torch

from grpo.config import load_config
from vla_rl.policy import PolicyConfig, SmallVLA
from vla_rl.tokenizer import WordTokenizer
from vla_rl.trainer import VLARLConfig, VLARLTrainer

from .test_trainer_e2e import TINY


def _policy(**kw) -> SmallVLA:
    cfg = PolicyConfig(image_size=32, ctx_dim=64, state_dim=9, action_dim=4, **kw)
    return SmallVLA(cfg, WordTokenizer.build(["reach the mauve sphere"]))


def test_from_pretrained_takes_runtime_keys_and_refuses_other_architectures(tmp_path):
    torch.manual_seed(0)
    base = _policy()
    base.set_state_normalization(torch.arange(9.0), torch.full((9,), 2.0))
    base.save_pretrained(tmp_path / "base")
    run_cfg = PolicyConfig(image_size=32, ctx_dim=64, state_dim=9, action_dim=4, n_action_steps=2)
    run_cfg.flow.eta = 0.3
    p = SmallVLA.from_pretrained(tmp_path / "base", run_cfg)
    assert p.cfg.flow.eta == 0.3 and p.cfg.n_action_steps == 2  # the run's sampling settings
    assert p.tokenizer.vocab == base.tokenizer.vocab and "mauve" in p.tokenizer.vocab  # the base's vocabulary
    for k, v in base.state_dict().items():
        assert torch.equal(p.state_dict()[k], v), k
    with pytest.raises(ValueError, match=r"image_size: 32 != 64"):
        SmallVLA.from_pretrained(tmp_path / "base", PolicyConfig(image_size=64, ctx_dim=64, state_dim=9, action_dim=4))
    with pytest.raises(FileNotFoundError, match="no SmallVLA at"):
        SmallVLA.from_pretrained(tmp_path / "nothing")
    with pytest.raises(FileNotFoundError, match=r"no built-in weights named 'nope'; shipped: \["):
        SmallVLA.from_pretrained("builtin:nope")


def test_sft_fine_tunes_a_base_keeping_its_vocabulary_and_normalization(tmp_path):
    cfg = load_config(VLARLConfig, "configs/vla/tabletop_reach.yaml",
                      TINY + [f"output_dir={tmp_path / 'a'}", "rl.iterations=0"])
    first = VLARLTrainer(cfg, quiet=True).train()["policy"]
    first.tokenizer = WordTokenizer(first.tokenizer.vocab + ["zebra"])  # a base with a word the run never sees
    first.text_embed = torch.nn.Embedding(len(first.tokenizer), first.cfg.text_dim, padding_idx=0)
    first.save_pretrained(tmp_path / "base")
    over = TINY + [f"output_dir={tmp_path / 'b'}", "rl.iterations=1", f"sft.base_policy={tmp_path / 'base'}"]
    t = VLARLTrainer(load_config(VLARLConfig, "configs/vla/tabletop_reach.yaml", over), quiet=True)
    assert t.policy.tokenizer.vocab[-1] == "zebra"
    w0 = {k: v.clone() for k, v in t.policy.state_dict().items()}
    res = t.train()
    assert res["iterations"] == 1 and t.sft_record["demos"] == 1
    assert torch.equal(t.policy.state_mean, w0["state_mean"]) and torch.equal(t.policy.state_std, w0["state_std"])
    assert not torch.equal(t.policy.state_dict()["fuse.0.weight"], w0["fuse.0.weight"])  # fine-tuned
    bad = over + ["policy.image_size=64"]
    with pytest.raises(ValueError, match="different architecture"):
        VLARLTrainer(load_config(VLARLConfig, "configs/vla/tabletop_reach.yaml", bad), quiet=True)
    with pytest.raises(ValueError, match="exclude each other"):
        load_config(VLARLConfig, "configs/vla/tabletop_reach.yaml", over + [f"sft.init_policy={tmp_path / 'base'}"])


def test_recipe_fine_tunes_the_shipped_base_to_a_modest_start(tmp_path):
    """configs/vla/tabletop_reach_one.yaml as shipped, SFT stage only: the built-in base (never trained on reach_one)
    fine-tuned on 5 reach_one demos lands in the issue's "modest" band on 64 held-out states (measured 0.33; the
    same 5 demos from scratch give 0.125, and GRPO + SRPO then reaches 0.94 in 200 iterations, see the config)."""
    cfg = load_config(VLARLConfig, "configs/vla/tabletop_reach_one.yaml", [f"output_dir={tmp_path}", "rl.iterations=0",
                                                                             "rl.num_videos=0"])
    assert cfg.sft.base_policy == "builtin:tabletop_base" and cfg.sft.demos_per_task == 5
    t = VLARLTrainer(cfg, quiet=True)
    t.run_sft()
    res = t.run_eval("sft", 0, videos=False)
    assert len(res.episodes) == 64 and 0.2 <= res.success_rate <= 0.6, res.success_rate
