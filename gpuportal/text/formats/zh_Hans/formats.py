"""Simplified Chinese: figures grouped by thousands with a comma ("12,345.6"), as Chinese GPU platforms and
their reports print GPU-hours and costs; Django's own Chinese formats group nothing."""

THOUSAND_SEPARATOR = ","
NUMBER_GROUPING = 3
