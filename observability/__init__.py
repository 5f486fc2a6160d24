"""The run's history and its readers: the event schema (events.py), its Parquet files
(history.py), availability figures; later Prometheus metrics, Spark analysis and Grafana dashboards."""
