"""The shipped JSON Schema file (for editors) is the one ``profile schema`` prints."""

from __future__ import annotations

import json
from pathlib import Path

from inspector.profile import profile_schema

SCHEMA = Path(__file__).resolve().parents[2] / "inspector" / "schemas" / "profile.schema.json"


def test_shipped_profile_schema_is_current():
    # Regenerate with: python main.py profile schema --out inspector/schemas/profile.schema.json
    assert json.loads(SCHEMA.read_text()) == json.loads(json.dumps(profile_schema()))
