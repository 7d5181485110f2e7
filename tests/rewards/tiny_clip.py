"""Tiny random-weight CLIP pieces built in code (no downloads): a byte-level CLIP tokenizer, a CLIPModel, an
open_clip-style state dict, and a reference open_clip forward pass written from open_clip's module layout."""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F

MEAN, STD = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)  # deliberately not CLIP's: preprocessing must read them


def bytes_to_unicode() -> dict[int, str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def make_tokenizer_dir(path: Path) -> Path:
    """A CLIP BPE tokenizer with the 512 byte symbols, a few merges and the two special tokens (ids last)."""
    from transformers import CLIPTokenizer

    chars = list(bytes_to_unicode().values())
    merges = ["r e", "re d</w>", "c i", "ci r", "cir c", "circ l", "circl e</w>", "b l", "bl u", "blu e</w>"]
    vocab_list = chars + [c + "</w>" for c in chars] + ["".join(m.split()) for m in merges]
    vocab_list += ["<|startoftext|>", "<|endoftext|>"]
    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(vocab_list)}))
    (path / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    tok = CLIPTokenizer(str(path / "vocab.json"), str(path / "merges.txt"), model_max_length=16)
    out = path / "saved"
    tok.save_pretrained(out)
    return out


def tiny_clip_config(tok, image_size: int = 32, proj: int = 16, heads: int = 2):
    from transformers import CLIPConfig

    text = dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=heads, max_position_embeddings=16, eos_token_id=tok.eos_token_id,
                bos_token_id=tok.bos_token_id, pad_token_id=tok.pad_token_id, hidden_act="gelu")
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=heads,
                  image_size=image_size, patch_size=8, hidden_act="gelu")
    return CLIPConfig(text_config=text, vision_config=vision, projection_dim=proj)


def make_clip_dir(path: Path, seed: int = 0, proj: int = 16) -> Path:
    """A saved tiny CLIPModel + tokenizer + preprocessor_config.json, as a user's local snapshot would be."""
    from transformers import AutoTokenizer, CLIPModel

    tok_dir = make_tokenizer_dir(path / "tok")
    tok = AutoTokenizer.from_pretrained(str(tok_dir), local_files_only=True)
    torch.manual_seed(seed)
    model = CLIPModel(tiny_clip_config(tok, proj=proj))
    with torch.no_grad():
        model.logit_scale.fill_(math.log(20.0))
    out = path / "clip"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    (out / "preprocessor_config.json").write_text(json.dumps({"image_mean": list(MEAN), "image_std": list(STD),
                                                              "crop_size": 32, "size": 32}))
    return out


def open_clip_state_dict(vocab: int, seed: int = 0, dt: int = 32, dv: int = 48, layers: int = 2, ctx: int = 16,
                         patch: int = 8, image: int = 32, proj: int = 24) -> dict[str, torch.Tensor]:
    """Random tensors under open_clip's ViT-CLIP names and shapes (as HPS_v2.1_compressed.pt holds)."""
    g = torch.Generator().manual_seed(seed)

    def r(*shape, scale=0.2):
        return torch.randn(*shape, generator=g) * scale

    def ln(prefix, d):
        return {f"{prefix}.weight": 1 + r(d, scale=0.1), f"{prefix}.bias": r(d, scale=0.1)}

    def blocks(prefix, d):
        sd = {}
        for i in range(layers):
            p = f"{prefix}.{i}"
            sd.update(ln(f"{p}.ln_1", d))
            sd.update(ln(f"{p}.ln_2", d))
            sd.update({f"{p}.attn.in_proj_weight": r(3 * d, d), f"{p}.attn.in_proj_bias": r(3 * d),
                       f"{p}.attn.out_proj.weight": r(d, d), f"{p}.attn.out_proj.bias": r(d),
                       f"{p}.mlp.c_fc.weight": r(4 * d, d), f"{p}.mlp.c_fc.bias": r(4 * d),
                       f"{p}.mlp.c_proj.weight": r(d, 4 * d), f"{p}.mlp.c_proj.bias": r(d)})
        return sd

    grid = image // patch
    sd = {"token_embedding.weight": r(vocab, dt), "positional_embedding": r(ctx, dt), "text_projection": r(dt, proj),
          "logit_scale": torch.tensor(math.log(1 / 0.07)),
          "visual.class_embedding": r(dv), "visual.positional_embedding": r(grid * grid + 1, dv),
          "visual.conv1.weight": r(dv, 3, patch, patch, scale=0.05), "visual.proj": r(dv, proj)}
    sd.update(ln("ln_final", dt))
    sd.update(ln("visual.ln_pre", dv))
    sd.update(ln("visual.ln_post", dv))
    sd.update(blocks("transformer.resblocks", dt))
    sd.update(blocks("visual.transformer.resblocks", dv))
    return sd


# ---- reference forward in open_clip's layout (x @ in_proj^T, fused qkv, x @ proj) ------------------------
def _block(sd, p, x, heads, causal):
    d = x.shape[-1]
    h = F.layer_norm(x, (d,), sd[f"{p}.ln_1.weight"], sd[f"{p}.ln_1.bias"], 1e-5)
    q, k, v = (h @ sd[f"{p}.attn.in_proj_weight"].t() + sd[f"{p}.attn.in_proj_bias"]).chunk(3, dim=-1)
    b, n, _ = q.shape
    q, k, v = (t.reshape(b, n, heads, d // heads).transpose(1, 2) for t in (q, k, v))
    att = q @ k.transpose(-1, -2) / math.sqrt(d // heads)
    if causal:
        att = att + torch.full((n, n), float("-inf")).triu(1)
    o = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, n, d)
    x = x + o @ sd[f"{p}.attn.out_proj.weight"].t() + sd[f"{p}.attn.out_proj.bias"]
    h = F.layer_norm(x, (d,), sd[f"{p}.ln_2.weight"], sd[f"{p}.ln_2.bias"], 1e-5)
    h = F.gelu(h @ sd[f"{p}.mlp.c_fc.weight"].t() + sd[f"{p}.mlp.c_fc.bias"])
    return x + h @ sd[f"{p}.mlp.c_proj.weight"].t() + sd[f"{p}.mlp.c_proj.bias"]


def _layers(sd, prefix):
    return len({k.split(".")[len(prefix.split("."))] for k in sd if k.startswith(prefix + ".")})


def reference_encode_image(sd, pixels: torch.Tensor, heads: int) -> torch.Tensor:
    """open_clip VisionTransformer.forward: conv1 -> [CLS] + pos -> ln_pre -> blocks -> ln_post(x[:, 0]) @ proj."""
    x = F.conv2d(pixels, sd["visual.conv1.weight"], stride=sd["visual.conv1.weight"].shape[-1])
    x = x.flatten(2).transpose(1, 2)
    cls = sd["visual.class_embedding"].expand(x.shape[0], 1, -1)
    x = torch.cat([cls, x], dim=1) + sd["visual.positional_embedding"]
    d = x.shape[-1]
    x = F.layer_norm(x, (d,), sd["visual.ln_pre.weight"], sd["visual.ln_pre.bias"], 1e-5)
    for i in range(_layers(sd, "visual.transformer.resblocks")):
        x = _block(sd, f"visual.transformer.resblocks.{i}", x, heads, causal=False)
    x = F.layer_norm(x[:, 0], (d,), sd["visual.ln_post.weight"], sd["visual.ln_post.bias"], 1e-5)
    return x @ sd["visual.proj"]


def reference_encode_text(sd, ids: torch.Tensor, heads: int) -> torch.Tensor:
    """open_clip CLIP.encode_text: tokens + pos -> causal blocks -> ln_final -> x[argmax(ids)] @ text_projection."""
    x = sd["token_embedding.weight"][ids] + sd["positional_embedding"][: ids.shape[1]]
    for i in range(_layers(sd, "transformer.resblocks")):
        x = _block(sd, f"transformer.resblocks.{i}", x, heads, causal=True)
    d = x.shape[-1]
    x = F.layer_norm(x, (d,), sd["ln_final.weight"], sd["ln_final.bias"], 1e-5)
    return x[torch.arange(x.shape[0]), ids.argmax(dim=-1)] @ sd["text_projection"]
