"""Randomised lidar faults on batched scans, and the robot's fill of sectors without a reading.

Per scan, in this order (each step only when its term is enabled, values from
:class:`navsim.randomization.RandomizationManager`):

1. ``lidar_bias``: every *return* (a sector reading below ``max_range``) becomes
   ``scale * range + offset``; a sector with no return stays ``max_range`` (a real lidar reports no
   return as inf, which the robot reads as max_range whatever its calibration).
2. ``lidar_noise``: Gaussian noise of the world's std (instead of ``env.lidar.noise_std``), drawn
   from the env's noise stream as without randomisation; then clipped to ``[0, max_range]``. With
   ``env.lidar.noise_beams`` k > 1 a sector's noise is the minimum of k draws (:func:`sector_noise`):
   the node's scan rule takes the minimum of the k noisy readings of a real lidar's beams in the
   sector, which reads short of the surface.
3. ``lidar_spurious``: a sector reads ``max_range`` (a spurious no-return) with the world's probability.
4. Sectors outside the field of view are filled as without randomisation (``navsim.lidar``).
5. ``lidar_dropout``: a seen sector has no valid reading with the world's probability.

Two scans come out. The *readings* (``NavEnv.scan_readings``) hold NaN where a reading dropped
out: a LaserScan on the training beams as a driver would publish it, which robot-side controllers
get (``navtrain.evaluation.RobotSideActor``) and resample with their own rule. The *policy scan*
(``NavEnv.scan``) is those readings with the dropped sectors filled by :class:`MissingFill`, the
robot's rule 5 for a sector without a valid reading (``navcontract.scan``), checked against
``navcontract.scan.resample_scan`` when built. The two paths see the same scan, except that the
robot path may also refuse a scan by the runtime's doubt rules (rule 7: too few valid readings,
a blind run in front), and then stops, as on the robot.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from navcontract.scan import ScanInput, ScanOptions, resample_scan
from navsim.randomization import RandomizationManager


class MissingFill:
    """``navcontract.scan``'s fill of sectors without a valid reading, for batched torch scans whose
    missing sectors change every scan.

    ``nearest``: the value of the angularly nearest sector with a reading (circular; a tie takes
    the smaller value); ``max_range``; ``constant`` (``fill_value``, clipped to [0, max_range]).
    A scan with no reading at all (the robot refuses it) keeps its values."""

    def __init__(
        self, num_beams: int, max_range: float, fill: str, fill_value: float | None, device: torch.device
    ) -> None:
        self.options = ScanOptions(
            fill=fill, fill_value=fill_value, min_valid_share=0.0, min_coverage=0.0, max_fill_gap=num_beams
        )
        self.num_beams, self.max_range, self.device = int(num_beams), float(max_range), device
        self._index = torch.arange(2 * self.num_beams, device=device)
        self._check()

    def __call__(self, ranges: torch.Tensor, missing: torch.Tensor) -> torch.Tensor:
        """(N, B) ranges and (N, B) bool missing -> ranges with the missing sectors filled."""
        b = self.num_beams
        valid = ~missing
        if self.options.fill == "max_range":
            fill = torch.full_like(ranges, self.max_range)
        elif self.options.fill == "constant":
            fill = torch.full_like(ranges, min(max(float(self.options.fill_value), 0.0), self.max_range))
        else:
            valid2 = torch.cat([valid, valid], dim=1)
            idx = self._index.expand_as(valid2)
            left = torch.where(valid2, idx, -1).cummax(dim=1).values[:, b:]  # last valid at or before j + b
            big = 3 * b
            right = torch.where(valid2, idx, big).flip(1).cummin(dim=1).values.flip(1)[:, :b]  # next at or after j
            j = self._index[:b]
            dl, dr = j + b - left, right - j
            vl = ranges.gather(1, left.clamp(min=0) % b)
            vr = ranges.gather(1, right.clamp(max=2 * b - 1) % b)
            fill = torch.where(dl < dr, vl, torch.where(dr < dl, vr, torch.minimum(vl, vr)))
        some = valid.any(dim=1, keepdim=True)
        return torch.where(missing & some, fill, ranges)

    def _check(self) -> None:
        """Agree with the runtime on random scans, or refuse to train with a different rule."""
        rng = np.random.default_rng(0)
        b = self.num_beams
        for share in (0.05, 0.3, 0.9):
            ranges = rng.uniform(0.0, self.max_range, (4, b)).astype(np.float32)
            missing = rng.uniform(size=(4, b)) < share
            missing[:, 0] = False  # at least one reading
            ranges[:, 1] = ranges[:, 3] if b > 3 else ranges[:, 1]  # ties in the nearest rule
            ours = self(torch.as_tensor(ranges, device=self.device), torch.as_tensor(missing, device=self.device))
            for row in range(4):
                scan = ScanInput.training_beams(np.where(missing[row], np.nan, ranges[row]).astype(np.float64), b)
                theirs = resample_scan(scan, b, self.max_range, options=self.options)
                if not np.allclose(ours[row].cpu().numpy(), theirs, atol=1e-6, rtol=0.0):
                    raise RuntimeError(
                        f"navcontract.scan's fill rule {self.options.fill!r} for missing sectors differs from "
                        "navsim.scan_faults.MissingFill: update MissingFill to follow it"
                    )


class LidarFaults:
    """Steps 1-5 of the module docstring for the enabled lidar terms of ``rand``."""

    TERMS = ("lidar_bias", "lidar_noise", "lidar_spurious", "lidar_dropout")

    def __init__(
        self,
        rand: RandomizationManager,
        seen: torch.Tensor,
        max_range: float,
        noise_std: float,
        fov_fill: Callable[[torch.Tensor], torch.Tensor],
        missing_fill: MissingFill,
        noise_beams: int = 1,
    ) -> None:
        self.rand = rand
        self.seen = seen
        self.max_range = float(max_range)
        self.noise_std = float(noise_std)
        self.fov_fill = fov_fill
        self.missing_fill = missing_fill
        self.noise_beams = int(noise_beams)
        self.active = any(rand.enabled(t) for t in self.TERMS)

    def apply(self, raw: torch.Tensor, noise_gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(N, B) sector minima (unseen sectors at max_range) -> (policy scan, readings), both
        (N, B) in metres; the readings hold NaN where a reading dropped out."""
        rand, r_max = self.rand, self.max_range
        x = biased_and_noisy(raw, rand, r_max, self.noise_std, noise_gen, self.noise_beams)
        if rand.enabled("lidar_spurious"):
            hit = rand.rand(*x.shape) < rand.value("lidar_spurious", "prob")[:, None]
            x = torch.where(hit & self.seen, torch.full_like(x, r_max), x)
        x = self.fov_fill(x)
        if not rand.enabled("lidar_dropout"):
            return x, x
        drop = (rand.rand(*x.shape) < rand.value("lidar_dropout", "prob")[:, None]) & self.seen
        readings = torch.where(drop, torch.full_like(x, float("nan")), x)
        return self.missing_fill(x, drop), readings


def sector_noise(shape: torch.Size, beams: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
    """Unit noise of a sector read as the minimum of ``beams`` noisy readings: the minimum of that
    many standard normal draws per sector (one draw for 1)."""
    if beams == 1:
        return torch.randn(shape, generator=gen, device=device)
    return torch.randn((*shape, beams), generator=gen, device=device).amin(dim=-1)


def biased_and_noisy(
    raw: torch.Tensor,
    rand: RandomizationManager,
    max_range: float,
    noise_std: float,
    gen: torch.Generator,
    beams: int = 1,
) -> torch.Tensor:
    """Steps 1-2 of the module docstring on (N, B) ranges: ``lidar_bias`` on every return (below
    ``max_range``), then Gaussian noise of the world's ``lidar_noise`` std (else ``noise_std``; none
    at 0) drawn from ``gen`` as the minimum over ``beams`` readings (:func:`sector_noise`), clipped
    to ``[0, max_range]``."""
    x = raw
    if rand.enabled("lidar_bias"):
        scale = rand.value("lidar_bias", "scale")[:, None]
        offset = rand.value("lidar_bias", "offset")[:, None]
        x = torch.where(raw < max_range, scale * raw + offset, raw)
    if rand.enabled("lidar_noise"):
        x = x + rand.value("lidar_noise", "std")[:, None] * sector_noise(x.shape, beams, gen, x.device)
    elif noise_std > 0:
        x = x + noise_std * sector_noise(x.shape, beams, gen, x.device)
    return x.clamp(0.0, max_range)


def dense_faults(
    raw: torch.Tensor, rand: RandomizationManager, max_range: float, noise_std: float, gen: torch.Generator
) -> torch.Tensor:
    """The enabled lidar terms of ``rand`` on a robot's own scan (N, M) of M beams, beam by beam, as a
    real lidar's faults fall on its beams (the node's scan rule then takes each sector's minimum):
    ``lidar_bias`` on every return (below ``max_range``), Gaussian noise of the world's
    ``lidar_noise`` std (else ``noise_std``), clipped to ``[0, max_range]``, a spurious no-return
    (``max_range``) and a dropped reading (NaN, as a driver publishes it) with the world's
    probabilities. Every draw comes from ``gen``, never from ``rand``'s own stream (the worlds the env
    draws stay those without this scan)."""
    x = biased_and_noisy(raw, rand, max_range, noise_std, gen)
    if rand.enabled("lidar_spurious"):
        hit = torch.rand(x.shape, generator=gen, device=x.device) < rand.value("lidar_spurious", "prob")[:, None]
        x = torch.where(hit, torch.full_like(x, max_range), x)
    if rand.enabled("lidar_dropout"):
        drop = torch.rand(x.shape, generator=gen, device=x.device) < rand.value("lidar_dropout", "prob")[:, None]
        x = torch.where(drop, torch.full_like(x, float("nan")), x)
    return x
