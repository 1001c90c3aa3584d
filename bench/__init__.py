"""sqlwin benchmarks: ``python -m bench`` (the Nexmark suite) and ``python bench/batch.py`` (window kinds)."""
