"""Errors a user can see.

Every error caused by user input (a bad flag, a missing file, a broken YAML
profile, a camera that cannot be opened) is an :class:`InspectorError`. The CLI
prints it as one line and exits with status 2; anything else is a bug.
"""

from __future__ import annotations


class InspectorError(Exception):
    """Base class of every error caused by input, configuration or environment."""


class ProfileError(InspectorError):
    """A reward profile (YAML) is invalid.

    :param message: what is wrong, e.g. ``expected a number, got 'high'``.
    :param file: the profile's path, when known.
    :param line: 1-based line of the offending node, when known.
    :param column: 1-based column of the offending node, when known.
    :param path: the path inside the document, e.g. ``terms[2].reward``.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        path: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.path = path
        super().__init__(self.format())

    def format(self) -> str:
        """Return ``file:line:col: path: message`` with the known parts."""
        loc = ""
        if self.file is not None:
            loc = str(self.file)
            if self.line is not None:
                loc += f":{self.line}"
                if self.column is not None:
                    loc += f":{self.column}"
            loc += ": "
        where = f"{self.path}: " if self.path else ""
        return f"{loc}{where}{self.message}"


class ConfigError(ProfileError):
    """A training or station configuration file is invalid (same location format)."""


class PluginError(InspectorError):
    """A plugin failed to load or registered a duplicate name."""


class CameraError(InspectorError):
    """A camera driver cannot be opened or was given bad parameters."""


class ModelError(InspectorError):
    """A model file is missing, of the wrong kind, or does not match the profile."""


class ExportError(InspectorError):
    """Exporting or building an inference engine failed."""


class MissingDependencyError(InspectorError):
    """An optional library is needed for this feature and is not installed.

    :param package: the library that is missing.
    :param feature: what it is needed for.
    :param hint: how to install it.
    """

    def __init__(self, package: str, feature: str, hint: str | None = None) -> None:
        self.package = package
        msg = f"{feature} needs '{package}', which is not installed"
        if hint:
            msg += f" ({hint})"
        super().__init__(msg)


class StationError(InspectorError):
    """The inspection station cannot start or continue."""


class FootageError(InspectorError):
    """Footage cannot be imported, labelled or read."""


class PreferenceError(InspectorError):
    """A preferences file is invalid, or its preferences cannot fit a profile's values."""
