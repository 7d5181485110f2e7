"""vla_rl.libero_demos on a file written here in LIBERO's own layout from a real LIBERO episode: the converted states
and frames equal what sims' LIBERO env shows, and a replay re-runs the demo in the env and keeps it (it succeeds)."""

import json

import numpy as np

import sims
from vla_rl.demos import load_demo_file
from vla_rl.libero_demos import convert, replay_libero_file, task_index

from ..libero_scene import place_bowl_over_plate

TASK = "libero/libero_spatial/0"
STILL = np.array([0, 0, 0, 0, 0, 0, -1], np.float32)


def _quat2axisangle(q):  # robosuite.utils.transform_utils.quat2axisangle: what LIBERO's datasets store as ee_ori
    w = min(max(q[3], -1.0), 1.0)
    den = np.sqrt(1.0 - w * w)
    return np.zeros(3) if np.isclose(den, 0.0) else q[:3] * 2.0 * np.arccos(w) / den


def _record_libero_file(path):
    """One demo in LIBERO's layout (scripts/create_dataset.py): the bowl starts just above the plate, the arm holds
    still, the bowl settles and the task succeeds. Frames stored as robosuite renders them (OpenGL, bottom-up)."""
    import h5py

    env = sims.make(TASK, image_size=32, cameras=("agentview", "wrist"), settle_steps=0)
    env.reset(options={"init_seed": 0})
    place_bowl_over_plate(env)
    e = env._env.env
    s0 = e.sim.get_state().flatten()
    obs, _ = env.reset_to_state(s0, init_seed=0)
    seen, states, actions = [], [], []
    for _ in range(12):
        seen.append(obs)
        states.append(e.sim.get_state().flatten())
        actions.append(STILL)
        obs, _, term, _, info = env.step(STILL)
        if term:
            break
    assert info["success"]
    env.close()
    with h5py.File(path, "w") as f:
        d = f.create_group("data")
        d.attrs["problem_info"] = json.dumps({"language_instruction": seen[0]["instruction"], "problem_name": "x"})
        d.attrs["macros_image_convention"] = "opengl"
        g = d.create_group("demo_0")
        g.create_dataset("actions", data=np.stack(actions).astype(np.float64))
        g.create_dataset("states", data=np.stack(states))
        g.create_dataset("obs/ee_pos", data=np.stack([o["state"][:3] for o in seen]).astype(np.float64))
        g.create_dataset("obs/ee_ori", data=np.stack([_quat2axisangle(o["state"][3:7].astype(np.float64))
                                                      for o in seen]))
        g.create_dataset("obs/gripper_states", data=np.stack([o["state"][7:9] for o in seen]).astype(np.float64))
        g.create_dataset("obs/agentview_rgb", data=np.stack([o["images"]["agentview"][::-1] for o in seen]))
        g.create_dataset("obs/eye_in_hand_rgb", data=np.stack([o["images"]["wrist"][::-1] for o in seen]))
    return seen


def test_convert_and_replay_a_libero_file_made_here(tmp_path):
    name = "pick_up_the_black_bowl_between_the_plate_and_the_ramekin_and_place_it_on_the_plate_demo.hdf5"
    src = tmp_path / name
    seen = _record_libero_file(src)
    assert task_index("libero_spatial", src) == 0
    # converted: the stored frames and states, in sims' layout, equal what the env showed
    out = convert(tmp_path / "converted.hdf5", [(TASK, src)])
    (d,) = load_demo_file(out, ["agentview", "wrist"])
    assert d.env_name == TASK and d.instruction == seen[0]["instruction"] and len(d.actions) == len(seen)
    want = np.stack([o["state"] for o in seen])
    np.testing.assert_allclose(d.state[:, :3], want[:, :3], atol=1e-6)
    np.testing.assert_allclose(np.abs((d.state[:, 3:7] * want[:, 3:7]).sum(-1)), 1.0, atol=1e-5)  # same rotation
    np.testing.assert_allclose(d.state[:, 7:], want[:, 7:], atol=1e-6)
    for cam in ("agentview", "wrist"):
        np.testing.assert_array_equal(d.images[cam], np.stack([o["images"][cam] for o in seen]))
    # replayed: run again in the env from the stored first state, re-rendered at this run's size, kept on success
    demos, tried = replay_libero_file(src, TASK, {"image_size": 32, "cameras": ("agentview",)})
    assert tried == 1 and len(demos) == 1
    (r,) = demos
    assert set(r.images) == {"agentview"} and len(r.actions) == len(seen)
    np.testing.assert_allclose(r.state, want, atol=1e-5)
    np.testing.assert_array_equal(r.images["agentview"], d.images["agentview"])
    out2 = convert(tmp_path / "replayed.hdf5", [(TASK, src)], replay=True,
                   env_kwargs={"image_size": 32, "cameras": ["agentview"]})
    assert len(load_demo_file(out2, ["agentview"])) == 1
