"""EVA alignment: the world model RL-trained through the diffusion frontend (diffusion_rl.align_world_model) with the
executability reward of world_models.eva_alignment."""

import torch

from diffusion_rl.align_world_model import align_world_model
from rewards.eva import EmbodimentLimits, EVAConfig
from tests.world_models.test_encoders_idm_eva import moving_square_videos
from world_models.eva_alignment import ConditionTable, alignment_report, calibrate_on_pretrained
from world_models.idm import IDMConfig, InverseDynamicsModel, train_idm
from world_models.video_wm import VideoWorldModel, WorldModelConfig, train_world_model, window_dataset


def test_eva_alignment_through_diffusion_trainer(tmp_path):
    torch.manual_seed(0)
    v, a = moving_square_videos(32, 6, seed=4)
    succ = torch.zeros(32, 6)
    cfg = WorldModelConfig(image_size=32, chunk=2, context_frames=2, action_dim=2, sampling_steps=4)
    wm = VideoWorldModel(cfg)
    data = window_dataset(v, a, succ, cfg)
    train_world_model(wm, data, steps=60, batch=24, lr=2e-3)
    idm = InverseDynamicsModel(IDMConfig(action_dim=2, channels=(16, 32, 32), hidden=64, image_size=32))
    train_idm(idm, v, a, steps=120, batch=32, lr=2e-3)
    table = ConditionTable(data.context[:8], data.actions[:8], data.future[:8])
    eva = calibrate_on_pretrained(wm, idm, table, EVAConfig(dt=1.0, limits=EmbodimentLimits(v_max=1.0)))
    assert eva.p0 > 1.0
    # a state-aware world model (the loop's) is calibrated and judged on its frames alone: same frames, same P0
    ws = VideoWorldModel(WorldModelConfig(**{**cfg.__dict__, "state_dim": 3}))
    missing, unexpected = ws.load_state_dict({k: t for k, t in wm.state_dict().items()
                                              if not k.startswith("success_head.")}, strict=False)
    assert not unexpected and missing and all(k.startswith("success_head.") for k in missing)
    assert calibrate_on_pretrained(ws, idm, table, EVAConfig(dt=1.0, limits=EmbodimentLimits(v_max=1.0))).p0 == eva.p0
    assert alignment_report(ws, idm, table, eva) == alignment_report(wm, idm, table, eva)
    w0 = {k: p.detach().clone() for k, p in wm.transformer.named_parameters()}
    res = align_world_model(wm, idm, table, eva, str(tmp_path), ["train.iterations=3", "train.prompts_per_iter=2",
                                                                  "grpo.group_size=4", "train.lr=1e-3"])
    assert set(res) >= {"eval_before", "eval_after"} and torch.isfinite(torch.tensor(res["eval_after"]))
    lora = [k for k, p in wm.transformer.named_parameters() if "lora_B" in k]
    assert lora and any(not torch.equal(p, torch.zeros_like(p)) for k, p in wm.transformer.named_parameters()
                        if "lora_B" in k)
    base = {k.replace(".base_layer", ""): p for k, p in wm.transformer.named_parameters() if "lora" not in k}
    assert base.keys() == w0.keys() and all(torch.equal(base[k], w0[k]) for k in w0)  # only the LoRA trained
    # the alignment defaults keep a KL to the LoRA-disabled reference (grpo.kl_coef 0.03): it is measured, and
    # nonzero once the LoRA has moved
    import json

    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    kls = [r["loss/kl"] for r in rows if "loss/kl" in r]
    assert len(kls) == 3 and kls[0] == 0.0 and max(kls) > 0.0, kls
