import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402

import sims  # noqa: E402
from sims import render  # noqa: E402


def rendering_works() -> bool:
    try:
        env = sims.make("tabletop/reach", image_size=16)
        env.reset(options={"init_seed": 0})
        env.close()
        return True
    except render.RenderingUnavailable:
        return False


@pytest.fixture(scope="session")
def can_render() -> bool:
    return rendering_works()
