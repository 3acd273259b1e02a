"""Prefect tasks of the table-imputation flow: one step each, thin wrappers over tdm/ and DuckDB.

Import from the modules (`tasks.load`, `tasks.impute`, ...): this package imports nothing itself, so
that light modules (`tasks.errors`, `tasks.warehouse.names`) load without Prefect, torch or pandera.
"""
