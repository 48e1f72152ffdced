"""perfonto.schemas: the JSON Schemas of the catalog files, generated from the pydantic models and
shipped as package data so that the YAML modelines resolve in an installed package too."""
