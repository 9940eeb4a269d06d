"""Sample-level memory: per-sample retention ``m``, stability ``S``, EMA loss and hazard (paper Sec. 3.1, App. A).

Every equation is a small pure function of tensors; :class:`SampleMemory` holds the per-sample state and calls
them. Equations are cited by their ``\\label{}`` in ``paper/mssr-paper.tex``.

Time: every method takes the global optimizer step; the equations run on *memory time*, a piecewise-linear map
of the step (:func:`memory_time`) whose slope, optimizer steps per memory time unit, is set by
:meth:`SampleMemory.set_time_unit` (the paper's main text counts steps; its Algorithm 1 counts epochs). Retention is
stored lazily (App. A, "Lazy update"): each sample keeps an anchor ``(anchor_step, log m_anchor)`` and its current
hazard ``h``; ``m(t) = exp(log m_anchor - h (t - anchor))``. Everything is kept in log space, so no output
overflows or underflows however long a sample goes unreviewed.

Beyond the paper, the memory learns from what it observes: every repeat exposure of a sample shows how much it was
forgotten, and two small per-task models (:class:`ForgettingModel`) are fitted online to those observations: of the
loss rise since the previous exposure (``replay_weighting="calibrated"``) and of the loss *gap*, the loss minus the
lowest loss the sample had had (``"forgotten"``, which selects within each task by the predicted gap).

Hyperparameters have no defaults here: ``MSSRConfig`` holds them (the paper's values) and
``mssr_hf.mssr_config.memory_from_config`` passes them in. This module imports torch and numpy only: tensors in,
tensors out.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

PHI_CHOICES = ("sigmoid", "identity", "power", "log")
WEIGHTINGS = ("power", "gain", "calibrated", "forgotten")

# SampleMemory's hyperparameters (its keyword arguments but ``seed``), in signature order: checked on construction,
# recorded in ``state_dict`` and compared on load.
_HPARAM_NAMES = (
    "alpha", "gamma_d", "phi", "phi_k", "phi_c", "phi_p", "phi_kappa", "ema_beta", "quantiles", "eta_s", "beta_s",
    "rho", "gamma_s", "s_min", "s_max", "s_init", "sigma_s", "zeta", "weighting", "beta_m", "calibration_decay",
    "calibration_prior", "task_gap_weight",
)  # fmt: skip


# ----------------------------------------------------------------------------------------------------------------
# Pure functions, one per equation
# ----------------------------------------------------------------------------------------------------------------


def ema_loss_update(ema: torch.Tensor, loss: torch.Tensor, seen: torch.Tensor, beta: float) -> torch.Tensor:
    r"""EMA-denoised loss, ``eq:ema_app``:
    $\tilde\ell_{i,t} = \beta_{ema}\tilde\ell_{i,t-1} + (1-\beta_{ema})\ell_{i,t}$.

    The first observation of a sample has no previous value: it sets $\tilde\ell = \ell$.

    Args:
        ema (`torch.Tensor`): $\tilde\ell_{i,t-1}$, shape ``(n,)``.
        loss (`torch.Tensor`): raw per-sample loss $\ell_{i,t}$, shape ``(n,)``.
        seen (`torch.Tensor`): bool, whether the sample has been observed before, shape ``(n,)``.
        beta (`float`): $\beta_{ema}$ in (0, 1).

    Returns:
        `torch.Tensor`: $\tilde\ell_{i,t}$, shape ``(n,)``.
    """
    return torch.where(seen, beta * ema + (1.0 - beta) * loss, loss)


def loss_quantiles(values: torch.Tensor, q_low: float, q_high: float) -> tuple[float, float]:
    r"""The quantiles $Q_{q_l}, Q_{q_u}$ of ``eq:quantile_app``, with linear interpolation (as ``torch.quantile``).

    One selection pass (``numpy.partition`` at the four order statistics needed) instead of a sort: O(n), no size
    limit, and bit-identical to linear interpolation between the neighbouring order statistics.

    Args:
        values (`torch.Tensor`): EMA losses of the seen samples, shape ``(n,)``, n >= 1.
        q_low (`float`), q_high (`float`): quantile levels $q_l \le q_u$ in [0, 1].
    """
    array = values.detach().to(torch.float64).cpu().numpy()
    n = array.size
    positions = [q * (n - 1) for q in (q_low, q_high)]
    ranks = sorted({min(math.floor(p) + j, n - 1) for p in positions for j in (0, 1)})
    ordered = np.partition(array, ranks)

    def quantile(pos: float) -> float:
        lo = math.floor(pos)
        hi = min(lo + 1, n - 1)
        return float(ordered[lo] + (pos - lo) * (ordered[hi] - ordered[lo]))

    return quantile(positions[0]), quantile(positions[1])


def normalized_loss(ema: torch.Tensor, q_low: float, q_high: float) -> torch.Tensor:
    r"""Robust quantile normalisation, ``eq:quantile_app``:
    $\hat\ell = \mathrm{clip}((\tilde\ell - Q_{q_l}) / \max(Q_{q_u} - Q_{q_l}, 10^{-8}), 0, 1)$.

    Args:
        ema (`torch.Tensor`): $\tilde\ell$, shape ``(n,)``.
        q_low (`float`), q_high (`float`): $Q_{q_l}$ and $Q_{q_u}$.

    Returns:
        `torch.Tensor`: $\hat\ell \in [0, 1]$, shape ``(n,)``.
    """
    return ((ema - q_low) / max(q_high - q_low, 1e-8)).clamp(0.0, 1.0)


def difficulty(x: torch.Tensor, phi: str, k: float = 10.0, c: float = 0.5, p: float = 2.0, kappa: float = 10.0):
    r"""The monotone mapping $\phi: [0,1] \to [0,1]$ of App. A ("Choices of the monotone mapping").

    - ``sigmoid`` (``eq:sigmoid_phi``): $1 / (1 + e^{-k(x-c)})$
    - ``identity``: $x$
    - ``power``: $x^p$
    - ``log``: $\log(1 + \kappa x) / \log(1 + \kappa)$
    """
    if phi == "sigmoid":
        return torch.sigmoid(k * (x - c))
    if phi == "identity":
        return x
    if phi == "power":
        return x.pow(p)
    if phi == "log":
        return torch.log1p(kappa * x) / math.log1p(kappa)
    raise ValueError(f"phi must be one of {PHI_CHOICES}, got {phi!r}")


def hazard(phi_value: torch.Tensor, stability: torch.Tensor, alpha: float, gamma_d: float) -> torch.Tensor:
    r"""Per-step hazard, ``eq:retention_update`` / ``eq:epoch_update``: $h = (\alpha + \gamma_d \phi(\hat\ell)) / S$.

    Args:
        phi_value (`torch.Tensor`): $\phi(\hat\ell)$, shape ``(n,)``.
        stability (`torch.Tensor`): $S$, shape ``(n,)``, positive.
        alpha (`float`): baseline decay $\alpha$. gamma_d (`float`): loss sensitivity $\gamma_d$.
    """
    return (alpha + gamma_d * phi_value) / stability


def decayed_log_strength(log_m_anchor: torch.Tensor, hazard: torch.Tensor, elapsed: torch.Tensor) -> torch.Tensor:
    r"""Retention after ``elapsed`` steps at a constant hazard, in log space (``eq:epoch_update``, App. A lazy update):
    $\log m_t = \log m_{anchor} - h\,(t - t_{anchor})$.

    This is the closed form between reviews (Lemma A.1, ``eq:closed_form_app``) for a piecewise-constant hazard.
    """
    # Clamped far below any meaningful value so that even an absurd hazard x time cannot reach -inf.
    return (log_m_anchor - hazard * elapsed).clamp(min=-1e300)


def consolidated_stability(
    stability: torch.Tensor,
    strength: torch.Tensor,
    elapsed: torch.Tensor,
    *,
    eta_s: float,
    s_max: float,
    beta_s: float,
    rho: float,
    gamma_s: float,
    s_min: float,
    noise: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Stability after a review, ``eq:reset_spacing``, clipped to $[S_{min}, S_{max}]$ (App. A, generalized
    consolidation):

    $$S^+ = \mathrm{clip}\big(S + \eta_s (S_{max} - S)^{\beta_s} e^{-\rho \Delta t} (1 - m)^{\gamma_s} + \epsilon,
    S_{min}, S_{max}\big)$$

    Args:
        stability (`torch.Tensor`): $S$ before the review, shape ``(n,)``.
        strength (`torch.Tensor`): $m$ just before the review, shape ``(n,)``.
        elapsed (`torch.Tensor`): $\Delta t = t - t^\star$ since the last review, shape ``(n,)``.
        noise (`torch.Tensor`, *optional*): $\epsilon \sim N(0, \sigma_s^2)$, shape ``(n,)``.
    """
    gain = eta_s * (s_max - stability).clamp_min(0.0).pow(beta_s) * torch.exp(-rho * elapsed)
    gain = gain * (1.0 - strength).clamp_min(0.0).pow(gamma_s)
    new = stability + gain
    if noise is not None:
        new = new + noise
    return new.clamp(s_min, s_max)


def power_log_weights(log_m: torch.Tensor, zeta: float) -> torch.Tensor:
    r"""Unnormalised log replay weights of ``eq:prob_weight``: $\log m^{-\zeta} = -\zeta \log m$."""
    return -zeta * log_m


def gain_log_weights(log_m: torch.Tensor, elapsed: torch.Tensor, beta_m: float, rho: float) -> torch.Tensor:
    r"""Unnormalised log replay weights of the scheduler-side form (Sec. 3.3, "Replay Scheduler"):
    $\log\big[(1 - m)^{\beta_m} e^{\rho \Delta t}\big] = \beta_m \log(1 - m) + \rho \Delta t$.

    $\log(1-m)$ is computed as ``log(-expm1(log m))``; a sample reviewed this step ($m = 1$) gets weight 0
    (or 1 when $\beta_m = 0$: ``xlogy`` takes $0 \log 0 = 0$).
    """
    return torch.xlogy(torch.tensor(beta_m, dtype=log_m.dtype), -torch.expm1(log_m)) + rho * elapsed


def calibrated_log_weights(predicted_rise: torch.Tensor, zeta: float) -> torch.Tensor:
    r"""Unnormalised log replay weights from predicted forgetting (a loss rise or a loss gap; beyond the paper):
    $\log w_i = \zeta\, \hat r_i / \sigma_{\hat r}$, with $\sigma_{\hat r}$ the standard deviation of the
    candidates' predictions, so that $\zeta$ is unit-free ($\zeta = 0$: uniform; large $\zeta$: the largest
    predictions first)."""
    if predicted_rise.numel() < 2:
        return torch.zeros_like(predicted_rise)
    return zeta * predicted_rise / predicted_rise.std().clamp(min=1e-8)


def normalize_log_weights(log_w: torch.Tensor) -> torch.Tensor:
    r"""$p_i = w_i / \sum_j w_j$ from log-weights (``eq:prob_weight``), via softmax: finite for any input.

    If every weight is zero ($\log w = -\infty$) the distribution is uniform.
    """
    if log_w.numel() == 0:
        return log_w.clone()
    if not torch.isfinite(log_w).any():
        return torch.full_like(log_w, 1.0 / log_w.numel())
    return torch.softmax(log_w, dim=0)


def memory_time(steps: torch.Tensor, segments: Sequence[Sequence[float]]) -> torch.Tensor:
    r"""Memory time of optimizer steps: the piecewise-linear clock $T(s) = T_k + (s - s_k) / u_k$ of the segment
    $k$ with the largest start $s_k \le s$ (the first segment also covers earlier steps).

    Args:
        steps (`torch.Tensor`): optimizer steps, shape ``(n,)`` (any numeric dtype).
        segments (`Sequence[tuple[int, float, float]]`): ``(s_k, T_k, u_k)``: start step, memory time at that step
            and optimizer steps per memory time unit, by increasing ``s_k``.

    Returns:
        `torch.Tensor`: float64, shape ``(n,)``.
    """
    steps = steps.to(torch.float64)
    if len(segments) == 1:
        start, time, unit = segments[0]
        return (steps - start) / unit + time
    starts = torch.tensor([s for s, _, _ in segments], dtype=torch.float64)
    times = torch.tensor([t for _, t, _ in segments], dtype=torch.float64)
    units = torch.tensor([u for _, _, u in segments], dtype=torch.float64)
    k = (torch.bucketize(steps, starts, right=True) - 1).clamp(min=0)
    return (steps - starts[k]) / units[k] + times[k]


def forgetting_features(elapsed: torch.Tensor, difficulty: torch.Tensor) -> torch.Tensor:
    r"""Features of the calibrated forgetting model: $x = [1, \log(1 + \Delta t), \hat\ell]$ with $\Delta t$ the
    memory time since the sample's last exposure and $\hat\ell$ its normalised EMA loss.

    Args:
        elapsed (`torch.Tensor`): $\Delta t \ge 0$, shape ``(n,)``.
        difficulty (`torch.Tensor`): $\hat\ell \in [0, 1]$, shape ``(n,)``.

    Returns:
        `torch.Tensor`: shape ``(n, 3)``, float64.
    """
    elapsed = elapsed.to(torch.float64).clamp(min=0.0)
    return torch.stack([torch.ones_like(elapsed), torch.log1p(elapsed), difficulty.to(torch.float64)], dim=1)


def gap_features(elapsed: torch.Tensor, last_gap: torch.Tensor) -> torch.Tensor:
    r"""Features of the fitted gap model: $x = [1, \log(1 + \Delta t), g_{last}]$ with $\Delta t$ the memory time
    since the sample's last exposure and $g_{last}$ its loss gap then (its loss minus the lowest loss it had had).

    Args:
        elapsed (`torch.Tensor`): $\Delta t \ge 0$, shape ``(n,)``.
        last_gap (`torch.Tensor`): $g_{last}$, shape ``(n,)``.

    Returns:
        `torch.Tensor`: shape ``(n, 3)``, float64.
    """
    elapsed = elapsed.to(torch.float64).clamp(min=0.0)
    return torch.stack([torch.ones_like(elapsed), torch.log1p(elapsed), last_gap.to(torch.float64)], dim=1)


def ridge_solution(gram: torch.Tensor, moment: torch.Tensor, prior: torch.Tensor, strength: float) -> torch.Tensor:
    r"""Ridge regression towards a prior, one independent fit per group:
    $w_c = (A_c + \lambda I)^{-1} (b_c + \lambda w_0)$, with $A_c = \sum x x^\top$ and $b_c = \sum x y$ over the
    group's (decayed) observations.

    Args:
        gram (`torch.Tensor`): $A$, shape ``(C, d, d)``. moment (`torch.Tensor`): $b$, shape ``(C, d)``.
        prior (`torch.Tensor`): $w_0$, shape ``(d,)``. strength (`float`): $\lambda > 0$.

    Returns:
        `torch.Tensor`: $w$, shape ``(C, d)``.
    """
    eye = torch.eye(gram.shape[-1], dtype=gram.dtype)
    rhs = moment + strength * prior
    return torch.linalg.solve(gram + strength * eye, rhs.unsqueeze(-1)).squeeze(-1)


class ForgettingModel:
    r"""A forgetting model fitted online to observed forgetting (beyond the paper).

    Every exposure of a sample seen before is an observation of how much it was forgotten after $\Delta t$ memory
    time units. :class:`SampleMemory` fits two such models: one of the loss *rise* since the sample's previous
    exposure, on :func:`forgetting_features` $[1, \log(1+\Delta t), \hat\ell]$ (``replay_weighting="calibrated"``),
    and one of the loss *gap*, the loss now minus the lowest loss the sample had had, on :func:`gap_features`
    $[1, \log(1+\Delta t), g_{last}]$ (``"forgotten"``). Samples are grouped into *cohorts* (the samples added to
    the memory together: one task of a sequence), and each cohort gets its own linear model $\hat y = w_c^\top x$,
    fitted by ridge regression towards the prior $w_0 = [0, \text{prior}, \text{last\_weight}]$ (before any
    observation, forgetting grows with the log of the time unseen, and a gap persists with weight ``last_weight``)
    with exponentially decayed evidence: each update multiplies the past statistics by ``decay``, so the fit follows
    the interference of the current task.

    Args:
        decay (`float`): weight kept by past evidence at each update, in (0, 1].
        prior (`float`): prior slope on $\log(1 + \Delta t)$, >= 0.
        strength (`float`, *optional*, defaults to `1.0`): ridge strength $\lambda$, in observations.
        last_weight (`float`, *optional*, defaults to `0.0`): prior weight of the third feature.
    """

    dim = 3

    def __init__(self, decay: float, prior: float, strength: float = 1.0, last_weight: float = 0.0):
        self.decay, self.prior, self.strength = float(decay), float(prior), float(strength)
        self.last_weight = float(last_weight)
        self.gram = torch.zeros(0, self.dim, self.dim, dtype=torch.float64)  # (C, d, d)
        self.moment = torch.zeros(0, self.dim, dtype=torch.float64)  # (C, d)
        self.weights = torch.zeros(0, self.dim, dtype=torch.float64)  # (C, d): the current fit
        # Running (decayed) sums for the calibration of predictions against outcomes: n, then for (x, y) pairs of
        # (predicted rise, rise) and (-log m, rise): sum x, sum y, sum xy, sum xx, sum yy.
        self.scores = torch.zeros(11, dtype=torch.float64)

    @property
    def prior_weights(self) -> torch.Tensor:
        return torch.tensor([0.0, self.prior, self.last_weight], dtype=torch.float64)

    def reset(self, cohort: int) -> None:
        """Drop the evidence of ``cohort`` (its fit returns to the prior); its calibration sums are kept."""
        if 0 <= cohort < self.gram.shape[0]:
            self.gram[cohort] = 0.0
            self.moment[cohort] = 0.0
            self.weights[cohort] = self.prior_weights

    def grow(self, cohorts: int) -> None:
        """Track ``cohorts`` cohorts (new ones start at the prior)."""
        extra = cohorts - self.gram.shape[0]
        if extra > 0:
            self.gram = torch.cat([self.gram, torch.zeros(extra, self.dim, self.dim, dtype=torch.float64)])
            self.moment = torch.cat([self.moment, torch.zeros(extra, self.dim, dtype=torch.float64)])
            self.weights = torch.cat([self.weights, self.prior_weights.expand(extra, self.dim)])

    def predict(self, cohort: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """Predicted loss rise, shape ``(n,)``, for samples of ``cohort`` (shape ``(n,)``) with ``features``."""
        return (self.weights[cohort] * features).sum(-1)

    def update(self, cohort: torch.Tensor, features: torch.Tensor, rise: torch.Tensor, neg_log_m: torch.Tensor):
        """Fold observed rises in (``cohort``, ``rise``, ``neg_log_m``: shape ``(n,)``; ``features``: ``(n, d)``).
        The calibration sums see the prediction made *before* this update."""
        predicted = self.predict(cohort, features)
        pairs = []
        for x in (predicted, neg_log_m):
            pairs += [x.sum(), rise.sum(), (x * rise).sum(), (x * x).sum(), (rise * rise).sum()]
        self.scores = self.decay * self.scores + torch.stack([torch.tensor(float(rise.numel()), dtype=torch.float64),
                                                              *pairs])  # fmt: skip
        self.gram *= self.decay
        self.moment *= self.decay
        self.gram.index_add_(0, cohort, features.unsqueeze(2) * features.unsqueeze(1))
        self.moment.index_add_(0, cohort, features * rise.unsqueeze(1))
        touched = torch.unique(cohort)
        self.weights[touched] = ridge_solution(self.gram[touched], self.moment[touched], self.prior_weights,
                                               self.strength)  # fmt: skip

    def calibration(self) -> dict[str, float]:
        """Pearson correlation of the predicted rise and of ``-log m`` with the observed rise, over the decayed
        window of observations, and the window's size."""
        n = float(self.scores[0])
        out = {"calibration_observations": n}
        for name, offset in (("calibration_r_predicted", 1), ("calibration_r_neg_log_m", 6)):
            sx, sy, sxy, sxx, syy = (float(v) for v in self.scores[offset : offset + 5])
            var_x, var_y = n * sxx - sx * sx, n * syy - sy * sy
            out[name] = (n * sxy - sx * sy) / math.sqrt(var_x * var_y) if n > 1 and var_x > 0 and var_y > 0 else 0.0
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"gram": self.gram.clone(), "moment": self.moment.clone(), "scores": self.scores.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in ("gram", "moment", "scores"):
            setattr(self, key, state[key].to(torch.float64).clone())
        self.weights = ridge_solution(self.gram, self.moment, self.prior_weights, self.strength)


# ----------------------------------------------------------------------------------------------------------------
# Stateful memory
# ----------------------------------------------------------------------------------------------------------------


class HyperparameterError(ValueError):
    """A constructor rejected a hyperparameter: argument ``argument`` of ``owner`` holds ``value``, which breaks
    ``rule``. Raised by :class:`SampleMemory` and :func:`~mssr_hf.scheduler.build_strategy`; ``MSSRConfig`` catches it
    and names its own field instead of the argument."""

    def __init__(self, owner: str, argument: str, value: Any, rule: str):
        self.owner, self.argument, self.value, self.rule = owner, argument, value, rule
        super().__init__(f"{owner}: {argument}={value!r} is invalid: {rule}.")


def _finite(value: Any) -> bool:
    return isinstance(value, numbers.Real) and math.isfinite(value)


def _check_hparams(hp: dict[str, Any]) -> None:
    """The rules every :class:`SampleMemory` hyperparameter must satisfy, checked in order on the raw values."""

    def need(ok: bool, name: str, rule: str) -> None:
        if not ok:
            raise HyperparameterError("SampleMemory", name, hp[name], rule)

    for name, value in hp.items():
        if name not in ("phi", "weighting", "quantiles"):
            need(_finite(value), name, "must be a finite number")
    need(hp["phi"] in PHI_CHOICES, "phi", f"choose one of {PHI_CHOICES}")
    need(hp["weighting"] in WEIGHTINGS, "weighting", "choose 'power' (m^-zeta), 'gain' or 'calibrated'")
    for name in ("alpha", "gamma_d", "eta_s", "rho", "gamma_s", "sigma_s", "zeta", "beta_m"):
        need(hp[name] >= 0, name, "must be >= 0")
    need(hp["phi_k"] > 0, "phi_k", "the sigmoid slope must be > 0")
    need(hp["phi_p"] > 0, "phi_p", "the power exponent must be > 0")
    need(hp["phi_kappa"] > 0, "phi_kappa", "kappa of the log mapping must be > 0")
    need(0.0 < hp["ema_beta"] < 1.0, "ema_beta", "must lie in (0, 1)")
    q = hp["quantiles"]
    pair = isinstance(q, Sequence) and len(q) == 2 and all(_finite(v) for v in q)
    need(pair and 0.0 <= q[0] < q[1] <= 1.0, "quantiles", "need (q_l, q_u) with 0 <= q_l < q_u <= 1")
    need(0.0 < hp["beta_s"] <= 1.0, "beta_s", "must lie in (0, 1]")
    need(hp["s_min"] > 0, "s_min", "must be > 0")
    need(hp["s_min"] <= hp["s_max"], "s_min", f"must be <= s_max={hp['s_max']}")
    s_range = f"[s_min, s_max]=[{hp['s_min']}, {hp['s_max']}]"
    need(hp["s_min"] <= hp["s_init"] <= hp["s_max"], "s_init", f"must lie in {s_range}")
    need(0.0 < hp["calibration_decay"] <= 1.0, "calibration_decay", "must lie in (0, 1]")
    need(hp["calibration_prior"] >= 0, "calibration_prior", "must be >= 0")
    need(hp["task_gap_weight"] >= 0, "task_gap_weight", "must be >= 0 (0: each task keeps a uniform draw's share)")
    need(
        hp["task_gap_weight"] == 0 or hp["weighting"] == "forgotten",
        "task_gap_weight",
        "applies to weighting='forgotten' only (the other weightings do not select per task); set it to 0",
    )


class SampleMemory:
    r"""Per-sample memory state of MSSR (paper Sec. 3.1 and App. A), for samples with ids ``0..N-1``.

    Every training exposure of a sample (its own stage or a replay) is an :meth:`observe` then a :meth:`review` at
    that step; :meth:`update_hazard` is the epoch-level update (``eq:epoch_update``), called every buffer refresh
    and at stage boundaries. Each sample also keeps its latest and its lowest observed loss (``last_loss``,
    ``best_loss``), from which the fitted forgetting models learn (:attr:`forgetting`, :attr:`gap_model`).

    Every hyperparameter is required: their defaults (the paper's Table ``tab:memory_hparams``, $\zeta$ from
    ``tab:replay_hparams``) live in one place, ``MSSRConfig``'s ``memory_*`` / ``replay_*`` fields, and
    ``mssr_hf.mssr_config.memory_from_config`` builds a memory from a config. A value outside its range raises a
    :class:`HyperparameterError` naming the argument and the rule.

    Args:
        num_samples (`int`, *optional*, defaults to `0`): initial bank size N (ids ``0..N-1``); :meth:`extend` adds
            more.
        alpha (`float`): baseline decay $\alpha \ge 0$.
        gamma_d (`float`): loss sensitivity $\gamma_d \ge 0$.
        phi (`str`): the mapping $\phi$: `sigmoid`, `identity`, `power`, `log`.
        phi_k (`float`), phi_c (`float`): sigmoid slope $k > 0$ and centre $c$.
        phi_p (`float`): exponent $p > 0$ of `power`.
        phi_kappa (`float`): $\kappa > 0$ of `log`.
        ema_beta (`float`): $\beta_{ema}$ in (0, 1).
        quantiles (`tuple[float, float]`): $(q_l, q_u)$, $0 \le q_l < q_u \le 1$.
        eta_s (`float`): consolidation step $\eta_s \ge 0$.
        beta_s (`float`): saturation exponent $\beta_s \in (0, 1]$.
        rho (`float`): spacing sensitivity $\rho \ge 0$.
        gamma_s (`float`): error-driven reinforcement $\gamma_s \ge 0$.
        s_min (`float`), s_max (`float`): stability clipping range, $0 < S_{min} \le S_{max}$.
        s_init (`float`): initial stability $S_{i,0} \in [S_{min}, S_{max}]$.
        sigma_s (`float`): std of the consolidation noise $\epsilon$, >= 0.
        zeta (`float`): prioritisation strength $\zeta \ge 0$ of ``eq:prob_weight``.
        weighting (`str`): `power` ($m^{-\zeta}$), `gain` ($(1-m)^{\beta_m} e^{\rho\Delta t}$), `calibrated`
            ($e^{\zeta \hat r / \sigma_{\hat r}}$, with $\hat r$ the loss rise predicted by the fitted
            :class:`ForgettingModel`) or `forgotten` (the same form on $\hat g$, the predicted loss gap: how far a
            sample's loss lies above the lowest it has had; used within each cohort, :attr:`stratified`).
        beta_m (`float`): exponent $\beta_m \ge 0$ of the `gain` weighting.
        calibration_decay (`float`): weight kept by the forgetting model's past evidence at each exposure, in (0, 1].
        calibration_prior (`float`): the forgetting model's prior slope of the loss rise on $\log(1 + \Delta t)$,
            >= 0.
        task_gap_weight (`float`): $\kappa \ge 0$ of :meth:`task_log_weights`: how
            much a cohort's share of the replay grows with its recently observed loss gap (`forgotten` only; 0: each
            cohort keeps the share a uniform draw gives it).
        seed (`int`): seed of the generator behind $\epsilon$.
    """

    def __init__(
        self, num_samples: int = 0, *, alpha: float, gamma_d: float, phi: str, phi_k: float, phi_c: float,
        phi_p: float, phi_kappa: float, ema_beta: float, quantiles: Sequence[float], eta_s: float, beta_s: float,
        rho: float, gamma_s: float, s_min: float, s_max: float, s_init: float, sigma_s: float, zeta: float,
        weighting: str, beta_m: float, calibration_decay: float, calibration_prior: float, task_gap_weight: float,
        seed: int,
    ):  # fmt: skip
        given = locals()
        hp = {name: given[name] for name in _HPARAM_NAMES}
        _check_hparams(hp)
        for name, value in hp.items():
            if name == "quantiles":
                value = tuple(float(q) for q in value)
            elif name not in ("phi", "weighting"):
                value = float(value)
            setattr(self, name, value)
        self.seed = int(seed)
        self.forgetting = ForgettingModel(self.calibration_decay, self.calibration_prior)
        self.gap_model = ForgettingModel(self.calibration_decay, self.calibration_prior, last_weight=1.0)

        self.generator = torch.Generator().manual_seed(self.seed)
        self.clock = 0  # the latest step any update has been made at; time never runs backwards
        self.skipped_losses = 0  # non-finite losses passed to observe and not written
        self.loss_range: tuple[float, float] | None = None  # (Q_l, Q_u) of the latest update_hazard
        self.ema_loss = torch.zeros(0, dtype=torch.float64)
        self.seen = torch.zeros(0, dtype=torch.bool)
        self.stability = torch.zeros(0, dtype=torch.float64)
        self.hazard = torch.zeros(0, dtype=torch.float64)
        self.anchor_step = torch.zeros(0, dtype=torch.int64)
        self.log_m_anchor = torch.zeros(0, dtype=torch.float64)
        self.last_review = torch.zeros(0, dtype=torch.int64)
        self.last_loss = torch.zeros(0, dtype=torch.float64)  # raw loss at the latest observation (if seen)
        self.best_loss = torch.zeros(0, dtype=torch.float64)  # lowest observed loss (if seen)
        self.cohort = torch.zeros(0, dtype=torch.int64)  # which extend() call added the sample
        self.time_segments: list[tuple[int, float, float]] = [(0, 0.0, 1.0)]  # see memory_time
        if num_samples < 0:
            raise ValueError(f"num_samples must be >= 0, got {num_samples}")
        if num_samples:
            self.extend(num_samples, step=0)

    # ------------------------------------------------------------------ validation

    def _ids(self, ids: Any, name: str = "ids") -> torch.Tensor:
        ids = torch.as_tensor(ids, dtype=torch.int64).reshape(-1)
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= len(self)):
            bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
            raise ValueError(f"{name} must lie in [0, {len(self)}) (the memory tracks {len(self)} samples), got {bad}")
        return ids

    def _step(self, step: int, *, at_least_clock: bool = True) -> int:
        if isinstance(step, torch.Tensor):
            step = int(step.item())
        if isinstance(step, numbers.Integral) and not isinstance(step, bool):
            step = int(step)
        if not isinstance(step, int) or isinstance(step, bool):
            raise ValueError(f"step must be an int, got {type(step).__name__}")
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        if at_least_clock and step < self.clock:
            raise ValueError(
                f"step={step} is earlier than the memory's latest update (step {self.clock}); time cannot go back"
            )
        return step

    # ------------------------------------------------------------------ state transitions

    def __len__(self) -> int:
        return self.stability.numel()

    def extend(self, n: int, step: int) -> torch.Tensor:
        """Add ``n`` new samples (ids ``len..len+n-1``): $S = S_{init}$, $h = \\alpha / S_{init}$, $\\log m = 0$,
        anchor = last review = ``step``. Returns the new ids."""
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be an int >= 0, got {n!r}")
        step = self._step(step)
        start = len(self)
        f64 = dict(dtype=torch.float64)
        self.ema_loss = torch.cat([self.ema_loss, torch.zeros(n, **f64)])
        self.seen = torch.cat([self.seen, torch.zeros(n, dtype=torch.bool)])
        self.stability = torch.cat([self.stability, torch.full((n,), self.s_init, **f64)])
        self.hazard = torch.cat([self.hazard, torch.full((n,), self.alpha / self.s_init, **f64)])
        self.anchor_step = torch.cat([self.anchor_step, torch.full((n,), step, dtype=torch.int64)])
        self.log_m_anchor = torch.cat([self.log_m_anchor, torch.zeros(n, **f64)])
        self.last_review = torch.cat([self.last_review, torch.full((n,), step, dtype=torch.int64)])
        self.last_loss = torch.cat([self.last_loss, torch.zeros(n, **f64)])
        self.best_loss = torch.cat([self.best_loss, torch.zeros(n, **f64)])
        if n:
            # The newest cohort's exposures so far were its own stage's learning, not forgetting: its gap fit
            # starts once it is replayed.
            self.gap_model.reset(self.num_cohorts - 1)
            self.cohort = torch.cat([self.cohort, torch.full((n,), self.num_cohorts, dtype=torch.int64)])
            self.gap_model.grow(self.num_cohorts + 1)
            self.forgetting.grow(self.num_cohorts + 1)
        self.clock = step
        return torch.arange(start, start + n)

    @property
    def num_cohorts(self) -> int:
        """How many cohorts (extend() calls that added samples) the memory tracks."""
        return self.forgetting.gram.shape[0]

    def set_time_unit(self, unit: float, step: int) -> None:
        """From ``step`` on, one memory time unit is ``unit`` optimizer steps (:func:`memory_time`); earlier steps keep
        their memory times. Hazards, the consolidation's spacing and the strength threshold all run on memory time."""
        step = self._step(step)
        unit = float(unit)
        if not (math.isfinite(unit) and unit > 0):
            raise ValueError(f"the memory time unit must be a number of optimizer steps > 0, got {unit!r}")
        start, _, current = self.time_segments[-1]
        if unit == current:
            return
        if step == start:
            self.time_segments[-1] = (start, self.time_segments[-1][1], unit)
        else:
            self.time_segments.append((step, float(self.time(step)), unit))

    def time(self, steps: Any) -> torch.Tensor:
        """Memory time of optimizer ``steps`` (:func:`memory_time`), float64."""
        return memory_time(torch.as_tensor(steps), self.time_segments)

    def _elapsed(self, since: torch.Tensor, step: int) -> torch.Tensor:
        """Memory time from the steps ``since`` to ``step``."""
        if self.time_segments == [(0, 0.0, 1.0)]:
            return since.double().neg_().add_(step)  # one bank-sized temporary on the paper's clock
        return self.time(step) - self.time(since)

    def elapsed_since_review(self, ids: Any = None, step: int | None = None) -> torch.Tensor:
        """Memory time since each sample's last review, at ``step``. Shape ``(n,)``, float64."""
        step = self.clock if step is None else self._step(step)
        last = self.last_review if ids is None else self.last_review[self._ids(ids)]
        return self._elapsed(last, step)

    def observe(self, ids: Any, losses: Any, step: int) -> int:
        """Fold per-sample losses into the EMA (``eq:ema_app``). Non-finite losses are skipped and counted in
        :attr:`skipped_losses`, never written. An id given more than once in one call is one observation of the
        mean of its finite losses. Returns how many losses were skipped."""
        uniq, mean, skipped = self._finite_losses(ids, losses, step)
        if uniq.numel():
            self._observe_unique(uniq, mean)
        return skipped

    def expose(self, ids: Any, losses: Any, step: int) -> int:
        """One training exposure at ``step``: :meth:`observe` the losses, then :meth:`review` the samples whose loss
        was finite; validates and deduplicates once. Returns how many losses were skipped."""
        uniq, mean, skipped = self._finite_losses(ids, losses, step)
        if uniq.numel():
            self._observe_unique(uniq, mean)
            self._review_unique(uniq, self.clock)
        return skipped

    def _finite_losses(self, ids: Any, losses: Any, step: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Validated, deduplicated ids with a finite loss and their mean loss; counts and drops the rest."""
        ids = self._ids(ids)
        losses = torch.as_tensor(losses, dtype=torch.float64).reshape(-1)
        if losses.numel() != ids.numel():
            raise ValueError(
                f"ids and losses must have the same length, got {ids.numel()} ids and {losses.numel()} losses"
            )
        self.clock = self._step(step)
        finite = torch.isfinite(losses)
        skipped = int(finite.numel() - finite.sum())
        self.skipped_losses += skipped
        if skipped:
            ids, losses = ids[finite], losses[finite]
        uniq, inverse = torch.unique(ids, return_inverse=True)
        if uniq.numel() == ids.numel():  # no duplicates: scatter the losses into sorted-id order
            return uniq, torch.empty_like(losses).index_copy_(0, inverse, losses), skipped
        total = torch.zeros(uniq.numel(), dtype=torch.float64).index_add_(0, inverse, losses)
        count = torch.zeros(uniq.numel(), dtype=torch.float64).index_add_(0, inverse, torch.ones_like(losses))
        return uniq, total / count, skipped

    def _observe_unique(self, uniq: torch.Tensor, mean: torch.Tensor) -> None:
        before = self.seen[uniq]
        if bool(before.any()):  # observed forgetting since the previous exposure: the forgetting model's data
            ids = uniq[before]
            neg_log_m = -self.log_strength(ids, self.clock)
            rise = mean[before] - self.last_loss[ids]
            self.forgetting.update(self.cohort[ids], self._rise_features(ids, self.clock), rise, neg_log_m)
            gap = mean[before] - self.best_loss[ids]
            self.gap_model.update(self.cohort[ids], self._gap_features(ids, self.clock), gap, neg_log_m)
        self.best_loss[uniq] = torch.where(self.seen[uniq], torch.minimum(self.best_loss[uniq], mean), mean)
        self.last_loss[uniq] = mean
        self.ema_loss[uniq] = ema_loss_update(self.ema_loss[uniq], mean, self.seen[uniq], self.ema_beta)
        self.seen[uniq] = True

    def predicted_rise(self, ids: Any = None, step: int | None = None) -> torch.Tensor:
        """Loss rise of ``ids`` since their last exposure, at ``step``, predicted by the fitted
        :class:`ForgettingModel`. Shape ``(n,)``, float64."""
        step = self.clock if step is None else self._step(step)
        ids = torch.arange(len(self)) if ids is None else self._ids(ids)
        return self.forgetting.predict(self.cohort[ids], self._rise_features(ids, step))

    def predicted_gap(self, ids: Any = None, step: int | None = None) -> torch.Tensor:
        """How far the loss of ``ids`` lies above the lowest loss each had had, at ``step``, predicted by the fitted
        gap model (:attr:`gap_model`). Shape ``(n,)``, float64."""
        step = self.clock if step is None else self._step(step)
        ids = torch.arange(len(self)) if ids is None else self._ids(ids)
        return self.gap_model.predict(self.cohort[ids], self._gap_features(ids, step))

    def _gap_features(self, ids: torch.Tensor, step: int) -> torch.Tensor:
        """:func:`gap_features` of ``ids`` at ``step`` (a never-seen sample's gap is 0)."""
        last_gap = torch.where(self.seen[ids], self.last_loss[ids] - self.best_loss[ids], 0.0)
        return gap_features(self._elapsed(self.last_review[ids], step), last_gap)

    def task_gaps(self, cohorts: torch.Tensor) -> torch.Tensor:
        r"""Each cohort's recently observed loss gap: the mean gap $g$ (loss minus the lowest loss the sample had had)
        of its samples' latest exposures, with the gap model's decayed weights (``calibration_decay`` per exposure
        step), shrunk towards the mean of all ``cohorts`` by one pseudo-observation:
        $\hat g_c = (\sum_c g + \bar g) / (n_c + 1)$, $\bar g = \sum g / \sum n$ over ``cohorts``. A cohort
        without observations gets $\bar g$; 0 everywhere before any. Clamped at 0. Shape of ``cohorts``, float64."""
        cohorts = torch.as_tensor(cohorts, dtype=torch.int64)
        known = cohorts < self.gap_model.gram.shape[0]
        count = torch.zeros(cohorts.shape, dtype=torch.float64)
        total = torch.zeros(cohorts.shape, dtype=torch.float64)
        count[known] = self.gap_model.gram[cohorts[known], 0, 0]
        total[known] = self.gap_model.moment[cohorts[known], 0]
        unique = torch.unique(cohorts[known])
        pooled_n = float(self.gap_model.gram[unique, 0, 0].sum()) if unique.numel() else 0.0
        if pooled_n <= 0:
            return torch.zeros(cohorts.shape, dtype=torch.float64)
        pooled = float(self.gap_model.moment[unique, 0].sum()) / pooled_n
        return ((total + pooled) / (count + 1.0)).clamp(min=0.0)

    def task_log_weights(self, ids: Any) -> torch.Tensor:
        r"""Log weight of each of ``ids``' cohort in the per-cohort counts of a replay draw (beyond the paper):
        $\log(1 + \kappa\, \hat g_c / \bar g)$, with $\hat g_c$ the cohort's :meth:`task_gaps` and $\bar g$
        their mean over ``ids`` ($\kappa$ = ``task_gap_weight``). A cohort whose replayed samples lie further above
        their best loss gets more of the replay; none drops below $1/(1+\kappa)$ of a uniform draw's share.
        Zeros (a uniform draw's shares) when $\kappa = 0$ or no gap has been observed. No step argument: the gaps
        decay per exposure, not with time. Shape ``(n,)``, float64."""
        ids = self._ids(ids)
        if self.task_gap_weight == 0 or ids.numel() == 0:
            return torch.zeros(ids.shape, dtype=torch.float64)
        gaps = self.task_gaps(self.cohort[ids])
        mean = float(gaps.mean())
        if mean <= 0:
            return torch.zeros(ids.shape, dtype=torch.float64)
        return torch.log1p(self.task_gap_weight * gaps / mean)

    @property
    def stratified(self) -> bool:
        """Whether selection keeps each cohort's share of the replay what uniform selection would give it and uses
        the weights only within a cohort (``weighting="forgotten"``; see ``scheduler.stratified_choice``)."""
        return self.weighting == "forgotten"

    def _rise_features(self, ids: torch.Tensor, step: int) -> torch.Tensor:
        """:func:`forgetting_features` of ``ids`` at ``step``: memory time since their last exposure, difficulty."""
        return forgetting_features(self._elapsed(self.last_review[ids], step), self.normalized_loss(ids))

    def normalized_loss(self, ids: torch.Tensor | None = None) -> torch.Tensor:
        """$\\hat\\ell$ for ``ids`` (all samples if ``None``) with the quantiles of the latest :meth:`update_hazard`;
        0.5 for never-seen samples and before the first update."""
        seen, ema = (self.seen, self.ema_loss) if ids is None else (self.seen[ids], self.ema_loss[ids])
        if self.loss_range is None:
            return torch.full_like(ema, 0.5)
        return torch.where(seen, normalized_loss(ema, *self.loss_range), 0.5)

    def _hazard_of(self, ids: torch.Tensor | None, stability: torch.Tensor) -> torch.Tensor:
        phi = difficulty(self.normalized_loss(ids), self.phi, self.phi_k, self.phi_c, self.phi_p, self.phi_kappa)
        return hazard(phi, stability, self.alpha, self.gamma_d)

    def review(self, ids: Any, step: int) -> None:
        """Consolidate ``ids`` at ``step`` (``eq:reset_spacing``): $S$ grows by the spacing rule, $m$ resets to 1,
        the anchor and last review move to ``step``, and $h$ is recomputed from the new $S$. Ids are deduplicated."""
        ids = torch.unique(self._ids(ids))
        self.clock = self._step(step)
        if ids.numel():
            self._review_unique(ids, self.clock)

    def _review_unique(self, ids: torch.Tensor, step: int) -> None:
        anchor, last = self.anchor_step[ids], self.last_review[ids]
        log_m = decayed_log_strength(self.log_m_anchor[ids], self.hazard[ids], self._elapsed(anchor, step))
        noise = None
        if self.sigma_s > 0:
            noise = torch.randn(ids.numel(), generator=self.generator, dtype=torch.float64) * self.sigma_s
        new_s = consolidated_stability(
            self.stability[ids], torch.exp(log_m), self._elapsed(last, step), eta_s=self.eta_s, s_max=self.s_max,
            beta_s=self.beta_s, rho=self.rho, gamma_s=self.gamma_s, s_min=self.s_min, noise=noise,
        )  # fmt: skip
        self.stability[ids] = new_s
        self.log_m_anchor[ids] = 0.0
        self.anchor_step[ids] = step
        self.last_review[ids] = step
        self.hazard[ids] = self._hazard_of(ids, new_s)

    def update_hazard(self, step: int) -> None:
        """Epoch-level update at ``step`` for every sample (``eq:epoch_update``, right endpoint): recompute the
        loss quantiles over seen samples (``eq:quantile_app``), then
        $h_{new} = (\\alpha + \\gamma_d \\phi(\\hat\\ell)) / S$,
        $\\log m \\leftarrow \\log m - h_{new} (t - t_{anchor})$, anchor $= t$, $h = h_{new}$."""
        step = self._step(step)
        if bool(self.seen.any()):
            self.loss_range = loss_quantiles(self.ema_loss[self.seen], *self.quantiles)
        h_new = self._hazard_of(None, self.stability)
        elapsed = self._elapsed(self.anchor_step, step)  # t - t_anchor
        self.log_m_anchor = decayed_log_strength(self.log_m_anchor, h_new, elapsed)
        self.anchor_step.fill_(step)
        self.hazard = h_new
        self.clock = step

    # ------------------------------------------------------------------ queries

    def log_strength(self, ids: Any = None, step: int | None = None) -> torch.Tensor:
        """$\\log m$ of ``ids`` (all samples if ``None``) at ``step`` (the latest update step if ``None``)."""
        step = self.clock if step is None else self._step(step)
        if ids is None:  # the whole bank: no index copies
            return decayed_log_strength(self.log_m_anchor, self.hazard, self._elapsed(self.anchor_step, step))
        ids = self._ids(ids)
        elapsed = self._elapsed(self.anchor_step[ids], step)
        return decayed_log_strength(self.log_m_anchor[ids], self.hazard[ids], elapsed)

    def strength(self, ids: Any = None, step: int | None = None) -> torch.Tensor:
        """Memory strength $m \\in (0, 1]$ of ``ids`` at ``step``, lazily (App. A). Shape ``(n,)``, float64."""
        return torch.exp(self.log_strength(ids, step))

    def replay_log_weights(self, ids: Any = None, step: int | None = None) -> torch.Tensor:
        """Unnormalised log replay weights of ``ids`` at ``step``: ``eq:prob_weight`` ($-\\zeta\\log m$) or the
        `gain` form. Shape ``(n,)``; use with Gumbel-top-k for sampling without replacement."""
        step = self.clock if step is None else self._step(step)
        ids = None if ids is None else self._ids(ids)
        if self.weighting == "calibrated":
            return calibrated_log_weights(self.predicted_rise(ids, step), self.zeta)
        if self.weighting == "forgotten":
            return calibrated_log_weights(self.predicted_gap(ids, step), self.zeta)
        log_m = self.log_strength(ids, step)
        if self.weighting == "power":
            return power_log_weights(log_m, self.zeta)
        return gain_log_weights(log_m, self.elapsed_since_review(ids, step), self.beta_m, self.rho)

    def replay_weights(self, ids: Any = None, step: int | None = None) -> torch.Tensor:
        """Replay probabilities $p_i$ over ``ids`` at ``step`` (``eq:prob_weight``): non-negative, summing to 1,
        finite for any elapsed time. Shape ``(n,)``, float64."""
        return normalize_log_weights(self.replay_log_weights(ids, step))

    def summary(self, ids: Any = None, step: int | None = None) -> dict[str, float]:
        """Mean / min / 5% / 50% / 95% quantiles of strength and the mean stability, for logging."""
        ids = torch.arange(len(self)) if ids is None else self._ids(ids)
        if ids.numel() == 0:
            return {}
        m = self.strength(ids, step)
        q05, q95 = loss_quantiles(m, 0.05, 0.95)
        q50 = loss_quantiles(m, 0.5, 0.5)[0]
        return {
            "strength_mean": float(m.mean()), "strength_min": float(m.min()), "strength_q05": q05,
            "strength_q50": q50, "strength_q95": q95, "stability_mean": float(self.stability[ids].mean()),
        }  # fmt: skip

    # ------------------------------------------------------------------ state

    def hparams(self) -> dict[str, Any]:
        return {
            name: (list(getattr(self, name)) if name == "quantiles" else getattr(self, name)) for name in _HPARAM_NAMES
        }

    def state_dict(self) -> dict[str, Any]:
        """Tensors and primitives only (safe for safetensors + JSON); includes the generator state."""
        return {
            "ema_loss": self.ema_loss.clone(),
            "seen": self.seen.clone(),
            "stability": self.stability.clone(),
            "hazard": self.hazard.clone(),
            "anchor_step": self.anchor_step.clone(),
            "log_m_anchor": self.log_m_anchor.clone(),
            "last_review": self.last_review.clone(),
            "last_loss": self.last_loss.clone(),
            "best_loss": self.best_loss.clone(),
            **{f"gap_{k}": v for k, v in self.gap_model.state_dict().items()},
            "cohort": self.cohort.clone(),
            "time_segments": [list(segment) for segment in self.time_segments],
            **{f"forgetting_{k}": v for k, v in self.forgetting.state_dict().items()},
            "rng_state": self.generator.get_state(),
            "clock": self.clock,
            "skipped_losses": self.skipped_losses,
            "loss_range": None if self.loss_range is None else list(self.loss_range),
            "seed": self.seed,
            "hparams": self.hparams(),
        }

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Restore a :meth:`state_dict`. With ``strict``, hyperparameters must match this object's."""
        if strict:
            for name, value in state["hparams"].items():
                mine = self.hparams().get(name)
                if mine != value:
                    raise ValueError(
                        f"SampleMemory.load_state_dict: hyperparameter {name}={value!r} in the saved state "
                        f"differs from this memory's {name}={mine!r}; construct the memory with the saved value "
                        "or pass strict=False"
                    )
        n = state["stability"].numel()
        for key in ("ema_loss", "seen", "hazard", "anchor_step", "log_m_anchor", "last_review"):
            if state[key].numel() != n:
                raise ValueError(f"state[{key!r}] has {state[key].numel()} entries, expected {n}")
        self.ema_loss = state["ema_loss"].to(torch.float64).clone()
        self.seen = state["seen"].to(torch.bool).clone()
        self.stability = state["stability"].to(torch.float64).clone()
        self.hazard = state["hazard"].to(torch.float64).clone()
        self.anchor_step = state["anchor_step"].to(torch.int64).clone()
        self.log_m_anchor = state["log_m_anchor"].to(torch.float64).clone()
        self.last_review = state["last_review"].to(torch.int64).clone()
        self.generator.set_state(state["rng_state"].to(torch.uint8).clone())
        self.clock = int(state["clock"])
        self.skipped_losses = int(state["skipped_losses"])
        self.loss_range = None if state["loss_range"] is None else tuple(float(v) for v in state["loss_range"])
        self.seed = int(state["seed"])
        # States written before the forgetting model and the time unit existed: paper clock, no observations yet.
        self.last_loss = state.get("last_loss", self.ema_loss).to(torch.float64).clone()
        self.cohort = state.get("cohort", torch.zeros(n, dtype=torch.int64)).to(torch.int64).clone()
        self.time_segments = [(int(s), float(t), float(u)) for s, t, u in state.get("time_segments", [(0, 0.0, 1.0)])]
        self.forgetting = ForgettingModel(self.calibration_decay, self.calibration_prior)
        self.forgetting.grow(1 if n else 0)  # overwritten below by a saved fit of any size
        self.best_loss = state.get("best_loss", self.last_loss).to(torch.float64).clone()
        self.gap_model = ForgettingModel(self.calibration_decay, self.calibration_prior, last_weight=1.0)
        self.gap_model.grow(1 if n else 0)
        if "gap_gram" in state:
            self.gap_model.load_state_dict({k: state[f"gap_{k}"] for k in ("gram", "moment", "scores")})
        if "forgetting_gram" in state:
            self.forgetting.load_state_dict({k: state[f"forgetting_{k}"] for k in ("gram", "moment", "scores")})
