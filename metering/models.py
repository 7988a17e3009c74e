"""Metering models arrive with the metering issue: daily and monthly rollups of GPU-seconds."""
