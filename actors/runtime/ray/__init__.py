"""The Ray runtime: the same roles as the simulator, as Ray actors on real files and real time.

Only the `adapter` package imports `ray`; the rest (real storage, the node's event loop, the driver's
history collector) is plain Python that the unit tests run without a cluster.
"""
