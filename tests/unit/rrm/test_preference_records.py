"""Preferences files are untrusted input: bounded, no pickle, one-line errors."""

from __future__ import annotations

import json

import pytest

from inspector.errors import PreferenceError
from inspector.rrm import preference_records as pr
from inspector.rrm.preference_records import load_preferences, parse_preferences

TERMS = {"correct_class": 1.0, "step_cost": -0.05}


def record(**changes):
    doc = {
        "part_id": "syn-1",
        "profile_sha256": "ab" * 32,
        "values": {"correct_class": 1.0, "step_cost": -0.01},
        "a": {"terms": dict(TERMS), "verdict": "line", "steps": 5, "path": [[0.5, 0.5, 0]]},
        "b": {"terms": {"correct_class": 0.0, "step_cost": -0.02}},
        "choice": "a",
    }
    doc.update(changes)
    return doc


def lines(*docs) -> bytes:
    return ("\n".join(d if isinstance(d, str) else json.dumps(d) for d in docs) + "\n").encode()


def test_round_trip(tmp_path):
    p = parse_preferences(lines(record()), "x.jsonl")[0]
    assert p.choice == "a" and p.a.terms == TERMS and p.a.path == ((0.5, 0.5, 0),)
    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps(p.to_json()) + "\n\n")  # blank lines are fine
    again, sha = load_preferences(str(f))
    assert again[0].a == p.a and again[0].b == p.b and len(sha) == 64


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("{not json", r"x.jsonl:2: not a JSON object"),
        ("[1, 2]", r"x.jsonl:2: expected an object, got a list"),
        (record(choice="A"), r"x.jsonl:2: choice: expected 'a', 'b' or 'tie', got 'A'"),
        (record(chioce="a"), r"x.jsonl:2: chioce: unknown key; allowed: part_id"),
        ({k: v for k, v in record().items() if k != "b"}, r"x.jsonl:2: b: missing"),
        (
            record(a={"terms": {"correct_class": "high"}}),
            r"x.jsonl:2: a.terms.correct_class: expected a number, got 'high'",
        ),
        (
            record(a={"terms": {"correct_class": 1e300}}),
            r"a.terms.correct_class: .* is out of range",
        ),
        ('{"part_id": "p", "choice": "a", "a": {"terms": {"x": NaN}}}', r"NaN is not a number"),
        (record(a={"terms": {}}), r"a.terms: expected an object term -> raw return"),
        (record(a={"terms": TERMS, "path": [[2.0, 0.5, 0]]}), r"a.path\[0\]: x and y"),
        (record(a={"terms": TERMS, "steps": -1}), r"a.steps: expected a count"),
        (record(values={}, profile_sha256=""), r"needs 'values' or 'profile_sha256'"),
        (record(part_id="x" * 300), r"part_id: longer than 256"),
        ("[" * 100_000 + "]" * 100_000, r"x.jsonl:2: (JSON nested too deeply|not a JSON)"),
    ],
)
def test_bad_records_are_one_line_errors(doc, message):
    with pytest.raises(PreferenceError, match=message) as err:
        parse_preferences(lines(record(), doc), "x.jsonl")
    assert "\n" not in str(err.value)
    assert len(str(err.value)) < 300


def test_not_utf8():
    with pytest.raises(PreferenceError, match="x.jsonl:1: not UTF-8"):
        parse_preferences(b'{"part_id": "\xff"}\n', "x.jsonl")


def test_sizes_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(pr, "MAX_LINE_BYTES", 100)
    with pytest.raises(PreferenceError, match="x.jsonl:1: line longer than 100 bytes"):
        parse_preferences(lines(record()), "x.jsonl")
    monkeypatch.setattr(pr, "MAX_LINE_BYTES", 1 << 20)
    monkeypatch.setattr(pr, "MAX_RECORDS", 2)
    with pytest.raises(PreferenceError, match="x.jsonl:3: more than 2 preferences"):
        parse_preferences(lines(record(), record(), record()), "x.jsonl")
    monkeypatch.setattr(pr, "MAX_FILE_BYTES", 10)
    f = tmp_path / "big.jsonl"
    f.write_bytes(lines(record()))
    with pytest.raises(PreferenceError, match="larger than"):
        load_preferences(str(f))


def test_missing_file():
    with pytest.raises(PreferenceError, match="nope.jsonl: cannot read"):
        load_preferences("nope.jsonl")
