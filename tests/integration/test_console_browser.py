"""The operator console in a real browser (headless Chromium) while a station runs.

One station and one browser for the whole flow, to keep it short: a wrong token is
refused (and logged), the right one lets the operator in, parts appear live, a
correction clicked in the page lands in the footage store with its provenance, and
the page logs no errors.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request

from inspector.footage.feedback import list_feedback
from inspector.footage.store import FootageStore
from tests.integration._console_harness import chromium, running_station, wait_for

TOKEN = "correct-horse-battery"


def _ids(drv) -> list[str]:
    return drv.execute_script(
        "return Array.from(document.querySelectorAll('#recent tr')).map(r => r.dataset.id)"
    )


def test_console_live_parts_correction_and_token(station_model, tmp_path, monkeypatch, caplog):
    from selenium.webdriver.common.by import By

    monkeypatch.setenv("LINE7_CONSOLE_TOKEN", TOKEN)
    caplog.set_level(logging.INFO, logger="inspector.station.console")
    with running_station(tmp_path, station_model, token_env="LINE7_CONSOLE_TOKEN") as st, \
            chromium() as drv:  # fmt: skip
        url = st.console.url
        # Without the token nothing is served but the sign-in page.
        try:
            urllib.request.urlopen(url + "api/state", timeout=5)
            raise AssertionError("the state was served without a token")
        except urllib.error.HTTPError as exc:
            assert exc.code == 401
        drv.get(url)
        drv.find_element(By.ID, "token").send_keys("wrong-token-123")
        drv.find_element(By.ID, "sign-in").click()
        wait_for(lambda: drv.find_element(By.ID, "refused").is_displayed(), 10, "refusal")
        assert drv.find_elements(By.ID, "recent") == []  # still the sign-in page
        refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
        assert any("POST /login" in m and "bad or missing token" in m for m in refusals)
        assert any("GET /api/state" in m for m in refusals)

        drv.find_element(By.ID, "token").send_keys(TOKEN)
        drv.find_element(By.ID, "sign-in").click()
        # Parts appear, and keep appearing (live, not a snapshot).
        first = wait_for(lambda: _ids(drv)[:1], 20, "the first parts")[0]
        wait_for(lambda: _ids(drv)[0] != first, 20, "newer parts")
        wait_for(lambda: float(drv.find_element(By.ID, "rate").text) > 0, 10, "parts/s")
        assert "line7" in drv.find_element(By.ID, "station").text
        # The frame was drawn (the canvas took the JPEG's size).
        wait_for(lambda: drv.execute_script("return document.getElementById('frame').width")
                 == 128, 10, "the frame on the canvas")  # fmt: skip

        # Hold the selected part, and correct it to another class.
        drv.find_element(By.ID, "operator").send_keys("alice")
        drv.find_element(By.ID, "follow").click()
        sel = wait_for(lambda: drv.find_element(By.ID, "sel-part").text, 5, "a selected part")
        buttons = drv.find_elements(By.CSS_SELECTOR, "#sel-buttons button.fb")
        other = next(b for b in buttons if "confirm" not in b.get_attribute("class"))
        pid, label = other.get_attribute("data-id"), other.get_attribute("data-label")
        other.click()
        wait_for(lambda: "stored as frame" in drv.find_element(By.ID, "message").text, 15,
                 "the feedback's confirmation")  # fmt: skip
        assert "corrected as " + label in drv.find_element(By.ID, "message").text
        wait_for(lambda: "alice" in drv.find_element(By.ID, "sel-feedback").text, 5,
                 "the page showing who corrected it")  # fmt: skip
        errors = [e for e in drv.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == [], errors
        station_label = st.console.hub.part(pid).doc["label"]
        model_sha = st.model_sha256

    with FootageStore(tmp_path / "store") as store:
        (fb,) = list_feedback(store)
        rec = store.get(fb.frame_id)
    assert (fb.result_id, fb.operator, fb.label, fb.station) == (pid, "alice", label, "line7")
    assert fb.model_sha256 == model_sha and fb.station_label == station_label
    assert fb.action == "correct" and fb.via == "console"
    assert (rec.label, rec.label_source) == (label, "operator:alice")
    assert rec.result is not None and rec.result["id"] == pid and rec.result["part_id"] == sel
    assert json.dumps(rec.result)  # the station's whole Result is kept with the frame
