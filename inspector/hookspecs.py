"""Every hook of inspector, documented.

Hooks are called once at start-up (registration), never inside ``env.step()``:
terms and drivers are resolved into plain objects, so pluggy's call order
never decides reward maths.
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy

hookspec = pluggy.HookspecMarker("inspector")
hookimpl = pluggy.HookimplMarker("inspector")


@hookspec
def register_reward_terms(register: Callable[..., None]) -> None:
    """Register reward terms that profiles can name.

    Called once when the plugin manager is built (before any profile loads).

    :param register: call ``register(name, factory)`` for each term. ``name`` is the
        string a profile writes in ``terms[i].term``; ``factory`` is a
        :class:`inspector.terms.RewardTerm` subclass (or a callable with the same
        keyword signature) that is called as ``factory(reward=..., **params)``.
        Registering a name twice, from the same or another plugin, raises
        :class:`inspector.errors.PluginError` naming both plugins.
    """


@hookspec
def register_camera_drivers(register: Callable[..., None]) -> None:
    """Register camera drivers that ``--camera`` can name.

    Called once when the plugin manager is built.

    :param register: call ``register(name, factory)`` for each driver. ``factory`` is a
        :class:`inspector.camera.CameraDriver` subclass whose ``__init__`` keyword
        arguments (with type hints and defaults) are the driver's parameters; string
        values from ``--param KEY=VALUE`` are converted with those hints. A duplicate
        name raises :class:`inspector.errors.PluginError` naming both plugins.
    """
