"""Power and temperature telemetry on the sample grid.

- Power gauge: the board's average power over the sample period that ends at the sample (energy
  delta ÷ time delta), as power sensors report a short-window average (NVML's power reading is one);
  the first sample reads idle power.
- Temperature: first-order thermal RC model (lumped die + heatsink): the temperature relaxes towards
  ``ambient + R_th · P`` with time constant ``tau``, driven by the window-average power::

      T_i = a_i · T_{i−1} + (1 − a_i) · (ambient + R_th · P_i),   a_i = exp(−Δt_i / tau)

  starting from the idle steady state. The recursion is evaluated in closed form with cumulative
  sums (vectorised, in blocks short enough that ``exp(−Σ ln a)`` stays below ``e**10``).
"""

from __future__ import annotations

import numpy as np


def first_order_filter(x: np.ndarray, a: np.ndarray, y0: float) -> np.ndarray:
    """``y_i = a_i · y_{i−1} + (1 − a_i) · x_i`` with ``y_{−1} = y0``, vectorised.

    Closed form: with ``c_i = Σ_{k≤i} ln a_k``, ``y_i = e^{c_i} · (y0 + Σ_{j≤i} (1 − a_j) x_j e^{−c_j})``.

    Args:
        x: (n,) input; a: (n,) decay factors in (0, 1]; y0: state before the first element.
    Returns:
        (n,) filtered values.
    """
    x = np.asarray(x, np.float64)
    a = np.asarray(a, np.float64)
    out = np.empty_like(x)
    la = np.log(np.clip(a, 1e-300, 1.0))
    i, n, y = 0, len(x), float(y0)
    while i < n:
        c = np.cumsum(la[i : i + 4096])
        m = int(np.searchsorted(-c, 10.0, side="right"))
        m = max(1, min(m, n - i))
        c = c[:m]
        acc = np.cumsum((1.0 - a[i : i + m]) * x[i : i + m] * np.exp(-c))
        out[i : i + m] = np.exp(c) * (y + acc)
        y = float(out[i + m - 1])
        i += m
    return out


class Thermal:
    """Running power/temperature telemetry over successive blocks of samples.

    Args:
        idle_power: W (the power read at the first sample and before it).
        ambient_c: °C; r_th: °C/W; tau_s: s.
    """

    def __init__(self, idle_power: float, ambient_c: float, r_th: float, tau_s: float):
        self.idle, self.ambient, self.r_th, self.tau = idle_power, ambient_c, r_th, tau_s
        self.t_prev: float | None = None
        self.e_prev = 0.0
        self.temp = ambient_c + r_th * idle_power

    def update(self, t_s: np.ndarray, energy_j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Power (W) and temperature (°C) at sample times ``t_s`` (s) given cumulative energy (J)."""
        t_s = np.asarray(t_s, np.float64)
        e = np.asarray(energy_j, np.float64)
        t_before = np.concatenate([[self.t_prev if self.t_prev is not None else t_s[0]], t_s[:-1]])
        e_before = np.concatenate([[self.e_prev], e[:-1]])
        dt = t_s - t_before
        power = np.where(dt > 0, (e - e_before) / np.where(dt > 0, dt, 1.0), self.idle)
        a = np.exp(-dt / self.tau)
        temp = first_order_filter(self.ambient + self.r_th * power, a, self.temp)
        self.t_prev, self.e_prev, self.temp = float(t_s[-1]), float(e[-1]), float(temp[-1])
        return power, temp
