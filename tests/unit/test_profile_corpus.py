"""The good and bad profile corpora, through the validator and the JSON Schema.

Each file in ``tests/data/profiles/bad`` starts with two comment lines:

* ``# expect: LINE:COL: PATH: MESSAGE`` (a prefix of it): what the validator reports,
  without the file name;
* ``# schema: rejects``, or ``# schema: semantic: WHY`` for the rules JSON Schema cannot
  state (the test checks that the schema really accepts those, so the marks stay honest).

Good files may carry ``# warns: TEXT`` lines: each must appear among the warnings, and a
good file without them must load without warnings.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from inspector.errors import ProfileError
from inspector.profile import load_profile, profile_schema

DATA = Path("tests/data/profiles")
GOOD = sorted((DATA / "good").glob("*.yaml"))
BAD = sorted((DATA / "bad").glob("*.yaml"))
SHIPPED = sorted(Path("reward_profiles").glob("*.yaml"))


def header(path: Path, key: str) -> list[str]:
    text = path.read_bytes().decode("utf-8", "replace")
    return [m.group(1).strip() for m in re.finditer(rf"^# {key}: (.*)$", text, re.M)]


@pytest.fixture(scope="module")
def validator():
    schema = profile_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def schema_errors(validator, path: Path) -> list[str]:
    """What the JSON Schema says; a document yaml.safe_load cannot read is rejected too."""
    try:
        doc = yaml.safe_load(path.read_bytes())
    except (yaml.YAMLError, RecursionError) as exc:
        return [f"unparseable: {type(exc).__name__}"]
    return [e.message for e in validator.iter_errors(doc)]


def test_corpora_are_substantial():
    assert len(GOOD) >= 5
    assert len(BAD) >= 40
    assert sum(header(p, "schema")[0].startswith("semantic") for p in BAD) >= 3


def test_schema_is_json_and_names_every_term(validator):
    schema = profile_schema()
    json.dumps(schema)  # serialisable as is
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    terms = schema["properties"]["terms"]["items"]
    names = set(terms["properties"]["term"]["enum"])
    assert {"correct_class", "false_alarm", "focus_defect", "step_cost", "coverage"} <= names
    focus = next(
        b for b in terms["allOf"] if b["if"]["properties"]["term"]["const"] == "focus_defect"
    )
    params = focus["then"]["properties"]["params"]["properties"]
    assert params["min_overlap"] == {
        "type": "number",
        "minimum": 0.0,
        "maximum": 1.0,
        "description": params["min_overlap"]["description"],
    }
    assert "component" in params["min_overlap"]["description"]


@pytest.mark.parametrize("path", GOOD + SHIPPED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_good_profiles_pass_both(path, validator):
    profile = load_profile(str(path), warn=False)
    expected = header(path, "warns")
    for w in expected:
        assert any(w in found for found in profile.warnings), (w, profile.warnings)
    if not expected:
        assert profile.warnings == ()
    assert schema_errors(validator, path) == []


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_profiles_fail_with_their_message(path, validator):
    (expected,) = header(path, "expect")
    (schema_mark,) = header(path, "schema")
    with pytest.raises(ProfileError) as ei:
        load_profile(str(path), warn=False)
    e = ei.value
    assert e.file == str(path)
    loc = f"{e.line}:{e.column}: " if e.line is not None else ""
    got = loc + (f"{e.path}: " if e.path else "") + e.message
    assert got.startswith(expected), got
    assert str(e).startswith(f"{path}:")
    assert "\n" not in str(e)
    errors = schema_errors(validator, path)
    if schema_mark == "rejects":
        assert errors, "the schema accepts a structurally bad profile"
    else:
        assert schema_mark.startswith("semantic: ")
        assert errors == [], "marked semantic-only but the schema rejects it: mark it 'rejects'"
