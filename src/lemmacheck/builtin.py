"""Importing this module registers every built-in network setting, input generator and quantity."""

from . import inputs  # noqa: F401
from .quantities import allenzhu2018, chatterji2021, du2018, generic, guo2024, zou2018  # noqa: F401
