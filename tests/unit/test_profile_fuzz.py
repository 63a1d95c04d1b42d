"""Fuzzing the profile loader: broken input ends in a located ProfileError, nothing else.

``test_broken_profiles_raise_located_profile_errors`` generates profiles that are
broken by construction (a value of the wrong type, a missing required key, an
unknown key, YAML syntax errors, nesting too deep, huge numbers, NaN and infinities,
unicode where names must be ASCII, control characters, garbage documents), starting
from every good profile we have. ``test_random_edits_never_crash`` makes random
character edits, which may or may not break a profile: those must load or raise a
ProfileError, never anything else.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector.errors import ProfileError
from inspector.profile import load_profile_text

SOURCES = sorted(Path("reward_profiles").glob("*.yaml")) + sorted(
    Path("tests/data/profiles/good").glob("*.yaml")
)
TEXTS = [p.read_text(encoding="utf-8") for p in SOURCES]
DOCS = [yaml.safe_load(t) for t in TEXTS]
FILE = "fuzz.yaml"


def walk(node, path=()):
    """Every (path, value) below ``node``, the node itself excluded."""
    if isinstance(node, dict):
        items = node.items()
    elif isinstance(node, list):
        items = enumerate(node)
    else:
        return
    for k, v in items:
        yield (*path, k), v
        yield from walk(v, (*path, k))


def get(doc, path):
    for k in path:
        doc = doc[k]
    return doc


def free_mapping(doc, path) -> bool:
    """``rrm.shaping.params`` of a null potential takes any keys and values."""
    if tuple(path[:3]) != ("rrm", "shaping", "params"):
        return False
    return doc["rrm"]["shaping"].get("potential") is None


def family(v) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    return {str: "str", dict: "dict", list: "list", type(None): "none"}[type(v)]


WORD = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)
NON_NUMBER_TEXT = WORD.map(lambda s: "zz" + s)
NON_ASCII = st.text(min_size=1, max_size=10).map(lambda s: s + "é")


def replacement(original):
    """A value of another type family that no slot of the original's type accepts."""
    fam = family(original)
    options = {
        "number": st.integers(-5, 5),
        "str": NON_NUMBER_TEXT,
        "bool": st.booleans(),
        "list": st.lists(NON_NUMBER_TEXT, min_size=1, max_size=3),
        "dict": st.dictionaries(WORD.map(lambda s: "zz_" + s), NON_NUMBER_TEXT, min_size=1),
    }
    banned = {fam}
    if fam == "dict":
        banned.add("number")  # a per-class reward {..} may also be a plain number
    return st.one_of(*[s for f, s in options.items() if f not in banned])


def dump(doc, flow) -> str:
    return yaml.safe_dump(doc, default_flow_style=flow, allow_unicode=True, sort_keys=False)


@st.composite
def wrong_type(draw):
    doc = copy.deepcopy(draw(st.sampled_from(DOCS)))
    paths = [(p, v) for p, v in walk(doc) if v is not None and not free_mapping(doc, p)]
    path, value = draw(st.sampled_from(paths))
    get(doc, path[:-1])[path[-1]] = draw(replacement(value))
    return dump(doc, draw(st.sampled_from([False, None, True])))


REQUIRED_TOP = ("name", "classes", "step_budget", "terms")


@st.composite
def missing_key(draw):
    doc = copy.deepcopy(draw(st.sampled_from(DOCS)))
    choices = [((), k) for k in REQUIRED_TOP]
    choices += [(("terms", i), k) for i in range(len(doc["terms"])) for k in ("term", "reward")]
    rrm = doc.get("rrm", {})
    for section, key in (("redistribution", "method"), ("normalisation", "method")):
        if section in rrm:
            choices.append((("rrm", section), key))
    if "shaping" in rrm:
        choices.append((("rrm", "shaping"), "potential"))
    parent, key = draw(st.sampled_from(choices))
    del get(doc, parent)[key]
    return dump(doc, draw(st.sampled_from([False, None])))


@st.composite
def unknown_key(draw):
    doc = copy.deepcopy(draw(st.sampled_from(DOCS)))
    maps = [((), doc)] + [
        (p, v) for p, v in walk(doc) if isinstance(v, dict) and not free_mapping(doc, (*p, "x"))
    ]
    _, target = draw(st.sampled_from(maps))
    key = draw(st.one_of(WORD.map(lambda s: "zz_" + s), NON_ASCII))
    if draw(st.booleans()) and target:
        # rename an existing key instead of adding one
        old = draw(st.sampled_from(sorted(target)))
        target[key] = target.pop(old)
    else:
        target[key] = draw(st.one_of(st.integers(), NON_NUMBER_TEXT))
    return dump(doc, draw(st.sampled_from([False, None])))


@st.composite
def huge_number(draw):
    doc = copy.deepcopy(draw(st.sampled_from(DOCS)))
    paths = [p for p, v in walk(doc) if family(v) == "number"]
    path = draw(st.sampled_from(paths))
    value = draw(
        st.one_of(
            st.floats(min_value=1e10, max_value=1e308),
            st.floats(min_value=-1e308, max_value=-1e10),
            st.integers(min_value=7, max_value=400).map(lambda k: 10**k + 1),
            st.sampled_from([math.nan, math.inf, -math.inf]),
        )
    )
    get(doc, path[:-1])[path[-1]] = value
    return dump(doc, draw(st.sampled_from([False, None])))


@st.composite
def unicode_name(draw):
    doc = copy.deepcopy(draw(st.sampled_from(DOCS)))
    paths = [
        p
        for p, v in walk(doc)
        if isinstance(v, str) and p[0] != "description" and not free_mapping(doc, p)
    ]
    path = draw(st.sampled_from(paths))
    get(doc, path[:-1])[path[-1]] = draw(NON_ASCII)
    return dump(doc, draw(st.sampled_from([False, None])))


@st.composite
def deep_nesting(draw):
    doc = copy.deepcopy(draw(st.sampled_from(DOCS)))
    paths = [p for p, v in walk(doc) if family(v) in ("number", "str", "bool")]
    path = draw(st.sampled_from(paths))
    get(doc, path[:-1])[path[-1]] = "DEEPNESTINGHERE"
    depth = draw(st.integers(33, 400))
    opener, closer = draw(st.sampled_from([("[", "]"), ("{a: ", "}")]))
    text = dump(doc, draw(st.sampled_from([False, None])))
    return text.replace("DEEPNESTINGHERE", opener * depth + "1" + closer * depth, 1)


SYNTAX_FRAGMENTS = [
    "[",
    "{a: 1",
    "]",
    "}",
    "*undefined_alias",
    "\tkey: 1",
    "key: 'unclosed",
    'key: "bad \\q escape"',
    "- item",
    "key: value: other",
    "&",
    "? ? ?",
    "%YAML 9.9",
    "!<tag:yaml.org,2002:python/object/new:os.system> x",
]


@st.composite
def syntax_error(draw):
    text = draw(st.sampled_from(TEXTS))
    lines = text.split("\n")
    # Insert before a top-level line, where no block scalar or flow collection is open.
    cut = draw(st.sampled_from([i for i, ln in enumerate(lines) if ln[:1].isalpha()]))
    frag = draw(st.sampled_from(SYNTAX_FRAGMENTS))
    return "\n".join(lines[:cut] + [frag] + lines[cut:])


@st.composite
def control_character(draw):
    text = draw(st.sampled_from(TEXTS))
    pos = draw(st.integers(0, len(text)))
    ch = draw(st.sampled_from([chr(c) for c in [*range(0, 9), 11, 12, *range(14, 32), 127]]))
    return text[:pos] + ch + text[pos:]


GARBAGE = st.one_of(
    st.just(""),
    st.text(max_size=30).filter(lambda s: ":" not in s),
    st.lists(st.integers(), max_size=5).map(yaml.safe_dump),
    st.binary(max_size=40),
    st.sampled_from(["null", "~", "42", "[]", "{}", "- a\n- b", "'just a string'", "---\n..."]),
)

BROKEN = st.one_of(
    wrong_type(),
    missing_key(),
    unknown_key(),
    huge_number(),
    unicode_name(),
    deep_nesting(),
    syntax_error(),
    control_character(),
    GARBAGE,
)


def test_sources_are_valid():
    assert len(TEXTS) >= 8
    for t in TEXTS:
        load_profile_text(t, warn=False)


@settings(
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(BROKEN)
def test_broken_profiles_raise_located_profile_errors(text):
    with pytest.raises(ProfileError) as ei:
        load_profile_text(text, FILE, warn=False)
    e = ei.value
    assert e.file == FILE
    assert e.line is not None or e.path
    assert str(e).startswith(f"{FILE}:")
    assert "\n" not in str(e)


@st.composite
def random_edit(draw):
    text = draw(st.sampled_from(TEXTS))
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "replace", "swap_lines"]))
        ch = draw(st.sampled_from(list(" :-[]{}#&*!|>'\"\t\n0.9ae,") + ["\u00e9", "\x00"]))
        if op == "insert":
            text = text[:pos] + ch + text[pos:]
        elif op == "delete":
            text = text[:pos] + text[pos + 1 :]
        elif op == "replace":
            text = text[:pos] + ch + text[pos + 1 :]
        else:
            lines = text.split("\n")
            i = draw(st.integers(0, len(lines) - 1))
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
    return text


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_edit())
def test_random_edits_never_crash(text):
    try:
        load_profile_text(text, FILE, warn=False)
    except ProfileError as e:
        assert e.file == FILE
        assert e.line is not None or e.path
