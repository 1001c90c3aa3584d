"""Pure cores (standard library and numpy only): they ship to executors and test without Spark."""
