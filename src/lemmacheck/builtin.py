"""Importing this module registers every built-in network setting, input generator and quantity."""

from . import inputs  # noqa: F401
from .quantities import generic, zou2018  # noqa: F401
from .quantities import allenzhu2018, guo2024  # noqa: F401
