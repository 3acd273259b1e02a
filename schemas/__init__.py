"""Data contracts of the pipeline: pandera schemas (`schemas.input`, `schemas.output`,
`schemas.lineage`) and the Great Expectations suite (`schemas.expectations`).

Import from the modules: this package imports nothing itself, so that the CLI starts quickly.
"""
