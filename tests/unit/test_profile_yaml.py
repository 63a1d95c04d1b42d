"""The located YAML loader and the specs the profile format is built from."""

from __future__ import annotations

import re

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from inspector.errors import ConfigError, ProfileError
from inspector.yamlio.located import MAX_DEPTH, Checker, join_path, parse_yaml
from inspector.yamlio.spec import (
    Key,
    ListOf,
    Nullable,
    Number,
    Record,
    String,
    Tagged,
)


def test_values_and_keys_know_their_location():
    root = parse_yaml("a: 1\nb:\n  - x\n  - {c: true}\n", "f.yaml")
    assert (root.line, root.column) == (1, 1)
    assert (root.keys["b"].line, root.keys["b"].column) == (2, 1)
    seq = root.value["b"]
    assert (seq.value[0].line, seq.value[0].column) == (3, 5)
    c = seq.value[1].value["c"]
    assert (c.value, c.line, c.column) == (True, 4, 9)
    assert root.to_python() == {"a": 1, "b": ["x", {"c": True}]}


def test_crlf_and_bom_do_not_shift_locations():
    root = parse_yaml(b"\xef\xbb\xbfa: 1\r\nb: 2\r\n", "f.yaml")
    assert (root.value["b"].line, root.value["b"].column) == (2, 4)


def test_paths_stay_one_line():
    assert join_path("", "terms") == "terms"
    assert join_path("terms", 2) == "terms[2]"
    assert join_path("scan", "glimpse") == "scan.glimpse"
    assert join_path("rrm", "a\nb") == "rrm['a\\nb']"


def test_empty_documents_are_none():
    for text in ("", "# only a comment\n", "\n\n"):
        assert parse_yaml(text) is None
    assert parse_yaml("---\n").value is None  # an explicit (null) document is not empty


def test_merge_keys_and_explicit_overrides():
    root = parse_yaml("base: &b {x: 1, y: 2}\nitem:\n  <<: *b\n  y: 3\n")
    assert root.to_python()["item"] == {"x": 1, "y": 3}


def test_duplicate_keys_are_errors():
    with pytest.raises(ProfileError) as ei:
        parse_yaml("a: 1\nb: 2\na: 3\n", "f.yaml")
    assert (ei.value.line, ei.value.column) == (3, 1)
    assert "duplicate key 'a' (first at line 1)" in ei.value.message


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 500, 5000])
def test_deep_nesting_is_rejected_before_composing(depth):
    with pytest.raises(ProfileError, match="nesting deeper than"):
        parse_yaml("a: " + "[" * depth + "]" * depth, "f.yaml")


def test_nesting_at_the_limit_is_fine():
    root = parse_yaml("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert root.kind == "seq"


def test_error_class_can_be_chosen():
    with pytest.raises(ConfigError) as ei:
        parse_yaml("a: [1,\n", "station.yaml", error=ConfigError)
    assert ei.value.file == "station.yaml" and ei.value.line is not None


def test_reader_errors_have_a_location():
    with pytest.raises(ProfileError) as ei:
        parse_yaml("a: 1\nb: x\x00y\n", "f.yaml")
    assert (ei.value.line, ei.value.column) == (2, 5)


def test_bad_timestamps_and_unsupported_tags_are_profile_errors():
    for text in ("a: 2020-13-45\n", "a: !!set {x}\n", "a: !!omap [x: 1]\n", "a: !!str [1]\n"):
        with pytest.raises(ProfileError) as ei:
            parse_yaml(text, "f.yaml")
        assert ei.value.line == 1


def check(spec, text):
    root = parse_yaml(text, "f.yaml")
    return spec.check(root.value["v"], "v", Checker("f.yaml"))


def test_number_spec():
    n = Number(lo=0, hi=1, lo_exclusive=True)
    assert check(n, "v: 0.5") == 0.5
    assert check(n, "v: 1") == 1.0 and isinstance(check(n, "v: 1"), float)
    for bad, msg in [
        ("v: 0", "must be in (0, 1], got 0"),
        ("v: true", "expected a number, got true"),
        ("v: .nan", "expected a finite number"),
        ("v: '0.5'", "expected a number, got '0.5'"),
        ("v: " + "9" * 80, "must be in (0, 1], got 9999"),
    ]:
        with pytest.raises(ProfileError, match=re.escape(msg)):
            check(n, bad)
    i = Number(lo=1, hi=10, integer=True)
    assert check(i, "v: 3.0") == 3 and isinstance(check(i, "v: 3.0"), int)
    with pytest.raises(ProfileError, match="expected an integer, got 3.5"):
        check(i, "v: 3.5")


def test_tagged_spec_picks_the_variant_and_suggests_names():
    spec = Tagged(
        tag="kind",
        noun="shape",
        variants={
            "circle": Record(keys={"kind": Key(String(enum=("circle",))), "r": Key(Number())}),
            "square": Record(keys={"kind": Key(String(enum=("square",))), "side": Key(Number())}),
        },
    )
    assert check(spec, "v: {kind: circle, r: 2}") == {"kind": "circle", "r": 2.0}
    with pytest.raises(ProfileError, match="unknown shape 'circel' \\(did you mean 'circle'\\?\\)"):
        check(spec, "v: {kind: circel}")
    with pytest.raises(ProfileError, match="unknown key 'side'; allowed: kind, r"):
        check(spec, "v: {kind: circle, side: 2}")
    with pytest.raises(ProfileError, match="unknown key 'knd' \\(did you mean 'kind'\\?\\)"):
        check(spec, "v: {knd: circle}")
    with pytest.raises(ProfileError, match="missing required key 'kind'"):
        check(spec, "v: {r: 1}")


SPEC = Record(
    keys={
        "n": Key(Number(lo=0, hi=10, integer=True), required=True),
        "s": Key(Nullable(String(pattern=r"[a-z]+"))),
        "l": Key(ListOf(String(enum=("a", "b")), min_items=1, unique=True)),
    }
)
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-20, 20),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-20, max_value=20),
    st.text("abAB1 ", max_size=4),
    st.lists(st.sampled_from(["a", "b", "c", 1]), max_size=3),
)


@given(st.dictionaries(st.sampled_from(["n", "s", "l", "x"]), VALUES, max_size=4))
def test_spec_and_its_schema_agree(doc):
    """For a spec the format is made of, the validator and the JSON Schema agree exactly."""
    import yaml

    text = yaml.safe_dump({"v": doc})
    schema_ok = jsonschema.Draft202012Validator(SPEC.schema()).is_valid(yaml.safe_load(text)["v"])
    try:
        check(SPEC, text)
        ours = True
    except ProfileError:
        ours = False
    assert ours == schema_ok
