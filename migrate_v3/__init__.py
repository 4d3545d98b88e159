"""migrate-v3: migrate Modular MAX model source from the V2 API to ModuleV3."""

__version__ = "0.1.0"
