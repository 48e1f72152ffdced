"""JSON Schemas of the catalog file formats, generated from the pydantic models (``schemas/``)."""

from __future__ import annotations

import copy
import json

from perfonto.ontology.model import GenerationFile


def _extension(schema: dict) -> dict:
    """The schema of a generation that ``extends`` another: any key may be omitted (it is inherited),
    except generation, description and extends."""
    ext = copy.deepcopy(schema)

    def strip(node):
        if isinstance(node, dict):
            node.pop("required", None)
            for v in node.values():
                strip(v)
        elif isinstance(node, list):
            for v in node:
                strip(v)

    strip(ext)
    ext["required"] = ["generation", "description", "extends"]
    ext["$id"] = "https://perfonto.dev/schemas/generation-extension.schema.json"
    ext["title"] = "GenerationExtension"
    return ext


def schemas() -> dict[str, str]:
    """File name → JSON text of every schema perfonto publishes."""
    out = {}
    gen = GenerationFile.model_json_schema()
    gen["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    gen["$id"] = "https://perfonto.dev/schemas/generation.schema.json"
    out["generation.schema.json"] = json.dumps(gen, indent=2, sort_keys=True) + "\n"
    out["generation-extension.schema.json"] = json.dumps(_extension(gen), indent=2, sort_keys=True) + "\n"
    from perfonto.capture.collector import json_schema as collector_schema

    out["collector.schema.json"] = json.dumps(collector_schema(), indent=2, sort_keys=True) + "\n"
    try:
        from perfonto.metrics.vectors import VectorFile
    except ImportError:  # pragma: no cover - the vector format ships with the metrics layer
        return out
    vec = VectorFile.model_json_schema()
    vec["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    vec["$id"] = "https://perfonto.dev/schemas/vectors.schema.json"
    out["vectors.schema.json"] = json.dumps(vec, indent=2, sort_keys=True) + "\n"
    return out
