"""The console's HTTP side with a real station and real HTTP: access, methods, feedback, SSE."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request

import pytest

from inspector import ConfigError
from inspector.footage.feedback import list_feedback
from inspector.footage.store import FootageStore
from inspector.station.config import load_station_config
from tests.integration._console_harness import running_station, wait_for
from tests.integration._station_proc import station_yaml

TOKEN = "s3cret-token-for-tests"


def _call(url, method="GET", body=None, headers=None):
    data = (
        None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    )
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_an_open_address_needs_a_token(station_model, tmp_path, monkeypatch):
    monkeypatch.delenv("INSPECTOR_CONSOLE_TOKEN", raising=False)
    path = station_yaml(tmp_path, station_model, console={"enabled": True, "host": "0.0.0.0"})
    with pytest.raises(ConfigError, match="not a loopback address: set console.token_env"):
        load_station_config(path)
    section = {"enabled": True, "host": "0.0.0.0", "token_env": "NOPE_X"}
    path = station_yaml(tmp_path, station_model, console=section)
    from inspector.station.console.config import ConsoleSection

    with pytest.raises(ConfigError, match="NOPE_X is not set"):
        load_station_config(path).console.resolve_token()
    monkeypatch.setenv("NOPE_X", "short")
    with pytest.raises(ConfigError, match="at least 8"):
        ConsoleSection(enabled=True, token_env="NOPE_X").resolve_token()


def test_access_methods_feedback_and_events(station_model, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="inspector.station.console")
    with running_station(tmp_path, station_model, fps=40, token=TOKEN) as st:
        url = st.console.url
        auth = {"Authorization": f"Bearer {TOKEN}"}
        wait_for(lambda: len(st.console.hub.parts) >= 5, 30, "parts in the console")
        # Refused without a token or with a wrong one, each logged with the address.
        for path in ("api/state", "events", "frame/x.jpg"):
            assert _call(url + path)[0] == 401
        assert _call(url + "api/state", headers={"Authorization": "Bearer nope-nope"})[0] == 401
        status, body = _call(url + "login", "POST", {"token": "wrong-token"},
                             {"Content-Type": "application/json"})  # fmt: skip
        assert status == 401
        logged = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
        assert len(logged) == 5 and all("from 127.0.0.1:" in m for m in logged)
        # The sign-in page is all an unauthenticated browser gets.
        status, page = _call(url)
        assert status == 200 and b'action="/login"' in page
        # GET changes nothing: the state-changing routes only take POST.
        assert _call(url + "api/feedback", headers=auth)[0] == 405
        assert _call(url + "login")[0] == 405
        status, body = _call(url + "api/state", headers=auth)
        state = json.loads(body)
        assert status == 200 and state["info"]["station"] == "line7"
        part = state["parts"][-1]
        status, jpeg = _call(url + f"frame/{part['id']}.jpg", headers=auth)
        assert status == 200 and jpeg[:2] == b"\xff\xd8"
        fb = {"id": part["id"], "label": part["label"], "operator": "bob"}
        post = dict(auth, **{"Content-Type": "application/json"})
        # Another site cannot post on an operator's behalf; feedback must be JSON.
        assert (
            _call(url + "api/feedback", "POST", fb, dict(post, Origin="http://evil.example"))[0]
            == 401
        )
        assert _call(url + "api/feedback", "POST", b"id=1", dict(auth, **{
            "Content-Type": "application/x-www-form-urlencoded"}))[0] == 415  # fmt: skip
        assert _call(url + "api/feedback", "POST", dict(fb, label="nonsense"), post)[0] == 400
        assert _call(url + "api/feedback", "POST", dict(fb, operator="b o b"), post)[0] == 400
        assert _call(url + "api/feedback", "POST", dict(fb, id="gone"), post)[0] == 404
        assert _call(url + "api/feedback", "POST", b"x" * 10000, post)[0] == 413
        status, body = _call(url + "api/feedback", "POST", fb, post)
        assert status == 200, body
        out = json.loads(body)
        assert out["action"] == "confirm" and out["operator"] == "bob"
        # The page's stream: hello first, then parts as they come, then the feedback.
        req = urllib.request.Request(url + "events", headers=auth)
        with urllib.request.urlopen(req, timeout=10) as r:
            events = []
            for line in r:
                if line.startswith(b"event: "):
                    events.append(line[7:].strip().decode())
                if "parts" in events and "status" in events:
                    break
        assert events[0] == "hello"
        status, body = _call(url + "api/state", headers=auth)
        assert json.loads(body)["status"]["feedback"]["confirmed"] == 1
    with FootageStore(tmp_path / "store") as store:
        (row,) = list_feedback(store)
        rec = store.get(row.frame_id)
    assert (rec.label_source, row.result_id, row.station) == ("operator:bob", part["id"], "line7")


def test_console_benchmark_runs_at_a_tiny_size(station_model, tmp_path):
    from types import SimpleNamespace

    from benchmarks.speed import console as bench

    args = SimpleNamespace(params={"size": 128}, parts=20, rounds=1)
    out = bench.throughput(station_model, tmp_path, args)
    assert set(out["median"]) == {bench.WITHOUT, bench.WITH} and out["ratio"] > 0
    assert out["cpu_ms"][bench.WITH]["loop"] > 0
    assert out["client_latency_s"] and all(x >= 0 for x in out["client_latency_s"])
