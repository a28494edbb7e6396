"""Root pytest configuration: Hypothesis profiles.

`ci` (default, and whenever CI is set): derandomized, so every run explores the same examples and a correct
claim or property cannot turn CI red by chance. `explore`: random and longer, for hunting counterexamples
(`pytest --hypothesis-profile=explore`). Neither has a deadline: shared 2-core machines are noisy.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, deadline=None, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
