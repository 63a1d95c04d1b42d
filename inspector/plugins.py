"""Plugin manager: hookspecs, built-in plugins, third-party entry points.

Built-ins are named as module strings so that ``inspector`` never imports
``plugins`` or ``camera_drivers`` at module level (see DESIGN.md). Third-party
plugins come through the entry-point group ``inspector``;
``INSPECTOR_LOAD_PLUGINS=a,b`` limits which of those load (empty string: none).
"""

from __future__ import annotations

import difflib
import functools
import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pluggy

from inspector import hookspecs
from inspector.errors import PluginError

#: Built-in plugins, one concern per module.
DEFAULT_PLUGINS: tuple[str, ...] = (
    "plugins.focus",
    "plugins.outcome",
    "plugins.process",
    "plugins.sharpness",
    "camera_drivers.synthetic",
    "camera_drivers.folder",
    "camera_drivers.video",
    "camera_drivers.live",
    "camera_drivers.footage_store",
)

ENTRY_POINT_GROUP = "inspector"


@dataclass
class Registry:
    """What the plugins registered: name -> (factory, plugin that registered it)."""

    kind: str
    items: dict[str, tuple[Callable[..., Any], str]] = field(default_factory=dict)

    def add(self, name: str, factory: Callable[..., Any], plugin: str) -> None:
        """Add ``name``; a duplicate is a PluginError naming both plugins."""
        if not isinstance(name, str) or not name:
            raise PluginError(f"plugin {plugin!r} registered a {self.kind} with an empty name")
        if name in self.items:
            other = self.items[name][1]
            raise PluginError(
                f"{self.kind} {name!r} is registered twice: by plugin {other!r} and by plugin "
                f"{plugin!r}; rename one of them"
            )
        self.items[name] = (factory, plugin)

    def get(self, name: str) -> Callable[..., Any]:
        """Return the factory for ``name`` or raise PluginError with a suggestion."""
        try:
            return self.items[name][0]
        except KeyError:
            raise PluginError(self.unknown_message(name)) from None

    def unknown_message(self, name: str) -> str:
        """``unknown <kind> 'x' (did you mean 'y'?); known: a, b``."""
        names = sorted(self.items)
        close = difflib.get_close_matches(str(name), names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"unknown {self.kind} {name!r}{hint}; known: {', '.join(names) or 'none'}"

    def names(self) -> list[str]:
        """Sorted registered names."""
        return sorted(self.items)

    def plugin_of(self, name: str) -> str:
        """Which plugin registered ``name``."""
        return self.items[name][1]


@dataclass
class Plugins:
    """A loaded plugin manager with its resolved registries."""

    pm: pluggy.PluginManager
    reward_terms: Registry
    camera_drivers: Registry


def _plugin_name(pm: pluggy.PluginManager, plugin: object) -> str:
    return pm.get_name(plugin) or getattr(plugin, "__name__", repr(plugin))


def _collect(pm: pluggy.PluginManager, hook_name: str, kind: str) -> Registry:
    registry = Registry(kind)
    hook = getattr(pm.hook, hook_name)
    # Call each implementation separately so we know which plugin registered what.
    for impl in hook.get_hookimpls():
        plugin_name = impl.plugin_name

        def register(name: str, factory: Callable[..., Any], _p: str = plugin_name) -> None:
            registry.add(name, factory, _p)

        try:
            impl.function(register=register)
        except PluginError:
            raise
        except Exception as exc:  # a broken third-party plugin must not look like our bug
            raise PluginError(f"plugin {plugin_name!r} failed in {hook_name}: {exc}") from exc
    return registry


def _allowed_entry_points() -> set[str] | None:
    raw = os.environ.get("INSPECTOR_LOAD_PLUGINS")
    if raw is None:
        return None
    return {p.strip() for p in raw.split(",") if p.strip()}


def make_plugin_manager(*, builtins: tuple[str, ...] = DEFAULT_PLUGINS) -> Plugins:
    """Build a fresh plugin manager: hookspecs, built-ins, then entry points.

    :param builtins: module names of the built-in plugins to register.
    :raises PluginError: a plugin failed to import, a hook is unknown, or a name is
        registered twice.
    """
    pm = pluggy.PluginManager("inspector")
    pm.add_hookspecs(hookspecs)
    for modname in builtins:
        try:
            mod = importlib.import_module(modname)
        except ImportError as exc:
            raise PluginError(f"built-in plugin {modname!r} failed to import: {exc}") from exc
        pm.register(mod, name=modname)
    allowed = _allowed_entry_points()
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if allowed is not None and ep.name not in allowed:
            continue
        if pm.get_plugin(ep.name) is not None:
            continue
        try:
            plugin = ep.load()
        except Exception as exc:
            raise PluginError(f"plugin {ep.name!r} ({ep.value}) failed to load: {exc}") from exc
        pm.register(plugin, name=ep.name)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"plugin hook not known to inspector: {exc}") from exc
    return Plugins(
        pm=pm,
        reward_terms=_collect(pm, "register_reward_terms", "reward term"),
        camera_drivers=_collect(pm, "register_camera_drivers", "camera driver"),
    )


@functools.lru_cache(maxsize=1)
def _cached(key: str | None) -> Plugins:
    return make_plugin_manager()


def get_plugins() -> Plugins:
    """The process-wide plugin manager (rebuilt when INSPECTOR_LOAD_PLUGINS changes)."""
    return _cached(os.environ.get("INSPECTOR_LOAD_PLUGINS"))


def reset_plugins() -> None:
    """Forget the cached plugin manager (tests that install plugins use this)."""
    _cached.cache_clear()
