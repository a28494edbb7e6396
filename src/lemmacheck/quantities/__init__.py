"""Quantity estimators, registered by name in `registry.QUANTITIES`; a claim's `check.quantity` names one.

Each estimator takes a Context and returns an Observation with one value per replicate. Modules here are
grouped by setting (one per paper) plus `generic` for setting-free facts.
"""
