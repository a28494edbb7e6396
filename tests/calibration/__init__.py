"""Calibration suite: claims of exactly known truth through the real runner."""
