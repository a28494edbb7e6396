"""Settings and quantities that belong to no paper.

`scalar`: no network at all, for a deterministic scalar or small-vector inequality (a telescoping bound, a
series remainder) that a paper states along the way; its quantities explore the inequality by random and
boundary-seeking draws.
"""

from __future__ import annotations

from .registry import NETWORKS

NETWORKS.register("scalar", "no network: a deterministic scalar or small-vector inequality, explored by "
                  "random and boundary-seeking draws")(__name__)
