"""The JSON Schema front end, split by concern; :mod:`cfgmask.json_schema` is the entry point."""
