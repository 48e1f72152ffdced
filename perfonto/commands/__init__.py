"""One module per CLI command. Each defines ``register(subparsers)``, which adds its parser and sets
``func`` (a callable taking the parsed args and returning the exit code). ``HELP`` lists the commands in
help order with their one-line help, so that ``perfonto --help`` needs no command module and a command
imports only its own module (``perfonto.cli``); adding a command is adding a module and one line here
(and to ``MODULES`` when the module is named otherwise)."""

HELP = {
    "run": "compile the catalog, emulate a workload, evaluate every metric and report the bottleneck",
    "analyze": "evaluate a catalog over a counter dump you already have and print the report",
    "emulate": "emulate a fleet of hosts into a partitioned counter dataset with its ground truth",
    "check": "compile a catalog and print every diagnostic",
    "diff": "what changes between two generations, and whether the change is compatible",
    "codegen": "generate an evaluator, the SQL query, a C header, docs or the JSON Schemas",
    "docs": "write the Markdown docs site of the catalog (pages per generation and per metric group)",
    "explain": "formula, unit derivation, dependency tree, availability and source of a metric",
    "graph": "dependency graph of a metric as Mermaid or DOT",
    "test": "run the catalog's test vectors (*.vectors.yaml)",
    "validate": "check every metric with a ground-truth counterpart on several emulated workloads",
    "project": "project serving throughput, TTFT and TPOT of a model on a generation (offline benchmark)",
    "sweep": "project a grid of spec constants and workload knobs; tokens/s, latency, MFU, bottleneck",
    "sensitivity": "which spec constant buys the most tokens/s at one operating point (d ln y / d ln x)",
    "compare": "two generations over a list of workloads, and which assumption drives each difference",
    "compare-runs": "compare captures with a baseline: every metric's change, its bootstrap interval and a verdict",
    "findings": "a run's findings with the gain removing each cause could buy (--reproject: measured on the emulator)",
    "plan": "group the counters a set of metrics needs into the fewest passes, with each counter's read interval cap",
    "coverage": "which metrics each scenario moves, whether the catalog tells the scenarios apart, what each counter "
    "buys",
    "validate-emulator": "compare the emulator's throughput with the public measurements it is calibrated on",
    "emulator-quantities": "list the emulator's named quantities (what signals' emulator bindings may name)",
    "calibrate": "fit the emulator's efficiency model to the public measurements and write fitted.yaml",
    "import": "import a perf, Intel perfmon, Arm telemetry or rocprofiler metric catalog",
    "export": "export the metric catalog in another tool's format (perf pmu-events JSON, OpenTelemetry semantic "
    "conventions)",
    "align": "align the chips' clocks of a run to the host timeline and analyse it across chips",
    "timeline": "write a run's correlated timeline (Chrome/Perfetto trace-event JSON or Perfetto protobuf)",
    "serve": "live metrics from the emulator or a growing dump, as OpenMetrics (Prometheus) and OTLP",
    "report": "write a run's report as one self-contained HTML page (and its pictures as PNG/SVG)",
}

COMMANDS = [c for c in HELP if c != "graph"]  # the modules' commands (``graph`` is registered by ``explain``)

MODULES = {"graph": "explain", "import": "import_"}  # command -> module name where they differ


def module_of(command: str) -> str:
    """The ``perfonto.commands`` module that registers ``command``."""
    return MODULES.get(command, command.replace("-", "_"))
