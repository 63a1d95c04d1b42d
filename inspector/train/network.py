"""The policy network: a small CNN over the glimpses and the overview plus the state.

Every glimpse is standardised on its own (subtract its mean, divide by its std)
before the CNN: low-contrast defects are invisible to a CNN on raw [0, 1] pixels.
One CNN with shared weights reads each remembered glimpse; the features of the
current glimpse and the max over all remembered glimpses (evidence kept across
glimpses) are concatenated with the overview's and the state's features.

With ``evidence_classes`` the extractor also classifies every remembered glimpse on its
own (a linear head on its CNN features, softmax over the verdict classes) and adds the
max of each class's probability over the memory: the decision rule of exhaustive tiling
(the most confident defect tile), over the glimpses the agent chose. Perception
pretraining trains that head on mask-labelled crops (``inspector.train.perception``),
so the verdict head starts with a calibrated per-class detector as an input instead of
having to recover one from the pooled features.
"""

from __future__ import annotations

import gymnasium as gym
import torch
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn


def standardise(x: torch.Tensor, eps: float = 1.0) -> torch.Tensor:
    """Per-image standardisation over the last two axes (eps in grey levels).

    Two passes (the mean, then the mean square of the centred image) rather than
    ``Tensor.std``: the same figure to float rounding at a third of the CPU on a batch of
    32x32 glimpses (torch's one-pass std is the slow reduction on CPU), and every glimpse
    of every PPO step goes through it.
    """
    mean = x.mean(dim=(-2, -1), keepdim=True)
    centred = x - mean
    std = centred.square().mean(dim=(-2, -1), keepdim=True).sqrt()
    return centred / (std + eps)


class GlimpseCNN(nn.Module):
    """Conv stack -> global max and mean pooling (a point defect survives max pooling).

    :param channels: width.
    :param separable: the second and third layers depthwise-separable (a 3x3 filter per
        channel, then a 1x1 mix of the channels), the MobileNet factorisation: at width 32
        about a seventh of the plain stack's multiply-adds on a 32x32 glimpse (1.0 M
        against 7.2 M); a width-32 student with it ran at 1.3-1.5x a width-8 member's
        time per glimpse in ONNX Runtime on one core, the plain one at 3.9x
        (docs/training.md). For a distilled student that has to be wide (tell the defect
        types apart) and cheap (run as one agent).
    :param fine: two stride-1 5x5 layers first, at full resolution, instead of a
        stride-2 3x3 one. A one-pixel defect on a periodic texture (an LCD's pixel grid
        of pitch 3-5) is only told apart by comparing a pixel with its neighbours a
        pitch away; the stride-2 3x3 stack does not learn that (measured: 0.50-0.58
        held-out accuracy on native 32x32 glimpses with and without a 1-px point of the
        synthetic panels, against 0.99 for ``fine``), at several times the compute
        (every layer at full resolution).
    """

    def __init__(self, channels: int = 8, fine: bool = False, separable: bool = False) -> None:
        super().__init__()
        c = channels
        if fine and separable:
            raise ValueError("a glimpse CNN is either fine or separable, not both")
        # ReLUs in place: a conv's backward does not need its output (less CPU).
        if separable:
            self.net = nn.Sequential(
                nn.Conv2d(1, c, 3, stride=2, padding=1),
                nn.ReLU(inplace=True),
                nn.Conv2d(c, c, 3, padding=1, groups=c),
                nn.Conv2d(c, 2 * c, 1),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(2),
                nn.Conv2d(2 * c, 2 * c, 3, padding=1, groups=2 * c),
                nn.Conv2d(2 * c, 2 * c, 1),
                nn.ReLU(inplace=True),
            )
        elif fine:
            self.net = nn.Sequential(
                nn.Conv2d(1, c, 5, padding=2),
                nn.ReLU(inplace=True),
                nn.Conv2d(c, 2 * c, 5, padding=2),
                nn.ReLU(inplace=True),
                nn.Conv2d(2 * c, 2 * c, 3, padding=1),
                nn.ReLU(inplace=True),
            )
        else:
            # A stride-2 first layer keeps the cost low; its 3x3 kernels still see
            # every pixel, so a one-pixel point defect reaches the features.
            self.net = nn.Sequential(
                nn.Conv2d(1, c, 3, stride=2, padding=1),
                nn.ReLU(inplace=True),
                nn.Conv2d(c, 2 * c, 3, padding=1),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(2),
                nn.Conv2d(2 * c, 2 * c, 3, padding=1),
                nn.ReLU(inplace=True),
            )
        self.out_dim = 4 * c

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, 1, H, W] -> [B, out_dim].

        The first layer's output goes on in the channels-last (NHWC) layout, so the later
        convolutions and the max pooling run in oneDNN's channels-last kernels: the same
        arithmetic (to float rounding), 15-30 % less CPU for a training step's forward
        and backward pass and 30-50 % less for a forward pass, on batches of 32x32
        glimpses on one core (docs/training.md, "Where the time goes"). The
        weights keep the default layout (SB3's orthogonal init needs it, saved models
        load unchanged); a one-channel input cannot carry the layout itself.
        """
        layers = iter(self.net)
        h = next(layers)(x).contiguous(memory_format=torch.channels_last)
        for layer in layers:
            h = layer(h)
        return torch.cat([h.amax(dim=(-2, -1)), h.mean(dim=(-2, -1))], dim=1)


class InspectorExtractor(BaseFeaturesExtractor):
    """SB3 features extractor for the Dict observation of :class:`InspectionEnv`.

    :param observation_space: the env's Dict space.
    :param channels: width of the glimpse CNN.
    :param features_dim: size of the output features.
    :param fine: the glimpse CNN's full-resolution variant (see :class:`GlimpseCNN`);
        the overview CNN stays the fast one.
    :param separable: the glimpse CNN's depthwise-separable variant (see
        :class:`GlimpseCNN`); the overview CNN stays the plain one.
    :param evidence_classes: number of verdict classes of the per-glimpse evidence head
        (0: none).
    :param overview_evidence: the evidence head judges the overview too (through the
        glimpse CNN), and those class probabilities are features of their own on every
        step; needs ``evidence_classes`` and an overview the glimpses' size.
    """

    def __init__(
        self,
        observation_space: gym.spaces.Dict,
        channels: int = 8,
        features_dim: int = 128,
        fine: bool = False,
        evidence_classes: int = 0,
        overview_evidence: bool = False,
        separable: bool = False,
    ) -> None:
        super().__init__(observation_space, features_dim)
        if evidence_classes < 0:
            raise ValueError(f"evidence_classes must not be negative, got {evidence_classes}")
        if overview_evidence and not evidence_classes:
            raise ValueError("overview_evidence needs evidence_classes (the head it reuses)")
        g_shape = observation_space["glimpse"].shape[1:]
        o_shape = observation_space["overview"].shape[1:]
        if overview_evidence and g_shape != o_shape:
            raise ValueError(
                f"overview_evidence needs the overview the glimpses' size: overview"
                f" {o_shape[0]}x{o_shape[1]}, glimpse {g_shape[0]}x{g_shape[1]}"
            )
        self.overview_evidence = bool(overview_evidence)
        self.memory = observation_space["glimpse"].shape[0]
        state_dim = observation_space["state"].shape[0]
        self.glimpse_cnn = GlimpseCNN(channels, fine=fine, separable=separable)
        self.overview_cnn = GlimpseCNN(max(4, channels // 2))
        self.state_mlp = nn.Sequential(nn.Linear(state_dim, 64), nn.ReLU())
        self.evidence = (
            nn.Linear(self.glimpse_cnn.out_dim, evidence_classes) if evidence_classes else None
        )
        n_ev = evidence_classes * (2 if overview_evidence else 1)
        total = 2 * self.glimpse_cnn.out_dim + self.overview_cnn.out_dim + 64 + n_ev
        self.head = nn.Sequential(nn.Linear(total, features_dim), nn.ReLU())

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        g = obs["glimpse"].float()
        b, m = g.shape[:2]
        # Empty memory slots (all zeros before enough glimpses) must not win the max.
        filled = (g.reshape(b, m, -1).amax(dim=-1) > 0).float().unsqueeze(-1)
        overview = standardise(obs["overview"].float())
        # The overview's evidence comes from the glimpse CNN too: one pass with the memory.
        feats, ov_feats = self._memory_features(
            g, filled, overview if self.overview_evidence else None
        )
        mem = (feats * filled - (1.0 - filled) * 1e4).amax(dim=1)
        mem = torch.maximum(mem, feats[:, 0])
        ov = self.overview_cnn(overview)
        st = self.state_mlp(obs["state"].float())
        parts = [feats[:, 0], mem, ov, st]
        if self.evidence is not None:
            prob = torch.softmax(self.evidence(feats), dim=-1)  # [B, M, classes]
            # Empty slots count as 0 (no evidence); the current glimpse always counts.
            ev = torch.maximum((prob * filled).amax(dim=1), prob[:, 0])
            parts.append(ev)
            if ov_feats is not None:
                parts.append(torch.softmax(self.evidence(ov_feats), dim=-1))
        return self.head(torch.cat(parts, dim=1))

    def _memory_features(
        self, g: torch.Tensor, filled: torch.Tensor, extra: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The glimpse CNN's features of every memory slot, [B, M, out_dim], and of
        ``extra`` (standardised [B, 1, H, W] images the glimpses' size, or None).

        Only the current glimpse and the filled slots go through the CNN: an empty slot's
        features are masked out of everything they feed (the memory max and the evidence),
        so they only cost time, about half the memory in episodes of a few glimpses. An
        export (tracing) takes every slot, so the graph has no data-dependent shapes.
        ``extra`` goes through in the same call (every image is standardised and pooled on
        its own, so the figures are those of a call of its own, at one call's overhead).
        """
        b, m, h, w = g.shape
        flat = g.reshape(b * m, 1, h, w)
        need = filled.reshape(b, m) > 0
        need[:, 0] = True
        idx = need.reshape(-1).nonzero(as_tuple=True)[0]
        every = torch.jit.is_tracing() or len(idx) == b * m
        x = standardise(flat if every else flat[idx])
        n = x.shape[0]
        if extra is not None:
            x = torch.cat([x, extra])
        out = self.glimpse_cnn(x)
        part, extra_feats = out[:n], (out[n:] if extra is not None else None)
        if every:
            return part.reshape(b, m, -1), extra_feats
        full = part.new_zeros(b * m, part.shape[1]).index_copy(0, idx, part)
        return full.reshape(b, m, -1), extra_feats
