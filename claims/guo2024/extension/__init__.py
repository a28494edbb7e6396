"""The guo2024 plugin: its network setting(s) and quantities, registered through lemmacheck's extension API.

lemmacheck imports this package (claims/<paper>/extension/) before it validates the claims beside it.
"""

from . import network, quantities  # noqa: F401
