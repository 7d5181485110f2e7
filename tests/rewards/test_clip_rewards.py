"""CLIP score, PickScore, HPSv2.1 (open_clip conversion) and aesthetic, run through their real loading and
scoring code with tiny random weights saved to a tmp dir in code."""

import math

import pytest
import torch
import torch.nn.functional as F

from rewards import RewardBatch, build_reward
from rewards.clip_backbone import clip_preprocess
from rewards.open_clip_convert import clip_config_from_open_clip, hf_to_open_clip, open_clip_to_hf

from .tiny_clip import (
    MEAN,
    STD,
    make_clip_dir,
    make_tokenizer_dir,
    open_clip_state_dict,
    reference_encode_image,
    reference_encode_text,
)

PROMPTS = ["a red circle", "a blue square left of a red circle", "a red circle"]


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory):
    return make_clip_dir(tmp_path_factory.mktemp("clip"))


@pytest.fixture(scope="module")
def images():
    return torch.rand(3, 3, 40, 56, generator=torch.Generator().manual_seed(0))


def _hf_reference(model_dir, images, prompts):
    """Scores through CLIPModel.forward (logits_per_image) on our preprocessing: the formula check."""
    from transformers import AutoTokenizer, CLIPModel

    model = CLIPModel.from_pretrained(str(model_dir), local_files_only=True).eval()
    tok = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    ids = tok(prompts, padding=True, truncation=True, max_length=16, return_tensors="pt")
    with torch.no_grad():
        out = model(input_ids=ids["input_ids"], attention_mask=ids["attention_mask"],
                    pixel_values=clip_preprocess(images, 32, MEAN, STD))
    return out.logits_per_image.diagonal(), float(model.logit_scale.detach().exp())


def test_preprocess_matches_center_crop_and_normalization():
    x = torch.rand(2, 3, 32, 48)
    y = clip_preprocess(x, 32, MEAN, STD)  # no resize needed (short side 32): a pure center crop
    m, s = torch.tensor(MEAN).view(1, 3, 1, 1), torch.tensor(STD).view(1, 3, 1, 1)
    torch.testing.assert_close(y, (x[:, :, :, 8:40] - m) / s)
    z = clip_preprocess(torch.full((1, 3, 100, 60), 0.5), 32)
    assert z.shape == (1, 3, 32, 32) and torch.allclose(z[0, 0], z[0, 0, 0, 0].expand(32, 32), atol=1e-5)


def test_pickscore_and_clip_score_match_clipmodel_forward(clip_dir, images):
    logits, scale = _hf_reference(clip_dir, images, PROMPTS)
    ps = build_reward("pickscore", model=str(clip_dir))
    out = ps(RewardBatch(images=images, prompts=PROMPTS))
    torch.testing.assert_close(out.details["pickscore_raw"], logits, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out.total, logits / 26.0, rtol=1e-4, atol=1e-4)
    assert out.total.dtype == torch.float32 and set(out.components) == {"pickscore"}
    cs = build_reward("clip_score", model=str(clip_dir))
    c = cs(RewardBatch(images=images, prompts=PROMPTS))
    torch.testing.assert_close(c.details["clip_cosine"], logits / scale, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(c.total, 2.5 * (logits / scale).clamp_min(0), rtol=1e-4, atol=1e-4)
    # image i is scored against prompt i: swapping both swaps the scores
    swapped = ps(RewardBatch(images=images.flip(0), prompts=PROMPTS[::-1]))
    torch.testing.assert_close(swapped.total, out.total.flip(0))


def test_bf16_video_and_separate_processor(clip_dir, images):
    ps32 = build_reward("pickscore", model=str(clip_dir))
    ps16 = build_reward("pickscore", model=str(clip_dir), processor=str(clip_dir), dtype="bfloat16")
    assert ps16.clip.dtype == torch.bfloat16
    a, b = ps32(RewardBatch(images=images, prompts=PROMPTS)), ps16(RewardBatch(images=images, prompts=PROMPTS))
    assert b.total.dtype == torch.float32 and (a.total - b.total).abs().max() < 0.05
    # videos: per frame, averaged over time
    video = torch.stack([images, images.flip(0)], dim=1)  # [3, 2, 3, H, W]
    v = ps32(RewardBatch(videos=video, prompts=PROMPTS))
    f2 = ps32(RewardBatch(images=images.flip(0), prompts=PROMPTS))
    torch.testing.assert_close(v.total, (a.total + f2.total) / 2)


def test_missing_weights_fail_at_start_with_clear_message(tmp_path):
    with pytest.raises(ValueError, match=r"reward 'pickscore' needs .*PickScore_v1.*model=<local path>"):
        build_reward("pickscore")
    with pytest.raises(ValueError, match=r"reward 'clip_score': model='/nope/clip' does not exist"):
        build_reward("clip_score", model="/nope/clip")
    with pytest.raises(ValueError, match=r"reward 'hpsv2' needs .*HPS_v2.1_compressed.pt"):
        build_reward("hpsv2")
    with pytest.raises(ValueError, match=r"reward 'aesthetic' needs .*clip"):
        build_reward("aesthetic", mlp="x.pth")
    with pytest.raises(ValueError, match=r"reward 'pickscore': cannot load a CLIPModel"):
        build_reward("pickscore", model=str(tmp_path))  # exists but empty
    with pytest.raises(ValueError, match=r"reward 'pickscore': bad arguments \['modle'\]"):
        build_reward("pickscore", modle="x")


# ---- HPSv2.1: open_clip -> transformers -------------------------------------------------------------------
def test_open_clip_key_converter_round_trip():
    sd = open_clip_state_dict(vocab=50)
    hf = open_clip_to_hf(sd)
    assert "vision_model.encoder.layers.1.self_attn.k_proj.weight" in hf and "visual.proj" not in hf
    torch.testing.assert_close(hf["visual_projection.weight"], sd["visual.proj"].t())
    back = hf_to_open_clip(hf)
    assert set(back) == set(sd)
    for k in sd:
        assert torch.equal(back[k], sd[k]), k
    # and a CLIPModel's own state dict survives HF -> open_clip -> HF
    from transformers import CLIPModel

    model = CLIPModel(clip_config_from_open_clip(sd, vision_heads=2, text_heads=2))
    own = {k: v for k, v in model.state_dict().items() if not k.endswith("position_ids")}
    again = open_clip_to_hf(hf_to_open_clip(own))
    assert set(again) == set(own) and all(torch.equal(again[k], own[k]) for k in own)
    with pytest.raises(ValueError, match="does not know.*visual.mystery"):
        open_clip_to_hf({**sd, "visual.mystery": torch.zeros(1)})
    with pytest.raises(ValueError, match="not a plain open_clip ViT"):
        open_clip_to_hf({**sd, "visual.transformer.resblocks.0.ls_1.gamma": torch.zeros(48)})


def test_converted_model_computes_open_clip_forward(tmp_path):
    """The converted CLIPModel equals a from-scratch open_clip forward (fused qkv, x @ proj, EOT pooling)."""
    from transformers import AutoTokenizer

    from rewards.open_clip_convert import clip_model_from_open_clip

    tok = AutoTokenizer.from_pretrained(str(make_tokenizer_dir(tmp_path / "tok")), local_files_only=True)
    sd = open_clip_state_dict(vocab=len(tok))
    model = clip_model_from_open_clip(sd, vision_heads=2, text_heads=2, eos_token_id=tok.eos_token_id).eval()
    pix = torch.randn(2, 3, 32, 32)
    ids = tok(["a red circle", "blue"], padding="max_length", truncation=True, max_length=16,
              return_tensors="pt")["input_ids"]
    with torch.no_grad():
        torch.testing.assert_close(model.get_image_features(pixel_values=pix), reference_encode_image(sd, pix, 2),
                                   rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(model.get_text_features(input_ids=ids), reference_encode_text(sd, ids, 2),
                                   rtol=1e-4, atol=1e-4)
        # one head instead of two is a different function: the test can tell
        wrong = clip_model_from_open_clip(sd, vision_heads=1, text_heads=1).eval()
        assert not torch.allclose(wrong.get_image_features(pixel_values=pix), reference_encode_image(sd, pix, 2),
                                  atol=1e-3)


def test_hpsv2_reward_from_checkpoint_file(tmp_path, images):
    from transformers import AutoTokenizer

    from rewards.hps import convert_hps_checkpoint

    tok_dir = make_tokenizer_dir(tmp_path / "tok")
    tok = AutoTokenizer.from_pretrained(str(tok_dir), local_files_only=True)
    sd = open_clip_state_dict(vocab=len(tok))
    ck = tmp_path / "HPS_v2.1_compressed.pt"
    torch.save({"state_dict": {f"module.{k}": v.half() for k, v in sd.items()}}, ck)  # DDP prefix, fp16
    r = build_reward("hpsv2", checkpoint=str(ck), tokenizer=str(tok_dir), vision_heads=2, text_heads=2)
    out = r(RewardBatch(images=images, prompts=PROMPTS))
    # reference: open_clip forward on the same (fp16-rounded) weights, OpenAI mean/std, argmax-EOT tokens
    ref_sd = {k: v.half().float() for k, v in sd.items()}
    pix = clip_preprocess(images, 32)
    ids = tok(PROMPTS, padding="max_length", truncation=True, max_length=16, return_tensors="pt")["input_ids"]
    e_i = F.normalize(reference_encode_image(ref_sd, pix, 2), dim=-1)
    e_t = F.normalize(reference_encode_text(ref_sd, ids, 2), dim=-1)
    torch.testing.assert_close(out.total, (e_i * e_t).sum(-1), rtol=1e-4, atol=1e-4)
    assert set(out.components) == {"hps"}
    # converted once to a transformers directory, it loads from there with the same scores
    d = convert_hps_checkpoint(str(ck), str(tok_dir), str(tmp_path / "hps_hf"), vision_heads=2, text_heads=2)
    torch.testing.assert_close(build_reward("hpsv2",
                                            checkpoint=str(d))(RewardBatch(images=images, prompts=PROMPTS)).total,
                               out.total, rtol=1e-5, atol=1e-5)
    bad = tmp_path / "bad.pt"
    torch.save({"state_dict": {"foo": torch.zeros(2)}}, bad)
    with pytest.raises(ValueError, match="not an open_clip ViT CLIP state dict: missing"):
        build_reward("hpsv2", checkpoint=str(bad), tokenizer=str(tok_dir))


# ---- aesthetic --------------------------------------------------------------------------------------------
def _mlp_state_dict(d_in: int, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    dims = [d_in, 1024, 128, 64, 16, 1]
    sd = {}
    for (i, a, b) in zip((0, 2, 4, 6, 7), dims[:-1], dims[1:]):
        sd[f"layers.{i}.weight"] = torch.randn(b, a, generator=g) / math.sqrt(a)
        sd[f"layers.{i}.bias"] = torch.randn(b, generator=g) * 0.1
    return sd


def test_aesthetic_reward_matches_manual_mlp(clip_dir, images, tmp_path):
    from transformers import CLIPModel

    sd = _mlp_state_dict(16)
    torch.save(sd, tmp_path / "sac+logos+ava1-l14-linearMSE.pth")
    r = build_reward("aesthetic", clip=str(clip_dir), mlp=str(tmp_path / "sac+logos+ava1-l14-linearMSE.pth"))
    out = r(RewardBatch(images=images, prompts=[""] * 3))
    model = CLIPModel.from_pretrained(str(clip_dir), local_files_only=True).eval()
    with torch.no_grad():
        e = F.normalize(model.get_image_features(pixel_values=clip_preprocess(images, 32, MEAN, STD)), dim=-1)
        x = e
        for i in (0, 2, 4, 6, 7):  # dropout is off in eval; no nonlinearities in the released MLP
            x = x @ sd[f"layers.{i}.weight"].t() + sd[f"layers.{i}.bias"]
    torch.testing.assert_close(out.total, x.squeeze(-1), rtol=1e-4, atol=1e-4)
    torch.save(_mlp_state_dict(768), tmp_path / "l14.pth")
    with pytest.raises(ValueError, match="MLP takes 768-d embeddings, the CLIP .* gives 16-d"):
        build_reward("aesthetic", clip=str(clip_dir), mlp=str(tmp_path / "l14.pth"))
    torch.save({"layers.0.weight": torch.zeros(4, 16)}, tmp_path / "bad.pth")
    with pytest.raises(ValueError, match="not a LAION aesthetic-predictor MLP"):
        build_reward("aesthetic", clip=str(clip_dir), mlp=str(tmp_path / "bad.pth"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_scorers_on_cuda_match_cpu(clip_dir, images, tmp_path):
    """Images on the GPU stay there through preprocessing; fp32 scores match the CPU's, bf16 ones closely."""
    torch.save(_mlp_state_dict(16), tmp_path / "mlp.pth")
    x = images.cuda()
    for name, kw in (("pickscore", {"model": str(clip_dir)}), ("clip_score", {"model": str(clip_dir)}),
                     ("aesthetic", {"clip": str(clip_dir), "mlp": str(tmp_path / "mlp.pth")})):
        cpu = build_reward(name, **kw)(RewardBatch(images=images, prompts=PROMPTS))
        gpu = build_reward(name, device="cuda", **kw)(RewardBatch(images=x, prompts=PROMPTS))
        assert gpu.total.device.type == "cuda" and gpu.total.dtype == torch.float32
        torch.testing.assert_close(gpu.total.cpu(), cpu.total, rtol=1e-3, atol=1e-3)
        bf = build_reward(name, device="cuda", dtype="bfloat16", **kw)(RewardBatch(images=x, prompts=PROMPTS))
        assert (bf.total.cpu() - cpu.total).abs().max() < 0.1 * max(1.0, float(cpu.total.abs().max()))
