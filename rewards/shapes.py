"""Colors and shapes: the embedded default's prompt grammar, renderer and programmatic verifier.

Grammar (lower case)::

    prompt   := object | object " " relation " " object
    object   := ("a " | "an ") color " " shape
    color    := red | green | blue | yellow | purple | orange
    shape    := circle | square | triangle
    relation := "left of" | "right of" | "above" | "below"

e.g. ``"a red circle left of a blue square"``; the two objects of a relation have different colors.

* :func:`sample_prompts` draws prompts; :func:`parse_prompt` returns a :class:`Spec` (clear error otherwise).
* :func:`render` draws prompts as anti-aliased images ``[B, 3, S, S]`` in [0, 1] on a light background,
  with random sizes and positions that satisfy the relation -- the pretraining data of the demo model.
* :class:`ShapesVerifier` scores an image against its prompt without any learned model: pixels are
  classified to the nearest palette color (within a tolerance), the largest connected blob of each requested
  color is found, its shape is read from its (sub-pixel, coverage-weighted) fill ratio of the bounding box
  (square ~1, circle ~pi/4, triangle ~1/2), and the relation from the blobs' centroids. Components in [0, 1]:
  ``color`` (requested colors present), ``shape`` (present objects of the right shape), ``relation`` (two-object
  prompts; 1 for single-object prompts); ``total`` is the mean of color, shape and relation over the ones that apply
  (single-object prompts: ``(color + shape) / 2``). Detail ``accuracy``: 1 iff everything is right.
  ``shape_width > 0`` makes the shape component graded (:func:`shape_credit`: partial credit for a blob whose fill
  ratio is within ``shape_width`` of the asked class), a denser RL signal; ``accuracy`` stays exact.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch
from scipy import ndimage

from .base import ImageReward, RewardOutput

PALETTE: dict[str, tuple[float, float, float]] = {
    "red": (0.90, 0.10, 0.10),
    "green": (0.10, 0.75, 0.20),
    "blue": (0.15, 0.25, 0.95),
    "yellow": (0.95, 0.85, 0.10),
    "purple": (0.60, 0.15, 0.75),
    "orange": (1.00, 0.55, 0.05),
}
BACKGROUND = (0.94, 0.94, 0.94)
SHAPES = ("circle", "square", "triangle")
RELATIONS = ("left of", "right of", "above", "below")


@dataclass(frozen=True)
class Spec:
    objects: tuple[tuple[str, str], ...]  # ((color, shape), ...) one or two
    relation: str | None = None  # relation of objects[0] to objects[1]


def _parse_object(words: list[str], prompt: str) -> tuple[str, str]:
    if len(words) != 3 or words[0] not in ("a", "an") or words[1] not in PALETTE or words[2] not in SHAPES:
        raise ValueError(f"malformed shapes prompt {prompt!r}: expected 'a <color> <shape>' with color in "
                         f"{sorted(PALETTE)} and shape in {list(SHAPES)}")
    return words[1], words[2]


def parse_prompt(prompt: str) -> Spec:
    """``"a red circle left of a blue square"`` -> ``Spec((("red","circle"),("blue","square")), "left of")``."""
    text = " ".join(prompt.lower().replace(",", " ").split())
    for rel in RELATIONS:
        key = f" {rel} "
        if key in text:
            a, b = text.split(key, 1)
            o1, o2 = _parse_object(a.split(), prompt), _parse_object(b.split(), prompt)
            if o1[0] == o2[0]:
                raise ValueError(f"malformed shapes prompt {prompt!r}: the two objects must have different colors")
            return Spec((o1, o2), rel)
    return Spec((_parse_object(text.split(), prompt),))


def sample_prompts(n: int, rng: random.Random | None = None, p_relation: float = 0.7,
                   colors: tuple[str, ...] | None = None, shapes: tuple[str, ...] | None = None) -> list[str]:
    """``n`` prompts of the grammar; a fraction ``p_relation`` has two objects and a relation."""
    rng = rng or random.Random(0)
    colors = tuple(colors or PALETTE)
    shapes = tuple(shapes or SHAPES)
    out = []
    for _ in range(n):
        c1, s1 = rng.choice(colors), rng.choice(shapes)
        if rng.random() < p_relation and len(colors) > 1:
            c2 = rng.choice([c for c in colors if c != c1])
            out.append(f"{_a(c1)} {c1} {s1} {rng.choice(RELATIONS)} {_a(c2)} {c2} {rng.choice(shapes)}")
        else:
            out.append(f"{_a(c1)} {c1} {s1}")
    return out


def check_prompt_options(options: dict, key: str = "prompts.shapes") -> None:
    """:func:`sample_prompts`' keyword arguments ``options`` (a config's ``key``): ``p_relation`` a probability in
    [0, 1], ``colors`` / ``shapes`` lists of the grammar's own names (:data:`PALETTE`, :data:`SHAPES`: the renderer
    and the verifier know no others), else one ``ValueError`` naming ``key.name`` (was: accepted; a string was split
    into its letters, an unknown colour drawn into prompts no image can match)."""
    p = options.get("p_relation")
    if isinstance(p, (int, float)) and not isinstance(p, bool) and not 0 <= p <= 1:
        raise ValueError(f"{key}.p_relation={p}: expected a probability in [0, 1]")
    for name, known in (("colors", tuple(PALETTE)), ("shapes", SHAPES)):
        v = options.get(name)
        if v is None:
            continue
        if not isinstance(v, (list, tuple)) or any(not isinstance(x, str) for x in v):
            raise ValueError(f"{key}.{name}={v!r}: expected a list of names from {list(known)}")
        bad = [x for x in v if x not in known]
        if bad:
            raise ValueError(f"{key}.{name} has unknown name(s) {bad}; expected names from {list(known)}")


def _a(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


# ---- rendering -------------------------------------------------------------------------------
def _shape_mask(shape: str, cx: float, cy: float, r: float, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    dx, dy = xs - cx, ys - cy
    if shape == "circle":
        return dx**2 + dy**2 <= r**2
    if shape == "square":
        return np.maximum(np.abs(dx), np.abs(dy)) <= 0.89 * r  # same area as the circle
    # upward isosceles triangle in the box [-r, r]^2 (apex at the top), scaled to the circle's area
    h = 1.25 * r
    t = (dy + h) / (2 * h)  # 0 at the apex, 1 at the base
    return (dy >= -h) & (dy <= h) & (np.abs(dx) <= t * h)


def _positions(spec: Spec, size: int, rng: random.Random) -> list[tuple[float, float, float]]:
    """(cx, cy, r) per object, inside the canvas, non-overlapping, satisfying the relation with a margin.

    Rejection sampling (uniform over the valid layouts) for up to 200 tries. At 32 px a try satisfies a relation
    with p ~ 0.073, so all 200 fail for ~2.5e-7 of the relation prompts: rare, but it ended a pretraining run (about
    300k rendered prompts in). Then :func:`_constructive_positions` places the pair directly."""
    for _ in range(200):
        objs = []
        for _o in spec.objects:
            r = rng.uniform(0.14, 0.2) * size
            objs.append((rng.uniform(r + 1, size - r - 1), rng.uniform(r + 1, size - r - 1), r))
        if len(objs) == 1:
            return objs
        (x1, y1, r1), (x2, y2, r2) = objs
        sep = r1 + r2 + 1
        ok = {"left of": x2 - x1 >= sep, "right of": x1 - x2 >= sep, "above": y2 - y1 >= sep,
              "below": y1 - y2 >= sep}[spec.relation]  # type: ignore[index]
        if ok:
            return objs
    return _constructive_positions(spec, size, rng)


def _constructive_positions(spec: Spec, size: int, rng: random.Random) -> list[tuple[float, float, float]]:
    """A two-object layout that satisfies the relation by construction: the smallest radius, the first object's
    coordinate along the relation's axis drawn from the range that leaves room for the second one (separation
    ``r1 + r2 + 1``), the second's drawn beyond it; the other axis uniform."""
    r = 0.14 * size
    lo, hi = r + 1, size - r - 1
    sep = 2 * r + 1
    if hi - lo < sep:
        raise RuntimeError(f"could not place {spec} on a {size}px canvas (needs >= {2 * lo + sep:.1f}px)")
    a = rng.uniform(lo, hi - sep)
    b = rng.uniform(a + sep, hi)
    first_high = spec.relation in ("right of", "below")  # x1 - x2 >= sep or y1 - y2 >= sep
    c1, c2 = (b, a) if first_high else (a, b)
    o1, o2 = rng.uniform(lo, hi), rng.uniform(lo, hi)
    if spec.relation in ("left of", "right of"):
        return [(c1, o1, r), (c2, o2, r)]
    return [(o1, c1, r), (o2, c2, r)]


def render_spec(spec: Spec, size: int = 32, rng: random.Random | None = None, supersample: int = 4) -> torch.Tensor:
    """One image ``[3, size, size]`` in [0, 1]; anti-aliased by ``supersample``-x supersampling."""
    rng = rng or random.Random(0)
    s = size * supersample
    coords = (np.arange(s) + 0.5) / supersample
    xs, ys = np.meshgrid(coords, coords)
    img = np.empty((s, s, 3), dtype=np.float32)
    img[:] = BACKGROUND
    for (color, shape), (cx, cy, r) in zip(spec.objects, _positions(spec, size, rng)):
        img[_shape_mask(shape, cx, cy, r, xs, ys)] = PALETTE[color]
    img = img.reshape(size, supersample, size, supersample, 3).mean(axis=(1, 3))
    return torch.from_numpy(img).permute(2, 0, 1).contiguous()


def render(prompts: list[str], size: int = 32, rng: random.Random | None = None,
           seed: int | None = None) -> torch.Tensor:
    """Images ``[B, 3, size, size]`` in [0, 1] for ``prompts`` (random layouts from ``rng`` or ``seed``)."""
    rng = rng or random.Random(seed)
    return torch.stack([render_spec(parse_prompt(p), size, rng) for p in prompts])


# ---- verification ----------------------------------------------------------------------------
FILL_CLASSES = {"square": (0.89, np.inf), "circle": (0.67, 0.89), "triangle": (-np.inf, 0.67)}  # fill-ratio intervals


def fill_ratio(mask: np.ndarray, alpha: np.ndarray | None = None) -> float:
    """A blob's fill ratio of its bounding box (sub-pixel with ``alpha``, see :func:`classify_shape`)."""
    if alpha is None:
        ys, xs = np.nonzero(mask)
        return float(mask.sum() / ((ys.max() - ys.min() + 1) * (xs.max() - xs.min() + 1)))
    return float(alpha.sum() / max(alpha.max(axis=0).sum() * alpha.max(axis=1).sum(), 1e-6))


def shape_credit(fill: float, shape: str, width: float = 0.2) -> float:
    """Graded shape credit in [0, 1]: 1 when ``fill`` lies in ``shape``'s interval of :data:`FILL_CLASSES` (exactly
    when :func:`classify_shape` says ``shape``), else ``max(0, 1 - d / width)`` with ``d`` the distance of ``fill``
    to that interval -- a blob that is *almost* the asked shape earns part of the reward."""
    if shape_of_fill(fill) == shape:
        return 1.0
    lo, hi = FILL_CLASSES[shape]
    return max(0.0, 1.0 - max(lo - fill, fill - hi, 0.0) / width)


def classify_shape(mask: np.ndarray, alpha: np.ndarray | None = None) -> str:
    """Shape of a blob from its fill ratio of its bounding box: square ~1, circle ~pi/4, triangle ~1/2.

    With ``alpha [H, W]`` (per-pixel coverage in [0, 1], see :func:`coverage`) the ratio is sub-pixel::

        fill = sum(alpha) / (sum_x max_y alpha * sum_y max_x alpha)

    which separates the classes at 32 px (rendered: square >= 0.97, circle 0.74-0.82, triangle <= 0.60);
    without it, the binary mask's pixel count over its bounding box is used.
    """
    return shape_of_fill(fill_ratio(mask, alpha))


def shape_of_fill(fill: float) -> str:
    """The class of a fill ratio (the intervals of :data:`FILL_CLASSES`)."""
    if fill > 0.89:
        return "square"
    if fill > 0.67:
        return "circle"
    return "triangle"


def coverage(image: np.ndarray, color: str, mask: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Per-pixel coverage ``[H, W]`` of a blob: each pixel near the blob (``mask`` grown by one pixel, minus
    ``others``, pixels of other objects) projected on the segment background -> palette color, in [0, 1]."""
    bg, col = np.array(BACKGROUND, np.float32), np.array(PALETTE[color], np.float32)
    a = np.clip(((image - bg) @ (col - bg)) / float((col - bg) @ (col - bg)), 0.0, 1.0)
    region = ndimage.binary_dilation(mask, iterations=1) & ~others
    return np.where(region, a, 0.0)


def palette_labels(image: np.ndarray, tol: float = 0.25) -> np.ndarray:
    """``[H, W]`` nearest palette color index per pixel (``len(PALETTE)`` = background; -1 = farther than ``tol``)."""
    ref = np.array([PALETTE[c] for c in PALETTE] + [BACKGROUND], dtype=np.float32)  # [C+1, 3]
    d = np.linalg.norm(image[:, :, None, :] - ref[None, None], axis=-1)  # [H, W, C+1]
    return np.where(d.min(-1) <= tol, d.argmin(-1), -1)


def find_blobs(image: np.ndarray, tol: float = 0.25,
               min_frac: float = 0.01) -> dict[str, tuple[np.ndarray, tuple[float, float]]]:
    """Largest blob per palette color: ``color -> (mask [H, W], (cx, cy))``. ``image`` is ``[H, W, 3]``."""
    names = list(PALETTE)
    label = palette_labels(image, tol)
    min_area = max(2, int(min_frac * image.shape[0] * image.shape[1]))
    out = {}
    for i, c in enumerate(names):
        lab, n = ndimage.label(label == i)
        if n == 0:
            continue
        areas = ndimage.sum(np.ones_like(lab), lab, index=np.arange(1, n + 1))
        k = int(np.argmax(areas)) + 1
        if areas[k - 1] < min_area:
            continue
        mask = lab == k
        ys, xs = np.nonzero(mask)
        out[c] = (mask, (float(xs.mean()), float(ys.mean())))
    return out


def verify(image: torch.Tensor, spec: Spec, tol: float = 0.25, shape_width: float = 0.0) -> dict[str, float]:
    """Components for one image ``[3, H, W]`` in [0, 1] against ``spec``. ``shape_width > 0``: the ``shape``
    component is the graded :func:`shape_credit` (``accuracy`` still needs every shape exactly right)."""
    img = image.permute(1, 2, 0).cpu().numpy().astype(np.float32)
    blobs = find_blobs(img, tol)
    objects = np.zeros(img.shape[:2], dtype=bool)
    for m, _ in blobs.values():
        objects |= m
    present = [c in blobs for c, _ in spec.objects]
    fills = [fill_ratio(blobs[c][0], coverage(img, c, blobs[c][0], objects & ~blobs[c][0])) if c in blobs else None
             for c, _ in spec.objects]
    exact = [f is not None and shape_of_fill(f) == s for f, (_, s) in zip(fills, spec.objects)]
    graded = [0.0 if f is None else shape_credit(f, s, shape_width) if shape_width > 0 else float(e)
              for f, e, (_, s) in zip(fills, exact, spec.objects)]
    out = {"color": float(np.mean(present)), "shape": float(np.mean(graded))}
    parts = [out["color"], out["shape"]]
    if spec.relation is not None:
        (c1, _), (c2, _) = spec.objects
        rel = 0.0
        if c1 in blobs and c2 in blobs:
            (x1, y1), (x2, y2) = blobs[c1][1], blobs[c2][1]
            rel = float({"left of": x1 < x2, "right of": x1 > x2, "above": y1 < y2, "below": y1 > y2}[spec.relation])
        out["relation"] = rel
        parts.append(rel)
    else:
        out["relation"] = 1.0  # nothing to relate; kept so every prompt reports the same components
    out["accuracy"] = float(all(p == 1.0 for p in parts) and all(exact))
    out["total"] = float(np.mean(parts))
    return out


class ShapesVerifier(ImageReward):
    """The programmatic prompt-adherence reward of the demo task (see module docstring)."""

    name = "shapes_verifier"

    def __init__(self, tol: float = 0.25, nonfinite: str = "warn", accuracy_weight: float = 0.0,
                 shape_width: float = 0.0):
        if not 0 < tol < 1.8:
            raise ValueError(f"tol is an RGB distance in (0, 1.8), got {tol}")
        if not 0 <= accuracy_weight <= 1:
            raise ValueError(f"accuracy_weight is a mixing weight in [0, 1], got {accuracy_weight}")
        self.tol = tol
        # > 0: total = (1 - w) * verifier + w * accuracy (all-correct), so partial credit alone cannot carry the
        # reward; the unweighted verifier score stays in details["verifier"]
        self.accuracy_weight = accuracy_weight
        if shape_width < 0:
            raise ValueError(f"shape_width is a fill-ratio distance >= 0 (0: exact shape credit), got {shape_width}")
        self.shape_width = shape_width  # > 0: graded shape credit (verify(shape_width=...)); accuracy stays exact
        self.nonfinite = nonfinite  # type: ignore[assignment]

    def score(self, images, prompts, metadata) -> RewardOutput:
        specs = [parse_prompt(p) for p in prompts]  # malformed prompts fail before any work
        rows = [verify(img, spec, self.tol, self.shape_width) for img, spec in zip(images.cpu(), specs)]

        def col(k: str) -> torch.Tensor:
            return torch.tensor([r[k] for r in rows], dtype=torch.float32, device=images.device)

        total, acc = col("total"), col("accuracy")
        details = {"accuracy": acc}
        if self.accuracy_weight > 0:
            details["verifier"] = total
            total = (1 - self.accuracy_weight) * total + self.accuracy_weight * acc
        return RewardOutput(total=total, components={k: col(k) for k in ("color", "shape", "relation")},
                            details=details)
