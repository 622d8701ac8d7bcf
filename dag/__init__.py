"""DAGMan for htc (import name ``htc.dag``): an empty package for now.

The DAG file language, its networkx model and the engine arrive with their issue; until then
nothing here runs, and nothing in ``htc/`` imports it. The folder exists because the design puts
``dag/`` at the top of the tree and installs it as ``htc.dag`` (see docs/architecture.md).
"""
