"""YAML in, with locations: one guarded parser for everything written by hand.

- :mod:`~inspector.yamlio.located`: ``parse_yaml``, the one loader (safe tags only,
  size, depth, alias-expansion and duplicate-key guards) into located ``YNode`` trees.
- :mod:`~inspector.yamlio.spec`: specs that check a ``YNode`` tree and describe it
  as JSON Schema (the reward-profile format is written with them).
- :mod:`~inspector.yamlio.profile_spec`: the reward-profile format as specs.
- :mod:`~inspector.yamlio.dataclass_load`: settings dataclasses (``TrainConfig``,
  ``StationConfig``) from YAML, typed by their field hints.

Nothing is imported here, so that importing one part does not import the others.
"""
