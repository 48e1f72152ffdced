"""perfonto emulator layer: an analytical, iteration-level model of transformer inference on Sohu.

``run(gen, ...)`` schedules the forward passes of an offline serving scenario (continuous batching
with chunked prefill, tensor parallelism over all chips), times every op with a roofline, samples
every signal of the generation as raw registers (``counters.parquet``) and writes the ground truth
(``ground_truth.json``). Imports only ``ontology`` (plus numpy and pyarrow).

Modules: ``models`` (shapes), ``hardware`` (spec constants), ``assumptions`` (efficiency and other
modelling constants), ``scheduler`` (continuous batching), ``ops`` (per-op work and roofline time),
``timeline`` (piecewise-linear cumulative counters), ``signals`` (signal ↔ quantity mapping),
``thermal`` (power/temperature telemetry), ``counters`` (raw register writer), ``groundtruth``,
``run``.
"""
from .assumptions import Assumptions
from .hardware import Hardware, HardwareSpecError, hardware_from_generation
from .models import MODELS, ModelShape, get_model
from .run import EmulationResult, run, sample_grid
from .scheduler import ContinuousBatcher, SchedulerError, StepBatch

__all__ = ["Assumptions", "ContinuousBatcher", "EmulationResult", "Hardware", "HardwareSpecError", "MODELS",
           "ModelShape", "SchedulerError", "StepBatch", "get_model", "hardware_from_generation", "run", "sample_grid"]
