"""Prefect flows (composition only), their settings and the `tdm` command line."""
