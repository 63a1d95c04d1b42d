"""Learned redistribution: RUDDER-style return decomposition.

A small LSTM reads an episode's per-step features (a pooled glimpse, the state
vector and the action) and predicts the episode's outcome return at every step.
The redistributed reward of step t is the difference of consecutive predictions
g_t - g_{t-1} (g_{-1} = 0); a final correction on the last step makes the sum
exactly the episode's return, so returns are preserved whatever the model has
learned. The model trains online on the episodes PPO collects, with its own
optimiser; its loss is logged as ``rrm/learned_loss``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from inspector.rrm.redistribution import correct_to_return

POOL = 4


def episode_features(
    glimpse: np.ndarray, state: np.ndarray, actions: np.ndarray, n_actions: int
) -> np.ndarray:
    """Per-step features [T, F]: the current glimpse pooled to 4x4 and standardised,
    the state vector, and the move action one-hot.

    :param glimpse: [T, M, G, G] uint8 observations (only the current glimpse is used).
    :param state: [T, S] state vectors.
    :param actions: [T] or [T, k] actions (the first component is the move).
    :param n_actions: number of move actions.
    """
    g = glimpse[:, 0].astype(np.float32)
    t, side = g.shape[0], g.shape[-1]
    k = side // POOL
    pooled = g[:, : k * POOL, : k * POOL].reshape(t, POOL, k, POOL, k).mean(axis=(2, 4))
    pooled = pooled.reshape(t, -1)
    pooled = (pooled - pooled.mean(axis=1, keepdims=True)) / (
        pooled.std(axis=1, keepdims=True) + 1.0
    )
    a = np.asarray(actions).reshape(t, -1)[:, 0].astype(int)
    onehot = np.eye(n_actions, dtype=np.float32)[np.clip(a, 0, n_actions - 1)]
    return np.concatenate([pooled, state.astype(np.float32), onehot], axis=1)


class ReturnPredictor(nn.Module):
    """LSTM over the episode predicting the outcome return at each step."""

    def __init__(self, n_features: int, hidden: int = 32) -> None:
        super().__init__()
        self.lstm = nn.LSTM(n_features, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, F] -> [B, T] predictions."""
        h, _ = self.lstm(x)
        return self.head(h).squeeze(-1)


class LearnedRedistributor:
    """Trains the return predictor online and redistributes with it.

    :param n_features: feature size (see :func:`episode_features`).
    :param hidden: LSTM hidden size.
    :param lr: learning rate of the predictor's own Adam optimiser.
    :param epochs: passes over each rollout's episodes per update.
    :param seed: seed of the predictor's initial weights.
    """

    def __init__(
        self, n_features: int, hidden: int = 32, lr: float = 1e-3, epochs: int = 2, seed: int = 0
    ) -> None:
        # Seed the predictor without disturbing PPO's random stream.
        state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        self.model = ReturnPredictor(n_features, hidden)
        torch.random.set_rng_state(state)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.epochs = epochs
        self.last_loss = float("nan")

    @staticmethod
    def _pad(episodes: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        n = max(len(e) for e in episodes)
        f = episodes[0].shape[1]
        x = np.zeros((len(episodes), n, f), dtype=np.float32)
        m = np.zeros((len(episodes), n), dtype=np.float32)
        for i, e in enumerate(episodes):
            x[i, : len(e)] = e
            m[i, : len(e)] = 1.0
        return torch.from_numpy(x), torch.from_numpy(m)

    def redistribute(
        self, features: list[np.ndarray], outcomes: list[np.ndarray]
    ) -> list[np.ndarray]:
        """Redistribute each episode's outcome rewards; every return is preserved exactly."""
        if not features:
            return []
        x, _ = self._pad(features)
        with torch.no_grad():
            pred = self.model(x).numpy().astype(np.float64)
        out = []
        for i, (f, r) in enumerate(zip(features, outcomes)):
            g = pred[i, : len(f)]
            diff = np.diff(np.concatenate([[0.0], g]))
            out.append(correct_to_return(diff, float(np.sum(r))))
        return out

    def fit(self, features: list[np.ndarray], outcomes: list[np.ndarray]) -> float:
        """One online update on these episodes; returns the mean loss."""
        if not features:
            return self.last_loss
        x, m = self._pad(features)
        g = torch.tensor([float(np.sum(r)) for r in outcomes], dtype=torch.float32)
        last = torch.tensor([len(f) - 1 for f in features])
        losses = []
        for _ in range(self.epochs):
            pred = self.model(x)
            final = pred[torch.arange(len(features)), last]
            main = ((final - g) ** 2).mean()
            # RUDDER's auxiliary loss: predict the final return at every step too.
            aux = (((pred - g[:, None]) ** 2) * m).sum() / m.sum()
            loss = main + 0.1 * aux
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            losses.append(float(loss.detach()))
        self.last_loss = float(np.mean(losses))
        return self.last_loss
