"""zkconsumer's benchmark suite: ``python -m bench [--quick]`` (see bench/__main__.py)."""
