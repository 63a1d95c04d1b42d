"""Image sharpness of the focused glimpse, for optics with a real focus.

The variance of the Laplacian is the classic focus measure (Pech-Pacheco et al.,
2000): it is large when the glimpse has crisp edges and small when it is blurred.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from inspector import PROCESS, RewardTerm, StepContext, hookimpl


def laplacian_variance(glimpse: np.ndarray) -> float:
    """Variance of the Laplacian of a uint8 glimpse (grey or BGR)."""
    import cv2

    img = glimpse
    if img.ndim == 3:
        img = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY) if img.shape[2] == 3 else img[..., 0]
    return float(cv2.Laplacian(img, cv2.CV_64F).var())


class Sharpness(RewardTerm):
    """reward * min(1, var(Laplacian(glimpse)) / norm) on every native-level step.

    :param reward: paid for a glimpse at least as sharp as ``norm``.
    :param norm: the Laplacian variance that counts as fully sharp (depends on the optics
        and the glimpse size; measure a few sharp glimpses and take a typical value).
    :param native_only: pay only for glimpses at the deepest zoom level.
    """

    name = "sharpness"
    channel = PROCESS
    summary = "variance of the Laplacian of the native glimpse / norm, capped at 1"
    reward_sign: ClassVar[int] = 1
    param_ranges: ClassVar[dict[str, tuple[float, float]]] = {"norm": (1e-6, 1e9)}

    def __init__(self, reward: float = 0.01, norm: float = 100.0, native_only: bool = True) -> None:
        super().__init__(reward)
        self.norm = float(norm)
        self.native_only = bool(native_only)

    def __call__(self, ctx: StepContext) -> float:
        if self.native_only and not ctx.native:
            return 0.0
        if ctx.glimpse is None or ctx.glimpse.size == 0:
            return 0.0
        return float(self.reward) * min(1.0, laplacian_variance(ctx.glimpse) / self.norm)


TERMS: tuple[type[RewardTerm], ...] = (Sharpness,)


@hookimpl
def register_reward_terms(register) -> None:
    """Register the sharpness term."""
    for cls in TERMS:
        register(cls.name, cls)
