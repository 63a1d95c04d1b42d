"""How a frame's label is chosen from its annotation, and which frames' boxes disagree.

VOC and COCO annotate boxes, not frames; a frame's class is one of these rules
(``footage import --label-rule``):

* ``largest-area`` (the default): the class with the most box area; ties go to the
  class named first. A frame without boxes is ``ok``.
* ``first-object``: the class of the first box in the file. Without boxes, ``ok``.
* ``folder``: the name of the folder the image is in (``IMAGES/crazing/x.jpg`` ->
  ``crazing``).
* ``filename-pattern``: a regular expression searched in the image's file name
  without its extension; its group ``label`` (else its first group, else the whole
  match) is the class. The default pattern takes the name before a trailing number:
  ``crazing_12`` -> ``crazing``, ``rolled-in_scale_3`` -> ``rolled-in_scale``.

Whatever the rule, a frame whose boxes name several classes, or whose label is not
the class of any of its boxes, is reported (:func:`disagreement`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from inspector.annotations.common import OK_CLASS, Record, label_from_boxes
from inspector.errors import FootageError
from inspector.frames import Box

#: The rules ``--label-rule`` accepts.
LABEL_RULES: tuple[str, ...] = ("largest-area", "first-object", "folder", "filename-pattern")
DEFAULT_LABEL_RULE = "largest-area"
#: The name before a trailing number (and its separator).
DEFAULT_LABEL_PATTERN = r"^(.*?)[-_. ]*\d+$"
#: What each rule means, for the line an import prints.
_MEANING = {
    "largest-area": f"the class with the most box area ({OK_CLASS!r} without boxes)",
    "first-object": f"the class of the first box in the file ({OK_CLASS!r} without boxes)",
    "folder": "the name of the image's folder",
    "filename-pattern": "the file name through the pattern {pattern!r}",
}


@dataclass(frozen=True)
class LabelRule:
    """A rule choosing a frame's label (see the module docstring).

    :param name: one of :data:`LABEL_RULES`.
    :param pattern: the regular expression of ``filename-pattern`` (default
        :data:`DEFAULT_LABEL_PATTERN`).
    :raises FootageError: an unknown rule or a pattern that does not compile.
    """

    name: str = DEFAULT_LABEL_RULE
    pattern: str | None = None

    def __post_init__(self) -> None:
        if self.name not in LABEL_RULES:
            raise FootageError(
                f"unknown label rule {self.name!r}; expected one of: {', '.join(LABEL_RULES)}"
            )
        if self.pattern is not None and self.name != "filename-pattern":
            raise FootageError(
                f"label pattern {self.pattern!r} is for label rule filename-pattern,"
                f" not {self.name}"
            )
        if self.name == "filename-pattern":
            pattern = self.pattern or DEFAULT_LABEL_PATTERN
            try:
                re.compile(pattern)
            except re.error as exc:
                raise FootageError(f"--label-pattern {pattern!r}: {exc}") from None
            object.__setattr__(self, "pattern", pattern)

    def describe(self) -> str:
        """``largest-area: the class with the most box area ('ok' without boxes)``."""
        return f"{self.name}: " + _MEANING[self.name].format(pattern=self.pattern)

    def label(self, rec: Record) -> tuple[str | None, str | None]:
        """The record's label under this rule, or ``(None, why)`` when it gives none.

        :param rec: a record read from VOC or COCO (its boxes in file order).
        """
        if self.name == "largest-area":
            return label_from_boxes(rec.boxes), None
        if self.name == "first-object":
            return (rec.boxes[0].label if rec.boxes else OK_CLASS), None
        if self.name == "folder":
            name = rec.image.parent.name
            return (name, None) if name else (None, "the image has no folder to name its class")
        m = re.search(str(self.pattern), rec.image.stem)
        if m is None:
            return None, f"file name {rec.image.stem!r} does not match {self.pattern!r}"
        groups = m.groupdict()
        label = groups.get("label") or (m.group(1) if m.groups() else m.group(0))
        if not label:
            return None, f"{self.pattern!r} gives an empty class for {rec.image.stem!r}"
        return label, None


#: The layouts (and import formats) whose frames get their label from boxes by a rule.
RULED_LAYOUTS: tuple[str, ...] = ("voc", "coco")


def label_by_rule(
    records: list[Record],
    layout: str,
    rule: LabelRule | None,
    skips: list[tuple[str, str]] | None = None,
    *,
    flag: str = "--label-rule",
    kind: str = "--format",
) -> list[Record]:
    """The records of ``layout`` labelled by ``rule`` (the footage import and the
    ``folder`` camera alike): VOC/COCO records by the rule (default ``largest-area``);
    any other layout brings its labels, and a rule other than the default is an error.

    :param flag: how the caller names the rule, ``kind`` how it names the layout (for
        the error).
    :raises FootageError: a rule other than the default for a layout that is not VOC/COCO.
    """
    if layout in RULED_LAYOUTS:
        return relabel(records, rule or LabelRule(), skips)
    check_rule_applies(layout, rule, flag=flag, kind=kind)
    return records


def check_rule_applies(
    layout: str, rule: LabelRule | None, *, flag: str = "--label-rule", kind: str = "--format"
) -> None:
    """Refuse a rule other than the default for a layout that brings its own labels.

    :raises FootageError: naming ``flag`` and the layouts it is for.
    """
    if layout not in RULED_LAYOUTS and rule is not None and rule != LabelRule():
        raise FootageError(
            f"{flag} is for {kind} {' or '.join(RULED_LAYOUTS)}; {layout} brings its labels"
        )


def box_classes(boxes: Iterable[Box]) -> list[str]:
    """The classes of ``boxes``, each once, in file order."""
    return list(dict.fromkeys(b.label for b in boxes))


def disagreement(rec: Record) -> str | None:
    """Why this frame's boxes disagree with each other or with its label, or None.

    :param rec: a labelled record.
    """
    classes = box_classes(rec.boxes)
    if len(classes) > 1:
        return f"boxes of {len(classes)} classes ({', '.join(classes)}); labelled {rec.label}"
    if classes and rec.label is not None and rec.label != classes[0]:
        return f"boxes of class {classes[0]}; labelled {rec.label}"
    return None


def relabel(
    records: list[Record], rule: LabelRule, skips: list[tuple[str, str]] | None = None
) -> list[Record]:
    """The records labelled by ``rule``; a record the rule gives no label is skipped.

    :param records: records read from VOC or COCO.
    :param rule: the rule.
    :param skips: where the skipped ones are recorded as ``(image, reason)``.
    """
    out = []
    for r in records:
        label, why = rule.label(r)
        if label is None:
            if skips is not None:
                skips.append((str(r.image), f"--label-rule {rule.name}: {why}"))
            continue
        out.append(replace(r, label=label))
    return out
