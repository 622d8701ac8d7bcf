"""DAGMan for htc: the DAG file language, its networkx model and the engine (``htc.dag``)."""
