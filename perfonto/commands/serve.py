"""``perfonto serve (--emulate … | --follow FILE|DIR) [--port P] [--otlp URL]``: live metrics over
HTTP (OpenMetrics ``/metrics``, JSON ``/healthz``) and optionally OTLP; see ``perfonto.serve``.

Runs until SIGINT or SIGTERM, then shuts down cleanly and exits 0 (under ``--json`` after printing
one JSON summary). Exit 2 for usage errors (a bad port, duration or URL, an unknown generation),
1 when it cannot start (a missing path, a port in use, an emulation that cannot run)."""

from __future__ import annotations

import argparse
import json
import signal
import socket
import threading
from urllib.parse import urlparse

from . import HELP
from .common import catalog_options, CommandError, duration, non_negative_int, stderr, uncompiled, workload_options


def _port(text: str) -> int:
    v = non_negative_int(text)
    if v > 65535:
        raise argparse.ArgumentTypeError(f"a TCP port is 0 … 65535 (0 = any free port): {text!r}")
    return v


def _endpoint(text: str) -> str:
    u = urlparse(text)
    if u.scheme not in ("http", "https") or not u.netloc:
        raise argparse.ArgumentTypeError(
            f"an OTLP/HTTP endpoint is a URL like http://127.0.0.1:4318/v1/metrics: {text!r}"
        )
    return text if u.path not in ("", "/") else text.rstrip("/") + "/v1/metrics"


def register(sub) -> None:
    from .run import EMULATED_CHIPS

    p = sub.add_parser("serve", help=HELP["serve"])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--emulate", action="store_true", help="emulate in real time (the knobs of `perfonto run`)")
    src.add_argument(
        "--follow",
        metavar="FILE|DIR",
        help="a folder of Parquet part files appended over time, or one dump file rewritten",
    )
    catalog_options(p)
    p.add_argument("--bind", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, loopback only)")
    p.add_argument(
        "--port", type=_port, default=9464, help="TCP port of /metrics and /healthz (default: 9464; 0 = any free port)"
    )
    p.add_argument("--host", default=None, help="`host` label of every series (default: this machine's host name)")
    p.add_argument(
        "--otlp",
        type=_endpoint,
        default=None,
        metavar="ENDPOINT",
        help="also export over OTLP/HTTP to this URL, e.g. http://127.0.0.1:4318/v1/metrics",
    )
    p.add_argument("--otlp-interval", type=duration, default=10.0, help="OTLP export period (default: 10s)")
    e = p.add_argument_group("--emulate")
    workload_options(e, "model", "chips", chips=EMULATED_CHIPS)
    e.add_argument(
        "--duration", type=duration, default=None, help="stop the source after this long (default: run until stopped)"
    )
    workload_options(
        e,
        "sample_period",
        "isl",
        "osl",
        "seed",
        "warmup_steps",
        "slow_chip",
        "throttled_link",
        "router_skew",
        sample_period={"note": "1ms; 1us … the chunk"},
        seed={"note": "0; chunk k: seed + k"},
        warmup_steps={"note": "400, in each chunk; 0 = cold start"},
    )
    e.add_argument(
        "--chunk",
        type=duration,
        default=1.0,
        help="simulated seconds emulated at a time, replayed at wall-clock pace (default: 1s)",
    )
    f = p.add_argument_group("--follow")
    f.add_argument("--poll", type=duration, default=0.5, help="how often to look for new parts (default: 0.5s)")
    f.add_argument(
        "--settle",
        type=duration,
        default=2.0,
        help="how long an unreadable part may stay unchanged before it is skipped as corrupt (default: 2s)",
    )
    p.add_argument(
        "--json", action="store_true", help="on shutdown, print one JSON summary on stdout; messages on stderr"
    )
    p.set_defaults(func=cmd_serve)


def _source(args, gen, log):
    if args.follow is not None:
        from perfonto.analysis.follow import Follower, FollowSource, PartError

        try:
            return FollowSource(Follower(args.follow, gen, settle_s=args.settle), poll_s=args.poll, log=log)
        except (FileNotFoundError, PartError) as exc:
            raise CommandError(str(exc.args[0]), 1) from None
    if args.sample_period < 1e-6:
        raise CommandError(f"--sample-period must be at least 1us (got {args.sample_period:g} s)", 2)
    if args.duration is not None and args.sample_period > args.duration:
        raise CommandError(
            f"--sample-period ({args.sample_period:g} s) is longer than --duration ({args.duration:g} s)", 2
        )
    if args.chunk < 2 * args.sample_period:
        raise CommandError(f"--chunk ({args.chunk:g} s) must hold at least two samples of {args.sample_period:g} s", 2)
    from ..live_emulate import EmulatedSource

    from .run import emulation_of

    src = EmulatedSource(gen, chunk_s=args.chunk, **emulation_of(args))
    try:
        src.start()
    except ValueError as exc:
        src.close()
        raise CommandError(f"cannot emulate: {exc}", 1) from None
    return src


def cmd_serve(args) -> int:
    from perfonto.metrics.catalog import load_catalog

    from ..serve import Server

    err = stderr()

    def log(msg: str) -> None:
        err.print(msg, markup=False)

    cat = load_catalog(args.catalog, args.generation)
    if cat.graph is None or cat.errors:
        raise uncompiled(
            cat, args, cat.generation is None and any(d.code == "unknown-generation" for d in cat.diagnostics)
        )
    graph = cat.graph
    source = _source(args, graph.generation, log)
    try:
        server = Server(
            graph,
            source,
            bind=args.bind,
            port=args.port,
            host=args.host or socket.gethostname(),
            otlp=args.otlp,
            otlp_interval_s=args.otlp_interval,
            log=log,
        )
    except OSError as exc:
        source.close()
        raise CommandError(f"cannot listen on {args.bind}:{args.port}: {exc.strerror or exc}", 1) from None
    except ValueError as exc:
        source.close()
        raise CommandError(str(exc), 1) from None
    what = (
        f"following {args.follow}"
        if args.follow
        else f"emulating {args.model} on {args.chips} x {graph.generation.name} in real time, "
        f"{args.sample_period * 1e3:g} ms samples"
    )
    log(
        f"serving {len(server.live.expositions)} metrics of {graph.generation.name} (catalog hash "
        f"{graph.content_hash}) on {server.url}/metrics (health: {server.url}/healthz); {what}"
        f"{'; OTLP to ' + args.otlp if args.otlp else ''}; stop with Ctrl-C or SIGTERM"
    )
    stop = threading.Event()
    old = {s: signal.signal(s, lambda signum, frame: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        summary = server.run(stop)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    log(f"stopped: {summary['samples']} samples, {summary['windows']} windows evaluated per chip")
    if args.json:
        print(json.dumps(summary, indent=2))
    return 0
