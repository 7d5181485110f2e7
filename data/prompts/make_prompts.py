"""Writes the prompt sets the full-size recipes name (configs/diffusion/*.yaml), deterministically:

    python data/prompts/make_prompts.py        # rewrites the .txt files and kontext_refs/*.png beside this script

Every word list below was written for this project (no prompt is taken from a dataset), so the sets may be
redistributed under the project's licence (README.md here). Each set is the cross product of its lists, shuffled
with a fixed seed and cut to a fixed size; the same script always writes the same bytes (tests/test_recipe_prompts.py).
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent

SUBJECTS = [
    "an old lighthouse keeper", "a red fox", "a snow leopard", "a vintage bicycle", "a steaming cup of coffee",
    "a hot air balloon", "a paper boat", "a sleeping cat", "a golden retriever puppy", "a medieval castle",
    "a glass greenhouse", "a robot gardener", "an astronaut", "a ballet dancer", "a street musician",
    "a stack of old books", "a bowl of ramen", "a sailing ship", "a wooden cabin", "a vintage typewriter",
    "a koi fish", "a white owl", "a mountain goat", "a steam locomotive", "a lantern festival",
    "a chess board mid-game", "a sunflower field", "a jellyfish", "a fire-breathing dragon", "a tiny house",
    "a bustling night market", "a violin on a chair", "a hummingbird", "a desert caravan", "a treehouse",
    "a knight in silver armor", "a bonsai tree", "a blacksmith at work", "a pair of red sneakers", "a food truck",
    "a polar bear cub", "a stained glass window", "a floating island", "a lighthouse", "a city tram",
    "a watchmaker's workbench", "a field of lavender", "a raccoon", "a farmers' market stall", "a giant tortoise",
]
SETTINGS = [
    "on a foggy pier at dawn", "in a snowy pine forest", "on a busy city street", "in a sunlit kitchen",
    "beside a mountain lake", "under a starry night sky", "in a rainy alley with neon signs", "on a sandy beach",
    "in a library full of dust motes", "on a rooftop at sunset", "in an overgrown ruin", "in a field of wildflowers",
    "inside a cozy cafe", "on the surface of the moon", "in a bamboo grove", "at the edge of a cliff",
    "in a flooded cathedral", "in a desert at noon", "in autumn woods", "in a futuristic greenhouse",
]
STYLES = [
    "photograph, 35mm, shallow depth of field", "oil painting", "watercolor illustration", "digital concept art",
    "studio photo, soft box lighting", "anime style", "isometric 3D render", "charcoal sketch",
    "cinematic still, golden hour", "ukiyo-e woodblock print", "low-poly render", "macro photograph",
    "pixel art", "art nouveau poster", "claymation style", "highly detailed, 8k",
]
HPS_STYLES = {  # HPSv2's four style groups: photo, anime, concept art, painting
    "photo": ["photograph, natural light", "DSLR photo, 50mm lens", "documentary photograph", "aerial photograph"],
    "anime": ["anime style", "anime key visual, vibrant colors", "studio anime film still"],
    "concept-art": ["digital concept art", "matte painting, epic scale", "fantasy concept art, dramatic lighting"],
    "painting": ["oil painting", "impressionist painting", "gouache painting", "renaissance style painting"],
}
MOTIONS = [
    "walks slowly", "turns its head toward the camera", "runs", "drifts", "spins in place", "rises into the air",
    "splashes through shallow water", "leaps over a log", "sways in the wind", "rolls forward",
]
VIDEO_SUBJECTS = [
    "a red fox", "a golden retriever", "a paper boat", "a hot air balloon", "a ballet dancer", "a sailing ship",
    "a koi fish", "a white owl", "a steam locomotive", "a cyclist", "a horse", "a kite", "a jellyfish",
    "a skateboarder",
    "a robot", "a child with a balloon",
]
CAMERAS = ["static camera", "slow tracking shot", "slow dolly in", "aerial drone shot", "handheld camera",
           "low angle shot", "close-up", "wide shot"]
VIDEO_SETTINGS = ["through fresh snow", "along a beach at sunset", "across a city square", "in a misty forest",
                  "over a calm lake", "in a neon-lit street at night", "in a field of tall grass", "on a rainy day"]

COLORS = {"red": (220, 40, 40), "blue": (40, 80, 220), "green": (40, 170, 70), "yellow": (235, 200, 40),
          "purple": (140, 60, 190), "orange": (240, 140, 30)}
SHAPES = ["circle", "square", "triangle"]
BACKGROUNDS = {"white": (245, 245, 240), "gray": (150, 150, 150), "beige": (225, 210, 180),
               "light blue": (190, 215, 240)}


def _pick(items: list[str], n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    items = list(items)
    rng.shuffle(items)
    return items[:n]


def pickscore_prompts() -> list[str]:
    return _pick([f"{s} {w}, {t}" for s, w, t in itertools.product(SUBJECTS, SETTINGS, STYLES)], 2000, 0)


def hps_prompts() -> list[str]:
    styles = [t for group in HPS_STYLES.values() for t in group]
    return _pick([f"{s} {w}, {t}" for s, w, t in itertools.product(SUBJECTS, SETTINGS, styles)], 2000, 1)


def video_prompts() -> list[str]:
    return _pick([f"{s} {m} {w}, {c}" for s, m, w, c in itertools.product(VIDEO_SUBJECTS, MOTIONS, VIDEO_SETTINGS,
                                                                          CAMERAS)],
                 1000, 2)


def kontext_scenes(n: int = 8, size: int = 512) -> list[tuple[str, list[tuple[str, str, tuple[int, int]]]]]:
    """``n`` scenes: a background and three coloured shapes at fixed spots, as ``(background, [(colour, shape,
    xy)])``."""
    rng = random.Random(3)
    spots = [(size // 4, size // 4), (3 * size // 4, size // 4), (size // 4, 3 * size // 4),
             (3 * size // 4, 3 * size // 4)]
    out = []
    for _ in range(n):
        bg = rng.choice(sorted(BACKGROUNDS))
        colors = rng.sample(sorted(COLORS), 3)
        out.append((bg, [(c, rng.choice(SHAPES), xy) for c, xy in zip(colors, rng.sample(spots, 3))]))
    return out


def draw_scene(scene, size: int = 512):
    from PIL import Image, ImageDraw

    bg, objects = scene
    img = Image.new("RGB", (size, size), BACKGROUNDS[bg])
    d = ImageDraw.Draw(img)
    r = size // 8
    for color, shape, (x, y) in objects:
        box = (x - r, y - r, x + r, y + r)
        if shape == "circle":
            d.ellipse(box, fill=COLORS[color])
        elif shape == "square":
            d.rectangle(box, fill=COLORS[color])
        else:
            d.polygon([(x, y - r), (x - r, y + r), (x + r, y + r)], fill=COLORS[color])
    return img


def kontext_prompts(scenes) -> list[str]:
    """``"<reference image> | <instruction>"`` (diffusion_rl.flux_kontext): edits that name what is in the scene."""
    out = []
    for i, (bg, objects) in enumerate(scenes):
        ref = f"data/prompts/kontext_refs/scene_{i:02d}.png"
        free = [c for c in sorted(COLORS) if c not in {o[0] for o in objects}]
        for color, shape, _ in objects:
            out.append(f"{ref} | make the {color} {shape} {free[0]}")
            out.append(f"{ref} | remove the {color} {shape}")
            out.append(f"{ref} | turn the {color} {shape} into a {[s for s in SHAPES if s != shape][0]}")
        out.append(f"{ref} | add a {free[1]} star in the middle")
        out.append(f"{ref} | make the {bg} background {[b for b in sorted(BACKGROUNDS) if b != bg][0]}")
        out.append(f"{ref} | add two more {objects[0][0]} {objects[0][1]}s")
    return out


def write_all(dest: Path = HERE) -> list[Path]:
    header = "# written by data/prompts/make_prompts.py (see README.md here: source and licence)\n"
    scenes = kontext_scenes()
    sets = {"pickscore_train.txt": pickscore_prompts(), "hps_train.txt": hps_prompts(),
            "video_train.txt": video_prompts(), "kontext_edit_train.txt": kontext_prompts(scenes)}
    written = []
    for name, prompts in sets.items():
        (dest / name).write_text(header + "\n".join(prompts) + "\n")
        written.append(dest / name)
    (dest / "kontext_refs").mkdir(exist_ok=True)
    for i, scene in enumerate(scenes):
        p = dest / "kontext_refs" / f"scene_{i:02d}.png"
        draw_scene(scene).save(p, optimize=True)
        written.append(p)
    return written


if __name__ == "__main__":
    for p in write_all():
        print(p)
