"""The profile's ok class: named, implied by a class called ``ok``, or none at all.

A profile's figures (false-alarm rate, defect recall, the ok-vs-defect operating point)
rest on one class meaning "no defect". Taking the first class silently would make a
defect class the defect-free one on footage where every part has a defect, so the ok
class is ``ok_class`` when given, else the class named ``ok``; ``ok_class: none`` says
that no class is defect-free (classification only), and a profile with neither is
refused with what to write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inspector.yamlio.located import Checker, YNode

#: The ok class of a profile without ``ok_class``: a class called ``ok``.
DEFAULT_OK_CLASS = "ok"
#: ``ok_class: none``: no class is defect-free (classification-only footage).
NO_OK_CLASS = "none"


def ok_class_of(doc: Mapping[str, Any]) -> str | None:
    """The profile's ok class: ``ok_class``, None for ``ok_class: none``, else ``ok``.

    :param doc: the checked profile document.
    """
    ok = doc.get("ok_class", DEFAULT_OK_CLASS)
    return None if ok == NO_OK_CLASS else ok


def check_ok_class(root: YNode, doc: Mapping[str, Any], ck: Checker) -> None:
    """Refuse an ok class that is not a class or not first, or a profile that names none.

    :param root: the profile's located YAML (for the line and column of errors).
    :param doc: the checked document.
    :param ck: the checker errors are raised through.
    :raises ProfileError: see above.
    """
    classes: list[str] = doc["classes"]
    ok = ok_class_of(doc)
    if "ok_class" in doc:
        node = root.value["ok_class"]
        if ok is None and NO_OK_CLASS in classes:
            raise ck.fail(
                node,
                "ok_class",
                f"'ok_class: {NO_OK_CLASS}' means no class is defect-free, but a class is "
                f"named {NO_OK_CLASS!r}: rename that class, or name the ok class",
            )
        if ok is not None and ok not in classes:
            raise ck.fail(
                node,
                "ok_class",
                f"{ok!r} is not one of the classes: {', '.join(classes)} "
                f"(or '{NO_OK_CLASS}' when every part has a defect)",
            )
        if ok is not None and classes[0] != ok:
            raise ck.fail(
                node,
                "ok_class",
                f"the ok class {ok!r} must come first in classes (classes[0] is {classes[0]!r})",
            )
    elif DEFAULT_OK_CLASS not in classes:
        # Taking the first class as "ok" would make a defect class the defect-free one.
        raise ck.fail(
            root.value["classes"],
            "classes",
            f"no class is named {DEFAULT_OK_CLASS!r} and there is no ok_class: write "
            f"'ok_class: <class>' to name the defect-free class (listed first), or "
            f"'ok_class: {NO_OK_CLASS}' when every part has a defect (classification only: "
            "no false-alarm rate, no ok-vs-defect operating point)",
        )
    elif classes[0] != DEFAULT_OK_CLASS:
        raise ck.fail(
            root.value["classes"],
            "classes",
            f"the ok class {DEFAULT_OK_CLASS!r} must come first in classes (classes[0] is "
            f"{classes[0]!r}), or write 'ok_class: ...' ({NO_OK_CLASS!r} for none)",
        )
