"""The collector format in machine-readable form: the ``perfonto`` metadata object a dump may carry
(a pydantic model, published as ``schemas/collector.schema.json``) and the exact wide-layout Arrow
schema of a generation (``wide_schema``; ``perfonto codegen --target collector``). The prose is the
guide ``collector-format.md``; the reader is ``capture.dump``."""

from __future__ import annotations

import json

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from perfonto.ontology.resolved import Generation
from perfonto.ontology import kinds

VERSION = 1


class CollectorMetadata(BaseModel):
    """The JSON object under the schema-metadata key ``perfonto`` of a Parquet or Arrow dump. Every key
    is optional; other keys are kept and ignored (a collector may record its own provenance)."""

    model_config = ConfigDict(extra="allow")

    collector_format: int = Field(
        VERSION, ge=1, description="Version of the collector format the dump follows (this reader: 1)."
    )
    generation: str | None = Field(
        None, description="Generation the registers belong to; a dump of another generation is refused."
    )
    sample_period_ns: int | None = Field(
        None, ge=0, description="Sampling period in ns: samples land on a grid, a dropped sample leaves a gap."
    )
    timestamp_unit: str | None = Field(None, pattern="^(ns|us|ms|s)$", description="Unit of a bare `timestamp` column.")
    duration_ns: int | None = Field(None, ge=0, description="Duration of the capture on the host timeline, ns.")
    model: str | None = Field(None, description="The workload's model, shown in the report.")
    multiplex_scaled: bool | None = Field(
        None,
        description="The registers hold counts already scaled by time enabled / time running (perf stat's printed "
        "counts); the `C@enabled_ns`/`C@running_ns` columns then only say which counters ran together.",
    )


LAYOUTS = {
    "wide": {
        "keys": ["host?", "chip", "timestamp_ns|timestamp_us|timestamp_ms|timestamp_s|timestamp", "sample?"],
        "signals": "one column per signal (fixed-size list for instances) or per instance, `name[i]`",
        "multiplex?": "per register column C (`name` or `name[i]`): `C@enabled_ns`, `C@running_ns` (running totals "
        "of perf's time_enabled and time_running, ns) and optionally `C@group` (the multiplex group of the "
        "interval ending at the read; null: unknown); counts are scaled by Δenabled / Δrunning (capture.multiplex)",
    },
    "long": {
        "keys": ["host?", "chip", "timestamp_ns|timestamp_us|timestamp_ms|timestamp_s|timestamp"],
        "columns": {
            "signal": "string",
            "instance": "integer or null (flat index over the block's axes)",
            "value": "unsigned integer (the raw register)",
        },
    },
}


def json_schema() -> dict:
    """``schemas/collector.schema.json``: the metadata object, with the layouts as ``x-layouts``."""
    s = CollectorMetadata.model_json_schema()
    s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    s["$id"] = "https://perfonto.dev/schemas/collector.schema.json"
    s["title"] = "perfonto collector format: dump metadata"
    s["x-layouts"] = LAYOUTS
    s["x-files"] = ["parquet", "arrow ipc (.arrow, .ipc, .feather)", "csv"]
    return s


def register_type(sig) -> pa.DataType:
    """The narrowest unsigned type that holds ``sig``'s register (64 bits when the width is unknown)."""
    width = sig.width or 64
    for bits, t in ((8, pa.uint8()), (16, pa.uint16()), (32, pa.uint32())):
        if width <= bits:
            return t
    return pa.uint64()


def wide_schema(gen: Generation, hosts: bool = False) -> pa.Schema:
    """The wide-layout Arrow schema of ``gen``'s dump: keys, then one column per signal."""
    fields = ([pa.field("host", pa.string())] if hosts else []) + [
        pa.field("chip", pa.int32(), nullable=False),
        pa.field("timestamp_ns", pa.int64(), nullable=False),
    ]
    for name, sig in gen.signals.items():
        t = register_type(sig) if kinds.of(sig).counts else pa.uint64()
        fields.append(pa.field(name, pa.list_(t, sig.instances) if sig.instances > 1 else t))
    meta = CollectorMetadata(generation=gen.name).model_dump(exclude_none=True)
    return pa.schema(fields, metadata={"perfonto": json.dumps(meta)})


def wide_schema_json(gen: Generation) -> str:
    """``wide_schema`` as JSON:
    ``{"collector_format", "generation", "columns": [{name, type, instances, kind, unit, scale, width}]}``
    (``scale``: raw register × scale = the value in ``unit``, so a collector writes the raw register and a
    reader converts; ``scale_field``: the packed field that sets the unit per sample, where one does)."""
    cols = [
        {"name": "host", "type": "string", "optional": True},
        {"name": "chip", "type": "int32"},
        {"name": "timestamp_ns", "type": "int64"},
    ]
    for name, sig in gen.signals.items():
        t = register_type(sig) if kinds.of(sig).counts else pa.uint64()
        cols.append(
            {
                "name": name,
                "type": str(t),
                "instances": sig.instances,
                "kind": sig.kind,
                "unit": sig.unit_text,
                "scale": sig.scale,  # the register holds raw counts: raw × scale is the value in `unit`
                "width": sig.width,
                **({"scale_field": sig.scale_field[0]} if sig.scale_field else {}),
            }
        )
    return json.dumps({"collector_format": VERSION, "generation": gen.name, "columns": cols}, indent=2) + "\n"
