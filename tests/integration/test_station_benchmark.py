"""benchmarks.speed.station runs end to end at a tiny size (figures are never asserted)."""

from __future__ import annotations

import re

import pytest

import benchmarks.speed.station as bench

pytestmark = pytest.mark.mqtt


def test_station_benchmark_measures_every_configuration(station_model, monkeypatch):
    written = {}

    def write_section(name, title, body, command, **_kw):
        written.update(name=name, body=body, command=command)

    monkeypatch.setattr(bench, "write_section", write_section)
    assert bench.main(["--model", str(station_model), "--rounds", "2", "--parts", "5"]) == 0
    assert written["name"] == "station"
    rows = [line for line in written["body"].splitlines() if line.startswith("| ")][1:]
    names = [r.split("|")[1].strip() for r in rows]
    assert names == [bench.FULL, bench.NORMAL, bench.NOMQTT, bench.BASE, bench.FULL_NF,
                     bench.BASE_NF]  # fmt: skip
    for r in rows:
        cells = [c.strip() for c in r.split("|")[1:-1]]
        rate, p50, p99, cpu = (float(c) for c in cells[1:5])
        assert rate > 0 and 0 < p50 <= p99 and cpu > 0
        assert cells[-1] == "yes"  # every result acknowledged (or kept, MQTT off)
    assert re.search(r"MQTT \+ outbox cost <= 15 %: (met|NOT met) \(-?\d", written["body"])
