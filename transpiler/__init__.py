"""Front-end, lint rules, C++ emitter and yaml import for Python backward formulas."""
