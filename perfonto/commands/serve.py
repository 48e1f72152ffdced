"""``perfonto serve (--emulate … | --follow FILE|DIR) [--port P] [--otlp URL]``: live metrics over
HTTP (OpenMetrics ``/metrics``, JSON ``/healthz``) and optionally OTLP; see ``perfonto.serve``.

Runs until SIGINT or SIGTERM, then shuts down cleanly and exits 0 (under ``--json`` after printing
one JSON summary). Exit 2 for usage errors (a bad port, duration or URL, an unknown generation),
1 when it cannot start (a missing path, a port in use, an emulation that cannot run)."""

from __future__ import annotations

import argparse
import json
import re
import signal
import socket
import threading
from urllib.parse import urlparse

from . import HELP
from .common import catalog_options, CommandError, duration, non_negative_int, stderr, uncompiled
from .workload_args import workload_options


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


def _mark_mode(group, mode: str) -> None:
    """Record, in the namespace's ``serve_given`` ({option: mode}), each option of ``group`` given on the
    command line, so the other mode's options are refused (``_check_mode``) instead of ignored."""
    for action in group._group_actions:
        base = type(action)

        class Marked(base):  # type: ignore[misc, valid-type]
            def __call__(self, parser, namespace, values, option_string=None):
                given = dict(getattr(namespace, "serve_given", None) or {})
                given[option_string] = mode
                namespace.serve_given = given
                super().__call__(parser, namespace, values, option_string)

        action.__class__ = Marked


def _check_mode(args) -> None:
    """Refuse an option of the other source mode (``--chips`` with ``--follow``, ``--poll`` with ``--emulate``).

    Raises:
        CommandError: exit 2, naming the option and the mode it belongs to.
    """
    mode = "--follow" if args.follow is not None else "--emulate"
    wrong = [(opt, m) for opt, m in (getattr(args, "serve_given", None) or {}).items() if m != mode]
    if wrong:
        opts = ", ".join(o for o, _ in wrong)
        raise CommandError(
            f"{opts}: {'an option' if len(wrong) == 1 else 'options'} of `perfonto serve {wrong[0][1]}`, not of "
            f"{mode} (it would be ignored); drop {'it' if len(wrong) == 1 else 'them'}",
            2,
        )


def register(sub) -> None:
    from .run import EMULATED_CHIPS

    p = sub.add_parser("serve", help=HELP["serve"])
    p._negative_number_matcher = re.compile(r"^-\d+$|^-\d*\.?\d+\s*[a-zµ]*$")  # --duration -1s: a value, refused
    p.set_defaults(serve_given=None)
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
    p.add_argument(
        "--window",
        type=duration,
        default=None,
        metavar="SPAN",
        help="serve each gauge over the trailing SPAN (e.g. 1s), from its run-level sums as `analyze` computes "
        "a run value, instead of the latest window (one sample period; the default) — recommended: 1s or more",
    )
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
    _mark_mode(e, "--emulate")
    f = p.add_argument_group("--follow")
    f.add_argument("--poll", type=duration, default=0.5, help="how often to look for new parts (default: 0.5s)")
    f.add_argument(
        "--settle",
        type=duration,
        default=2.0,
        help="how long an unreadable part may stay unchanged before it is skipped as corrupt, and how long a "
        "part taken is watched for rows appended to it (default: 2s)",
    )
    _mark_mode(f, "--follow")
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
    except BaseException:  # a signal during start-up: no scratch folder left behind
        src.close()
        raise
    return src


class _StartupStop(Exception):
    """SIGINT or SIGTERM before serving began (the first chunk being emulated, the evaluator generated)."""


def _listen_error(args, exc: OSError) -> CommandError:
    if isinstance(exc, socket.gaierror):
        return CommandError(
            f"cannot listen on {args.bind}:{args.port}: {args.bind!r} is not an address of this machine "
            f"({exc.strerror or exc}); give an IPv4 or IPv6 address, e.g. 127.0.0.1, 0.0.0.0 or ::1",
            1,
        )
    return CommandError(f"cannot listen on {args.bind}:{args.port}: {exc.strerror or exc}", 1)


def cmd_serve(args) -> int:
    err = stderr()

    def log(msg: str) -> None:
        err.print(msg, markup=False)

    _check_mode(args)
    stop = threading.Event()
    serving = threading.Event()

    got: list[str] = []

    building = threading.Event()  # the source and server are being made: a signal is handled after (a
    # signal is run in the main thread at its next bytecode, wherever the OS delivered it — inside the
    # server's constructor, whose half-made socket nobody would close, if this raised there)

    def on_signal(signum, frame):
        got.append(signal.Signals(signum).name)
        stop.set()
        if not serving.is_set() and not building.is_set():
            raise _StartupStop(got[-1])

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        server, what = _start(args, log, serving, building)
        if stop.is_set():  # a signal held while the server was built: close it, serve nothing
            server.close()
            raise _StartupStop(got[-1] if got else "a signal")
        log(
            f"serving {len(server.live.expositions)} metrics of {server.graph.generation.name} (catalog hash "
            f"{server.graph.content_hash}) on {server.url}/metrics (health: {server.url}/healthz); {what}"
            f"{'; OTLP to ' + args.otlp if args.otlp else ''}; stop with Ctrl-C or SIGTERM"
        )
        summary = server.run(stop)
    except _StartupStop as exc:
        log(f"stopped by {exc} during start-up, before serving anything")
        return 0
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    log(f"stopped: {summary['samples']} samples, {summary['windows']} windows evaluated per chip")
    if args.json:
        print(json.dumps(summary, indent=2))
    return 0


def _start(args, log, serving: threading.Event, building: threading.Event):
    """The catalog, the source and the ``Server`` (closing the source when the server cannot start).
    A SIGINT or SIGTERM while the source is made stops the start-up there; once it is made (``building``
    set) a signal only sets the stop flag: the caller closes the server it gets back and reports the stop,
    so no half-made server is left unclosed (the signals are also held in this thread meanwhile)."""
    from perfonto.metrics.catalog import load_catalog

    from ..serve import Server

    cat = load_catalog(args.catalog, args.generation)
    if cat.graph is None or cat.errors:
        raise uncompiled(
            cat, args, cat.generation is None and any(d.code == "unknown-generation" for d in cat.diagnostics)
        )
    graph = cat.graph
    source = None
    try:  # a signal while the source is made stops the start-up (the source cleans up after itself) …
        source = _source(args, graph.generation, log)
        building.set()  # … from here it only sets the stop flag: the caller closes what was made
    except BaseException:
        if source is not None:
            source.close()
        raise
    held = _hold_signals()
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
            window_s=args.window,
        )
    except OSError as exc:
        source.close()
        raise _listen_error(args, exc) from None
    except ValueError as exc:
        source.close()
        raise CommandError(str(exc), 1) from None
    except BaseException:
        source.close()
        raise
    finally:
        serving.set()  # before the signals held are handled: a stop now ends the serving, not the start-up
        _release_signals(held)
    what = (
        f"following {args.follow}"
        if args.follow
        else f"emulating {args.model} on {args.chips} x {graph.generation.name} in real time, "
        f"{args.sample_period * 1e3:g} ms samples"
    )
    return server, what


_STOPS = {signal.SIGINT, signal.SIGTERM}


def _hold_signals():
    """Block SIGINT and SIGTERM (where the platform can); returns the mask to restore."""
    return signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS) if hasattr(signal, "pthread_sigmask") else None


def _release_signals(mask) -> None:
    """Restore ``mask``: a signal held meanwhile is handled now."""
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
