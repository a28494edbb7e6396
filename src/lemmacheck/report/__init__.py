"""Static, self-contained HTML report of a results store: `build_report(db, out, compare=None)`.

Pages work from file:// and any static host, load nothing from the network (a Content-Security-Policy forbids
it), render formulas as MathML and plots as inline SVG. See build.py for the layout and data.py for the
comparison rule.
"""

from .build import build_report

__all__ = ["build_report"]
