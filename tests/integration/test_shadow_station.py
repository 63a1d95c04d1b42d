"""A shadow model at the real station: its verdicts travel in results and footage."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from inspector.station.result import SCHEMA_SHADOW, validate_result
from tests.integration._station_proc import REPO, StationProc, station_yaml


def test_shadow_verdicts_reach_results_and_footage_and_models_compare(tmp_path, station_model):
    shadow = tmp_path / "candidate.onnx"
    shutil.copyfile(station_model, shadow)
    footage = tmp_path / "footage"
    cfg = station_yaml(tmp_path, station_model, station="sh1",
                       shadow={"model": str(shadow), "budget_ms": 2000},
                       footage={"path": str(footage),
                                "keep": {"ok_one_in": 1, "low_confidence_below": 1.0}})  # fmt: skip
    proc = StationProc(cfg, "--max-parts", "12")
    assert proc.wait(120) == 0, proc.text()
    assert "  shadow   " in proc.text()
    docs = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(docs) == 12
    for d in docs:
        validate_result(d)
        assert d["schema"] == SCHEMA_SHADOW
        sh = d["shadow"]
        if "skipped" not in sh:
            # The same model on the same frame decides the same way.
            assert sh["label"] == d["label"] and sh["steps"] == d["steps"]
            assert sh["glimpse_path"] == d["glimpse_path"]
    assert sum("skipped" not in d["shadow"] for d in docs) >= 10

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(REPO / "main.py"), *args],
                              capture_output=True, text=True, cwd=REPO, timeout=120)  # fmt: skip

    store = tmp_path / "store"
    imp = cli("footage", "import", str(footage), "--format", "station", "--store", str(store))
    assert imp.returncode == 0, imp.stderr
    out = cli("models", "compare", "--footage", str(store), "--json")
    assert out.returncode == 0, out.stderr
    c = json.loads(out.stdout)
    assert c["with_shadow"] >= 10 and c["label_agreement"] == 1.0
    # Station frames carry the station's own verdict as label: no truth to score on,
    # so the promotion gate refuses on this evidence.
    assert c["live"]["parts"] == 0
    gate = cli("models", "compare", "--footage", str(store), "--gate")
    assert gate.returncode == 1 and "gate: REFUSED: 0 labelled parts" in gate.stdout
