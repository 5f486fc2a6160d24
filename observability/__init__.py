"""Event streams; later Prometheus metrics, Spark analysis and Grafana dashboards."""
