"""HybridPPO: plain PPO gradients when the extra weights are 0; the hybrid terms act."""

from __future__ import annotations

import copy

import numpy as np
import torch as th
from stable_baselines3 import PPO

from inspector.rrm.buffer import RRMRolloutBuffer
from inspector.train.hybrid import HybridPPO
from tests.unit.rrm.test_buffer import POLICY_KW, collect, tiny_profile, venv


def _pair(w_sl: float, w_kd: float, teacher=None, verdict_on_stop: bool = True):
    prof = tiny_profile()
    kw = dict(n_steps=32, batch_size=64, n_epochs=1, seed=5, device="cpu", policy_kwargs=POLICY_KW)
    plain = PPO(
        "MultiInputPolicy",
        venv(prof, teacher=True),
        rollout_buffer_class=RRMRolloutBuffer,
        rollout_buffer_kwargs={"rrm": prof.rrm},
        **kw,
    )
    ours = HybridPPO(
        "MultiInputPolicy",
        venv(prof, teacher=True),
        rollout_buffer_class=RRMRolloutBuffer,
        rollout_buffer_kwargs={"rrm": prof.rrm},
        w_rl=0.7,
        w_sl=w_sl,
        w_kd=w_kd,
        teacher=teacher,
        verdict_on_stop=verdict_on_stop,
        **kw,
    )
    ours.policy.load_state_dict(plain.policy.state_dict())
    collect(ours)
    # The very same rollout for both.
    plain.rollout_buffer = copy.deepcopy(ours.rollout_buffer)
    return plain, ours


def _grads_after_one_minibatch(model, params=None) -> list[th.Tensor]:
    """The gradients of ``params`` (default: every policy parameter that has one) at
    the first optimiser step of ``model.train()``."""
    from stable_baselines3.common.logger import configure

    model.set_logger(configure(None, []))
    grads = []
    opt = model.policy.optimizer
    orig_step = opt.step

    def capture():
        chosen = model.policy.parameters() if params is None else params
        grads.extend(p.grad.detach().clone() for p in chosen if p.grad is not None)
        raise StopIteration

    opt.step = capture
    np.random.seed(0)
    try:
        model.train()
    except StopIteration:
        pass
    finally:
        opt.step = orig_step
    return grads


def test_zero_extra_weights_give_plain_ppo_gradients_on_the_same_batch():
    plain, ours = _pair(0.0, 0.0, verdict_on_stop=False)
    g_plain = _grads_after_one_minibatch(plain)
    g_ours = _grads_after_one_minibatch(ours)
    assert len(g_plain) == len(g_ours) > 0
    for a, b in zip(g_plain, g_ours):
        assert th.equal(a, b)


def test_hybrid_terms_change_the_gradients_and_log_their_losses():
    plain, ours = _pair(0.2, 0.1, teacher="scripted")
    g_plain = _grads_after_one_minibatch(plain)
    g_ours = _grads_after_one_minibatch(ours)
    assert any(not th.allclose(a, b) for a, b in zip(g_plain, g_ours))


def test_cross_entropy_alone_teaches_the_verdict_head():
    prof = tiny_profile()
    model = HybridPPO(
        "MultiInputPolicy",
        venv(prof),
        n_steps=64,
        batch_size=64,
        n_epochs=10,
        seed=0,
        device="cpu",
        learning_rate=3e-3,
        policy_kwargs=POLICY_KW,
        rollout_buffer_class=RRMRolloutBuffer,
        rollout_buffer_kwargs={"rrm": prof.rrm},
        w_rl=0.0,
        w_sl=1.0,
        w_kd=0.0,
    )
    collect(model)
    buf = model.rollout_buffer
    obs = {k: th.as_tensor(v.reshape(-1, *v.shape[2:])) for k, v in buf.observations.items()}
    labels = th.as_tensor(buf.labels.reshape(-1))

    def ce():
        with th.no_grad():
            d = model.policy.get_distribution(obs)
            return th.nn.functional.cross_entropy(d.distribution[-1].logits, labels).item()

    from stable_baselines3.common.logger import configure

    model.set_logger(configure(None, []))
    before = ce()
    model.train()
    assert ce() < before * 0.9


def test_no_teacher_sets_the_kl_weight_to_zero_and_says_so(caplog):
    prof = tiny_profile()
    with caplog.at_level("WARNING"):
        model = HybridPPO(
            "MultiInputPolicy",
            venv(prof),
            n_steps=16,
            device="cpu",
            policy_kwargs=POLICY_KW,
            w_kd=0.3,
        )
    assert model.w_kd == 0.0
    assert "no teacher" in caplog.text


def test_balanced_stop_weighted_verdict_loss_changes_the_gradients():
    _, ours = _pair(0.2, 0.0, teacher="scripted")
    weighted = copy.deepcopy(ours)
    weighted.verdict_balance, weighted.verdict_stop_weight = True, 8.0
    assert (ours.rollout_buffer.teacher_actions >= 0).any()  # the stop weighting has data
    g_plain = _grads_after_one_minibatch(ours)
    g_weighted = _grads_after_one_minibatch(weighted)
    assert any(not th.allclose(a, b) for a, b in zip(g_plain, g_weighted))


def test_verdict_stop_weight_must_be_positive():
    import pytest

    prof = tiny_profile()
    with pytest.raises(ValueError, match="verdict_stop_weight must be positive"):
        HybridPPO("MultiInputPolicy", venv(prof), device="cpu", verdict_stop_weight=0.0)


def _params(module) -> list[th.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def test_critic_warmup_trains_the_value_function_alone_then_hands_over():
    from stable_baselines3.common.logger import configure

    _, ours = _pair(0.2, 0.1, teacher="scripted")
    ours.set_logger(configure(None, []))
    ours.critic_warmup = ours.num_timesteps  # this rollout is still within the warm-up
    pol = ours.policy
    actor = [pol.features_extractor, pol.action_net, pol.mlp_extractor.policy_net]
    critic = [pol.value_net, pol.mlp_extractor.value_net]
    before_a = [_params(m) for m in actor]
    before_c = [_params(m) for m in critic]
    ours.train()
    for m, b in zip(actor, before_a):
        assert all(p.equal(q) for p, q in zip(m.parameters(), b))
    assert any(not p.equal(q) for m, b in zip(critic, before_c) for p, q in zip(m.parameters(), b))
    ours.critic_warmup = ours.num_timesteps - 1  # past the warm-up: the policy learns
    ours.train()
    assert any(not p.equal(q) for p, q in zip(pol.action_net.parameters(), before_a[1]))


def test_critic_warmup_must_not_be_negative():
    import pytest

    with pytest.raises(ValueError, match="critic_warmup"):
        HybridPPO("MultiInputPolicy", venv(tiny_profile()), device="cpu", critic_warmup=-1)


def test_verdict_on_stop_corrects_the_stored_log_probs_of_non_stop_steps():
    from inspector.scan import STOP

    _, ours = _pair(0.0, 0.0)
    buf = ours.rollout_buffer
    stored = buf.log_probs.copy()
    n = stored.size
    acts = buf.actions.reshape(n, -1).astype(np.int64)
    stop = acts[:, 0] == STOP
    assert stop.any() and (~stop).any()  # the rollout has both kinds of step
    obs = {k: th.as_tensor(v.reshape(n, *v.shape[2:])) for k, v in buf.observations.items()}
    with th.no_grad():
        move, verdict = ours.policy.get_distribution(obs).distribution
        lp_move = move.log_prob(th.as_tensor(acts[:, 0])).numpy()
        lp_verdict = verdict.log_prob(th.as_tensor(acts[:, 1])).numpy()
    np.testing.assert_allclose(stored.reshape(n), lp_move + lp_verdict, atol=1e-5)
    ours._mask_rollout_log_probs()
    want = lp_move + np.where(stop, lp_verdict, 0.0)
    np.testing.assert_allclose(buf.log_probs.reshape(n), want, atol=1e-5)


def _verdict_rows_grad(model) -> th.Tensor:
    """The PPO gradient of the verdict rows of the action head (entropy bonus off)."""
    from inspector.scan import ACTIONS

    model.ent_coef = 0.0
    (weight,) = _grads_after_one_minibatch(model, [model.policy.action_net.weight])
    return weight[len(ACTIONS) :]


def test_verdict_on_stop_gives_the_verdict_head_no_ppo_gradient_without_stops():
    from inspector.scan import STOP

    masked = _pair(0.0, 0.0)[1]
    unmasked = _pair(0.0, 0.0, verdict_on_stop=False)[1]
    for model in (masked, unmasked):  # a rollout in which nothing stopped
        acts = model.rollout_buffer.actions
        acts[..., 0] = np.where(acts[..., 0] == STOP, 0, acts[..., 0])
    assert th.count_nonzero(_verdict_rows_grad(masked)) == 0
    assert th.count_nonzero(_verdict_rows_grad(unmasked)) > 0
