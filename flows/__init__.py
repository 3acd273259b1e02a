"""Prefect flows (composition only) and their settings."""
