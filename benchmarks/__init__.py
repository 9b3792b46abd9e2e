"""The benchmarks: one entry point, ``python -m benchmarks --routine NAME`` (see __main__.py).

Not part of the installed package; run from the repository root. Every routine checks its results
against a reference (the CPU op, itself tested against the NumPy references), writes a JSON file, a
table and, with matplotlib, a plot, and prints the command that reproduces it.
"""
