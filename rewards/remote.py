"""Rewards served over the network: a client that is a ``Reward`` like any other, and a small server for any reward.

    reward = RemoteReward(RemoteRewardConfig(url="http://127.0.0.1:8000", timeout_s=30, retries=3))
    out = reward(RewardBatch(images=x, prompts=p))            # x [B, 3, H, W] in [0, 1] -> out.total [B]
    serve("shapes_verifier", host="127.0.0.1", port=8000)      # `diffusion-rl serve-reward shapes_verifier --port 8000`

So a reward that needs its own environment (a VLM judge, an OCR model, a preference model with conflicting
dependencies) runs in its own process, and the trainer talks to it over HTTP with the standard library only.

The protocol (version 1; JSON both ways, so a server in any language is a few lines):

* ``GET  {url}/health`` -> ``{"protocol": 1, "reward": NAME, "kwargs": {...}}``: the client checks it before the run
  (the trainers check NAME and the constructor arguments against ``reward.name`` / ``reward.kwargs`` when given).
* ``POST {url}/score`` with ``{"protocol": 1, "request_id": str, "batch_index": int, "n": N, "prompts": [N str],
  "metadata": [N dicts], "images": ARRAY | null, "videos": ARRAY | [N ARRAY] | null}`` -> ``{"request_id": the same,
  "n": N, "total": [N], "components": {name: [N]}, "details": {name: [N]}}``; a value is a finite number, or
  ``null`` where the reward gave NaN (the trainer's non-finite guard then skips the update, as it does in-process).
* ``ARRAY`` is ``{"encoding": "raw", "dtype": "float32" | "uint8", "shape": [...], "data": base64 of the C-order
  little-endian bytes}`` or ``{"encoding": "png", "shape": [...], "layout": "chw" | "hwc", "data": [base64 PNG per
  frame]}``. Images ``[N, 3, H, W]`` (videos ``[N, T, 3, H, W]``) travel as float32 (``encoding: raw``, lossless: the
  server's reward sees the very tensor the trainer decoded, so its numbers equal the in-process reward's bit for bit),
  or quantized to uint8 ``round(255 x)``, as raw bytes (``encoding: uint8``, 4x smaller) or one PNG per frame
  (``encoding: png``, smaller still, lossless for the uint8 values); the server gives the reward ``uint8 / 255``
  as float. Robot episodes are a list of ``N`` uint8 ``[T_i, H, W, 3]`` videos (``videos``), sent as they are.

A batch of ``N`` items is split into requests of at most ``batch_size`` items (0: one request), at most
``max_in_flight`` of them in flight at once; answers are put back in item order. Every request has an id
(``<client id>-<counter>``) that the answer must echo; a retry resends the same id, and the server answers a
repeated id from its cache (or waits for the first attempt to finish) instead of scoring again, so an item is
never lost nor counted twice. A connection error, a timeout or an HTTP 5xx / 429 is retried ``retries`` times
after ``backoff_s * 2**k`` seconds; then, and for an answer that is malformed, wrong-sized or non-finite, a
:class:`RemoteRewardError` names the server, the request id, the batch index and the item count in one line.
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import logging
import math
import re
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Literal
from urllib.parse import urlsplit

import numpy as np
import torch

from .base import RewardBatch, RewardOutput, concat_outputs

log = logging.getLogger(__name__)

PROTOCOL = 1
ENCODINGS = ("raw", "uint8", "png")


def is_url(name: str) -> bool:
    """Whether a reward name is a server address (``http://`` or ``https://``) rather than a reward name or path."""
    return name.startswith(("http://", "https://"))


def check_url(key: str, url: str) -> None:
    """A reward server's address ``url`` (config key ``key``) names a host and, if any, a port in 0..65535, with no
    whitespace and no ``?query`` / ``#fragment`` (the client appends ``/score`` to it), else one ``ValueError``: the
    first request would fail, after the run started."""
    try:
        parts = urlsplit(url)
    except ValueError as e:  # e.g. an unclosed IPv6 bracket
        raise ValueError(f"{key}={url!r}: {e}; expected http://HOST:PORT") from None
    if not parts.hostname:
        raise ValueError(f"{key}={url!r}: no host in it; expected http://HOST:PORT")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{key}={url!r}: a user:password@ part is not sent by the client; expected http://HOST:PORT")
    if not re.fullmatch(r"[A-Za-z0-9._:%-]+", parts.hostname) and not any(c.isspace() for c in url):
        raise ValueError(f"{key}={url!r}: the host {parts.hostname!r} is not a name or an IP address; expected "
                         "http://HOST:PORT")
    if any(c.isspace() for c in url):
        raise ValueError(f"{key}={url!r}: holds whitespace; expected http://HOST:PORT")
    if parts.query or parts.fragment or url.rstrip("/").endswith(("?", "#")):
        raise ValueError(f"{key}={url!r}: a ?query or #fragment would swallow the requests' paths (/score, /health); "
                         "expected http://HOST:PORT (a path prefix allowed)")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"{key}={url!r}: the port is not a number in 0..65535; expected http://HOST:PORT") from None
    if port == 0:  # (was: accepted; no server listens on port 0, so every request failed once the run started)
        raise ValueError(f"{key}={url!r}: port 0 names no server (serve-reward --port 0 picks a free port and prints "
                         "it); expected http://HOST:PORT with a port in 1..65535")


MAX_TIMEOUT_S = 86400  # reward.remote.timeout_s / backoff_s: at most a day
MAX_RETRIES = 20  # reward.remote.retries: the 20th retry already waits backoff_s x 2**19 (6 days at 1 s)
MAX_IN_FLIGHT = 1024  # reward.remote.max_in_flight: one client thread per request in flight


@dataclass
class RemoteRewardConfig:
    url: str = ""  # the reward server http://HOST:PORT (serve-reward NAME --port P); empty: reward.name is the address
    timeout_s: float = 60.0  # seconds one request may take before it is retried
    retries: int = 3  # extra attempts of a request after a connection error, a timeout or an HTTP 5xx / 429
    backoff_s: float = 1.0  # seconds before the first retry, doubled after each
    batch_size: int = 64  # items per request (0: the whole batch, for a reward that compares a batch's items)
    max_in_flight: int = 4  # requests of one batch sent at once
    encoding: Literal["raw", "uint8", "png"] = "raw"  # float images as raw float32 (lossless), uint8 or png (255x)

    def validate(self, key: str = "reward.remote") -> None:
        """One ``ValueError`` naming the first bad field."""
        if self.url and not is_url(self.url):
            raise ValueError(f"{key}.url={self.url!r}: expected http://HOST:PORT or https://HOST:PORT")
        if self.url:
            check_url(f"{key}.url", self.url)
        if not self.timeout_s > 0:
            raise ValueError(f"{key}.timeout_s must be > 0, got {self.timeout_s}")
        if self.timeout_s > MAX_TIMEOUT_S:  # (was: 1e300 accepted; the socket's OverflowError at the first request)
            raise ValueError(f"{key}.timeout_s={self.timeout_s:g}: expected at most {MAX_TIMEOUT_S} seconds (a day)")
        if self.retries < 0:
            raise ValueError(f"{key}.retries must be >= 0, got {self.retries}")
        if self.retries > MAX_RETRIES:  # the waits double: (was: 1e9 accepted; a dead server's 40th wait is 35 years,
            # the 1025th an OverflowError)
            raise ValueError(f"{key}.retries={self.retries}: expected at most {MAX_RETRIES} (the waits double: "
                             f"backoff_s x 2**{MAX_RETRIES - 1} before the last)")
        if self.backoff_s < 0:
            raise ValueError(f"{key}.backoff_s must be >= 0, got {self.backoff_s}")
        if self.backoff_s > MAX_TIMEOUT_S:
            raise ValueError(f"{key}.backoff_s={self.backoff_s:g}: expected at most {MAX_TIMEOUT_S} seconds (a day)")
        if self.batch_size < 0:
            raise ValueError(f"{key}.batch_size must be >= 0 (0: one request per batch), got {self.batch_size}")
        if self.max_in_flight < 1:
            raise ValueError(f"{key}.max_in_flight must be >= 1, got {self.max_in_flight}")
        if self.max_in_flight > MAX_IN_FLIGHT:  # one thread each (was: 1e9 accepted, the pool's threads unbounded)
            raise ValueError(f"{key}.max_in_flight={self.max_in_flight}: expected at most {MAX_IN_FLIGHT} requests at "
                             "once (one client thread each)")
        if self.encoding not in ENCODINGS:
            raise ValueError(f"{key}.encoding={self.encoding!r}: expected one of {', '.join(ENCODINGS)}")


class RemoteRewardError(RuntimeError):
    """A reward server that did not answer (after the retries), or answered wrongly; the message is one line."""


class _Retryable(Exception):
    """A failure worth another attempt (connection, timeout, HTTP 5xx / 429)."""


# ---- arrays on the wire ----------------------------------------------------------------------------------------
def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def _png(frame_hwc: np.ndarray) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(frame_hwc)).save(buf, format="PNG")
    return _b64(buf.getvalue())


def encode_array(x: torch.Tensor | np.ndarray, encoding: str = "raw") -> dict:
    """A float image/video tensor (``[..., 3, H, W]`` in [0, 1]) or a uint8 video (``[T, H, W, 3]``) -> ARRAY (module
    docstring). Float data: ``raw`` float32, or quantized ``round(255 x)`` (``uint8``, ``png``); uint8 data is sent as
    uint8 (``png``: as PNGs)."""
    a = x.detach().cpu() if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    if a.dtype == torch.uint8:
        layout, u8 = "hwc", a.numpy()
        if encoding == "png":
            frames = u8.reshape(-1, *u8.shape[-3:])
            return {"encoding": "png", "shape": list(u8.shape), "layout": layout, "data": [_png(f) for f in frames]}
        return {"encoding": "raw", "dtype": "uint8", "shape": list(u8.shape),
                "data": _b64(np.ascontiguousarray(u8).tobytes())}
    if not torch.is_floating_point(a):
        raise ValueError(f"images/videos must be float in [0, 1] or uint8, got dtype {a.dtype}")
    f = a.float()
    if encoding == "raw":
        return {"encoding": "raw", "dtype": "float32", "shape": list(f.shape),
                "data": _b64(np.ascontiguousarray(f.numpy().astype("<f4")).tobytes())}
    u8 = (f.nan_to_num(0.0).clamp(0, 1) * 255).round().to(torch.uint8).numpy()  # a NaN pixel is sent as 0
    if encoding == "uint8":
        return {"encoding": "raw", "dtype": "uint8", "as_float": True, "shape": list(u8.shape),
                "data": _b64(u8.tobytes())}
    if f.dim() < 3 or f.shape[-3] != 3:
        raise ValueError(f"png encoding needs images [..., 3, H, W], got shape {tuple(f.shape)}")
    frames = np.moveaxis(u8.reshape(-1, *u8.shape[-3:]), 1, -1)  # [F, H, W, 3]
    return {"encoding": "png", "shape": list(f.shape), "layout": "chw", "data": [_png(fr) for fr in frames]}


def decode_array(d: Any) -> torch.Tensor:
    """ARRAY -> the tensor a reward reads: float32 ``[..., 3, H, W]`` in [0, 1] for images (uint8 ones as ``/ 255``),
    uint8 ``[T, H, W, 3]`` for robot videos. ``ValueError`` on anything else."""
    if not isinstance(d, dict) or d.get("encoding") not in ("raw", "png") or not isinstance(d.get("shape"), list):
        raise ValueError("an array must be {'encoding': 'raw' | 'png', 'shape': [...], 'data': ...}")
    shape = tuple(int(s) for s in d["shape"])
    if d["encoding"] == "raw":
        dtype = {"float32": "<f4", "uint8": "u1"}.get(d.get("dtype"))
        if dtype is None:
            raise ValueError(f"array dtype {d.get('dtype')!r}: expected float32 or uint8")
        a = np.frombuffer(base64.b64decode(d["data"]), dtype=dtype)
        if a.size != math.prod(shape):
            raise ValueError(f"array data holds {a.size} values, shape {list(shape)} needs {math.prod(shape)}")
        t = torch.from_numpy(a.reshape(shape).copy())
        return t.float() / 255.0 if d.get("as_float") else t
    from PIL import Image

    frames = [np.asarray(Image.open(io.BytesIO(base64.b64decode(s))).convert("RGB")) for s in d["data"]]
    hwc = np.stack(frames) if frames else np.zeros((0, 1, 1, 3), np.uint8)
    if d.get("layout") == "chw":
        t = torch.from_numpy(np.moveaxis(hwc, -1, 1).copy()).float() / 255.0
        return t.reshape(shape)
    return torch.from_numpy(hwc.copy()).reshape(shape)


def _jsonable(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    raise TypeError(f"metadata value {v!r} of type {type(v).__name__} cannot be sent as JSON")


def encode_request(batch: RewardBatch, request_id: str, batch_index: int, encoding: str = "raw") -> bytes:
    """One ``POST /score`` body for ``batch`` (module docstring)."""
    n = len(batch)
    body: dict[str, Any] = {"protocol": PROTOCOL, "request_id": request_id, "batch_index": batch_index, "n": n,
                            "prompts": list(batch.prompts), "metadata": list(batch.metadata), "images": None,
                            "videos": None}
    if batch.images is not None:
        body["images"] = encode_array(batch.images, encoding)
    if batch.videos is not None:
        v = batch.videos
        body["videos"] = ([encode_array(e, encoding) for e in v] if isinstance(v, (list, tuple))
                          else encode_array(v, encoding))
    return json.dumps(body, default=_jsonable).encode()


def decode_request(raw: bytes) -> tuple[str, int, RewardBatch]:
    """``(request_id, batch_index, RewardBatch)`` from a ``POST /score`` body; ``ValueError`` when it is malformed."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"the body is not JSON ({e})") from None
    if not isinstance(body, dict) or not isinstance(body.get("request_id"), str) or not isinstance(body.get("n"), int):
        raise ValueError("the body must be a JSON object with 'request_id' (str) and 'n' (int)")
    if body.get("protocol", PROTOCOL) != PROTOCOL:
        raise ValueError(f"protocol {body.get('protocol')!r} is not supported (this server speaks {PROTOCOL})")
    n = body["n"]
    images = decode_array(body["images"]) if body.get("images") is not None else None
    v = body.get("videos")
    videos = None if v is None else [decode_array(e) for e in v] if isinstance(v, list) else decode_array(v)
    batch = RewardBatch(images=images, prompts=[str(p) for p in body.get("prompts") or []],
                        metadata=list(body.get("metadata") or []), videos=videos)
    if len(batch) != n:
        raise ValueError(f"'n' is {n} but the request holds {len(batch)} items")
    return body["request_id"], int(body.get("batch_index", 0)), batch


def _values(v: torch.Tensor) -> list:
    return [None if not math.isfinite(x) else x for x in v.detach().double().cpu().flatten().tolist()]


def encode_answer(out: RewardOutput, request_id: str, n: int) -> bytes:
    """A reward's output -> the ``POST /score`` answer (NaN/inf -> null)."""
    total = getattr(out, "total", None)
    if not isinstance(total, torch.Tensor) or tuple(total.shape) != (n,):
        got = tuple(total.shape) if isinstance(total, torch.Tensor) else type(total).__name__
        raise ValueError(f"the reward returned total of shape {got}, expected [{n}]")
    return json.dumps({"request_id": request_id, "n": n, "total": _values(total),
                       "components": {k: _values(v) for k, v in (getattr(out, "components", None) or {}).items()},
                       "details": {k: _values(v) for k, v in (getattr(out, "details", None) or {}).items()}},
                      allow_nan=False).encode()


def _no_constants(token: str):
    raise ValueError(f"non-finite number {token} (a value must be a finite number, or null where the reward gave NaN)")


def decode_answer(raw: bytes, request_id: str, n: int) -> RewardOutput:
    """Check an answer (JSON, the request's id, ``n`` finite-or-null numbers per field) -> ``RewardOutput`` of float32
    ``[n]`` tensors (null -> NaN); ``ValueError`` saying what is wrong."""
    try:
        body = json.loads(raw, parse_constant=_no_constants)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"not JSON ({e}): {raw[:80]!r}") from None
    if not isinstance(body, dict):
        raise ValueError(f"expected a JSON object, got {type(body).__name__}")
    if body.get("request_id") != request_id:
        raise ValueError(f"it answers request {body.get('request_id')!r}, not {request_id!r}")

    def vec(v: Any, what: str) -> torch.Tensor:
        if not isinstance(v, list):
            raise ValueError(f"{what} is {type(v).__name__}, expected a list of {n} numbers")
        if len(v) != n:
            raise ValueError(f"{what} has {len(v)} values, expected {n} (one per item)")
        bad = [x for x in v if x is not None and (isinstance(x, bool) or not isinstance(x, (int, float))
                                                  or not math.isfinite(x))]
        if bad:
            raise ValueError(f"{what} holds {bad[0]!r}, expected finite numbers (or null)")
        return torch.tensor([float("nan") if x is None else float(x) for x in v], dtype=torch.float32)

    if "total" not in body:
        raise ValueError("no 'total' in it")
    groups = {}
    for g in ("components", "details"):
        d = body.get(g) or {}
        if not isinstance(d, dict):
            raise ValueError(f"{g} is {type(d).__name__}, expected an object name -> list")
        groups[g] = {str(k): vec(v, f"{g[:-1]} {k!r}") for k, v in d.items()}
    return RewardOutput(vec(body["total"], "total"), groups["components"], groups["details"])


# ---- the client ------------------------------------------------------------------------------------------------
class RemoteReward:
    """A :class:`rewards.base.Reward` whose scores come from a reward server (module docstring)."""

    def __init__(self, cfg: RemoteRewardConfig, url: str | None = None):
        cfg.validate()
        self.cfg = cfg
        self.url = (url or cfg.url).rstrip("/")
        if not is_url(self.url):
            raise ValueError(f"remote reward: expected a server address http://HOST:PORT, got {self.url!r}")
        self.name = f"remote {self.url}"
        self.__name__ = self.name
        self._id = uuid.uuid4().hex[:12]
        self._counter = itertools.count()
        self._count_lock = threading.Lock()
        self._batches = itertools.count()
        self._pool: ThreadPoolExecutor | None = None
        self.requests_sent = 0  # HTTP attempts (retries included), for tests and logs
        self.served_kwargs: dict | None = None  # the served reward's constructor arguments (GET /health)

    # -- plumbing
    def _post(self, path: str, data: bytes | None) -> bytes:
        req = urllib.request.Request(self.url + path, data=data, method="POST" if data is not None else "GET",
                                     headers={"Content-Type": "application/json"})
        with self._count_lock:
            self.requests_sent += 1
        try:
            with urllib.request.urlopen(req, timeout=self.cfg.timeout_s) as r:
                return r.read()
        except urllib.error.HTTPError as e:
            detail = " ".join(e.read()[:200].decode(errors="replace").split())
            if e.code >= 500 or e.code == 429:
                raise _Retryable(f"HTTP {e.code} {detail}") from None
            raise ValueError(f"HTTP {e.code} {detail}") from None
        except (TimeoutError, ConnectionError, urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, TimeoutError) or "timed out" in str(reason):
                raise _Retryable(f"timed out after {self.cfg.timeout_s:g} s") from None
            raise _Retryable(f"{type(reason).__name__}: {reason}") from None

    def _with_retries(self, fn: Callable[[], Any], what: str, quiet: bool = False) -> Any:
        last = ""
        for attempt in range(self.cfg.retries + 1):
            try:
                return fn()
            except _Retryable as e:
                last = str(e)
                log.log(logging.DEBUG if quiet else logging.WARNING, "reward server %s: %s failed (attempt %d/%d): %s",
                        self.url, what, attempt + 1, self.cfg.retries + 1, last)
                if attempt < self.cfg.retries:
                    time.sleep(self.cfg.backoff_s * 2 ** attempt)
            except ValueError as e:
                raise RemoteRewardError(f"reward server {self.url}: {what} was refused: {e}") from None
        n = self.cfg.retries + 1
        raise RemoteRewardError(f"reward server {self.url}: {what} failed {n} time{'s' if n > 1 else ''}; last error: "
                                f"{last}")

    def check(self) -> str:
        """``GET /health`` (with the retries): the served reward's name (its kwargs: ``served_kwargs``);
        ``RemoteRewardError`` when it does not answer."""
        raw = self._with_retries(lambda: self._post("/health", None), "GET /health", quiet=True)  # one line at start
        try:
            body = json.loads(raw)
            name, proto, kwargs = str(body["reward"]), body.get("protocol"), body.get("kwargs") or {}
            if not isinstance(kwargs, dict):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            raise RemoteRewardError(f"reward server {self.url}: GET /health answered {raw[:80]!r}, expected "
                                    "{'protocol': 1, 'reward': NAME}") from None
        if proto != PROTOCOL:
            raise RemoteRewardError(f"reward server {self.url} speaks protocol {proto!r}, this client {PROTOCOL}")
        self.served_kwargs = kwargs
        return name

    def _request(self, part: RewardBatch, batch_index: int, n_batches: int) -> RewardOutput:
        with self._count_lock:
            rid = f"{self._id}-{next(self._counter)}"
        n = len(part)
        body = encode_request(part, rid, batch_index, self.cfg.encoding)
        what = f"request {rid} (batch {batch_index + 1} of {n_batches}, {n} items)"
        raw = self._with_retries(lambda: self._post("/score", body), what)
        try:
            return decode_answer(raw, rid, n)
        except ValueError as e:
            raise RemoteRewardError(f"reward server {self.url}: malformed answer to {what}: {e}") from None

    def __call__(self, batch: RewardBatch) -> RewardOutput:
        """Score ``batch`` (``len(batch)`` items) in requests of ``batch_size``, ``max_in_flight`` at once."""
        n = len(batch)
        bs = self.cfg.batch_size or max(n, 1)
        spans = [(i, min(i + bs, n)) for i in range(0, n, bs)]
        parts = [_slice(batch, a, b) for a, b in spans]
        if len(parts) == 1:
            outs = [self._request(parts[0], 0, 1)]
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.cfg.max_in_flight, thread_name_prefix="remote-reward")
            futs = [self._pool.submit(self._request, p, k, len(parts)) for k, p in enumerate(parts)]
            try:
                outs = [f.result() for f in futs]
            except BaseException:
                for f in futs:
                    f.cancel()
                raise
        if not outs:
            return RewardOutput(torch.zeros(0))
        try:
            return concat_outputs(outs)
        except ValueError as e:
            raise RemoteRewardError(f"reward server {self.url}: malformed answers to one batch: {e}") from None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def _slice(batch: RewardBatch, a: int, b: int) -> RewardBatch:
    def cut(x):
        return None if x is None else x[a:b]
    return RewardBatch(images=cut(batch.images), prompts=list(batch.prompts[a:b]) if batch.prompts else [],
                       metadata=list(batch.metadata[a:b]) if batch.metadata else [],
                       videos=cut(batch.videos) if not isinstance(batch.videos, tuple) else list(batch.videos[a:b]))


def build_remote_reward(name: str, cfg: RemoteRewardConfig | None, key: str = "reward") -> RemoteReward | None:
    """The client when ``name`` is a URL (``cfg.url`` must then be empty or equal) or ``cfg.url`` is set; else None."""
    cfg = cfg or RemoteRewardConfig()
    url = name if is_url(name) else cfg.url
    if is_url(name) and cfg.url and cfg.url.rstrip("/") != name.rstrip("/"):
        raise ValueError(f"{key}: the server is named twice, {name!r} and remote.url={cfg.url!r}; give one")
    if not url:
        return None
    check_url(key, url)
    return RemoteReward(cfg, url)


# ---- the server ------------------------------------------------------------------------------------------------
class RewardServer(ThreadingHTTPServer):
    """An HTTP server for one reward (``POST /score``, ``GET /health``). Scoring calls are serialized (a reward model
    need not be thread-safe); answers are cached by request id (the last ``cache`` ones), so a retried request is
    answered, not scored again. Stand-ins for a slow remote model (benchmarks): ``delay_s`` adds a fixed latency to
    every request (concurrent requests wait it out together, like network or queueing time), ``delay_per_item_s``
    adds scoring time per item inside the serialized section (like one model scoring one batch at a time)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, reward: Callable[[RewardBatch], RewardOutput], name: str, host: str = "127.0.0.1",
                 port: int = 0, delay_s: float = 0.0, cache: int = 1024, quiet: bool = True,
                 delay_per_item_s: float = 0.0, kwargs: dict | None = None):
        self.reward, self.reward_name, self.delay_s, self.quiet = reward, name, float(delay_s), quiet
        self.reward_kwargs = dict(kwargs or {})  # reported by GET /health
        self.delay_per_item_s = float(delay_per_item_s)
        self._score_lock, self._state_lock = threading.Lock(), threading.Lock()
        self._answers: OrderedDict[str, bytes] = OrderedDict()
        self._pending: dict[str, threading.Event] = {}
        self._cache = cache
        self.scored_items = 0  # items the reward scored (a retried request is not scored again)
        super().__init__((host, port), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def answer(self, raw: bytes) -> bytes:
        rid, _, batch = decode_request(raw)
        with self._state_lock:
            if rid in self._answers:
                return self._answers[rid]
            ev = self._pending.get(rid)
            first = ev is None
            if first:
                ev = self._pending[rid] = threading.Event()
        if not first:  # the same request is being scored (a client's retry after a timeout): wait for it
            ev.wait()
            with self._state_lock:
                if rid in self._answers:
                    return self._answers[rid]
            return self.answer(raw)  # the first attempt failed: score it now
        try:
            if self.delay_s > 0:
                time.sleep(self.delay_s)
            with self._score_lock:
                if self.delay_per_item_s > 0:
                    time.sleep(self.delay_per_item_s * len(batch))
                out = self.reward(batch)
                self.scored_items += len(batch)
            body = encode_answer(out, rid, len(batch))
            with self._state_lock:
                self._answers[rid] = body
                while len(self._answers) > self._cache:
                    self._answers.popitem(last=False)
            return body
        finally:
            with self._state_lock:
                self._pending.pop(rid, None)
            ev.set()


class _Handler(BaseHTTPRequestHandler):
    server: RewardServer
    protocol_version = "HTTP/1.1"

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - http.server's hook
        if self.path.rstrip("/") != "/health":
            return self._send(404, json.dumps({"error": f"no {self.path}; GET /health, POST /score"}).encode())
        self._send(200, json.dumps({"protocol": PROTOCOL, "reward": self.server.reward_name,
                                    "kwargs": self.server.reward_kwargs}).encode())

    def do_POST(self) -> None:  # noqa: N802 - http.server's hook
        if self.path.rstrip("/") != "/score":
            return self._send(404, json.dumps({"error": f"no {self.path}; POST /score"}).encode())
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = self.server.answer(raw)
        except ValueError as e:  # a malformed request, or the reward refused its input
            return self._send(400, json.dumps({"error": " ".join(str(e).split())}).encode())
        except Exception as e:  # noqa: BLE001 - the reward failed: 500, the client retries
            log.exception("reward %s failed", self.server.reward_name)
            return self._send(500, json.dumps({"error": f"{type(e).__name__}: {' '.join(str(e).split())}"}).encode())
        self._send(200, body)

    def log_message(self, fmt: str, *args: Any) -> None:  # noqa: D102 - quiet unless asked
        if not self.server.quiet:
            super().log_message(fmt, *args)


MAX_DELAY_S = 3600.0  # the longest stand-in latency serve-reward adds (time.sleep overflows near 1e11 s)


def make_server(name: str, kwargs: dict | None = None, host: str = "127.0.0.1", port: int = 0, delay_s: float = 0.0,
                quiet: bool = True, delay_per_item_s: float = 0.0) -> RewardServer:
    """A :class:`RewardServer` for the reward ``name`` (a built-in name or ``package.module:attr``, built with
    ``kwargs``); ``ValueError`` for an unknown reward or an address it cannot listen on."""
    from . import build_reward

    if not (0 <= delay_s < math.inf and 0 <= delay_per_item_s < math.inf):  # a nan fails both comparisons
        raise ValueError(f"--delay-s and --delay-per-item-s must be finite and >= 0, got {delay_s} and "
                         f"{delay_per_item_s}")
    if max(delay_s, delay_per_item_s) > MAX_DELAY_S:  # (was: served, then time.sleep overflowed on each request)
        raise ValueError(f"--delay-s={delay_s} / --delay-per-item-s={delay_per_item_s}: expected at most "
                         f"{MAX_DELAY_S} s (a stand-in latency)")
    if not 0 <= port <= 65535:
        raise ValueError(f"--port {port}: expected 0..65535 (0: a free port)")
    if not host.strip():  # the socket would listen on every interface, as an explicit 0.0.0.0 does
        raise ValueError(f"--host {host!r} is empty (expected an address to listen on: 127.0.0.1 for this machine "
                         "only, 0.0.0.0 for every interface)")
    reward = build_reward(name, **(kwargs or {}))
    if not callable(reward):  # e.g. math:pi: it would serve, then fail every request
        raise ValueError(f"reward {name!r} is a {type(reward).__name__}, not callable (expected a reward function, a "
                         "class, or a built-in reward name)")
    try:
        return RewardServer(reward, name, host, port, delay_s, quiet=quiet, delay_per_item_s=delay_per_item_s,
                            kwargs=kwargs)
    except OSError as e:
        raise ValueError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None


def serve_forever(server: RewardServer, out=None) -> int:
    """Serve until Ctrl-C / SIGTERM; prints the address first (one line, flushed: scripts wait for it)."""
    import sys

    print(f"serving reward {server.reward_name!r} at {server.url} (POST /score, GET /health); Ctrl-C stops",
          file=out or sys.stdout, flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def check_served(client: RemoteReward, name: str, kwargs: dict, key: str) -> None:
    """``GET /health`` before a run (``ValueError``, one line, when the server does not answer); when the config names
    the reward (``name`` not the URL) or gives ``kwargs``, they must be what the server serves."""
    try:
        served = client.check()
    except RemoteRewardError as e:
        raise ValueError(f"{key}={client.url!r}: {e} (start it with: serve-reward NAME --port PORT)") from None
    if not is_url(name) and name != served:
        raise ValueError(f"{key}={name!r} but the server at {client.url} serves {served!r}; set {key}={served!r} (or "
                         f"{key}={client.url!r})")
    if kwargs and json.loads(json.dumps(kwargs)) != client.served_kwargs:
        raise ValueError(f"reward.kwargs={kwargs} but the server at {client.url} was started with --kwargs "
                         f"'{json.dumps(client.served_kwargs)}'; give the same arguments, or none")


def add_serve_command(sub, prog: str) -> None:
    """The ``serve-reward`` subcommand of a console script (``prog``: its name, for the help)."""
    s = sub.add_parser("serve-reward", help="serve a reward over HTTP for rewards in their own environment "
                                            "(reward.name=http://HOST:PORT in a run's config)",
                       description="Serve a built-in reward or NAME=package.module:attr over HTTP (rewards.remote); "
                                   f"a run points at it with reward.name=http://HOST:PORT. Example: {prog} "
                                   "serve-reward "
                                   "shapes_verifier --port 8000")
    s.add_argument("name", help="a built-in reward name or package.module:attr")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1: this machine only)")
    s.add_argument("--port", type=int, default=8000, help="port (0: a free one, printed)")
    s.add_argument("--kwargs", default="{}", help="the reward's constructor arguments as a JSON object")
    s.add_argument("--delay-s", type=float, default=0.0, help="fixed latency added to every request (benchmarks)")
    s.add_argument("--delay-per-item-s", type=float, default=0.0,
                   help="scoring time added per item, one batch at a time (benchmarks: a model's throughput)")
    s.add_argument("--verbose", action="store_true", help="log every request")


def serve_command(args) -> int:
    """Run ``serve-reward`` from parsed arguments (bad input: ``ValueError``, one line, exit 2)."""
    if not args.name.strip():
        raise ValueError("NAME is empty (expected a built-in reward name or package.module:attr)")
    try:
        kwargs = json.loads(args.kwargs)
    except json.JSONDecodeError as e:
        raise ValueError(f"--kwargs {args.kwargs!r}: not JSON ({e})") from None
    if not isinstance(kwargs, dict):
        raise ValueError(f"--kwargs {args.kwargs!r}: expected a JSON object")
    server = make_server(args.name, kwargs, args.host, args.port, args.delay_s, quiet=not args.verbose,
                         delay_per_item_s=args.delay_per_item_s)
    return serve_forever(server)


def start_in_thread(server: RewardServer) -> threading.Thread:
    """Serve in a daemon thread (tests, benchmarks); ``server.shutdown()`` stops it."""
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    return t


__all__ = ["RemoteReward", "RemoteRewardConfig", "RemoteRewardError", "RewardServer", "build_remote_reward",
           "decode_answer", "decode_array", "decode_request", "encode_answer", "encode_array", "encode_request",
           "is_url", "make_server", "check_served", "serve_forever", "start_in_thread", "add_serve_command",
           "serve_command"]
