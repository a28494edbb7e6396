"""Network settings, one module per paper, each exactly as the paper defines it (see its docstring)."""
