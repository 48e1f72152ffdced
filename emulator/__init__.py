"""perfonto.emulator: the reference emulator — an analytical, iteration-level model of transformer
inference on modelled chips that writes raw counter registers and the ground truth to check them by.

``run(gen, ...)`` serves a scenario (offline or online; continuous batching with chunked or whole
prompts; tensor, expert, pipeline and data parallelism), times every op with a roofline whose
efficiencies are fitted on public GPU measurements, samples every signal of the generation as raw
registers on each chip's own clock (``counters.parquet``), and writes the request records
(``requests.parquet``), the driver's clock-sync reads (``sync.parquet``), the host-side event trace
(``trace.parquet``) and the ground truth (``ground_truth.json``).
``project(gen, ...)`` replays a whole benchmark without counters (throughput, TTFT, TPOT).
Imports only ``ontology`` (plus numpy, pyarrow, PyYAML; scipy for ``calibration.fit``).

Modules: ``models`` (shapes, ``data/models.yaml``), ``hardware`` (spec constants), ``parallel``
(mappings, dtypes, per-chip shares), ``assumptions`` (efficiency and other modelling constants;
fitted ones in ``data/fitted.yaml``), ``presets`` (named assumption sets, ``data/presets.yaml``),
``steps`` (per-step aggregates, where each request's tokens land), ``scheduler`` (continuous
batching: offline, online, closed loop, speculative decoding), ``latency`` (TTFT, TPOT, ITL),
``serving`` (engine sizing shared by run and project, step loop, throughput), ``work`` (the slots of
a step and their FLOPs and bytes), ``moe`` (expert-rank imbalance), ``model_flops`` (the definitions
of model FLOPs), ``ops`` (roofline time and counter quantities), ``subclasses`` (top-down level 2),
``knobs`` (slow chip, throttled link, router skew; lock-step collectives) and ``lockstep`` (the
chips' tables in lock step), ``timeline`` (piecewise-linear cumulative counters), ``quantities``
(the named quantities a signal's emulator binding may name, ``data/quantities.yaml``, and the check
of a generation's bindings), ``signals`` (each signal planned from its binding), ``thermal``,
``clocks`` (device clocks, sync reads), ``counters`` (raw register writer), ``records`` (request
records), ``trace`` (host-side events, collective waits), ``groundtruth``, ``run``, ``project``,
``claim`` (a run's modelling assumptions, the comparison with a public claim), ``calibration_rows`` (the cited
rows, read and checked), ``calibration`` (the fit and its in-sample checks against
``data/calibration.yaml``), ``source_validation`` (the other cited sources, leave-one-source-out, errors per
engine profile).
"""

from . import project as project_module
from .assumptions import Assumptions, fitted_assumptions
from .hardware import Hardware, HardwareSpecError, hardware_from_generation
from .models import MODELS, ModelShape, get_model
from .parallel import Mapping, MappingError, Precision
from .project import Projection
from .knobs import Knobs
from .run import MAX_CHIPS, EmulationResult, run, sample_grid
from .scheduler import ContinuousBatcher, SchedulerError, StepBatch
from .serving import Engine

project = project_module

__all__ = [
    "Assumptions",
    "ContinuousBatcher",
    "EmulationResult",
    "Engine",
    "Hardware",
    "HardwareSpecError",
    "MODELS",
    "Knobs",
    "MAX_CHIPS",
    "Mapping",
    "MappingError",
    "ModelShape",
    "Precision",
    "Projection",
    "SchedulerError",
    "StepBatch",
    "fitted_assumptions",
    "get_model",
    "hardware_from_generation",
    "project",
    "run",
    "sample_grid",
]
