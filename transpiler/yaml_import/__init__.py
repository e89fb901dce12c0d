"""derivatives.yaml to Python formulas and back (``transpile import-yaml`` / ``emit-yaml``),
and autograd node C++ for an imported directory. See README.md in this package."""
