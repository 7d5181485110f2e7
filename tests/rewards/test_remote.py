"""The reward-server client and server (rewards.remote) on the loopback interface: answers equal the in-process
reward (images, videos, robot episodes), batches split and put back in order, a slow server (timeout, then the retry
is answered without scoring twice), a dead server, a reward that raises, and malformed / wrong-sized / foreign /
non-finite answers, each a one-line error naming the server and the request; ``serve-reward``'s bad input."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import torch

from rewards import RewardBatch, RewardOutput, build_reward
from rewards.remote import (
    RemoteReward,
    RemoteRewardConfig,
    RemoteRewardError,
    RewardServer,
    build_remote_reward,
    decode_array,
    decode_request,
    encode_array,
    make_server,
    start_in_thread,
)
from rewards.success import episode_metadata, success_reward

from ..remote_servers import SlowOnce, free_port, serve, stop


def _server(reward, name="test", **kw) -> RewardServer:
    srv = RewardServer(reward, name, "127.0.0.1", 0, **kw)
    start_in_thread(srv)
    return srv


def _client(url, **kw) -> RemoteReward:
    kw = {"retries": 2, "backoff_s": 0.05, "timeout_s": 5.0, **kw}
    return RemoteReward(RemoteRewardConfig(**kw), url)


def _images(n=6, seed=0):
    return torch.rand(n, 3, 16, 16, generator=torch.Generator().manual_seed(seed))


def test_answers_equal_the_in_process_reward_and_keep_item_order():
    reward = build_reward("shapes_verifier", shape_width=0.5)
    srv = _server(reward, "shapes_verifier")
    try:
        cl = _client(srv.url, batch_size=4, max_in_flight=3)
        assert cl.check() == "shapes_verifier"
        prompts = ["a red circle left of a blue square"] * 5 + ["a green square"] * 5
        batch = RewardBatch(images=_images(10), prompts=prompts)
        got, want = cl(batch), reward(batch)
        assert torch.equal(got.total, want.total.float()) and got.total.dtype == torch.float32
        assert set(got.components) == set(want.components) and set(got.details) == set(want.details)
        assert all(torch.equal(got.components[k], want.components[k].float()) for k in want.components)
        assert cl.requests_sent == 1 + 3 and srv.scored_items == 10  # health + ceil(10 / 4) requests
        # videos [B, T, 3, H, W]: the base class averages over frames, in process and served alike
        vb = RewardBatch(images=torch.rand(3, 2, 3, 16, 16), prompts=["a red circle"] * 3)
        assert torch.equal(cl(vb).total, reward(vb).total.float())
        # uint8 / png: the images quantized to round(255 x), the same for both encodings
        q = RewardBatch(images=(batch.images * 255).round() / 255, prompts=batch.prompts)
        for enc in ("uint8", "png"):
            assert torch.equal(_client(srv.url, encoding=enc, batch_size=0)(batch).total, reward(q).total.float()), enc
    finally:
        srv.shutdown()


def test_items_come_back_in_order_across_requests_in_flight():
    def index(batch):  # each item's own id from its metadata
        return RewardOutput(torch.tensor([float(m["i"]) for m in batch.metadata]), {"i": torch.zeros(len(batch))})

    srv = _server(index, delay_s=0.05)
    try:
        out = _client(srv.url, batch_size=3, max_in_flight=4)(RewardBatch(images=_images(11),
                                                                          metadata=[{"i": i} for i in range(11)]))
        assert out.total.tolist() == [float(i) for i in range(11)] and out.components["i"].shape == (11,)
    finally:
        srv.shutdown()


def test_robot_episodes_served_equal_the_binary_reward():
    """uint8 episode videos of their own lengths and the episode metadata travel as they are."""
    seen = []

    def success_and_lengths(batch):
        seen.extend(batch.videos)
        return success_reward(batch)

    srv = _server(success_and_lengths)
    try:
        vids = [np.random.default_rng(i).integers(0, 255, (t, 8, 8, 3), dtype=np.uint8)
                for i, t in enumerate((3, 5, 4))]
        meta = episode_metadata(["tabletop/reach"] * 3, torch.tensor([True, False, True]), [0, 0, 1])
        batch = RewardBatch(videos=vids, prompts=["reach the red cube"] * 3, metadata=meta)
        out = _client(srv.url, batch_size=2)(batch)
        assert torch.equal(out.total, success_reward(batch).total) and out.total.tolist() == [1.0, 0.0, 1.0]
        assert sorted(v.shape[0] for v in seen) == [3, 4, 5]  # two requests (2 + 1 episodes), each video intact
        for v in seen:
            want = next(w for w in vids if len(w) == v.shape[0])
            assert v.dtype == torch.uint8 and np.array_equal(v.numpy(), want)
    finally:
        srv.shutdown()


def test_slow_server_times_out_then_the_retry_is_answered_without_scoring_twice():
    reward = SlowOnce(first_s=1.5)
    srv = _server(reward)
    try:
        cl = _client(srv.url, timeout_s=0.5, retries=5, backoff_s=0.1)
        t0 = time.perf_counter()
        out = cl(RewardBatch(images=_images(4)))
        assert time.perf_counter() - t0 >= 1.4
        assert torch.allclose(out.total, _images(4).flatten(1).mean(1))
        assert cl.requests_sent >= 2  # timed out at least once, then answered
        assert reward.calls == 1 and srv.scored_items == 4  # the retry waited for the first attempt: no double count
    finally:
        srv.shutdown()


def test_dead_server_is_one_line_naming_it_after_the_retries():
    url = f"http://127.0.0.1:{free_port()}"
    cl = _client(url, retries=2, backoff_s=0.05, batch_size=2)
    t0 = time.perf_counter()
    with pytest.raises(RemoteRewardError) as e:
        cl(RewardBatch(images=_images(4)))
    msg = str(e.value)
    assert time.perf_counter() - t0 >= 0.05 + 0.1 and "\n" not in msg
    assert msg.startswith(f"reward server {url}: request ") and "batch 1 of 2, 2 items" in msg
    assert "failed 3 times" in msg and "Connection" in msg
    with pytest.raises(RemoteRewardError, match="GET /health failed 3 times"):
        cl.check()


def test_a_reward_that_raises_is_retried_then_reported():
    calls = []

    def broken(batch):
        calls.append(len(batch))
        raise RuntimeError("reward model out of memory")

    srv = _server(broken)
    try:
        with pytest.raises(RemoteRewardError, match=r"failed 3 times; last error: HTTP 500 .*out of memory"):
            _client(srv.url)(RewardBatch(images=_images(2)))
        assert calls == [2, 2, 2]
    finally:
        srv.shutdown()


class _Canned(BaseHTTPRequestHandler):
    """Answers every POST with ``server.make(request_id, n)`` (a misbehaving server)."""

    def do_POST(self):  # noqa: N802
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        body = json.loads(raw)
        out = self.server.make(body["request_id"], body["n"])
        self.server.posts += 1
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *a):
        pass


def _ans(**kw):
    return lambda rid, n: json.dumps({"request_id": rid, "total": [0.5] * n, **kw}).encode()


@pytest.mark.parametrize("make, why", [
    (lambda rid, n: b"<html>502 Bad Gateway</html>", "not JSON"),
    (lambda rid, n: json.dumps({"request_id": rid, "total": [0.5] * (n - 1)}).encode(),
     "total has 3 values, expected 4"),
    (lambda rid, n: json.dumps({"request_id": "someone-else", "total": [0.5] * n}).encode(),
     "answers request 'someone-else'"),
    (lambda rid, n: (b'{"request_id": "%s", "total": [NaN, 1, 1, 1]}' % rid.encode()), "non-finite number NaN"),
    (lambda rid, n: json.dumps({"request_id": rid, "total": ["0.5"] * n}).encode(), "total holds '0.5'"),
    (_ans(components={"a": [1.0, 2.0]}), "component 'a' has 2 values, expected 4"),
    (lambda rid, n: json.dumps({"request_id": rid}).encode(), "no 'total'"),
])
def test_malformed_and_wrong_sized_answers_are_one_line_errors(make, why):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Canned)
    srv.make, srv.posts = make, 0
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        with pytest.raises(RemoteRewardError) as e:
            _client(url)(RewardBatch(images=_images(4)))
        msg = str(e.value)
        assert msg.startswith(f"reward server {url}: malformed answer to request ") and "(batch 1 of 1, 4 items)" in msg
        assert why in msg and "\n" not in msg
        assert srv.posts == 1  # a malformed answer is not retried
    finally:
        srv.shutdown()
        srv.server_close()


def test_null_values_are_nan_like_an_in_process_nan():
    def partial(batch):
        return RewardOutput(torch.tensor([1.0, float("nan"), 0.25]))

    srv = _server(partial)
    try:
        out = _client(srv.url)(RewardBatch(images=_images(3)))
        assert out.total[0] == 1.0 and torch.isnan(out.total[1]) and out.total[2] == 0.25
    finally:
        srv.shutdown()


def test_arrays_round_trip_and_requests_are_checked():
    x = _images(2)
    assert torch.equal(decode_array(encode_array(x, "raw")), x)
    assert torch.equal(decode_array(encode_array(x, "png")), decode_array(encode_array(x, "uint8")))
    u = torch.randint(0, 255, (3, 4, 4, 3), dtype=torch.uint8)
    assert torch.equal(decode_array(encode_array(u, "png")), u) and torch.equal(decode_array(encode_array(u)), u)
    with pytest.raises(ValueError, match="'n' is 3 but the request holds 2 items"):
        decode_request(json.dumps({"request_id": "r", "n": 3, "images": encode_array(x)}).encode())
    bad = encode_array(x)
    bad["shape"] = [2, 3, 16, 15]
    with pytest.raises(ValueError, match="needs 1440"):
        decode_array(bad)


@pytest.mark.parametrize("kw, msg", [
    ({"timeout_s": 0}, "reward.remote.timeout_s must be > 0"), ({"retries": -1}, "reward.remote.retries must be >= 0"),
    ({"batch_size": -2}, "reward.remote.batch_size must be >= 0"), ({"max_in_flight": 0}, "max_in_flight must be >= 1"),
    ({"url": "127.0.0.1:8000"}, "expected http://HOST:PORT"), ({"encoding": "jpeg"}, "expected one of raw, uint8, png"),
])
def test_config_errors_name_the_key(kw, msg):
    with pytest.raises(ValueError, match=msg):
        RemoteRewardConfig(**kw).validate()


def test_build_remote_reward_from_a_name_or_a_section():
    assert build_remote_reward("shapes_verifier", RemoteRewardConfig()) is None
    assert build_remote_reward("http://127.0.0.1:9/", None).url == "http://127.0.0.1:9"
    assert build_remote_reward("x", RemoteRewardConfig(url="http://127.0.0.1:9")).url == "http://127.0.0.1:9"
    with pytest.raises(ValueError, match="named twice"):
        build_remote_reward("http://127.0.0.1:9", RemoteRewardConfig(url="http://127.0.0.1:10"))


def test_serve_reward_command_serves_and_refuses_bad_input(capsys):
    from diffusion_rl.cli import main as diffusion_main
    from vla_rl.cli import main as vla_main

    proc, url = serve("rewards.success:success_reward", cli="vla_rl.cli")
    try:
        assert _client(url).check() == "rewards.success:success_reward"
    finally:
        stop(proc)
    for main, args, want in [
        (diffusion_main, ["serve-reward", "no_such_reward"], "unknown reward 'no_such_reward'"),
        (diffusion_main, ["serve-reward", "shapes_verifier", "--kwargs", "[1]"], "expected a JSON object"),
        (vla_main, ["serve-reward", "shapes_verifier", "--port", "70000"], "expected 0..65535"),
    ]:
        assert main(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and want in err[0], err
    busy = make_server("shapes_verifier")  # a port in use
    try:
        assert diffusion_main(["serve-reward", "shapes_verifier", "--port", str(busy.server_address[1])]) == 2
        assert "cannot listen on 127.0.0.1:" in capsys.readouterr().err
    finally:
        busy.server_close()


def test_the_served_reward_and_its_arguments_are_checked_against_the_config():
    from rewards.remote import check_served

    srv = make_server("shapes_verifier", {"shape_width": 0.0})
    start_in_thread(srv)
    try:
        cl = _client(srv.url)
        check_served(cl, srv.url, {}, "reward.name")  # the URL alone: anything served
        check_served(cl, "shapes_verifier", {"shape_width": 0.0}, "reward.name")
        with pytest.raises(ValueError,
                           match="reward.name='jpeg_compressibility' but the server at .* serves 'shapes_verifier'"):
            check_served(cl, "jpeg_compressibility", {}, "reward.name")
        want = r"""reward.kwargs=\{'shape_width': 0.5\} but the server .* --kwargs '\{"shape_width": 0.0\}'"""
        with pytest.raises(ValueError, match=want):
            check_served(cl, srv.url, {"shape_width": 0.5}, "reward.name")
    finally:
        srv.shutdown()
        srv.server_close()
